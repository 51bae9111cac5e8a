/* chipd_counters.c - what each counter of a real chipd means (docs/protocol.md §8.1):
 * err_<code> counts every request once, by how it ended, whichever process ended it;
 * requests and answered; the gauges of the supervisor and of a worker; what an ERROR
 * record carries; and the stats op's blocks, every counter of a big node's too. Part of
 * check_chipd. */
#include "chipd_fixture.h"
#include "hello.h"
#include "node.h"
#include "proto.h"
#include "region.h"
#include "ring.h"
#include "testutil.h"
#include "wait.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTR_NAME(name, kind) #name,
static const char *const sup_names[] = {PROTO_SUP_COUNTERS(CTR_NAME)};
static const char *const wrk_names[] = {PROTO_WRK_COUNTERS(CTR_NAME)};

#define MAX_CHIPS 2
#define WAIT_MS	  10000u /* bound of every poll (the supervisor sweeps every tick) */

struct ctrs {
	uint64_t sup[PROTO_NSUP_CTRS];
	uint64_t chip[MAX_CHIPS][PROTO_NWRK_CTRS];
};

/* Every counter of @d, read from shared memory (chipd_stats: no request). */
static void read_ctrs(struct cd *d, struct ctrs *c)
{
	struct chipd_stat *st = calloc(512, sizeof(*st));
	struct chipd_error err;
	uint32_t n = 0;

	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(chipd_stats(d->conn, st, 512, &n, &err), 0);
	memset(c, 0, sizeof(*c));
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(st[i].block, "supervisor") == 0) {
			for (int k = 0; k < PROTO_NSUP_CTRS; k++)
				if (strcmp(st[i].name, sup_names[k]) == 0)
					c->sup[k] = st[i].value;
			continue;
		}
		for (int chip = 0; chip < MAX_CHIPS; chip++) {
			char block[16];

			snprintf(block, sizeof(block), "chip%d", chip);
			for (int k = 0; strcmp(st[i].block, block) == 0 && k < PROTO_NWRK_CTRS; k++)
				if (strcmp(st[i].name, wrk_names[k]) == 0)
					c->chip[chip][k] = st[i].value;
		}
	}
	free(st);
}

static uint64_t err_ctr(const struct ctrs *c, enum chipd_code code)
{
	return c->sup[PROTO_SUP_err_bad_request + code - 1];
}

/* Polls @d's counters into @c until @done(@c) holds (bounded: WAIT_MS). */
static void wait_ctrs(struct cd *d, struct ctrs *c, bool (*done)(const struct ctrs *c),
		      const char *what)
{
	uint64_t end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;

	for (read_ctrs(d, c); !done(c); read_ctrs(d, c)) {
		ck_assert_msg(shm_now_ns() < end, "%s: not within %u ms", what, WAIT_MS);
		usleep(5000);
	}
}

static int submit(struct cd *d, const struct chipd_param *p, uint32_t np, int32_t chip,
		  uint32_t deadline_ms, uint64_t *id, chipd_stream **s, struct chipd_error *err)
{
	struct chipd_request req = {.workload = "synthetic",
				    .params = p,
				    .nparams = np,
				    .chip = chip,
				    .deadline_ms = deadline_ms};

	return chipd_submit(d->conn, &req, CD_CALL_MS, id, s, err);
}

/* Submits and reads the stream to its end: the code it ended with (CHIPD_OK after
 * FINAL) and *@n tokens. */
static enum chipd_code run_stream(struct cd *d, const struct chipd_param *p, uint32_t np,
				  int32_t chip, uint32_t deadline_ms, uint64_t *id, uint32_t *n)
{
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;

	ck_assert_int_eq(submit(d, p, np, chip, deadline_ms, id, &s, &err), 0);
	*n = cd_drain_stream(s, &code, CD_CALL_MS);
	chipd_stream_close(s, CD_CALL_MS);
	return code;
}

static bool four_streams_ended(const struct ctrs *c)
{
	uint64_t n = 0;

	for (int i = 0; i < MAX_CHIPS; i++)
		n += c->chip[i][PROTO_WRK_completed] + c->chip[i][PROTO_WRK_failed] +
		     c->chip[i][PROTO_WRK_cancelled];
	return n >= 4;
}

/* Refusals and stream ends, each request once under the code it ended with: a deadline
 * (worker), a cancel (worker), a device error (worker), a cancel of nothing and a bad
 * chip (router refusals). A completed stream and the cancel call itself count in no
 * err_<code>. */
START_TEST(err_counts_each_request_once_by_how_it_ended)
{
	const char *const args[] = {"--chips", "2", NULL};
	struct chipd_param quick[] = {{"tokens", 3}, {"device_us", 0}};
	struct chipd_param endless[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	struct chipd_param broken[] = {{"tokens", 5}, {"device_us", 0}, {"fail_step", 1}};
	struct chipd_token tok;
	struct chipd_error err;
	struct ctrs c0, c;
	chipd_stream *s;
	uint64_t id;
	uint32_t n;
	struct cd d;
	int rc;

	cd_start(&d, args, NULL);
	read_ctrs(&d, &c0);
	ck_assert_int_eq(run_stream(&d, quick, 2, -1, 0, &id, &n), CHIPD_OK);
	ck_assert_int_eq(run_stream(&d, endless, 2, -1, 100, &id, &n), CHIPD_E_TIMEOUT);
	ck_assert_int_eq(run_stream(&d, broken, 3, 0, 0, &id, &n), CHIPD_E_DEVICE_ERROR);
	ck_assert_int_eq(submit(&d, endless, 2, -1, 0, &id, &s, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, CD_CALL_MS, &err), 0);
	ck_assert_int_eq(chipd_cancel(d.conn, id, CD_CALL_MS, &err), 0);
	do /* the tokens already on their way, then the end */
		rc = chipd_stream_next(s, &tok, CD_CALL_MS, &err);
	while (rc == 0);
	ck_assert_int_eq(rc, -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_CANCELLED);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(chipd_cancel(d.conn, 424242, CD_CALL_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NOT_FOUND);
	/* a submit's admission counts every stream end seen so far, so once it is
	 * answered the counts are complete, whatever the sweep's tick */
	ck_assert_int_eq(submit(&d, quick, 2, 7, 0, &id, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	read_ctrs(&d, &c);

	/* 5 submits and 2 cancels, every answer delivered (the router counts one just
	 * after its client can read it) */
	for (uint64_t end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;
	     c.sup[PROTO_SUP_answered] - c0.sup[PROTO_SUP_answered] < 7 && shm_now_ns() < end;
	     usleep(2000))
		read_ctrs(&d, &c);
	ck_assert_uint_eq(c.sup[PROTO_SUP_requests] - c0.sup[PROTO_SUP_requests], 7);
	ck_assert_uint_eq(c.sup[PROTO_SUP_answered] - c0.sup[PROTO_SUP_answered], 7);
	for (int k = 1; k < CHIPD_NCODES; k++) {
		uint64_t want = k == CHIPD_E_TIMEOUT || k == CHIPD_E_DEVICE_ERROR ||
				k == CHIPD_E_CANCELLED || k == CHIPD_E_NOT_FOUND ||
				k == CHIPD_E_BAD_REQUEST;

		ck_assert_msg(err_ctr(&c, k) - err_ctr(&c0, k) == want,
			      "err_%s: %llu, expected %llu", chipd_code_name(k),
			      (unsigned long long)(err_ctr(&c, k) - err_ctr(&c0, k)),
			      (unsigned long long)want);
	}
	/* the workers count the streams they ended (just after the record is out), the
	 * router also the refusals */
	wait_ctrs(&d, &c, four_streams_ended, "the workers' counts of ended streams");
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_failed] + c.chip[1][PROTO_WRK_failed], 2);
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_cancelled] + c.chip[1][PROTO_WRK_cancelled], 1);
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_completed] + c.chip[1][PROTO_WRK_completed], 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* What completed_reached waits for: chip want_chip's completions (-1: both chips')
 * reach want_completed. */
static int want_chip;
static uint64_t want_completed;

static uint64_t completed_on(const struct ctrs *c, int chip)
{
	return chip >= 0 ? c->chip[chip][PROTO_WRK_completed]
			 : c->chip[0][PROTO_WRK_completed] + c->chip[1][PROTO_WRK_completed];
}

static bool completed_reached(const struct ctrs *c)
{
	return completed_on(c, want_chip) >= want_completed;
}

/* A submit for any chip goes to the READY chip with the fewest requests not ended
 * (ties: the lower chip). A stream that ended counts no more, though its ring waits
 * for the sweep: one client's back-to-back requests all run on chip 0 (they would
 * alternate if the ended one still counted), and one held on chip 0 sends the next
 * to chip 1. */
START_TEST(any_chip_goes_to_the_one_with_fewest_unended_requests)
{
	const char *const args[] = {"--chips", "2", NULL};
	struct chipd_param quick[] = {{"tokens", 1}, {"device_us", 0}};
	struct chipd_param endless[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	struct chipd_token tok;
	struct chipd_error err;
	struct ctrs c0, c;
	chipd_stream *held;
	uint64_t id;
	uint32_t n;
	struct cd d;

	cd_start(&d, args, NULL);
	read_ctrs(&d, &c0);
	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(run_stream(&d, quick, 2, -1, 0, &id, &n), CHIPD_OK);
	want_chip = -1;
	want_completed = completed_on(&c0, -1) + 12;
	wait_ctrs(&d, &c, completed_reached, "12 completions counted");
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_completed] - c0.chip[0][PROTO_WRK_completed], 12);
	ck_assert_uint_eq(c.chip[1][PROTO_WRK_completed], c0.chip[1][PROTO_WRK_completed]);

	ck_assert_int_eq(submit(&d, endless, 2, 0, 0, &id, &held, &err), 0);
	ck_assert_int_eq(chipd_stream_next(held, &tok, CD_CALL_MS, &err), 0);
	read_ctrs(&d, &c0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(run_stream(&d, quick, 2, -1, 0, &id, &n), CHIPD_OK);
	want_chip = 1;
	want_completed = completed_on(&c0, 1) + 3;
	wait_ctrs(&d, &c, completed_reached, "3 completions on chip 1 counted");
	ck_assert_uint_eq(c.chip[1][PROTO_WRK_completed] - c0.chip[1][PROTO_WRK_completed], 3);
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_completed], c0.chip[0][PROTO_WRK_completed]);
	chipd_stream_close(held, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* The ring that carried request @id in @d's node region, attached as @r. */
static void find_ring(struct cd *d, struct proto_node *n, uint64_t id, struct ring *r)
{
	cd_node_attach(d, n);
	for (uint32_t i = 0; i < n->geom.nrings; i++) {
		ck_assert_int_eq(proto_node_ring(n, i, r), 0);
		if (atomic_load(&r->hdr->request_id) == id)
			return;
	}
	ck_abort_msg("no ring carries request %llu", (unsigned long long)id);
}

/* The record that ended request @id's stream. */
static struct ring_rec end_record(struct cd *d, uint64_t id)
{
	struct proto_node n;
	struct ring r;
	struct ring_rec rec;
	uint64_t head;

	find_ring(d, &n, id, &r);
	ck_assert(ring_finished(&r));
	head = atomic_load(&r.hdr->head);
	rec = r.recs[(head - 1) & (r.capacity - 1)];
	proto_node_detach(&n);
	return rec;
}

/* An ERROR record carries no token: its value is 0, its seq the number of tokens
 * before it, and no tokens counter counts it, whether the worker wrote it
 * (device_error) or the supervisor in its place (worker_lost). */
START_TEST(error_record_carries_no_token)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct chipd_param broken[] = {{"tokens", 10}, {"device_us", 0}, {"fail_step", 3}};
	struct chipd_param slow[] = {{"tokens", 1 << 20}, {"device_us", 20000}};
	struct chipd_token tok;
	struct chipd_error err;
	struct ring_rec rec;
	enum chipd_code code;
	chipd_stream *s;
	struct ctrs c;
	uint64_t id;
	uint32_t n;
	struct cd d;
	pid_t w0;

	cd_start(&d, args, NULL);
	ck_assert_int_eq(run_stream(&d, broken, 3, 0, 0, &id, &n), CHIPD_E_DEVICE_ERROR);
	ck_assert_uint_eq(n, 3);
	rec = end_record(&d, id);
	ck_assert_uint_eq(rec.flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR));
	ck_assert_uint_eq(rec.seq, 3);
	ck_assert_uint_eq(rec.value, 0);
	ck_assert_uint_eq(rec.request_id, id);
	read_ctrs(&d, &c); /* S counts a token before the end can follow it */
	ck_assert_uint_eq(c.chip[0][PROTO_WRK_tokens], 3);

	/* the worker dies mid-stream: the supervisor writes the end */
	ck_assert_int_eq(submit(&d, slow, 2, 0, 0, &id, &s, &err), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(chipd_stream_next(s, &tok, CD_CALL_MS, &err), 0);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	n = 2 + cd_drain_stream_from(s, 2, &code, CD_CALL_MS); /* more may have come */
	ck_assert_int_eq(code, CHIPD_E_WORKER_LOST);
	rec = end_record(&d, id);
	ck_assert_uint_eq(rec.flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_WORKER_LOST));
	ck_assert_uint_eq(rec.seq, n);
	ck_assert_uint_eq(rec.value, 0);
	chipd_stream_close(s, CD_CALL_MS);
	/* counted when it wrote the record; the device error at the next admission */
	read_ctrs(&d, &c);
	ck_assert_uint_eq(c.sup[PROTO_SUP_err_worker_lost], 1);
	ck_assert_uint_eq(c.sup[PROTO_SUP_err_device_error], 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* The stats op through the mailbox (libchipd reads the counters directly): @chip -1
 * for every block. Fills @m with the decoded answer (an ok one or the envelope). */
static void stats_op(struct cd *d, int64_t chip, struct proto_msg *m)
{
	proto_msg_init(m, PROTO_OP_STATS);
	m->chip = chip;
	cd_op_raw(d, m);
}

/* Returns the stats op's answer's keys' blocks as flags: bit 0 the supervisor, bit
 * 1 + i chip i; fails on any other block. */
static unsigned stats_op_blocks(struct cd *d, int64_t chip)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	unsigned blocks = 0;

	stats_op(d, chip, m);
	ck_assert_msg(m->ok, "stats: %s", m->err.message);
	for (uint32_t i = 0; i < m->nstats; i++) {
		const char *key = m->stats[i].key;
		unsigned c;

		if (strncmp(key, "supervisor.", 11) == 0)
			blocks |= 1;
		else if (sscanf(key, "chip%u.", &c) == 1 && c < MAX_CHIPS)
			blocks |= 2u << c;
		else
			ck_abort_msg("stats: key %s", key);
	}
	free(m);
	return blocks;
}

START_TEST(stats_op_with_a_chip_has_the_supervisor_block)
{
	const char *const args[] = {"--chips", "2", NULL};
	struct cd d;

	cd_start(&d, args, NULL);
	ck_assert_uint_eq(stats_op_blocks(&d, -1), 1 | 2 | 4);
	ck_assert_uint_eq(stats_op_blocks(&d, 1), 1 | 4);
	ck_assert_uint_eq(stats_op_blocks(&d, 0), 1 | 2);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A stats op without a chip answers every counter of every block, also on a node
 * whose counters are more than 512 (31 chips: 25 + 31 * 16): none silently left out,
 * the last chip's block included. */
START_TEST(stats_op_answers_every_counter_of_a_big_node)
{
	const char *const args[] = {"--chips", "31", "--kv-blocks", "16", NULL};
	struct proto_msg *m = calloc(1, sizeof(*m));
	const uint32_t want = PROTO_NSUP_CTRS + 31 * PROTO_NWRK_CTRS;
	uint32_t last = 0;
	struct cd d;

	cd_start(&d, args, NULL);
	stats_op(&d, -1, m);
	ck_assert_msg(m->ok, "stats: %s", m->err.message);
	for (uint32_t i = 0; i < m->nstats; i++)
		last += strncmp(m->stats[i].key, "chip30.", 7) == 0;
	ck_assert_msg(m->nstats == want && last == PROTO_NWRK_CTRS,
		      "stats: %u pairs of %u counters, %u of chip30's %d", m->nstats, want, last,
		      PROTO_NWRK_CTRS);
	free(m);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

static bool no_ring_held(const struct ctrs *c)
{
	return c->sup[PROTO_SUP_rings_in_use] == 0;
}

/* The worker's queue_depth (and status's queued) is what waits in its admission queue
 * while the orchestrator is busy; the supervisor's queue_depth every stream in flight,
 * rings_in_use every ring held, an ended stream whose reader has not read the end
 * included. */
START_TEST(gauges_count_what_waits_and_what_is_held)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct chipd_param busy[] = {{"tokens", 5}, {"host_us", 500000}, {"device_us", 0}};
	struct chipd_param quick[] = {{"tokens", 1}, {"device_us", 0}};
	struct chipd_status *st = calloc(1, sizeof(*st));
	bool queued = false, in_flight = false;
	chipd_stream *a, *b, *last;
	struct chipd_error err;
	enum chipd_code code;
	uint64_t id, end;
	struct ctrs c;
	struct cd d;

	ck_assert_ptr_nonnull(st);
	cd_start(&d, args, NULL);
	/* a: its orchestrator builds each step for 500 ms; b waits behind it */
	ck_assert_int_eq(submit(&d, busy, 3, 0, 0, &id, &a, &err), 0);
	end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;
	for (read_ctrs(&d, &c); c.chip[0][PROTO_WRK_active] != 1; read_ctrs(&d, &c)) {
		ck_assert(shm_now_ns() < end);
		usleep(2000);
	}
	ck_assert_int_eq(submit(&d, quick, 2, 0, 0, &id, &b, &err), 0);
	while (!(queued && in_flight) && shm_now_ns() < end) {
		read_ctrs(&d, &c);
		ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, st, &err), 0);
		queued |= c.chip[0][PROTO_WRK_queue_depth] == 1 && st->chips[0].queued == 1;
		in_flight |=
		    c.sup[PROTO_SUP_queue_depth] == 2 && c.sup[PROTO_SUP_rings_in_use] == 2;
		usleep(2000);
	}
	ck_assert_msg(queued, "the waiting request never showed in queue_depth and queued");
	ck_assert_msg(in_flight, "two streams in flight never showed in the supervisor's gauges");
	ck_assert_uint_eq(cd_drain_stream(a, &code, CD_CALL_MS), 5);
	ck_assert_uint_eq(cd_drain_stream(b, &code, CD_CALL_MS), 1);
	chipd_stream_close(a, CD_CALL_MS);
	chipd_stream_close(b, CD_CALL_MS);
	/* ended, not read: no longer in flight, its ring still held */
	ck_assert_int_eq(submit(&d, quick, 2, 0, 0, &id, &last, &err), 0);
	end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;
	for (read_ctrs(&d, &c);
	     c.sup[PROTO_SUP_queue_depth] != 0 || c.sup[PROTO_SUP_rings_in_use] != 1 ||
	     c.chip[0][PROTO_WRK_completed] != 3 || c.chip[0][PROTO_WRK_queue_depth] != 0 ||
	     c.chip[0][PROTO_WRK_active] != 0;
	     read_ctrs(&d, &c)) {
		ck_assert_msg(shm_now_ns() < end,
			      "supervisor queue_depth %llu rings_in_use %llu; chip0 completed %llu "
			      "queue_depth %llu active %llu",
			      (unsigned long long)c.sup[PROTO_SUP_queue_depth],
			      (unsigned long long)c.sup[PROTO_SUP_rings_in_use],
			      (unsigned long long)c.chip[0][PROTO_WRK_completed],
			      (unsigned long long)c.chip[0][PROTO_WRK_queue_depth],
			      (unsigned long long)c.chip[0][PROTO_WRK_active]);
		usleep(5000);
	}
	ck_assert_uint_eq(cd_drain_stream(last, &code, CD_CALL_MS), 1);
	chipd_stream_close(last, CD_CALL_MS);
	wait_ctrs(&d, &c, no_ring_held, "the read stream's ring released");
	free(st);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Worker gauges lie in memory any client can write: a value past what status carries
 * (0..2^32-1) is clamped, and status keeps answering. */
START_TEST(status_clamps_gauges_a_client_overwrote)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX];
	struct chipd_error err;
	struct proto_node n;
	struct cd d;

	ck_assert_ptr_nonnull(st);
	cd_start(&d, args, NULL);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, 0, WAIT_MS));
	ck_assert_int_eq(shm_region_name(name, sizeof(name), (unsigned)geteuid(), d.instance), 0);
	ck_assert_msg(proto_node_attach(&n, name, &diag) == 0, "%s", diag.msg);
	/* gauges are in the read-only node region since layout 3: only the supervisor
	 * and its workers write them; the test writes where no client can */
	if (!cd_node_make_writable(&n)) {
		proto_node_detach(&n);
		free(st);
		ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
		return;
	}
	/* queue_depth changes only when a request is queued: an idle worker keeps it */
	ctr_set(&n.wrk_ctr[0], PROTO_WRK_queue_depth, UINT64_MAX);
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, st, &err), 0);
	ck_assert_uint_eq(st->chips[0].queued, UINT32_MAX);
	ctr_set(&n.wrk_ctr[0], PROTO_WRK_queue_depth, (uint64_t)UINT32_MAX + 1);
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, st, &err), 0);
	ck_assert_uint_eq(st->chips[0].queued, UINT32_MAX);
	ctr_set(&n.wrk_ctr[0], PROTO_WRK_queue_depth, 0);
	proto_node_detach(&n);
	free(st);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

void cd_add_counter_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"err_counts_once", err_counts_each_request_once_by_how_it_ended},
	    {"error_record", error_record_carries_no_token},
	    {"stats_op_blocks", stats_op_with_a_chip_has_the_supervisor_block},
	    {"stats_op_big_node", stats_op_answers_every_counter_of_a_big_node},
	    {"gauges", gauges_count_what_waits_and_what_is_held},
	    {"status_clamps_gauges", status_clamps_gauges_a_client_overwrote},
	    {"routes_to_fewest_unended", any_chip_goes_to_the_one_with_fewest_unended_requests},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
