/* device_cases.c - the device contract on any backend (device_cases.h). */
#include "device_cases.h"

#include "tc_kernels.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SPIN_NS	 (200u * 1000u) /* device time of one spin kernel */
#define NSTREAMS 4

static int fail(char *msg, size_t cap, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *msg, size_t cap, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, cap, fmt, ap);
	va_end(ap);
	return err;
}

int dc_spin(struct dev_stream *s, int32_t *out, uint64_t ns, int32_t token)
{
	struct dev_kcall c = {DEV_K_SPIN, .u.spin = {out, ns, token}};

	return dev_launch(s, &c);
}

/* Spins on a stream of its own, copies the result back, checks it. */
struct worker_arg {
	struct dev *d;
	bool select;
	int32_t token;
	int err;
	char msg[DC_MSG_MAX];
};

static void *thread_main(void *arg)
{
	struct worker_arg *a = arg;
	struct dev_stream *s = NULL;
	int32_t *dout = NULL, got = -1;
	int err = 0;

	if (a->select)
		err = dev_select(a->d);
	if (!err)
		err = dev_alloc(a->d, sizeof(int32_t), (void **)&dout);
	if (!err)
		err = dev_stream_create(a->d, &s);
	for (int i = 0; i < 8 && !err; i++)
		err = dc_spin(s, dout, SPIN_NS, a->token + i);
	if (!err)
		err = dev_copy(a->d, s, &got, dout, sizeof(got), DEV_D2H);
	if (!err)
		err = dev_stream_sync(s);
	if (!err && got != a->token + 7)
		err = -EDOM;
	if (err)
		dev_last_error(a->d, a->msg, sizeof(a->msg));
	a->err = err;
	dev_stream_destroy(s);
	dev_free(a->d, dout);
	return NULL;
}

int dc_threads(struct dev *d, char *msg, size_t cap)
{
	struct worker_arg a[3] = {{d, true, 100, 0, ""}, {d, true, 200, 0, ""}, {d, false, 300, 0, ""}};
	struct dev_info info;
	pthread_t th[3];
	int expect;

	dev_get_info(d, &info);
	for (int i = 0; i < 3; i++)
		if (pthread_create(&th[i], NULL, thread_main, &a[i]))
			return fail(msg, cap, -EAGAIN, "cannot start thread %d", i);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		if (a[i].err)
			return fail(msg, cap, a[i].err, "thread %d: %d: %s", i, a[i].err, a[i].msg);
	/* without dev_select: the HIP backend selects the device itself; the sim refuses
	 * every device but index 0, as CUDA's per-thread default would */
	expect = info.kind == DEV_HIP || info.index == 0 ? 0 : -ENXIO;
	if (a[2].err != expect)
		return fail(msg, cap, a[2].err ? a[2].err : -EDOM,
			    "thread without dev_select: %d, want %d (%s)", a[2].err, expect,
			    a[2].msg);
	return 0;
}

int dc_streams(struct dev *d, char *msg, size_t cap)
{
	struct dev_stream *s[NSTREAMS] = {NULL};
	struct dev_event *e = NULL;
	int32_t *dout = NULL, *dbuf = NULL, got[NSTREAMS], src = 77, back = -1;
	int err = dev_alloc(d, NSTREAMS * sizeof(int32_t), (void **)&dout);

	if (!err)
		err = dev_alloc(d, sizeof(int32_t), (void **)&dbuf);
	if (!err)
		err = dev_event_create(d, &e);
	for (int i = 0; i < NSTREAMS && !err; i++)
		err = dev_stream_create(d, &s[i]);
	/* every stream spins and writes its own slot, all queued before any sync */
	for (int i = 0; i < NSTREAMS && !err; i++)
		for (int k = 0; k < 4 && !err; k++)
			err = dc_spin(s[i], dout + i, SPIN_NS, 10 * i + k);
	for (int i = 0; i < NSTREAMS && !err; i++)
		err = dev_stream_sync(s[i]);
	if (!err)
		err = dev_copy(d, NULL, got, dout, sizeof(got), DEV_D2H);
	for (int i = 0; i < NSTREAMS && !err; i++)
		if (got[i] != 10 * i + 3)
			err = fail(msg, cap, -EDOM, "stream %d wrote %d, want %d", i, got[i],
				   10 * i + 3);
	/* stream 1 reads what stream 0 wrote, ordered by an event only */
	if (!err)
		err = dc_spin(s[0], dout, SPIN_NS * 10, 0);
	if (!err)
		err = dev_copy(d, s[0], dbuf, &src, sizeof(src), DEV_H2D);
	if (!err)
		err = dev_event_record(e, s[0]);
	if (!err)
		err = dev_stream_wait(s[1], e);
	if (!err)
		err = dev_copy(d, s[1], &back, dbuf, sizeof(back), DEV_D2H);
	if (!err)
		err = dev_stream_sync(s[1]);
	if (!err && back != src)
		err = fail(msg, cap, -EDOM, "copy ordered by an event read %d, want %d", back,
			   src);
	if (err && !msg[0])
		dev_last_error(d, msg, cap);
	for (int i = 0; i < NSTREAMS; i++)
		dev_stream_destroy(s[i]);
	dev_event_destroy(e);
	dev_free(d, dout);
	dev_free(d, dbuf);
	return err;
}

/* Runs @bad on a fresh stream, then a spin on it and one on another stream; checks
 * the contract. */
static int one_error(struct dev *d, const struct dev_kcall *bad, const char *what, char *msg,
		     size_t cap)
{
	struct dev_stream *s = NULL, *ok = NULL;
	struct dev_event *e = NULL;
	int32_t *dout = NULL, got[2] = {-1, -1}, init[2] = {-1, -1};
	int err = dev_alloc(d, sizeof(got), (void **)&dout), r1, r2, r3, r4;

	if (!err)
		err = dev_copy(d, NULL, dout, init, sizeof(init), DEV_H2D);
	if (!err)
		err = dev_stream_create(d, &s);
	if (!err)
		err = dev_stream_create(d, &ok);
	if (!err)
		err = dev_event_create(d, &e);
	if (!err)
		err = dev_launch(s, bad);
	if (err) {
		dev_last_error(d, msg, cap);
		goto out;
	}
	r1 = dev_stream_sync(s);
	r2 = dc_spin(s, dout, 0, 5); /* queued on the failed stream: skipped */
	r3 = r2 ? r2 : dev_event_record(e, s);
	r3 = r3 ? r3 : dev_event_sync(e);
	r4 = dev_stream_sync(s);
	err = dc_spin(ok, dout + 1, 0, 6);
	if (!err)
		err = dev_stream_sync(ok);
	if (!err)
		err = dev_copy(d, NULL, got, dout, sizeof(got), DEV_D2H);
	if (err)
		err = fail(msg, cap, err, "%s: the healthy stream failed: %d", what, err);
	else if (r1 != -EINVAL || r2 != 0 || r3 != -EINVAL || r4 != -EINVAL)
		err = fail(msg, cap, -EDOM, "%s: sync %d, later launch %d, event %d, sync again %d",
			   what, r1, r2, r3, r4);
	else if (got[0] != -1 || got[1] != 6)
		err = fail(msg, cap, -EDOM, "%s: failed stream's later kernel wrote %d, other %d",
			   what, got[0], got[1]);
out:
	dev_event_destroy(e);
	dev_stream_destroy(s);
	dev_stream_destroy(ok);
	dev_free(d, dout);
	return err;
}

int dc_error_paths(struct dev *d, char *msg, size_t cap)
{
	enum { KVH = 2, DIM = 8, BS = 4, POOL = 4 };
	float *table = NULL, *out = NULL, *pool = NULL, *kv = NULL;
	int32_t *dtok = NULL, *dtab = NULL, tok = 9, tab[2] = {1, POOL + 3}; /* 2nd: outside */
	struct dev_kcall c = {DEV_K_EMBED};
	int err = dev_alloc(d, 4 * sizeof(float), (void **)&table);

	if (!err)
		err = dev_alloc(d, 2 * sizeof(float), (void **)&out);
	if (!err)
		err = dev_alloc(d, sizeof(tok), (void **)&dtok);
	if (!err)
		err = dev_copy(d, NULL, dtok, &tok, sizeof(tok), DEV_H2D);
	if (!err)
		err = dev_alloc(d, (size_t)POOL * KVH * DIM * BS * sizeof(float), (void **)&pool);
	if (!err)
		err = dev_alloc(d, 2 * KVH * DIM * sizeof(float), (void **)&kv);
	if (!err)
		err = dev_alloc(d, sizeof(tab), (void **)&dtab);
	if (!err)
		err = dev_copy(d, NULL, dtab, tab, sizeof(tab), DEV_H2D);
	if (err) {
		dev_last_error(d, msg, cap);
		goto out;
	}
	/* token 9 of a vocabulary of 2 */
	c.u.embed = (struct dev_k_embed){table, dtok, out, 2, 2};
	err = one_error(d, &c, "bad token", msg, cap);
	if (err)
		goto out;
	/* position 5 lies in logical block 1, whose pool id is outside the pool */
	c.kernel = DEV_K_KV_APPEND;
	c.u.kv = (struct dev_k_kv_append){
	    .cache = {pool, dtab, dtab, 2, POOL, KVH * DIM * BS, BS, KVH, DIM},
	    .k = kv,
	    .v = kv + KVH * DIM,
	    .pos = 5,
	};
	err = one_error(d, &c, "block id outside the pool", msg, cap);
out:
	dev_free(d, table);
	dev_free(d, out);
	dev_free(d, dtok);
	dev_free(d, pool);
	dev_free(d, kv);
	dev_free(d, dtab);
	return err;
}

int dc_argmax_nan(struct dev *d, char *msg, size_t cap)
{
	static const struct {
		float in[4];
		int32_t want;
	} cases[] = {
	    {{3, NAN, 1, 5}, 3},	 {{NAN, 1, 2, 2}, 2}, {{NAN, NAN, NAN, NAN}, 0},
	    {{NAN, -INFINITY, NAN, NAN}, 1}, {{1, NAN, 1, NAN}, 0},
	};
	struct dev_stream *s = NULL;
	float *din = NULL;
	int32_t *dout = NULL, got = -1;
	int err = dev_alloc(d, 4 * sizeof(float), (void **)&din);

	if (!err)
		err = dev_alloc(d, sizeof(int32_t), (void **)&dout);
	if (!err)
		err = dev_stream_create(d, &s);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !err; i++) {
		struct dev_kcall c = {DEV_K_ARGMAX, .u.argmax = {din, dout, 4}};

		err = dev_copy(d, NULL, din, cases[i].in, sizeof(cases[i].in), DEV_H2D);
		if (!err)
			err = dev_launch(s, &c);
		if (!err)
			err = dev_stream_sync(s);
		if (!err)
			err = dev_copy(d, NULL, &got, dout, sizeof(got), DEV_D2H);
		if (!err && got != cases[i].want)
			err = fail(msg, cap, -EDOM, "argmax case %zu: %d, want %d", i, got,
				   cases[i].want);
	}
	if (err && !msg[0])
		dev_last_error(d, msg, cap);
	dev_stream_destroy(s);
	dev_free(d, din);
	dev_free(d, dout);
	return err;
}

const char *dc_module_path;

int dc_module(struct dev *d, char *msg, size_t cap)
{
	const struct dev_dims dims = {{3, 2, 2}, {4, 2, 1}, 0};
	enum { N = 3 * 2 * 2 * 4 * 2 };
	struct dev_module *m = NULL;
	struct dev_func *f = NULL;
	struct dev_stream *s = NULL;
	struct tc_fill_args a = {NULL, 100, 0};
	int32_t got[N];
	int err;

	if (!dc_module_path)
		return fail(msg, cap, -ENOENT, "no module file for this device (dc_module_path)");
	err = dev_module_load(d, dc_module_path, &m);
	if (!err)
		err = dev_module_func(m, "tc_fill", &f);
	if (!err)
		err = dev_alloc(d, sizeof(got), (void **)&a.out);
	if (!err)
		err = dev_stream_create(d, &s);
	if (!err)
		err = dev_launch_func(s, f, &dims, &a, sizeof(a));
	a.base = -1; /* the launch has its own copy */
	if (!err)
		err = dev_copy(d, s, got, a.out, sizeof(got), DEV_D2H);
	if (!err)
		err = dev_stream_sync(s);
	for (int i = 0; i < N && !err; i++)
		if (got[i] != 100 + i)
			err = fail(msg, cap, -EDOM, "tc_fill element %d: %d, want %d", i, got[i],
				   100 + i);
	if (err && !msg[0])
		dev_last_error(d, msg, cap);
	dev_stream_destroy(s);
	dev_free(d, a.out);
	dev_module_unload(m);
	return err;
}

const struct dc_case dc_cases[] = {
    {"threads", dc_threads},
    {"streams", dc_streams},
    {"error_paths", dc_error_paths},
    {"argmax_nan", dc_argmax_nan},
    {"module", dc_module},
};
const size_t dc_ncases = sizeof(dc_cases) / sizeof(dc_cases[0]);
