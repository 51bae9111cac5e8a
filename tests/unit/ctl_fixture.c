/* ctl_fixture.c - see ctl_fixture.h. */
#include "ctl_fixture.h"
#include "ctl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLICE_NS (5ull * 1000 * 1000)

/* ---- formatters and samples ---- */

char *format(void (*fn)(FILE *, const void *), const void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	fn(f, arg);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

const struct chipd_workload wl_sample[] = {
    {"alpha",
     "the first",
     2,
     {{"tokens", 16, 1, 65536, "steps"}, {"neg", -1, INT64_MIN, 0, "a \"quoted\" doc"}}},
    {"beta", "the second", 1, {{"seed", 1, 0, INT64_MAX, "seed"}}},
};

void wl_table(FILE *f, const void *arg)
{
	(void)arg;
	ctl_workloads_table(f, wl_sample, 2);
}

void wl_json(FILE *f, const void *arg)
{
	ctl_workloads_json(f, arg, wl_sample, 2);
}

const char trace_json[] =
    "{\"traceEvents\":[\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"chip 0 O "
    "orchestrator\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":2,\"args\":{\"name\":\"chip 0 S "
    "scheduler\"}},\n"
    "{\"name\":\"O build\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0.000,\"dur\":10.000,"
    "\"args\":{\"arg\":1}},\n"
    "{\"name\":\"O build\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":10,\"dur\":10,"
    "\"args\":{\"arg\":2}},\n"
    "{\"name\":\"S "
    "run\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":12,\"dur\":10,\"args\":{\"arg\":1}},\n"
    "{\"name\":\"token publish\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":22,\"dur\":3,"
    "\"args\":{\"arg\":1}},\n"
    "{\"name\":\"token publish\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":30,\"dur\":10,"
    "\"args\":{\"arg\":2}},\n"
    "{\"name\":\"S run\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0,\"dur\":99},\n"
    "{\"name\":\"other\",\"ph\":\"i\",\"pid\":0,\"tid\":0,\"ts\":1,\"s\":\"g\",\"args\":{}}\n"
    "],\"displayTimeUnit\":\"ns\"}\n";

/* ---- the server of chipd_trace and chipd_workloads ---- */

static int trace_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct tsrv *t = ctx;
	FILE *f;

	(void)err;
	if (t->n < 8) {
		t->acts[t->n] = req->act;
		snprintf(t->paths[t->n], sizeof(t->paths[0]), "%s", req->path);
		t->n++;
	}
	if (req->act == PROTO_TRACE_COLLECT) {
		f = fopen(req->path, "w");
		if (!f)
			return proto_fail(err, CHIPD_E_INTERNAL, "cannot write %s", req->path);
		fputs(trace_json, f);
		fclose(f);
		ans->events = 7;
		ans->dropped = 2;
	}
	return CHIPD_OK;
}

/* wl_sample as the flat list of the wire, beta's row between alpha's: the client
 * groups rows by workload, whatever their order. */
static int workloads_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			 struct proto_error *err)
{
	static const struct {
		int w, i;
	} rows[] = {{0, 0}, {1, 0}, {0, 1}};

	struct tsrv *t = ctx;

	(void)err;
	if (atomic_load(&t->endless)) {
		struct timespec busy = {0, 2 * 1000 * 1000};

		nanosleep(&busy, NULL);
		snprintf(ans->wls[0].wl, CHIPD_NAME_MAX, "w%lld", (long long)req->from);
		ans->nwls = 1;
		ans->more = 1;
		return CHIPD_OK;
	}
	for (int w = 0; w < 2; w++) {
		snprintf(ans->wls[w].wl, CHIPD_NAME_MAX, "%s", wl_sample[w].name);
		snprintf(ans->wls[w].doc, CHIPD_DOC_MAX, "%s", wl_sample[w].doc);
	}
	ans->nwls = 2;
	for (int r = 0; r < 3; r++) {
		const struct chipd_wl_param *p = &wl_sample[rows[r].w].params[rows[r].i];
		struct proto_wl_param *q = &ans->wl_params[r];

		snprintf(q->wl, CHIPD_NAME_MAX, "%s", wl_sample[rows[r].w].name);
		snprintf(q->key, CHIPD_KEY_MAX, "%s", p->key);
		snprintf(q->doc, CHIPD_DOC_MAX, "%s", p->doc);
		q->def = p->def;
		q->min = p->min;
		q->max = p->max;
	}
	ans->nwl_params = 3;
	return CHIPD_OK;
}

static const struct proto_handler trace_handlers[] = {{PROTO_OP_TRACE, NULL, trace_run},
						      {PROTO_OP_WORKLOADS, NULL, workloads_run}};
static const struct proto_server trace_server = {"trace server", trace_handlers, 2};

static void *trace_serve(void *arg)
{
	struct tsrv *t = arg;
	struct mbox *mb = &t->x.node.mbox;
	struct mbox_event ev;
	size_t len;

	ck_assert_int_ge(mbox_server_attach(mb), 0);
	while (!atomic_load(&t->stop)) {
		if (mbox_server_next(mb, &ev, shm_deadline_in(SLICE_NS)))
			continue;
		if (ev.kind == MBOX_EV_RESET) {
			mbox_ack_reset(mb, ev.t);
			continue;
		}
		if (proto_dispatch(&trace_server, t, ev.req, ev.len, mbox_resp_buf(mb, ev.t),
				   mbox_resp_cap(mb), &len) == 0)
			mbox_answer(mb, ev.t, (uint32_t)len);
	}
	mbox_server_detach(mb);
	return NULL;
}

void tsrv_start(struct tsrv *t)
{
	memset(t, 0, sizeof(*t));
	cx_region(&t->x);
	hx_start(&t->hello, &t->x.node);
	ck_assert_int_eq(pthread_create(&t->thread, NULL, trace_serve, t), 0);
}

void tsrv_stop(struct tsrv *t)
{
	atomic_store(&t->stop, 1);
	pthread_join(t->thread, NULL);
	hx_stop(&t->hello);
	cx_region_remove(&t->x);
}
