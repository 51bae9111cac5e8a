/* check_data.c - data in and out of callables (docs/callables.md, "Data in and out";
 * docs/protocol.md 5.2), on a real chipd of sim chips through libchipd, with the
 * tests' "echo" callable (tests/callables/data_callable.c) registered: token payloads
 * in the 64-byte records, and a table that declares too many payload bytes refused;
 * input given inline, refused over the callable's input_max or to a callable that
 * takes none, and kept by the re-queue after a worker's death. */
#include "chipd_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

#define BOUND_MS 20000u

static char dir[128];

/* A private directory with the data callables copied in (mode 0755). */
static void setup(void)
{
	const char *t = getenv("TMPDIR");
	char cmd[512];

	snprintf(dir, sizeof(dir), "%s/chipd-data.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp %s/dc_*.so '%s'/ && chmod 0755 '%s'/*.so", CL_TEST_DIR, dir,
		 dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Registers the variant @variant ("dc_echo"); returns chipd_register's result. */
static int reg(struct cd *d, const char *variant, struct chipd_error *err)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s.so", dir, variant);
	return chipd_register(d->conn, path, NULL, CD_CALL_MS * 2, NULL, NULL, err);
}

static void start_echo(struct cd *d)
{
	struct chipd_error err;

	cd_start(d, NULL, NULL);
	ck_assert_msg(reg(d, "dc_echo", &err) == 0, "%s", err.message);
}

/* echo's payload byte @i of step @step for input @in (@len bytes). */
static uint8_t payload_of(const uint8_t *in, uint32_t len, uint32_t step, uint32_t i)
{
	return (uint8_t)((len ? in[(step + i) % len] : 0) + step + i);
}

/* Reads @s to its end: @tokens tokens of echo for input @in, payloads included;
 * returns the final token's out_len. */
static uint32_t expect_echo(chipd_stream *s, uint32_t tokens, const uint8_t *in, uint32_t len)
{
	struct chipd_token tok;
	struct chipd_error err;
	uint32_t sum = 0;

	for (uint32_t i = 0; i < len; i++)
		sum += in[i];
	for (uint32_t k = 0; k < tokens; k++) {
		ck_assert_msg(chipd_stream_next(s, &tok, BOUND_MS, &err) == 0, "%s", err.message);
		ck_assert_uint_eq(tok.seq, k);
		ck_assert_uint_eq(tok.value, (uint64_t)(uint32_t)(sum + k));
		ck_assert(tok.final == (k == tokens - 1));
		ck_assert_uint_eq(tok.payload_len, 24);
		for (uint32_t i = 0; i < 24; i++)
			ck_assert_msg(tok.payload[i] == payload_of(in, len, k, i),
				      "token %u payload byte %u: %u", k, i, tok.payload[i]);
		if (!tok.final)
			ck_assert_uint_eq(tok.out_len, 0);
	}
	return tok.out_len;
}

/* Payload bytes reach the reader with every token, 24 of them, in 64-byte records. */
START_TEST(payload_bytes)
{
	struct chipd_param p[] = {{"tokens", 9}};
	struct chipd_error err;
	chipd_stream *s = NULL;
	struct cd d;

	start_echo(&d);
	for (int32_t chip = 0; chip < 2; chip++) {
		ck_assert_msg(cd_submit_to(&d, "echo", chip, p, 1, &s, &err) == 0, "%s",
			      err.message);
		ck_assert_uint_eq(expect_echo(s, 9, NULL, 0), 0);
		chipd_stream_close(s, CD_CALL_MS);
	}
	/* a built-in declares none: its records carry no payload */
	s = cd_submit(&d, 3, 0);
	struct chipd_token tok;
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(chipd_stream_next(s, &tok, BOUND_MS, &err), 0);
		ck_assert_uint_eq(tok.payload_len, 0);
	}
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Submits @wl (@tokens, and @step_us unless 0) with @len input bytes at @in to @chip. */
static int submit_echo(struct cd *d, const char *wl, int32_t chip, uint32_t tokens,
		       uint32_t step_us, const uint8_t *in, uint32_t len, chipd_stream **s,
		       struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"step_us", step_us}};
	struct chipd_request req = {.workload = wl,
				    .params = p,
				    .nparams = step_us ? 2 : 1, /* step_us is echo's alone */
				    .chip = chip,
				    .input = in,
				    .input_len = len};
	uint64_t id;

	return chipd_submit(d->conn, &req, CD_CALL_MS, &id, s, err);
}

static void fill_bytes(uint8_t *b, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13u + seed);
}

/* Input given inline (up to 1024 bytes) reaches the callable: tokens and payloads are
 * computed from it, on both chips, at 1 byte and at 1024. */
START_TEST(inline_input)
{
	static const uint32_t lens[] = {1, 100, CHIPD_INPUT_INLINE_MAX};
	uint8_t in[CHIPD_INPUT_INLINE_MAX];
	struct chipd_error err;
	chipd_stream *s = NULL;
	struct cd d;

	start_echo(&d);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		int32_t chip = (int32_t)(i % 2);

		fill_bytes(in, lens[i], (uint32_t)i + 5);
		ck_assert_msg(submit_echo(&d, "echo", chip, 6, 0, in, lens[i], &s, &err) == 0,
			      "%s", err.message);
		ck_assert_uint_eq(expect_echo(s, 6, in, lens[i]), 0);
		chipd_stream_close(s, CD_CALL_MS);
	}
	/* more than a submit carries inline never leaves the client */
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 1, 0, in, CHIPD_INPUT_INLINE_MAX + 1, &s, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.message, "\"input\": 1025 bytes, at most 1024"), "%s",
		      err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Input longer than the callable's input_max, and input to a callable that takes
 * none: bad_request naming both numbers, before anything is reserved. */
START_TEST(input_over_input_max_refused)
{
	uint8_t in[64];
	struct chipd_error err;
	chipd_stream *s = NULL;
	char path[256];
	struct cd d;

	fill_bytes(in, sizeof(in), 1);
	start_echo(&d);
	snprintf(path, sizeof(path), "%s/dc_small.so", dir);
	ck_assert_msg(chipd_register(d.conn, path, "echo_small", CD_CALL_MS * 2, NULL, NULL, &err) ==
			  0,
		      "%s", err.message);
	ck_assert_int_eq(submit_echo(&d, "echo_small", -1, 2, 0, in, 17, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "input of 17 bytes is over its input_max 16"), "%s",
		      err.message);
	/* 16 is fine */
	ck_assert_msg(submit_echo(&d, "echo_small", -1, 2, 0, in, 16, &s, &err) == 0, "%s",
		      err.message);
	ck_assert_uint_eq(expect_echo(s, 2, in, 16), 0);
	chipd_stream_close(s, CD_CALL_MS);
	/* a built-in takes no input */
	ck_assert_int_eq(submit_echo(&d, "synthetic", -1, 2, 0, in, 3, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "synthetic: takes no input (input_max 0), got 3 bytes"),
		      "%s", err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A request with inline input whose worker dies before its first token is moved to
 * the other chip with its input: the tokens there are computed from the same bytes. */
START_TEST(requeue_keeps_inline_input)
{
	static const char *const two_chips[] = {"--chips", "2", NULL};
	uint8_t in[300];
	struct chipd_error err;
	chipd_stream *s = NULL;
	struct cd d;

	fill_bytes(in, sizeof(in), 77);
	cd_start(&d, two_chips, NULL);
	ck_assert_msg(reg(&d, "dc_echo", &err) == 0, "%s", err.message);
	/* admitted on chip 0; its first token is 300 ms away when the worker dies */
	ck_assert_msg(submit_echo(&d, "echo", 0, 3, 300000, in, sizeof(in), &s, &err) == 0, "%s",
		      err.message);
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	ck_assert_uint_eq(expect_echo(s, 3, in, sizeof(in)), 0);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A table that declares more than CHIPD_CL_PAYLOAD_MAX payload bytes is refused. */
START_TEST(payload_too_large_refused)
{
	struct chipd_error err;
	struct cd d;

	cd_start(&d, NULL, NULL);
	ck_assert_int_eq(reg(&d, "dc_big_payload", &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "payload_bytes 25 is over 24"), "%s", err.message);
	ck_assert(!cd_listed(&d, "echo", NULL));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("data");
	const struct tu_case cases[] = {
	    {"payload_bytes", payload_bytes},
	    {"payload_too_large_refused", payload_too_large_refused},
	    {"inline_input", inline_input},
	    {"input_over_input_max_refused", input_over_input_max_refused},
	    {"requeue_keeps_inline_input", requeue_keeps_inline_input},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return tu_run(s);
}
