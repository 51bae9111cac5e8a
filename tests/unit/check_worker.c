/* check_worker.c - the worker: a stream's tokens in order then FINAL, O and S
 * overlapping, cancel in each state, admission refusals. The fault cases (stalled
 * reader, device error, shutdown, racing ids, failed threads) are in
 * worker_faults.c, the trace op in worker_trace_op.c. */
#include "testutil.h"
#include "worker_fixture.h"

#include <check.h>
#include "wl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MS 5000u

void wrk_add_fault_tcases(Suite *s);
void wrk_add_trace_tcases(Suite *s);
void wrk_add_hol_tcases(Suite *s);
void wrk_add_abandon_tcases(Suite *s);
void wrk_add_health_tcases(Suite *s);
void wrk_add_limit_tcases(Suite *s);
void wrk_add_device_tcases(Suite *s);

START_TEST(tokens_in_order_then_final)
{
	struct wrk_config cfg;
	struct ring_rec rec[16];
	uint64_t ref[8];
	struct wl_params p;
	char msg[CHIPD_MSG_MAX];
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 11, 0, "synthetic", "tokens=8,device_us=200,seed=5", 0, msg),
			 CHIPD_OK);
	n = wf_read(&f, 0, rec, 16, READ_MS);
	ck_assert_uint_eq(n, 8);
	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "tokens=8,device_us=200,seed=5", msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_ref_tokens("synthetic", &p, ref, 8, msg, sizeof(msg)), 0);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_uint_eq(rec[i].request_id, 11);
		ck_assert_uint_eq(rec[i].seq, i);
		ck_assert_uint_eq(rec[i].value, ref[i]);
		ck_assert_uint_eq(rec[i].flags, i == 7 ? RING_F_FINAL : 0);
	}
	ck_assert_uint_eq(wf_read(&f, 0, rec, 1, 20), 0); /* nothing after FINAL */
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "tokens"), 8);
}
END_TEST

START_TEST(max_tokens_ends_early_with_final)
{
	struct wrk_config cfg;
	struct ring_rec rec[16];
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 12, 1, "synthetic", "tokens=10,device_us=50", 3, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 16, READ_MS), 3);
	ck_assert_uint_eq(rec[2].flags, RING_F_FINAL);
	wf_stop(&f);
}
END_TEST

/* Runs 2 requests x 12 steps with host cost = device cost; returns the worker's
 * overlap_ns: the time O was building inside S's steps. */
static uint64_t overlap_ns(bool no_overlap)
{
	struct wrk_config cfg;
	struct ring_rec rec[16];
	const char *p = "tokens=12,host_us=3000,device_us=6000";
	struct wf f;

	wf_config(&cfg);
	cfg.no_overlap = no_overlap;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 16, READ_MS), 12);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 16, READ_MS), 12);
	wf_stop(&f);
	ck_assert_uint_gt(wf_ctr(&f, "s_busy_ns"), 0);
	ck_assert_uint_gt(wf_ctr(&f, "o_busy_ns"), 0);
	return wf_ctr(&f, "overlap_ns");
}

START_TEST(o_builds_while_s_runs)
{
	/* With two banks O builds the next step (6 ms for 2 requests) while S runs one
	 * (6 ms of device time): O was busy inside S's steps. How much of S's time it
	 * hides is measured by `chipbench overlap` ("O||S of S"), not here: a loaded
	 * machine shrinks it, and only its absence is a bug. */
	ck_assert_msg(overlap_ns(false) > 0, "O never built while S ran a step");
}
END_TEST

START_TEST(no_overlap_mode_serializes_o_and_s)
{
	/* One bank: O gets it back only after S has measured its step and released it,
	 * so none of O's building falls inside a step of S, whatever the load. */
	uint64_t ns = overlap_ns(true);

	ck_assert_msg(ns == 0, "with one bank O was building for %llu ns inside S's steps",
		      (unsigned long long)ns);
}
END_TEST

START_TEST(trace_shows_o_and_s_spans_overlapping)
{
	struct wrk_config cfg;
	struct ring_rec rec[16];
	struct wrk_trace *tr;
	struct wrk_trace_summary sum;
	const char *p = "tokens=12,host_us=3000,device_us=6000";
	char path[] = "/tmp/chipd-trace-XXXXXX", text[32];
	struct wf f;
	FILE *fp;
	int fd;

	ck_assert_int_eq(wrk_trace_create(&tr, 4096), 0);
	wf_config(&cfg);
	cfg.trace = tr;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 16, READ_MS), 12);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 16, READ_MS), 12);
	wf_stop(&f);
	ck_assert_int_eq(wrk_trace_summarize(tr, &sum), 0);
	ck_assert_uint_eq(sum.dropped, 0);
	ck_assert_uint_gt(sum.o_busy_ns, 0);
	ck_assert_uint_gt(sum.s_busy_ns, 0);
	/* O's build spans overlap S's run spans (by how much: chipbench overlap --trace) */
	ck_assert_uint_gt(sum.overlap_ns, 0);
	ck_assert_uint_gt(sum.latency_p50_ns, 0);
	ck_assert_uint_ge(sum.latency_p99_ns, sum.latency_p50_ns);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(wrk_trace_write_json(tr, path, 0), 0);
	fp = fopen(path, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_ptr_nonnull(fgets(text, sizeof(text), fp));
	ck_assert_int_eq(strncmp(text, "{\"traceEvents\":[", 15), 0);
	ck_assert_int_eq(fseek(fp, -26, SEEK_END), 0);
	ck_assert_ptr_nonnull(fgets(text, sizeof(text), fp));
	ck_assert_str_eq(text, "],\"displayTimeUnit\":\"ns\"}\n");
	fclose(fp);
	unlink(path);
	wrk_trace_destroy(tr);
}
END_TEST

START_TEST(cancel_queued_request_never_runs)
{
	struct wrk_config cfg;
	struct ring_rec rec[16];
	struct wf_gate g = {0}; /* holds S in its first step until the test lets it go */
	struct wf f;

	wf_config(&cfg);
	cfg.nbanks = 2; /* request 1's two steps in flight take both */
	cfg.fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=4,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g, READ_MS));
	/* S is held and both banks are taken: request 2 cannot run before the cancel */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=4,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_cancel(&f, 2), CHIPD_OK);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 16, READ_MS), 1);
	ck_assert_uint_eq(rec[0].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	ck_assert_uint_eq(rec[0].seq, 0);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 16, READ_MS), 4); /* the other one finished */
	ck_assert_uint_eq(rec[3].flags, RING_F_FINAL);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
}
END_TEST

START_TEST(cancel_active_request_stops_at_next_step)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	ck_assert_int_eq(wf_assign(&f, 3, 0, "synthetic", "tokens=1000,device_us=1000", 0, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 3, READ_MS), 3);
	ck_assert_int_eq(wf_cancel(&f, 3), CHIPD_OK);
	n = wf_read(&f, 0, rec + 3, 1000, READ_MS) + 3;
	ck_assert_uint_lt(n, 1000);
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	for (uint32_t i = 0; i + 1 < n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 1, 20), 0);
	ck_assert_int_eq(wf_cancel(&f, 3), CHIPD_E_NOT_FOUND); /* its id is free again */
	wf_stop(&f);
}
END_TEST

START_TEST(queue_full_answered_at_once_and_retryable)
{
	struct wrk_config cfg;
	struct ring_rec rec[64] = {0}; /* read until a terminal one: none before */
	const char *p = "tokens=1000,device_us=1000";
	uint64_t t0;
	struct wf f;

	wf_config(&cfg);
	cfg.max_requests = 2;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", p, 0, NULL), CHIPD_OK);
	t0 = shm_now_ns();
	ck_assert_int_eq(wf_assign(&f, 3, 2, "synthetic", p, 0, NULL), CHIPD_E_QUEUE_FULL);
	ck_assert_uint_lt(shm_now_ns() - t0, 1000000000u); /* not after a blind wait */
	ck_assert(chipd_code_retryable(CHIPD_E_QUEUE_FULL));
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	while (!(rec[0].flags & RING_F_TERMINAL))
		ck_assert_uint_gt(wf_read(&f, 0, rec, 1, READ_MS), 0);
	ck_assert_int_eq(wf_assign(&f, 3, 2, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 2, rec, 64, READ_MS), 2);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "rejected"), 1);
}
END_TEST

START_TEST(bad_params_name_the_parameter)
{
	struct wrk_config cfg;
	char msg[CHIPD_MSG_MAX];
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "bogus=1", 0, msg), CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "bogus"), "message: %s", msg);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "device_us=-5", 0, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "device_us"), "message: %s", msg);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "nosuch", NULL, 0, msg), CHIPD_E_BAD_REQUEST);
	/* a ring generation that is not the reset one */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", NULL, 0, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_assign_noreset(&f, 2, 0, "synthetic", NULL, 0, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "ring_gen"), "message: %s", msg);
	wf_stop(&f);
}
END_TEST

START_TEST(kv_blocks_reserved_at_admission)
{
	struct wf_gate g = {.id = 1};
	struct wrk_config cfg;
	char msg[CHIPD_MSG_MAX];
	/* 2 * ceil((144 + 16) / 16) = 20 of the pool's 32 blocks */
	const char *half = "layers=1,heads=2,kv_heads=1,head_dim=8,block_size=16,context=144,"
			   "tokens=16";
	const char *big = "layers=1,heads=2,kv_heads=1,head_dim=8,block_size=16,context=4096,"
			  "tokens=2";
	struct ring_rec rec[20];
	struct wf f;

	wf_config(&cfg);
	cfg.kv_blocks = 32;
	cfg.l_fault = wf_gate_hook; /* request 1 keeps its blocks while L holds its fill */
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	/* more blocks than the whole pool: it can never run here, not retryable */
	ck_assert_int_eq(wf_assign(&f, 9, 0, "paged_attention", big, 0, msg), CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "paged_attention: 514 KV blocks needed, more than the chip's KV "
				  "cache holds (kv-blocks=32)"),
		      "message: %s", msg);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "paged_attention", half, 0, msg), CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g, READ_MS));
	/* the pool is held now: retryable no_capacity, and the same request fits later */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "paged_attention", half, 0, msg), CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(msg, "paged_attention: 20 KV blocks needed, 12 free"), "message: %s",
		      msg);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 20, RING_F_FINAL), 16);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "paged_attention", half, 0, msg), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 20, RING_F_FINAL), 16);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
}
END_TEST

START_TEST(heartbeat_echoes_seq)
{
	struct wrk_config cfg;
	struct wf f;
	struct proto_msg *m = malloc(sizeof(*m));
	char *buf = malloc(PROTO_RESP_MAX);
	struct proto_error err;
	size_t len;
	uint32_t alen;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	proto_msg_init(m, PROTO_OP_HEARTBEAT);
	m->seq = 42;
	ck_assert_int_eq(proto_encode_request(m, buf, PROTO_REQ_MAX, &len, &err), 0);
	ck_assert_int_eq(mbox_call(&f.mb, buf, (uint32_t)len, buf, PROTO_RESP_MAX, &alen,
				   shm_deadline_in(WF_CALL_MS * 1000000ull)),
			 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_HEARTBEAT, buf, alen, m, &err), 0);
	ck_assert(m->ok);
	ck_assert_int_eq(m->seq, 42);
	free(m);
	free(buf);
	wf_stop(&f);
}
END_TEST

static bool hb_active_is(struct wf *f, int64_t want)
{
	int64_t queued = -1, active = -1;

	ck_assert_int_eq(wf_heartbeat(f, 7, &queued, &active), CHIPD_OK);
	ck_assert_int_ge(queued, 0);
	return active == want;
}

static bool hb_one_active(void *arg)
{
	return hb_active_is(arg, 1);
}

static bool hb_none_active(void *arg)
{
	return hb_active_is(arg, 0);
}

START_TEST(heartbeat_counts_queued_and_active)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	int64_t queued = -1, active = -1;
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	ck_assert_int_eq(wf_heartbeat(&f, 1, &queued, &active), CHIPD_OK);
	ck_assert_int_eq(queued, 0);
	ck_assert_int_eq(active, 0);
	wf_assign_long(&f, 3, 0);
	ck_assert(tu_eventually(hb_one_active, &f, READ_MS));
	ck_assert_int_eq(wf_cancel(&f, 3), CHIPD_OK);
	wf_read_end(&f, 0, rec, 1024, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	ck_assert(tu_eventually(hb_none_active, &f, READ_MS));
	wf_stop(&f);
}
END_TEST

/* After a stream's terminal record the id is free at once: resubmitting it right
 * after reading FINAL (or a cancelled ERROR) is admitted, never duplicate_id. */
START_TEST(id_free_at_once_after_stream_end)
{
	enum { ROUNDS = 100 };
	struct wrk_config cfg;
	struct ring_rec rec[8];
	char msg[CHIPD_MSG_MAX];
	struct wf f;

	wf_config(&cfg);
	cfg.max_requests = 2;
	wf_start(&f, &cfg, 64);
	for (int i = 0; i < ROUNDS; i++) {
		int code = wf_assign(&f, 42, (uint32_t)(i % 2), "synthetic", "tokens=2", 0, msg);

		ck_assert_msg(code == CHIPD_OK, "round %d: code %d (%s)", i, code, msg);
		ck_assert_uint_eq(wf_read(&f, (uint32_t)(i % 2), rec, 8, READ_MS), 2);
		ck_assert_uint_eq(rec[1].flags, RING_F_FINAL);
	}
	/* the ERROR path (cancel) too */
	wf_assign_long(&f, 43, 0);
	ck_assert_int_eq(wf_cancel(&f, 43), CHIPD_OK);
	rec[0].flags = 0; /* one record at a time: the ring holds 64, the request 1000 */
	while (!(rec[0].flags & RING_F_TERMINAL))
		ck_assert_uint_gt(wf_read(&f, 0, rec, 1, READ_MS), 0);
	ck_assert_int_eq(wf_assign(&f, 43, 1, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 8, READ_MS), 2);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), ROUNDS + 1);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"tokens_in_order_then_final", tokens_in_order_then_final},
	    {"max_tokens_ends_early_with_final", max_tokens_ends_early_with_final},
	    {"o_builds_while_s_runs", o_builds_while_s_runs},
	    {"no_overlap_mode_serializes_o_and_s", no_overlap_mode_serializes_o_and_s},
	    {"trace_shows_o_and_s_spans_overlapping", trace_shows_o_and_s_spans_overlapping},
	    {"cancel_queued_request_never_runs", cancel_queued_request_never_runs},
	    {"cancel_active_request_stops_at_next_step", cancel_active_request_stops_at_next_step},
	    {"queue_full_answered_at_once_and_retryable",
	     queue_full_answered_at_once_and_retryable},
	    {"bad_params_name_the_parameter", bad_params_name_the_parameter},
	    {"kv_blocks_reserved_at_admission", kv_blocks_reserved_at_admission},
	    {"heartbeat_echoes_seq", heartbeat_echoes_seq},
	    {"heartbeat_counts_queued_and_active", heartbeat_counts_queued_and_active},
	    {"id_free_at_once_after_stream_end", id_free_at_once_after_stream_end},
	};
	Suite *s = suite_create("worker");

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	wrk_add_fault_tcases(s);
	wrk_add_device_tcases(s);
	wrk_add_trace_tcases(s);
	wrk_add_abandon_tcases(s);
	wrk_add_health_tcases(s);
	wrk_add_limit_tcases(s);
	wrk_add_hol_tcases(s);
	return tu_run(s);
}
