/* check_data.c - data in and out of callables (docs/callables.md, "Data in and out";
 * docs/protocol.md 5.2), on a real chipd of sim chips through libchipd, with the
 * tests' "echo" callable (tests/callables/data_callable.c) registered: token payloads
 * in the 64-byte records, and a table that declares too many payload bytes refused;
 * input given inline, refused over the callable's input_max or to a callable that
 * takes none, and kept by the re-queue after a worker's death; a deadline that
 * passes while the output hook runs ends the stream timeout. */
#include "chipd_fixture.h"
#include "client_internal.h"
#include "ring.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mbox.h"
#include "node.h"
#include "proto.h"
#include "wait.h"

#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

#define BOUND_MS 20000u

static char dir[128];

/* A private directory with the tests' callables copied in (mode 0755). */
static void setup(void)
{
	cd_callables_dir(dir, sizeof(dir), "data", CL_TEST_DIR, "dc_*.so");
}

static void teardown(void)
{
	cd_remove_dir(dir);
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

/* Submits @wl (@tokens, and @step_us unless 0) with @len input bytes at @in and room
 * for @output_cap output bytes to @chip. */
static int submit_echo(struct cd *d, const char *wl, int32_t chip, uint32_t tokens,
		       uint32_t step_us, const uint8_t *in, uint32_t len, uint32_t output_cap,
		       chipd_stream **s, struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"step_us", step_us}};
	struct chipd_request req = {.workload = wl,
				    .params = p,
				    .nparams = step_us ? 2 : 1, /* step_us is echo's alone */
				    .chip = chip,
				    .input = in,
				    .input_len = len,
				    .output_cap = output_cap};
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
		ck_assert_msg(submit_echo(&d, "echo", chip, 6, 0, in, lens[i], 0, &s, &err) == 0,
			      "%s", err.message);
		ck_assert_uint_eq(expect_echo(s, 6, in, lens[i]), 0);
		chipd_stream_close(s, CD_CALL_MS);
	}
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
	ck_assert_int_eq(submit_echo(&d, "echo_small", -1, 2, 0, in, 17, 0, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "input of 17 bytes is over its input_max 16"), "%s",
		      err.message);
	/* 16 is fine */
	ck_assert_msg(submit_echo(&d, "echo_small", -1, 2, 0, in, 16, 0, &s, &err) == 0, "%s",
		      err.message);
	ck_assert_uint_eq(expect_echo(s, 2, in, 16), 0);
	chipd_stream_close(s, CD_CALL_MS);
	/* a built-in takes no input */
	ck_assert_int_eq(submit_echo(&d, "synthetic", -1, 2, 0, in, 3, 0, &s, &err), -EREMOTEIO);
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
	ck_assert_msg(submit_echo(&d, "echo", 0, 3, 300000, in, sizeof(in), 0, &s, &err) == 0, "%s",
		      err.message);
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	ck_assert_uint_eq(expect_echo(s, 3, in, sizeof(in)), 0);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Reads @s to its end as expect_echo does, then its output: @in reversed. */
static void expect_output(chipd_stream *s, uint32_t tokens, const uint8_t *in, uint32_t len)
{
	static uint8_t out[65536];
	struct chipd_error err;
	uint32_t got = 0;

	ck_assert_uint_eq(expect_echo(s, tokens, in, len), len);
	ck_assert_msg(chipd_stream_output(s, out, sizeof(out), &got, &err) == 0, "%s",
		      err.message);
	ck_assert_uint_eq(got, len);
	for (uint32_t i = 0; i < len; i++)
		ck_assert_msg(out[i] == in[len - 1 - i], "output byte %u", i);
	if (len) /* one byte short of room */
		ck_assert_int_eq(chipd_stream_output(s, out, len - 1, &got, &err), -ENOSPC);
}

/* Input through the data area (more than 1024 bytes), and output into it: tokens,
 * payloads and the output bytes computed from the same input; out_len in the FINAL
 * record. Many at once from threads of one process share its data area. */
START_TEST(data_area_input_and_output)
{
	static uint8_t in[3][40000];
	static const uint32_t lens[3] = {1025, 40000, 200};
	struct chipd_error err;
	chipd_stream *s[3];
	uint32_t got;
	struct cd d;

	start_echo(&d);
	for (int i = 0; i < 3; i++) {
		fill_bytes(in[i], lens[i], (uint32_t)i * 3 + 1);
		ck_assert_msg(submit_echo(&d, "echo", i % 2, 4, 0, in[i], lens[i], 65536, &s[i],
					  &err) == 0,
			      "%s", err.message);
		/* nothing to read before the final token */
		ck_assert_int_eq(chipd_stream_output(s[i], in[i], 1, &got, &err), -EAGAIN);
	}
	for (int i = 0; i < 3; i++) {
		expect_output(s[i], 4, in[i], lens[i]);
		chipd_stream_close(s[i], CD_CALL_MS);
	}
	/* a stream that asked for none has none */
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 1, 0, in[0], 10, 0, &s[0], &err), 0);
	ck_assert_uint_eq(expect_echo(s[0], 1, in[0], 10), 0);
	ck_assert_int_eq(chipd_stream_output(s[0], in[1], 10, &got, &err), -ENODATA);
	chipd_stream_close(s[0], CD_CALL_MS);
	/* a callable that writes none is refused an output range */
	ck_assert_int_eq(submit_echo(&d, "synthetic", -1, 1, 0, NULL, 0, 100, &s[0], &err),
			 -EREMOTEIO);
	ck_assert_msg(strstr(err.message, "synthetic: writes no output (output_max 0"), "%s",
		      err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* An output that does not fit output_cap ends the stream too_large after its tokens;
 * input over input_max through the data area is refused like inline input. */
START_TEST(output_over_cap_and_input_over_max)
{
	static uint8_t in[70000];
	struct chipd_error err;
	chipd_stream *s = NULL;
	enum chipd_code code;
	uint32_t got;
	struct cd d;

	fill_bytes(in, sizeof(in), 9);
	start_echo(&d);
	ck_assert_msg(submit_echo(&d, "echo", -1, 3, 0, in, 3000, 100, &s, &err) == 0, "%s",
		      err.message);
	ck_assert_uint_eq(cd_drain_stream(s, &code, BOUND_MS), 2); /* FINAL never came */
	ck_assert_int_eq(code, CHIPD_E_TOO_LARGE);
	/* an ERROR end: never any output, which no retry changes */
	ck_assert_int_eq(chipd_stream_output(s, in, sizeof(in), &got, &err), -ENODATA);
	ck_assert(!err.retryable);
	ck_assert_msg(strstr(err.message, "its stream ended with an error: no output"), "%s",
		      err.message);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 3, 0, in, 65537, 0, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "input of 65537 bytes is over its input_max 65536"),
		      "%s", err.message);
	/* the node serves on */
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 2, 0, in, 2000, 2000, &s, &err), 0);
	expect_output(s, 2, in, 2000);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* One raw submit @m on @n's mailbox, refused bad_request with @needle. */
static void expect_refused_raw(struct proto_node *n, const struct proto_msg *m, const char *needle)
{
	static unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *a = calloc(1, sizeof(*a));
	struct proto_error perr;
	struct mbox_ticket t;
	const void *ans;
	uint32_t alen;
	size_t len;

	ck_assert_ptr_nonnull(a);
	ck_assert_msg(proto_encode_request(m, buf, sizeof(buf), &len, &perr) == 0, "%s",
		      perr.message);
	ck_assert_int_eq(mbox_claim(&n->mbox, &t), 0);
	memcpy(mbox_req_buf(&n->mbox, t), buf, len);
	ck_assert_int_eq(mbox_post(&n->mbox, t, (uint32_t)len), 0);
	ck_assert_int_eq(mbox_wait(&n->mbox, t, shm_now_ns() + 5000ull * SHM_NS_PER_MS), 0);
	ck_assert_int_eq(mbox_response(&n->mbox, t, &ans, &alen), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_SUBMIT, ans, alen, a, &perr), 0);
	ck_assert_int_eq(mbox_release(&n->mbox, t), 0);
	ck_assert(!a->ok);
	ck_assert_int_eq(a->err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(a->err.message, needle), "%s", a->err.message);
	free(a);
}

/* A range outside the data area (by the supervisor's own geometry: a 4 KiB area
 * here), and any range on a node without one, is refused naming it. libchipd never
 * sends one: the submits are written by hand. */
START_TEST(range_outside_data_area_refused)
{
	static const char *const small[] = {"--client-data-kib", "4", NULL};
	static const char *const none[] = {"--client-data-kib", "0", NULL};
	struct proto_msg *m = calloc(1, sizeof(*m));
	uint8_t in[2000] = {0};
	struct chipd_error err;
	chipd_stream *s = NULL, *s2 = NULL;
	struct proto_node n;
	struct cd d;

	ck_assert_ptr_nonnull(m);
	cd_start(&d, small, NULL);
	ck_assert_msg(reg(&d, "dc_echo", &err) == 0, "%s", err.message);
	cd_node_attach(&d, &n);
	ck_assert_uint_eq(n.geom.xchg.data_size, 4096);
	proto_msg_init(m, PROTO_OP_SUBMIT);
	strcpy(m->wl, "echo");
	m->input_off = 4000;
	m->input_len = 97;
	expect_refused_raw(&n, m, "\"input_off\": 4000 + 97 bytes lie outside the data area of "
				  "4096 bytes");
	m->input_off = 4095;
	m->input_len = 1;
	m->output_off = 0;
	m->output_cap = 4097;
	expect_refused_raw(&n, m, "\"output_off\": 0 + 4097 bytes lie outside");
	m->output_off = 4294967295ll;
	m->output_cap = 1;
	expect_refused_raw(&n, m, "\"output_off\": 4294967295 + 1 bytes lie outside");
	proto_node_detach(&n);
	/* the last byte of the area is fine, through libchipd too */
	ck_assert_msg(submit_echo(&d, "echo", -1, 1, 0, in, 2000, 2000, &s, &err) == 0, "%s",
		      err.message);
	expect_output(s, 1, in, 2000);
	chipd_stream_close(s, CD_CALL_MS);
	/* more than the area holds never leaves the client: this request's own input and
	 * output cannot fit together, which no retry changes */
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 1, 0, in, 2000, 3000, &s, &err), -EINVAL);
	ck_assert_str_eq(err.message, "\"output\": 3000 bytes and this request's input's 2048 "
				      "together exceed the data area's 4096");
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert(!err.retryable);
	/* an area other requests hold is no_capacity, retryable: the first stream's output
	 * range (3072 bytes) is held until it is closed */
	ck_assert_msg(submit_echo(&d, "echo", -1, 1, 0, in, 10, 3000, &s, &err) == 0, "%s",
		      err.message);
	ck_assert_int_eq(submit_echo(&d, "echo", -1, 1, 0, in, 10, 2000, &s2, &err), -ENOSPC);
	ck_assert_str_eq(err.message, "\"output\": no free range of 2000 bytes in the data area "
				      "(4096 bytes: 1024 free, 0 held by this request's input, "
				      "3072 by other requests)");
	ck_assert_int_eq(err.code, CHIPD_E_NO_CAPACITY);
	ck_assert(err.retryable);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);

	cd_start(&d, none, NULL);
	cd_node_attach(&d, &n);
	ck_assert_uint_eq(n.geom.xchg.data_size, 0);
	proto_msg_init(m, PROTO_OP_SUBMIT);
	strcpy(m->wl, "synthetic");
	m->output_off = 0;
	m->output_cap = 1;
	expect_refused_raw(&n, m, "\"output_off\": the node has no data area");
	proto_node_detach(&n);
	ck_assert_int_eq(submit_echo(&d, "synthetic", -1, 1, 0, in, 1025, 0, &s, &err), -EINVAL);
	ck_assert_msg(strstr(err.message, "\"input\": 1025 bytes need the data area, and the node "
					  "has none"),
		      "%s", err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	free(m);
}
END_TEST

/* A request whose input came through the data area is not moved after its worker's
 * death: its stream ends worker_lost (the bytes may be gone), while one with inline
 * input is moved (requeue_keeps_inline_input). */
START_TEST(data_area_input_not_requeued)
{
	static uint8_t in[5000];
	struct chipd_error err;
	chipd_stream *s = NULL;
	enum chipd_code code;
	struct cd d;

	fill_bytes(in, sizeof(in), 3);
	start_echo(&d);
	ck_assert_msg(submit_echo(&d, "echo", 0, 3, 300000, in, sizeof(in), 8000, &s, &err) == 0,
		      "%s", err.message);
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	ck_assert_uint_eq(cd_drain_stream(s, &code, BOUND_MS), 0);
	ck_assert_int_eq(code, CHIPD_E_WORKER_LOST);
	chipd_stream_close(s, CD_CALL_MS);
	/* chip 1 serves the same request, and chip 0 once restarted */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, 0, BOUND_MS));
	for (int32_t chip = 0; chip < 2; chip++) {
		ck_assert_msg(submit_echo(&d, "echo", chip, 2, 0, in, sizeof(in), 8000, &s, &err) ==
				  0,
			      "%s", err.message);
		expect_output(s, 2, in, sizeof(in));
		chipd_stream_close(s, CD_CALL_MS);
	}
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A client killed while its stream, with data-area input and an output range, runs:
 * the node ends the stream and keeps serving the others, and the region goes to new
 * clients scrubbed. */
START_TEST(client_killed_with_output_range)
{
	static uint8_t in[6000];
	struct chipd_error err;
	chipd_stream *s = NULL;
	int fds[2], status;
	pid_t w0, w1, child;
	char c;
	struct cd d;

	fill_bytes(in, sizeof(in), 11);
	start_echo(&d);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		chipd_conn *cc = NULL;
		struct chipd_param p[] = {{"tokens", 64}, {"step_us", 50000}};
		struct chipd_request req = {.workload = "echo", .params = p, .nparams = 2,
					    .chip = 0, .input = in, .input_len = sizeof(in),
					    .output_cap = 6000};
		struct chipd_token tok;
		uint64_t id;

		if (chipd_connect(d.instance, &cc, NULL) || chipd_submit(cc, &req, CD_CALL_MS, &id,
									   &s, NULL) ||
		    chipd_stream_next(s, &tok, BOUND_MS, NULL))
			_exit(1);
		if (write(fds[1], "t", 1) != 1)
			_exit(1);
		pause(); /* killed here, its stream running */
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	close(fds[0]);
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	/* the others are served on both chips meanwhile, outputs included */
	for (int i = 0; i < 4; i++) {
		ck_assert_msg(submit_echo(&d, "echo", i % 2, 2, 0, in, sizeof(in) - (uint32_t)i,
					  8000, &s, &err) == 0,
			      "%s", err.message);
		expect_output(s, 2, in, sizeof(in) - (uint32_t)i);
		chipd_stream_close(s, CD_CALL_MS);
	}
	/* the dead client's stream ends (cancelled): every ring comes back */
	ck_assert_uint_eq(cd_stat_reaches(&d, "supervisor", "err_cancelled", 1, BOUND_MS), 1);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_int_eq(cd_worker_pid(&d, 1), w1);
	/* new clients, one of which may get the dead one's region, scrubbed */
	for (int i = 0; i < 3; i++) {
		chipd_conn *cc = NULL;
		struct chipd_param p[] = {{"tokens", 1}};
		struct chipd_request req = {.workload = "echo", .params = p, .nparams = 1, .chip = -1,
					    .input = in, .input_len = 3000, .output_cap = 3000};
		uint64_t id;

		ck_assert_int_eq(chipd_connect(d.instance, &cc, &err), 0);
		ck_assert_msg(chipd_submit(cc, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s",
			      err.message);
		expect_output(s, 1, in, 3000);
		chipd_stream_close(s, CD_CALL_MS);
		chipd_close(cc);
	}
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Whether the @n bytes at @p are all zero. */
static bool all_zero(const volatile uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

#define LATE_TOKENS  25u	  /* steps of 100 ms: the last publish ~2.5 s in */
#define LATE_STEP_US 100000u
#define LATE_OUT_US  2000000u /* the output hook sleeps past the take-back (~3 s in) */

/* A client hangs up with its stream running and its region mapped, reopening the
 * reader the supervisor closed for it (a broken ring), so its live worker keeps
 * building until the ring is taken back (--stuck-ms/--progress-ms 3 s). The last
 * step's output hook passed the ring's generation check just before the take-back and
 * sleeps 2 s: the worker writes the output into the data area after the take-back.
 * The region must not be scrubbed (and handed to another client) before that write:
 * once it is free again its data area is zero, and stays zero. */
START_TEST(output_after_take_back_lands_before_scrub)
{
	const char *const args[] = {"--chips",    "1",    "--max-clients", "2",
				    "--stuck-ms", "3000", "--progress-ms", "3000",
				    NULL};
	struct chipd_param p[] = {
	    {"tokens", LATE_TOKENS}, {"step_us", LATE_STEP_US}, {"output_us", LATE_OUT_US}};
	uint8_t in[64];
	struct chipd_request req = {.workload = "echo", .params = p, .nparams = 3, .chip = 0,
				    .input = in, .input_len = sizeof(in), .output_cap = 4096};
	struct cd_reopener o = {0};
	struct chipd_error err;
	chipd_conn *bad = NULL, *late = NULL;
	const volatile uint8_t *out;
	chipd_stream *s;
	uint64_t id, t0;
	pid_t w0;
	struct cd d;
	int rc;

	fill_bytes(in, sizeof(in), 7);
	cd_start(&d, args, NULL);
	ck_assert_msg(reg(&d, "dc_echo", &err) == 0, "%s", err.message);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(chipd_connect(d.instance, &bad, &err), 0);
	rc = chipd_submit(bad, &req, CD_CALL_MS, &id, &s, &err);
	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	out = (const volatile uint8_t *)client_data_at(bad, &s->out);
	for (t0 = shm_now_ns() / SHM_NS_PER_MS;
	     atomic_load_explicit(&s->ring.hdr->head, memory_order_acquire) < 1; usleep(1000))
		ck_assert_msg(shm_now_ns() / SHM_NS_PER_MS - t0 < BOUND_MS, "no first token");
	cd_reopener_start(&o, s);
	/* hangs up, its region still mapped */
	ck_assert_int_eq(shutdown(bad->fd, SHUT_RDWR), 0);
	/* the take-back (~3 s), the late output (~4.5 s), a scrub after it */
	for (t0 = shm_now_ns() / SHM_NS_PER_MS;
	     atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) == s->gen;
	     usleep(2000))
		ck_assert_msg(shm_now_ns() / SHM_NS_PER_MS - t0 < BOUND_MS, "the ring was not taken back");
	cd_reopener_stop(&o);
	tu_sleep_ms(LATE_OUT_US / 1000u + 1000u);
	/* the one other region is the test's own connection's: a new client gets this one */
	ck_assert_int_eq(chipd_connect(d.instance, &late, &err), 0);
	ck_assert_msg(all_zero(out, 4096),
		      "a new client's data area holds bytes a request taken back wrote after "
		      "the scrub");
	tu_sleep_ms(500);
	ck_assert(all_zero(out, 4096));
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0); /* a live worker, not killed */
	chipd_close(late);
	chipd_stream_close(s, 0);
	chipd_close(bad);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A request whose deadline passes while its output hook runs (after its last step
 * completed) ends timeout: its FINAL is not published after the deadline, as for a
 * step running then (protocol.md 8.4, deadline_ms). The hook sleeps 1.5 s past a
 * 300 ms deadline; a machine slow enough to reach the deadline before the hook ends
 * the request timeout all the same. The node serves on. */
START_TEST(output_hook_past_deadline_ends_timeout)
{
	struct chipd_param p[] = {{"tokens", 1}, {"output_us", 1500000}};
	uint8_t in[10];
	struct chipd_request req = {.workload = "echo",
				    .params = p,
				    .nparams = 2,
				    .chip = -1,
				    .deadline_ms = 300,
				    .input = in,
				    .input_len = sizeof(in),
				    .output_cap = 4096};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	uint32_t got, n;
	uint64_t id;
	struct cd d;

	fill_bytes(in, sizeof(in), 5);
	start_echo(&d);
	ck_assert_msg(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s",
		      err.message);
	n = cd_drain_stream(s, &code, BOUND_MS);
	ck_assert_msg(code == CHIPD_E_TIMEOUT,
		      "ended %s (%u tokens), not timeout, past its deadline",
		      code == CHIPD_OK ? "completed" : chipd_code_name(code), n);
	ck_assert_uint_eq(n, 0); /* its one token, the last, not delivered */
	ck_assert_int_eq(chipd_stream_output(s, in, sizeof(in), &got, &err), -ENODATA);
	chipd_stream_close(s, CD_CALL_MS);
	/* the node serves on: the same request without a deadline completes */
	req.deadline_ms = 0;
	p[1].value = 0;
	ck_assert_msg(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s",
		      err.message);
	expect_output(s, 1, in, sizeof(in));
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
	    {"data_area_input_and_output", data_area_input_and_output},
	    {"output_over_cap_and_input_over_max", output_over_cap_and_input_over_max},
	    {"range_outside_data_area_refused", range_outside_data_area_refused},
	    {"data_area_input_not_requeued", data_area_input_not_requeued},
	    {"client_killed_with_output_range", client_killed_with_output_range},
	    {"output_after_take_back_lands_before_scrub",
	     output_after_take_back_lands_before_scrub},
	    {"output_hook_past_deadline_ends_timeout", output_hook_past_deadline_ends_timeout},
	};

	/* each its own directory of callables; a real chipd on a loaded machine */
	tu_add_cases_fixture(s, cases, sizeof(cases) / sizeof(cases[0]), 120, setup, teardown);
	return tu_run(s);
}
