/* worker_trace_op.c - the worker's trace op over its mailbox: start, collect a
 * Chrome trace fragment that merges into valid JSON, collect while O and S record
 * (TSan checks the rings' protocol), stop then collect, paths refused; the summary's
 * latencies pair each publish with its own epoch's build; a collect its caller gave up
 * on while the worker wrote it leaves no fragment. */
#include "mbox.h"
#include "testutil.h"
#include "wait.h"
#include "worker_fixture.h"
#include "wrk_trace.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MS 5000u

/* S releases banks in the order their lanes finish, not their epochs' (a slow request
 * holds an older bank while newer ones come back): the summary's latency of an epoch
 * is its own publish's end minus its own build's end, whatever order the publishes
 * came in. */
START_TEST(trace_summary_pairs_publishes_out_of_epoch_order)
{
	struct wrk_trace_summary sum;
	struct wrk_trace *t;

	ck_assert_int_eq(wrk_trace_create(&t, 16), 0);
	wrk_trace_span(t, WRK_TR_O, WRK_SPAN_O_BUILD, 0, 10, 1);
	wrk_trace_span(t, WRK_TR_O, WRK_SPAN_O_BUILD, 10, 20, 2);
	wrk_trace_span(t, WRK_TR_O, WRK_SPAN_O_BUILD, 20, 30, 3);
	/* epoch 1's bank is held by a slow lane: 2 and 3 are published first */
	wrk_trace_span(t, WRK_TR_S, WRK_SPAN_S_PUBLISH, 25, 30, 2);
	wrk_trace_span(t, WRK_TR_S, WRK_SPAN_S_PUBLISH, 35, 40, 3);
	wrk_trace_span(t, WRK_TR_S, WRK_SPAN_S_PUBLISH, 1000, 1010, 1);
	ck_assert_int_eq(wrk_trace_summarize(t, &sum), 0);
	/* latencies 10, 10 and 1000 */
	ck_assert_uint_eq(sum.latency_p50_ns, 10);
	ck_assert_uint_eq(sum.latency_p99_ns, 1000);
	wrk_trace_destroy(t);
}
END_TEST

void wrk_add_trace_tcases(Suite *s);

/* Validates a merged trace: JSON, the metadata events, every X event's fields, and
 * (when @want_os) an "O build" on tid 1 and an "S run" on tid 2; the X events number
 * argv[3] (-1: any) and lie within [argv[4], argv[5]] microseconds. */
static const char checker[] =
    "import json,sys\n"
    "ev=json.load(open(sys.argv[1]))['traceEvents']\n"
    "x=[e for e in ev if e['ph']=='X']\n"
    "meta={e['args']['name'] for e in ev if e['ph']=='M'}\n"
    "assert {'chip 0','M mailbox','O orchestrator','S scheduler'}<=meta,meta\n"
    "for e in x:\n"
    "  assert e['pid']==0 and e['tid'] in (0,1,2) and e['dur']>=0,e\n"
    "  assert float(sys.argv[4])<=e['ts'] and e['ts']+e['dur']<=float(sys.argv[5]),e\n"
    "if sys.argv[2]=='1':\n"
    "  assert any(e['tid']==1 and e['name']=='O build' for e in x)\n"
    "  assert any(e['tid']==2 and e['name']=='S run' for e in x)\n"
    "assert sys.argv[3]=='-1' or len(x)==int(sys.argv[3]),len(x)\n";

/* A path under /tmp for this test's output. */
static void out_path(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "/tmp/chipd-wtrace.%d.%s", (int)getpid(), tag);
}

/* Wraps the fragment at @frag into a whole trace and runs the checker on it. Skips
 * the JSON check (with a note) where python3 is missing. */
static void check_fragment(const char *frag, bool want_os, int64_t events, uint64_t t0_ns,
			   uint64_t t1_ns)
{
	char whole[128], script[128], cmd[512], buf[4096];
	FILE *in, *out;
	size_t n;
	int rc;

	snprintf(whole, sizeof(whole), "%s.whole.json", frag);
	snprintf(script, sizeof(script), "%s.check.py", frag);
	in = fopen(frag, "r");
	ck_assert_ptr_nonnull(in);
	out = fopen(whole, "w");
	ck_assert_ptr_nonnull(out);
	n = fread(buf, 1, 16, in);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(buf[0], '{'); /* an event, not the wrapper */
	ck_assert(strncmp(buf, "{\"traceEvents\"", 14) != 0);
	fputs("{\"traceEvents\":[", out);
	do
		fwrite(buf, 1, n, out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0);
	fputs("]}", out);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
	out = fopen(script, "w");
	ck_assert_ptr_nonnull(out);
	fputs(checker, out);
	ck_assert_int_eq(fclose(out), 0);
	if (system("command -v python3 >/dev/null 2>&1") != 0) {
		fprintf(stderr, "check_worker: no python3, JSON not validated\n");
	} else {
		snprintf(cmd, sizeof(cmd), "python3 %s %s %d %lld %llu.%03u %llu.%03u", script,
			 whole, want_os, (long long)events, (unsigned long long)(t0_ns / 1000),
			 (unsigned)(t0_ns % 1000), (unsigned long long)(t1_ns / 1000),
			 (unsigned)(t1_ns % 1000));
		rc = system(cmd);
		ck_assert_msg(rc == 0, "checker failed on %s (kept)", whole);
	}
	unlink(whole);
	unlink(script);
}

static void run_two(struct wf *f, uint64_t id0)
{
	struct ring_rec rec[16];
	const char *p = "tokens=6,host_us=300,device_us=500";

	ck_assert_int_eq(wf_assign(f, id0, 0, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_assign(f, id0 + 1, 1, "synthetic", p, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(f, 0, rec, 16, READ_MS), 6);
	ck_assert_uint_eq(wf_read(f, 1, rec, 16, READ_MS), 6);
}

START_TEST(trace_op_collects_a_fragment_of_o_and_s_spans)
{
	struct wrk_config cfg;
	char path[96];
	int64_t events = -1, dropped = -1;
	uint64_t t0;
	struct wf f;

	out_path(path, sizeof(path), "frag");
	wf_config(&cfg);   /* no trace in the config: start makes one */
	t0 = shm_now_ns(); /* a wait span may begin before the start */
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, 0, NULL, NULL, NULL), CHIPD_OK);
	run_two(&f, 1);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, &events, &dropped, NULL),
			 CHIPD_OK);
	ck_assert_int_gt(events, 12); /* at least 6 builds and 6 runs */
	ck_assert_int_eq(dropped, 0);
	check_fragment(path, true, events, t0, shm_now_ns());
	unlink(path);
	wf_stop(&f);
}
END_TEST

/* A quick check of a fragment in C (python3 is too slow to run while requests do):
 * one event per line, each an object; every X event's name known and its span within
 * [@t0_ns, @t1_ns]. Returns the X events. */
static int64_t check_lines(const char *path, uint64_t t0_ns, uint64_t t1_ns)
{
	static const char *const names[] = {"\"mailbox op\"",	"\"O build\"", "\"O wait bank\"",
					    "\"S wait epoch\"", "\"S run\"",   "\"token publish\""};
	char line[512];
	int64_t nx = 0;
	FILE *in = fopen(path, "r");

	ck_assert_ptr_nonnull(in);
	while (fgets(line, sizeof(line), in)) {
		size_t n = strlen(line);
		const char *ts, *name;
		double t, d;
		bool known = false;

		ck_assert_msg(n > 2 && line[n - 1] == '\n', "line: %s", line);
		line[--n] = 0;
		if (line[n - 1] == ',')
			line[--n] = 0;
		ck_assert_msg(line[0] == '{' && line[n - 1] == '}', "line: %s", line);
		if (!strstr(line, "\"ph\":\"X\""))
			continue;
		nx++;
		name = strstr(line, "\"name\":");
		ck_assert_ptr_nonnull(name);
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			known |= strncmp(name + 7, names[k], strlen(names[k])) == 0;
		ck_assert_msg(known, "line: %s", line);
		ts = strstr(line, "\"ts\":");
		ck_assert_ptr_nonnull(ts);
		ck_assert_int_eq(sscanf(ts, "\"ts\":%lf,\"dur\":%lf", &t, &d), 2);
		ck_assert_msg(t >= (double)(t0_ns / 1000) && t + d <= (double)(t1_ns / 1000 + 1),
			      "line: %s", line);
	}
	fclose(in);
	return nx;
}

struct collector {
	struct wf *f;
	char path[96];
	uint64_t t0;
	_Atomic int stop;
	int rounds;
	int64_t dropped, events;
};

/* Collects over and over while the requests run (M reads the rings as O and S write
 * them); each fragment must be whole. */
static void *collect_loop(void *arg)
{
	struct collector *c = arg;

	while (!atomic_load(&c->stop) || c->rounds < 3) {
		int64_t events = -1, dropped = -1;

		ck_assert_int_eq(
		    wf_trace(c->f, PROTO_TRACE_COLLECT, c->path, -1, &events, &dropped, NULL),
		    CHIPD_OK);
		ck_assert_int_eq(check_lines(c->path, c->t0, shm_now_ns()), events);
		c->dropped = dropped;
		c->events = events;
		c->rounds++;
	}
	return NULL;
}

START_TEST(trace_collect_while_requests_run)
{
	struct wrk_config cfg;
	static struct ring_rec rec[256];
	struct wrk_trace *tr;
	struct collector c = {0};
	pthread_t th;
	struct wf f;

	/* a small ring: O and S overwrite spans while M reads them */
	ck_assert_int_eq(wrk_trace_create(&tr, 16), 0);
	wf_config(&cfg);
	cfg.trace = tr;
	c.t0 = shm_now_ns();
	wf_start(&f, &cfg, 256);
	c.f = &f;
	out_path(c.path, sizeof(c.path), "live");
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(
		    wf_assign(&f, 20 + i, i, "synthetic", "tokens=200,device_us=1000", 0, NULL),
		    CHIPD_OK);
	ck_assert_int_eq(pthread_create(&th, NULL, collect_loop, &c), 0);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_uint_eq(wf_read(&f, i, rec, 256, READ_MS), 200);
	atomic_store(&c.stop, 1);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_ge(c.rounds, 3);
	ck_assert_int_gt(c.dropped, 0); /* the rings wrapped */
	check_fragment(c.path, false, c.events, c.t0, shm_now_ns());
	unlink(c.path);
	wf_stop(&f);
	wrk_trace_destroy(tr);
}
END_TEST

START_TEST(trace_stop_then_collect_keeps_what_was_recorded)
{
	struct wrk_config cfg;
	char path[96];
	int64_t n1 = -1, n2 = -1, n3 = -1;
	uint64_t t0;
	struct wf f;

	out_path(path, sizeof(path), "stop");
	wf_config(&cfg);
	t0 = shm_now_ns();
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	run_two(&f, 1);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_STOP, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, &n1, NULL, NULL), CHIPD_OK);
	ck_assert_int_gt(n1, 12);
	check_fragment(path, true, n1, t0, shm_now_ns());
	run_two(&f, 3); /* not recorded */
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, &n2, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(n2, n1);
	/* a new start after a stop forgets the old spans */
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, &n3, NULL, NULL), CHIPD_OK);
	ck_assert_int_lt(n3, n1);
	check_fragment(path, false, n3, t0, shm_now_ns());
	unlink(path);
	wf_stop(&f);
}
END_TEST

START_TEST(trace_collect_without_start_writes_metadata_only)
{
	struct wrk_config cfg;
	char path[96];
	int64_t events = -1, dropped = -1;
	struct wf f;

	out_path(path, sizeof(path), "none");
	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_STOP, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, &events, &dropped, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(events, 0);
	ck_assert_int_eq(dropped, 0);
	check_fragment(path, false, 0, 0, 1);
	unlink(path);
	wf_stop(&f);
}
END_TEST

/* {"v":1,"op":"trace","act":"collect","path":"rel/x"}, which the encoder refuses to
 * write: the worker must refuse it too. */
static const char relative_collect[] = "\x84"
				       "\xa1v\x01"
				       "\xa2op\xa5trace"
				       "\xa3"
				       "act\xa7"
				       "collect"
				       "\xa4path\xa5rel/x";

START_TEST(trace_bad_path_is_bad_request)
{
	struct wrk_config cfg;
	char msg[CHIPD_MSG_MAX], path[96];
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(
	    wf_trace(&f, PROTO_TRACE_COLLECT, "/nonexistent-chipd-dir/t.json", -1, NULL, NULL, msg),
	    CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "path"), "message: %s", msg);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, "/tmp", -1, NULL, NULL, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_int_eq(
	    wf_call_raw(&f, PROTO_OP_TRACE, relative_collect, sizeof(relative_collect) - 1, msg),
	    CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "path"), "message: %s", msg);
	out_path(path, sizeof(path), "chip");
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, 3, NULL, NULL, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "chip"), "message: %s", msg);
	ck_assert_int_ne(access(path, F_OK), 0);
	/* and the worker still serves */
	ck_assert_int_eq(wf_heartbeat(&f, 1, NULL, NULL), CHIPD_OK);
	wf_stop(&f);
}
END_TEST

/* The spans of a long recording, written by this thread as each worker thread's
 * writer before the worker starts: a fragment of megabytes, so writing it takes the
 * worker a while. */
static struct wrk_trace *long_recording(uint32_t per_thread)
{
	struct wrk_trace *t;

	ck_assert_int_eq(wrk_trace_create(&t, per_thread), 0);
	for (int th = 0; th < WRK_TR_NTHREADS; th++)
		for (uint32_t i = 0; i < per_thread; i++)
			wrk_trace_span(t, (enum wrk_trace_thread)th, WRK_SPAN_O_BUILD,
				       (uint64_t)i * 1000u, (uint64_t)i * 1000u + 500u, i);
	return t;
}

/* Entries of /tmp whose name starts with the base name of @path. */
static int count_beside(const char *path)
{
	const char *base = strrchr(path, '/') + 1;
	DIR *d = opendir("/tmp");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, base, strlen(base)) == 0;
	closedir(d);
	return n;
}

/* A collect whose caller gave up while the worker wrote the fragment: the supervisor
 * waits SUP_FORWARD_MS for the answer and then resets the slot (a worker slowed or
 * stopped mid-write), so nobody merges or removes what the worker writes after that.
 * The worker's answer finds the slot reset, and the worker removes its fragment: a
 * collect leaves nothing behind in chipd's runtime directory (chipd(8), FILES). The
 * reset must land while the worker holds the slot, so the collect is given up as soon
 * as the worker took it, again until one give-up finds it taken. Before, the fragment
 * stayed, and a part file of every such collect was left in the runtime directory. */
START_TEST(trace_collect_given_up_leaves_no_fragment)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct wrk_trace *tr = long_recording(1u << 14);
	struct proto_error err;
	struct wrk_config cfg;
	struct mbox_ticket t;
	char path[96];
	bool reset = false;
	struct wf f;
	size_t len;

	ck_assert_ptr_nonnull(m);
	out_path(path, sizeof(path), "abandoned");
	wf_config(&cfg);
	cfg.trace = tr;
	wf_start(&f, &cfg, 64);
	for (int attempt = 0; attempt < 20 && !reset; attempt++) {
		uint64_t until = shm_now_ns() + (uint64_t)WF_CALL_MS * 1000000u;
		enum mbox_state st;

		proto_msg_init(m, PROTO_OP_TRACE);
		m->act = PROTO_TRACE_COLLECT;
		snprintf(m->path, sizeof(m->path), "%s", path);
		ck_assert_int_eq(mbox_claim(&f.mb, &t), 0);
		ck_assert_int_eq(
		    proto_encode_request(m, mbox_req_buf(&f.mb, t), PROTO_REQ_MAX, &len, &err), 0);
		ck_assert_int_eq(mbox_post(&f.mb, t, (uint32_t)len), 0);
		do
			st = MBOX_CTL_STATE(mbox_ctl(&f.mb, t.slot));
		while (st == MBOX_POSTED && shm_now_ns() < until);
		ck_assert_int_ne(st, MBOX_POSTED);
		/* 1: reset while the worker writes; 0: its answer came first, dropped here,
		 * and the fragment is the caller's to remove (as the supervisor does) */
		reset = mbox_give_up(&f.mb, t) == 1;
		if (!reset) {
			(void)wf_heartbeat(&f, attempt, NULL, NULL);
			unlink(path);
		}
	}
	ck_assert_msg(reset, "the worker answered each of 20 collects before its give-up");
	/* M serves one request at a time: once this is answered, it is done with the
	 * collect, its answer found the slot reset */
	ck_assert_int_eq(wf_heartbeat(&f, 100, NULL, NULL), CHIPD_OK);
	ck_assert_uint_ge(wf_ctr(&f, "mbox_resets"), 1);
	ck_assert_msg(access(path, F_OK) != 0, "the fragment %s is left behind", path);
	ck_assert_int_eq(count_beside(path), 0);
	/* and a collect nobody gives up on is written as before */
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_COLLECT, path, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_int_eq(access(path, F_OK), 0);
	unlink(path);
	wf_stop(&f);
	wrk_trace_destroy(tr);
	free(m);
}
END_TEST

void wrk_add_trace_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"trace_op_collects_a_fragment_of_o_and_s_spans",
	     trace_op_collects_a_fragment_of_o_and_s_spans},
	    {"trace_collect_while_requests_run", trace_collect_while_requests_run},
	    {"trace_stop_then_collect_keeps_what_was_recorded",
	     trace_stop_then_collect_keeps_what_was_recorded},
	    {"trace_collect_without_start_writes_metadata_only",
	     trace_collect_without_start_writes_metadata_only},
	    {"trace_bad_path_is_bad_request", trace_bad_path_is_bad_request},
	    {"trace_collect_given_up_leaves_no_fragment",
	     trace_collect_given_up_leaves_no_fragment},
	    {"trace_summary_pairs_publishes_out_of_epoch_order",
	     trace_summary_pairs_publishes_out_of_epoch_order},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
