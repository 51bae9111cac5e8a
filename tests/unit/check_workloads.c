/* check_workloads.c - pins the workload interface on the sim backend: parameters and
 * their messages, the parameter tables the validator checks against, arenas, tokens
 * equal to the CPU reference decode, builds ahead of tokens, batching across streams,
 * KV pool capacity, the roll-back of a full step, and a request's cost against what it
 * reserves. */
#include "device.h"
#include "kernel_cases.h"
#include "testutil.h"
#include "wl.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define HOST_ARENA (1u << 20)
#define DEV_ARENA  (8u << 20)
#define MAX_TASKS  512u
#define MAX_TOKENS 64u

#define table  kc_wl_cases
#define NTABLE KC_WL_NCASES

/* A device, an executor and one bank (host and device arena). */
struct fx {
	struct dev *d;
	struct wl_exec *x;
	void *host_mem, *dev_mem;
	struct wl_arena host, dev;
};

static void fx_init(struct fx *f, unsigned streams)
{
	ck_assert_int_eq(dev_open(&f->d, DEV_SIM, 0, NULL, 0), 0);
	ck_assert_int_eq(wl_exec_create(&f->x, f->d, streams), 0);
	f->host_mem = malloc(HOST_ARENA);
	ck_assert_ptr_nonnull(f->host_mem);
	ck_assert_int_eq(dev_alloc(f->d, DEV_ARENA, &f->dev_mem), 0);
	wl_arena_init(&f->host, f->host_mem, HOST_ARENA);
	wl_arena_init(&f->dev, f->dev_mem, DEV_ARENA);
}

static void fx_fini(struct fx *f)
{
	wl_exec_destroy(f->x);
	dev_free(f->d, f->dev_mem);
	free(f->host_mem);
	ck_assert_uint_eq(dev_live(f->d), 0);
	dev_close(f->d);
}

static void params_of(struct wl_params *p, const char *text)
{
	char msg[WL_MSG_MAX];

	wl_params_init(p);
	ck_assert_msg(wl_params_parse(p, text, msg, sizeof(msg)) == 0, "%s", msg);
}

static struct wl_req *req_new(struct fx *f, struct wl_kvpool *kv, const char *wl,
			      const struct wl_params *p)
{
	struct wl_env env = {f->d, kv};
	struct wl_req *r;
	char msg[WL_MSG_MAX];

	ck_assert_msg(wl_req_create(&r, &env, wl, p, msg, sizeof(msg)) == 0, "%s", msg);
	return r;
}

/* Runs @r to the end, one step per bank, into @tokens. */
static void run_all(struct fx *f, struct wl_req *r, uint64_t *tokens)
{
	struct wl_step st;
	struct wl_out out;

	for (uint32_t i = 0; i < wl_req_steps(r); i++) {
		wl_arena_reset(&f->host);
		wl_arena_reset(&f->dev);
		ck_assert_int_eq(wl_step_init(&st, &f->host, &f->dev, MAX_TASKS), 0);
		ck_assert_int_eq(wl_req_build(r, &st, 0, &out), 0);
		ck_assert_int_eq(wl_exec_run(f->x, &st), 0);
		ck_assert_int_eq(wl_req_token(r, &out, &tokens[i]), 0);
	}
}

static void expect_ref(const char *wl, const struct wl_params *p, const uint64_t *got, uint32_t n)
{
	uint64_t want[MAX_TOKENS];
	char msg[WL_MSG_MAX];

	ck_assert_msg(wl_ref_tokens(wl, p, want, n, msg, sizeof(msg)) == 0, "%s", msg);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "%s step %u: token %llu, reference %llu", wl, i,
			      (unsigned long long)got[i], (unsigned long long)want[i]);
}

START_TEST(params_parse_set_and_replace)
{
	struct wl_params p;
	char msg[WL_MSG_MAX];
	int64_t v;

	params_of(&p, "a=1,b=-2,a=3");
	ck_assert_uint_eq(p.n, 2);
	ck_assert(wl_params_get(&p, "a", &v));
	ck_assert_int_eq(v, 3);
	ck_assert(!wl_params_get(&p, "c", &v));
	ck_assert_int_eq(wl_params_parse(&p, "x=1y", msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "not an integer"));
	ck_assert_int_eq(wl_params_parse(&p, "=1", msg, sizeof(msg)), -EINVAL);
	ck_assert_int_eq(wl_params_parse(&p, "a=1,,b=2", msg, sizeof(msg)), -EINVAL);
	ck_assert_int_eq(wl_params_set(&p, "", 1), -EINVAL);
	ck_assert_int_eq(wl_params_set(&p, "a_key_that_is_far_too_long", 1), -EINVAL);
	for (int i = 0; p.n < WL_PARAMS_MAX; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(wl_params_set(&p, key, i), 0);
	}
	ck_assert_int_eq(wl_params_set(&p, "one_more", 1), -ENOSPC);
}
END_TEST

START_TEST(validate_names_the_parameter)
{
	static const struct {
		const char *wl, *params, *want;
	} bad[] = {
	    {"nope", "", "unknown workload 'nope'"},
	    {"paged_attention", "colour=3", "unknown parameter 'colour'"},
	    {"paged_attention", "heads=0", "heads 0 outside"},
	    {"paged_attention", "heads=6,kv_heads=4", "heads 6 is not a multiple of kv_heads 4"},
	    {"paged_attention", "block_size=12", "block_size 12 is not a power of two"},
	    {"paged_attention", "head_dim=257", "head_dim 257 outside"},
	    {"paged_attention", "context=1048575,tokens=2", "context + tokens"},
	    {"gemm", "chain=0", "chain 0 outside"},
	    {"synthetic", "device_us=-1", "device_us -1 outside"},
	};
	struct wl_params p;
	char msg[WL_MSG_MAX], desc[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		params_of(&p, bad[i].params);
		ck_assert_int_eq(wl_validate(bad[i].wl, &p, msg, sizeof(msg)), -EINVAL);
		ck_assert_msg(strstr(msg, bad[i].want), "'%s' lacks '%s'", msg, bad[i].want);
	}
	for (size_t i = 0; i < NTABLE; i++) {
		params_of(&p, table[i].params);
		ck_assert_int_eq(wl_validate(table[i].workload, &p, msg, sizeof(msg)), 0);
	}
	ck_assert_int_eq(wl_describe("paged_attention", desc, sizeof(desc)), 0);
	ck_assert_ptr_nonnull(strstr(desc, "kv_heads=2 [1..256]"));
	ck_assert_int_eq(wl_describe("nope", desc, sizeof(desc)), -ENOENT);
}
END_TEST

/* One line of printable ASCII that fits a Markdown table cell (docs/protocol.md §8.6)
 * and the workloads answer. */
static void expect_doc_line(const char *what, const char *doc)
{
	ck_assert_msg(doc && doc[0], "%s: no doc", what);
	ck_assert_msg(strlen(doc) < WL_DOC_MAX, "%s: doc of %zu bytes", what, strlen(doc));
	for (const char *c = doc; *c; c++)
		ck_assert_msg(*c >= 0x20 && *c < 0x7f && *c != '|' && *c != '`',
			      "%s: byte 0x%02x in its doc", what, (unsigned char)*c);
}

/* @wl refuses @key = @v (all else default) as out of range, naming the key. */
static void expect_outside(const char *wl, const char *key, int64_t v)
{
	struct wl_params p;
	char msg[WL_MSG_MAX], want[64];

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_set(&p, key, v), 0);
	ck_assert_int_eq(wl_validate(wl, &p, msg, sizeof(msg)), -EINVAL);
	snprintf(want, sizeof(want), "%s: %s %lld outside", wl, key, (long long)v);
	ck_assert_msg(strstr(msg, want), "'%s' lacks '%s'", msg, want);
}

static bool is_ident(const char *s)
{
	return s[0] && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(s);
}

START_TEST(param_table_is_what_validate_checks)
{
	const char *const *names = wl_names();
	struct wl_params p;
	char msg[WL_MSG_MAX], desc[1024], want[96];
	size_t count = 0;

	for (; names[count]; count++) {
		const char *wl = names[count];
		const struct wl_param_info *t;
		int n = wl_param_table(wl, &t);

		ck_assert_msg(n >= 1 && n <= WL_PARAMS_MAX, "%s: %d parameters", wl, n);
		expect_doc_line(wl, wl_summary(wl));
		ck_assert_int_eq(wl_describe(wl, desc, sizeof(desc)), 0);
		wl_params_init(&p);
		for (int i = 0; i < n; i++) {
			ck_assert_msg(is_ident(t[i].key) && strlen(t[i].key) < WL_KEY_MAX,
				      "%s: key '%s'", wl, t[i].key);
			for (int j = 0; j < i; j++)
				ck_assert_str_ne(t[i].key, t[j].key);
			ck_assert_msg(t[i].lo <= t[i].def && t[i].def <= t[i].hi,
				      "%s.%s: default outside its range", wl, t[i].key);
			expect_doc_line(t[i].key, t[i].doc);
			snprintf(want, sizeof(want), "%s=%lld [%lld..%lld]", t[i].key,
				 (long long)t[i].def, (long long)t[i].lo, (long long)t[i].hi);
			ck_assert_msg(strstr(desc, want), "'%s' lacks '%s'", desc, want);
			/* the validator's range is the table's, bound for bound */
			if (t[i].lo > INT64_MIN)
				expect_outside(wl, t[i].key, t[i].lo - 1);
			if (t[i].hi < INT64_MAX)
				expect_outside(wl, t[i].key, t[i].hi + 1);
		}
		/* every default, stated or left out, is a valid request */
		params_of(&p, "");
		ck_assert_msg(wl_validate(wl, &p, msg, sizeof(msg)) == 0, "%s", msg);
		for (int i = 0; i < n; i++)
			ck_assert_int_eq(wl_params_set(&p, t[i].key, t[i].def), 0);
		ck_assert_msg(wl_validate(wl, &p, msg, sizeof(msg)) == 0, "%s", msg);
	}
	ck_assert_uint_ge(count, 1);
	ck_assert_uint_eq(count, wl_count());
	ck_assert_int_eq(wl_param_table("nope", &(const struct wl_param_info *){NULL}), -ENOENT);
	ck_assert_ptr_null(wl_summary("nope"));
}
END_TEST

START_TEST(arena_bumps_aligns_and_fills)
{
	char mem[256];
	struct wl_arena a;

	wl_arena_init(&a, mem, sizeof(mem));
	ck_assert_ptr_eq(wl_arena_alloc(&a, 10, 1), mem);
	ck_assert_uint_eq((uintptr_t)wl_arena_alloc(&a, 8, 64) % 64, 0);
	ck_assert_ptr_null(wl_arena_alloc(&a, 256, 1));
	wl_arena_reset(&a);
	ck_assert_ptr_eq(wl_arena_alloc(&a, 256, 1), mem);
	ck_assert_ptr_null(wl_arena_alloc(&a, 1, 1));
}
END_TEST

/* On sim device 0, then on device 1 with lazy streams (a copy lands only once its
 * stream is waited for): a read of a token or a weight before its wait shows. */
START_TEST(tokens_match_reference_decode)
{
	for (int index = 0; index < 2; index++) {
		struct dev *d;

		ck_assert_int_eq(dev_open(&d, DEV_SIM, index, NULL, 0), 0);
		if (index == 1)
			ck_assert_int_eq(dev_sim_set_lazy(d, true), 0);
		for (size_t i = 0; i < NTABLE; i++) {
			struct wl_params p;
			uint64_t got[MAX_TOKENS];
			char msg[WL_MSG_MAX] = "";
			uint32_t n;

			ck_assert_msg(kc_wl_tokens(d, &table[i], got, MAX_TOKENS, &n, msg,
						   sizeof(msg)) == 0,
				      "sim%d: %s", index, msg);
			params_of(&p, table[i].params);
			expect_ref(table[i].workload, &p, got, n);
		}
		ck_assert_uint_eq(dev_live(d), 0);
		dev_close(d);
	}
}
END_TEST

/* Two banks: step i+1 is built before step i ran, as an orchestrator does while the
 * scheduler runs the previous step. The previous token stays on the device. */
START_TEST(build_ahead_of_token)
{
	struct fx f;
	struct wl_arena host2, dev2;
	void *hm = malloc(HOST_ARENA), *dm;
	struct wl_params p;
	struct wl_step st[2];
	struct wl_out out[2];
	uint64_t got[MAX_TOKENS];
	struct wl_req *r;

	fx_init(&f, 1);
	ck_assert_int_eq(dev_alloc(f.d, DEV_ARENA, &dm), 0);
	wl_arena_init(&host2, hm, HOST_ARENA);
	wl_arena_init(&dev2, dm, DEV_ARENA);
	params_of(&p, table[0].params);
	r = req_new(&f, NULL, table[0].workload, &p);
	ck_assert_int_eq(wl_step_init(&st[0], &f.host, &f.dev, MAX_TASKS), 0);
	ck_assert_int_eq(wl_req_build(r, &st[0], 0, &out[0]), 0);
	for (uint32_t i = 0; i < wl_req_steps(r); i++) {
		struct wl_step *next = &st[(i + 1) % 2];

		if (i + 1 < wl_req_steps(r)) {
			struct wl_arena *h = i % 2 ? &f.host : &host2, *dv = i % 2 ? &f.dev : &dev2;

			wl_arena_reset(h);
			wl_arena_reset(dv);
			ck_assert_int_eq(wl_step_init(next, h, dv, MAX_TASKS), 0);
			ck_assert_int_eq(wl_req_build(r, next, 0, &out[(i + 1) % 2]), 0);
		}
		ck_assert_int_eq(wl_exec_run(f.x, &st[i % 2]), 0);
		ck_assert_int_eq(wl_req_token(r, &out[i % 2], &got[i]), 0);
	}
	ck_assert_int_eq(wl_req_build(r, &st[0], 0, &out[0]), -ENODATA);
	expect_ref(table[0].workload, &p, got, wl_req_steps(r));
	wl_req_destroy(r);
	dev_free(f.d, dm);
	free(hm);
	fx_fini(&f);
}
END_TEST

/* Every table entry in one step per round, each on its own lane and stream, the
 * paged-attention ones sharing one KV pool. */
START_TEST(batch_across_streams_matches_reference)
{
	struct fx f;
	struct wl_kvpool *kv;
	struct wl_req *r[NTABLE];
	struct wl_params p[NTABLE];
	struct wl_out out[NTABLE];
	uint64_t got[NTABLE][MAX_TOKENS];
	uint32_t left = 1;

	fx_init(&f, 4);
	/* blocks of 16 positions x 2 kv heads x 32 floats fit every table entry */
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 256, 16 * 2 * 32), 0);
	for (size_t i = 0; i < NTABLE; i++) {
		params_of(&p[i], table[i].params);
		r[i] = req_new(&f, kv, table[i].workload, &p[i]);
	}
	while (left) {
		struct wl_step st;

		wl_arena_reset(&f.host);
		wl_arena_reset(&f.dev);
		ck_assert_int_eq(wl_step_init(&st, &f.host, &f.dev, MAX_TASKS), 0);
		left = 0;
		for (size_t i = 0; i < NTABLE; i++) {
			out[i].token = NULL;
			if (wl_req_built(r[i]) < wl_req_steps(r[i]))
				ck_assert_int_eq(wl_req_build(r[i], &st, (uint32_t)i, &out[i]), 0);
		}
		ck_assert_int_eq(wl_exec_run(f.x, &st), 0);
		for (size_t i = 0; i < NTABLE; i++) {
			if (!out[i].token)
				continue;
			ck_assert_int_eq(wl_req_token(r[i], &out[i], &got[i][out[i].step]), 0);
			left += wl_req_built(r[i]) < wl_req_steps(r[i]);
		}
	}
	for (size_t i = 0; i < NTABLE; i++) {
		expect_ref(table[i].workload, &p[i], got[i], wl_req_steps(r[i]));
		wl_req_destroy(r[i]);
	}
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 256);
	wl_kvpool_destroy(kv);
	fx_fini(&f);
}
END_TEST

START_TEST(kv_pool_capacity_is_enforced)
{
	struct fx f;
	struct wl_kvpool *kv;
	struct wl_params p;
	struct wl_env env;
	struct wl_req *a, *b;
	char msg[WL_MSG_MAX];

	fx_init(&f, 1);
	/* 2 layers x (K, V) x ceil((10 + 8) / 4) = 20 blocks per request */
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 30, 4 * 2 * 16), 0);
	env = (struct wl_env){f.d, kv};
	params_of(&p, table[0].params);
	a = req_new(&f, kv, "paged_attention", &p);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 10);
	ck_assert_int_eq(wl_req_create(&b, &env, "paged_attention", &p, msg, sizeof(msg)), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(msg, "20 KV blocks needed, 10 free"));
	wl_req_destroy(a);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 30);
	b = req_new(&f, kv, "paged_attention", &p);
	wl_req_destroy(b);
	/* a request whose blocks are larger than the pool's */
	params_of(&p, "head_dim=32,block_size=16");
	ck_assert_int_eq(wl_req_create(&b, &env, "paged_attention", &p, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "exceed the pool's blocks"));
	wl_kvpool_destroy(kv);
	fx_fini(&f);
}
END_TEST

/* A pool whose blocks x floats x 4 bytes is past 2^40, or wraps round 2^64 (2147418113
 * blocks of 2147549185 floats: 4 bytes once wrapped), is refused -EOVERFLOW before
 * anything is allocated; the largest chipd makes (2^20 blocks of 4096 floats) is not. */
START_TEST(kv_pool_size_overflow_refused)
{
	struct wl_kvpool *kv = NULL;
	size_t live;
	struct fx f;

	fx_init(&f, 1);
	live = dev_live(f.d);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/* a pool that took the wrapped size went on to allocate its 8 GiB free list:
	 * refused at once within 4 GiB of address space (the sanitizers need more) */
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &(struct rlimit){1ull << 32, 1ull << 32}), 0);
#endif
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 2147418113u, 2147549185u), -EOVERFLOW);
	ck_assert_ptr_null(kv);
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 1u << 30, 1u << 9), -EOVERFLOW);
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, INT32_MAX, UINT32_MAX), -EOVERFLOW);
	ck_assert_ptr_null(kv);
	ck_assert_uint_eq(dev_live(f.d), live);
	ck_assert_uint_eq(wl_kvpool_bytes(1u << 20, 4096), 1ull << 34);
	ck_assert_uint_eq(wl_kvpool_bytes(1u << 28, 1u << 10), 1ull << 40);
	ck_assert_uint_eq(wl_kvpool_bytes((1u << 28) + 1, 1u << 10), 0);
	ck_assert_uint_eq(wl_kvpool_bytes(2147418113u, 2147549185u), 0);
	fx_fini(&f);
}
END_TEST

START_TEST(full_step_rolls_back)
{
	struct fx f;
	struct wl_params p;
	struct wl_step st;
	struct wl_out out;
	struct wl_req *r;
	uint64_t got[MAX_TOKENS];

	fx_init(&f, 1);
	params_of(&p, table[0].params);
	r = req_new(&f, NULL, table[0].workload, &p);
	/* 2 layers need 7 * 2 + 4 tasks */
	ck_assert_int_eq(wl_step_init(&st, &f.host, &f.dev, 10), 0);
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), -ENOBUFS);
	ck_assert_uint_eq(st.n, 0);
	ck_assert_uint_eq(wl_req_built(r), 0);
	/* and the request still decodes from its first step */
	run_all(&f, r, got);
	expect_ref(table[0].workload, &p, got, wl_req_steps(r));
	wl_req_destroy(r);
	fx_fini(&f);
}
END_TEST

/* The cost computed from the parameters alone is what a created request holds: host
 * bytes at their peak, device bytes, KV blocks taken from the shared pool, steps. */
START_TEST(cost_is_what_create_reserves)
{
	static const struct kc_wl_case more[] = {
	    {"paged_attention", ""},
	    {"paged_attention", "layers=3,heads=4,kv_heads=4,head_dim=8,block_size=2,context=7,"
				"tokens=3,vocab=100"},
	    {"gemm", "m=20,k=30,chain=5,tokens=2"},
	    {"synthetic", "tokens=100000"},
	};
	struct fx f;
	struct wl_kvpool *kv;
	struct wl_params p;
	struct wl_cost want, got;
	struct wl_env env;
	struct wl_req *r;
	char msg[WL_MSG_MAX];

	fx_init(&f, 1);
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 4096, 2048), 0);
	env = (struct wl_env){f.d, kv};
	for (size_t i = 0; i < NTABLE + sizeof(more) / sizeof(more[0]); i++) {
		const struct kc_wl_case *c = i < NTABLE ? &table[i] : &more[i - NTABLE];
		uint32_t free0 = wl_kvpool_free_blocks(kv);

		params_of(&p, c->params);
		ck_assert_msg(wl_cost(c->workload, &p, &want, msg, sizeof(msg)) == 0, "%s", msg);
		ck_assert_uint_le(want.kv_block_floats, 2048);
		ck_assert_msg(wl_req_create(&r, &env, c->workload, &p, msg, sizeof(msg)) == 0, "%s",
			      msg);
		wl_req_usage(r, &got);
		ck_assert_msg(got.host_bytes == want.host_bytes && got.dev_bytes == want.dev_bytes,
			      "%s %s: cost host %llu dev %llu, created host %llu dev %llu",
			      c->workload, c->params, (unsigned long long)want.host_bytes,
			      (unsigned long long)want.dev_bytes,
			      (unsigned long long)got.host_bytes,
			      (unsigned long long)got.dev_bytes);
		ck_assert_uint_eq(free0 - wl_kvpool_free_blocks(kv), want.kv_blocks);
		ck_assert_uint_eq(wl_req_steps(r), want.steps);
		wl_req_destroy(r);
		ck_assert_uint_eq(wl_kvpool_free_blocks(kv), free0);
	}
	wl_kvpool_destroy(kv);
	fx_fini(&f);
}
END_TEST

/* The largest requests are costed without allocating anything, and a bad one is
 * refused as wl_validate refuses it. */
START_TEST(cost_of_a_huge_request_allocates_nothing)
{
	struct wl_params p;
	struct wl_cost c;
	char msg[WL_MSG_MAX];
	/* e = 32 * 256 = 8192, f = (32 + 2) * 256 = 8704 */
	const uint64_t e = 8192, f = 8704, vocab = 16384, layers = 4;

	params_of(&p, "layers=4,heads=32,kv_heads=1,head_dim=256,block_size=1,context=0,tokens=1,"
		      "vocab=16384");
	ck_assert_int_eq(wl_cost("paged_attention", &p, &c, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(c.dev_bytes,
			  (2 * layers * 1 + 2 * vocab * e + layers * e * (f + e)) * 4 + 4);
	ck_assert_uint_ge(c.host_bytes, layers * e * f * 4); /* the largest staging buffer */
	ck_assert_uint_eq(c.kv_blocks, 2 * layers);
	ck_assert_uint_eq(c.steps, 1);
	params_of(&p, "m=4096,k=4096,chain=64,tokens=65536");
	ck_assert_int_eq(wl_cost("gemm", &p, &c, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(c.dev_bytes, (2ull * 4096 * 4096 + 64ull * 4096 * 4096) * 4 + 4);
	ck_assert_uint_eq(c.steps, 65536);
	params_of(&p, "heads=6,kv_heads=4");
	ck_assert_int_eq(wl_cost("paged_attention", &p, &c, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "heads 6 is not a multiple of kv_heads 4"));
	wl_params_init(&p);
	ck_assert_int_eq(wl_cost("no_such", &p, &c, msg, sizeof(msg)), -EINVAL);
}
END_TEST

/* Reserving takes the KV blocks and nothing of the device's; a reserved request is not
 * built before it is filled, and destroying it unfilled gives everything back. */
START_TEST(reserve_then_fill_or_destroy)
{
	struct fx f;
	struct wl_kvpool *kv;
	struct wl_params p;
	struct wl_env env;
	struct wl_req *r;
	struct wl_step st;
	struct wl_out out;
	struct wl_cost c;
	uint64_t got[MAX_TOKENS];
	char msg[WL_MSG_MAX];
	size_t live0;

	fx_init(&f, 1);
	ck_assert_int_eq(wl_kvpool_create(&kv, f.d, 64, 4 * 2 * 16), 0);
	env = (struct wl_env){f.d, kv};
	live0 = dev_live(f.d);
	params_of(&p, table[0].params);
	ck_assert_int_eq(wl_req_reserve(&r, &env, "paged_attention", &p, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 64 - 20);
	ck_assert_uint_eq(dev_live(f.d), live0);
	wl_req_usage(r, &c);
	ck_assert_uint_eq(c.dev_bytes, 0);
	ck_assert_int_eq(wl_step_init(&st, &f.host, &f.dev, MAX_TASKS), 0);
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), -EPROTO);
	wl_req_destroy(r);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 64);
	/* reserved, then filled: decodes as a created one does */
	ck_assert_int_eq(wl_req_reserve(&r, &env, "paged_attention", &p, msg, sizeof(msg)), 0);
	ck_assert_msg(wl_req_fill(r, msg, sizeof(msg)) == 0, "%s", msg);
	run_all(&f, r, got);
	expect_ref("paged_attention", &p, got, wl_req_steps(r));
	wl_req_destroy(r);
	ck_assert_uint_eq(dev_live(f.d), live0);
	wl_kvpool_destroy(kv);
	fx_fini(&f);
}
END_TEST

/* ---- the executor's streams and lanes ---- */

/* A task on @lane: a spin of @ns writing @token to @out, or (@bad_tok non-NULL) an
 * embedding lookup of the token at @bad_tok, which the sim kernel refuses when it
 * runs (outside a vocabulary of 2): a stream error, not a launch error. */
static struct wl_task spin_task(uint32_t lane, int32_t *out, uint64_t ns, int32_t token)
{
	struct wl_task t = {.kind = WL_TASK_LAUNCH, .lane = lane};

	t.u.call = (struct dev_kcall){DEV_K_SPIN, .u.spin = {out, ns, token}};
	return t;
}

static struct wl_task bad_embed_task(uint32_t lane, const int32_t *dtok, float *emb, float *out)
{
	struct wl_task t = {.kind = WL_TASK_LAUNCH, .lane = lane};

	t.u.call = (struct dev_kcall){DEV_K_EMBED};
	t.u.call.u.embed = (struct dev_k_embed){emb, dtok, out, 2, 2};
	return t;
}

/* The device buffers of the stream tests: the token @tok (in @dtok), @nout spin
 * outputs (@dout), and the table and output of an embedding (@emb, @out). */
struct lane_bufs {
	int32_t *dtok, *dout;
	float *emb, *out;
};

static void lane_bufs_alloc(struct fx *f, struct lane_bufs *b, int32_t tok, unsigned nout)
{
	ck_assert_int_eq(dev_alloc(f->d, sizeof(tok), (void **)&b->dtok), 0);
	ck_assert_int_eq(dev_alloc(f->d, nout * sizeof(*b->dout), (void **)&b->dout), 0);
	ck_assert_int_eq(dev_alloc(f->d, 4 * sizeof(float), (void **)&b->emb), 0);
	ck_assert_int_eq(dev_alloc(f->d, 2 * sizeof(float), (void **)&b->out), 0);
	ck_assert_int_eq(dev_copy(f->d, NULL, b->dtok, &tok, sizeof(tok), DEV_H2D), 0);
}

static void lane_bufs_free(struct fx *f, struct lane_bufs *b)
{
	dev_free(f->d, b->dtok);
	dev_free(f->d, b->dout);
	dev_free(f->d, b->emb);
	dev_free(f->d, b->out);
}

/* A step whose stream fails when the device refuses to make a new one: the stream is
 * lost, a later run reports the refusal instead of touching it, and once streams can
 * be made again the executor runs as before. */
START_TEST(exec_survives_a_stream_it_cannot_replace)
{
	struct fx f;
	struct wl_task tasks[1];
	struct wl_step st = {.tasks = tasks, .n = 1, .cap = 1};
	struct lane_bufs b;
	int32_t tok;

	fx_init(&f, 1);
	lane_bufs_alloc(&f, &b, 9, 1);
	tasks[0] = bad_embed_task(0, b.dtok, b.emb, b.out);
	ck_assert_int_eq(dev_sim_fail_stream_creates(f.d, 2), 0);
	ck_assert_int_eq(wl_exec_run(f.x, &st), -EINVAL); /* the kernel's error */
	ck_assert(!wl_exec_stream_ok(f.x, 0));		  /* its replacement was refused */
	tasks[0] = spin_task(0, b.dout, 0, 5);
	ck_assert_int_eq(wl_exec_run(f.x, &st), -EAGAIN); /* refused again: nothing ran */
	ck_assert_int_eq(wl_exec_run(f.x, &st), 0);	  /* the stream is back */
	ck_assert(wl_exec_stream_ok(f.x, 0));
	ck_assert_int_eq(dev_copy(f.d, NULL, &tok, b.dout, sizeof(tok), DEV_D2H), 0);
	ck_assert_int_eq(tok, 5);
	lane_bufs_free(&f, &b);
	fx_fini(&f);
}
END_TEST

/* Lanes on their own streams end on their own: a short lane completes while a long
 * one still runs, a lane whose kernel fails reports its stream's error and no other
 * lane's, and a task that depends on another lane's is refused. */
START_TEST(exec_lanes_end_on_their_own)
{
	struct fx f;
	struct wl_task tasks[3];
	struct wl_step st = {.tasks = tasks, .n = 3, .cap = 3};
	struct wl_lane lanes[3];
	struct dev_event *ev[3];
	struct lane_bufs b;
	int32_t got;

	fx_init(&f, 4);
	ck_assert_uint_eq(wl_exec_nstreams(f.x), 4);
	lane_bufs_alloc(&f, &b, 9, 2);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(dev_event_create(f.d, &ev[i]), 0);
	/* lane 0: long (far longer than a loaded machine takes for lane 1); lane 1:
	 * empty; lane 2: fails when it runs */
	tasks[0] = spin_task(0, &b.dout[0], 2000ull * 1000u * 1000u, 1);
	tasks[1] = spin_task(1, &b.dout[1], 0, 2);
	tasks[2] = bad_embed_task(2, b.dtok, b.emb, b.out);
	for (unsigned i = 0; i < 3; i++)
		lanes[i] = (struct wl_lane){.stream = i, .done = ev[i]};
	ck_assert_int_eq(wl_exec_launch(f.x, &st, lanes, 3), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(lanes[i].err, 0);
		ck_assert(lanes[i].recorded);
	}
	ck_assert_int_eq(dev_event_sync(ev[1]), 0);
	ck_assert_int_eq(dev_event_sync(ev[2]), -EINVAL);
	ck_assert_int_eq(dev_event_query(ev[0]), -EBUSY);  /* still running */
	ck_assert_int_eq(wl_exec_stream_reset(f.x, 2), 0); /* the failed stream goes */
	ck_assert_int_eq(dev_event_sync(ev[0]), 0);
	dev_clear_error(f.d);
	ck_assert_int_eq(dev_copy(f.d, NULL, &got, &b.dout[1], sizeof(got), DEV_D2H), 0);
	ck_assert_int_eq(got, 2);
	/* a dependency across lanes: refused before anything is queued */
	tasks[1].ndeps = 1;
	tasks[1].deps[0] = 0;
	ck_assert_int_eq(wl_exec_launch(f.x, &st, lanes, 3), -EINVAL);
	for (int i = 0; i < 3; i++)
		dev_event_destroy(ev[i]);
	lane_bufs_free(&f, &b);
	fx_fini(&f);
}
END_TEST

/* A lane whose launch the device layer's check refuses (a spin of more than an hour,
 * queued as no callable's launch can queue it) is marked refused: its builder's
 * fault, told apart from a stream's error (a kernel that fails when it runs, lane 2)
 * and from a lane that completes; wl_task_check refuses what the device layer would
 * refuse of each kind of task, and nothing else. */
START_TEST(exec_lane_refused_by_its_check_is_marked)
{
	struct fx f;
	struct wl_task tasks[3], t;
	struct wl_step st = {.tasks = tasks, .n = 3, .cap = 3};
	struct wl_lane lanes[3];
	struct dev_event *ev[3];
	struct lane_bufs b;
	char msg[DEV_ERRMSG_MAX];

	fx_init(&f, 4);
	lane_bufs_alloc(&f, &b, 9, 2);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(dev_event_create(f.d, &ev[i]), 0);
	tasks[0] = spin_task(0, &b.dout[0], 0, 1);
	tasks[1] = spin_task(1, &b.dout[1], 3601ull * 1000000000ull, 2);
	tasks[2] = bad_embed_task(2, b.dtok, b.emb, b.out);
	for (unsigned i = 0; i < 3; i++)
		lanes[i] = (struct wl_lane){.stream = i, .done = ev[i]};
	ck_assert_int_eq(wl_exec_launch(f.x, &st, lanes, 3), 0);
	ck_assert(lanes[0].err == 0 && !lanes[0].refused && lanes[0].recorded);
	ck_assert_int_eq(lanes[1].err, -EINVAL);
	ck_assert(lanes[1].refused && lanes[1].recorded);
	ck_assert(lanes[2].err == 0 && !lanes[2].refused && lanes[2].recorded);
	ck_assert_int_eq(dev_event_sync(ev[0]), 0);
	ck_assert_int_eq(dev_event_sync(ev[1]), 0); /* nothing of it ran: its stream is well */
	ck_assert_int_eq(dev_event_sync(ev[2]), -EINVAL);
	ck_assert_int_eq(wl_exec_stream_reset(f.x, 2), 0);
	dev_clear_error(f.d);
	/* the checks, kind by kind */
	ck_assert_int_eq(wl_task_check(&tasks[0], msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_task_check(&tasks[2], msg, sizeof(msg)), 0); /* a run-time fault */
	ck_assert_int_eq(wl_task_check(&tasks[1], msg, sizeof(msg)), -EINVAL);
	ck_assert_str_eq(msg, "spin: ns 3601000000000 above an hour");
	t = (struct wl_task){.kind = WL_TASK_COPY};
	t.u.copy.dst = b.dout;
	t.u.copy.n = sizeof(int32_t);
	t.u.copy.kind = DEV_D2H;
	ck_assert_int_eq(wl_task_check(&t, NULL, 0), -EINVAL); /* no source */
	t.u.copy.src = b.dtok;
	ck_assert_int_eq(wl_task_check(&t, NULL, 0), 0);
	t = (struct wl_task){.kind = WL_TASK_FUNC};
	ck_assert_int_eq(wl_task_check(&t, msg, sizeof(msg)), -EINVAL);
	ck_assert_str_eq(msg, "function: no function");
	for (int i = 0; i < 3; i++)
		dev_event_destroy(ev[i]);
	lane_bufs_free(&f, &b);
	fx_fini(&f);
}
END_TEST

Suite *workloads_suite(void);

Suite *workloads_suite(void)
{
	Suite *s = suite_create("workloads");
	const struct tu_case cases[] = {
	    {"params_parse_set_and_replace", params_parse_set_and_replace},
	    {"validate_names_the_parameter", validate_names_the_parameter},
	    {"param_table_is_what_validate_checks", param_table_is_what_validate_checks},
	    {"arena_bumps_aligns_and_fills", arena_bumps_aligns_and_fills},
	    {"tokens_match_reference_decode", tokens_match_reference_decode},
	    {"build_ahead_of_token", build_ahead_of_token},
	    {"batch_across_streams_matches_reference", batch_across_streams_matches_reference},
	    {"kv_pool_capacity_is_enforced", kv_pool_capacity_is_enforced},
	    {"kv_pool_size_overflow_refused", kv_pool_size_overflow_refused},
	    {"full_step_rolls_back", full_step_rolls_back},
	    {"cost_is_what_create_reserves", cost_is_what_create_reserves},
	    {"cost_of_a_huge_request_allocates_nothing", cost_of_a_huge_request_allocates_nothing},
	    {"reserve_then_fill_or_destroy", reserve_then_fill_or_destroy},
	    {"exec_survives_a_stream_it_cannot_replace", exec_survives_a_stream_it_cannot_replace},
	    {"exec_lanes_end_on_their_own", exec_lanes_end_on_their_own},
	    {"exec_lane_refused_by_its_check_is_marked", exec_lane_refused_by_its_check_is_marked},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(workloads_suite());
}
