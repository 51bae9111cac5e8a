/* chipd_clstat.c - the counts of each callable in the workloads answer
 * (docs/callables.md, "Counters") on a real chipd: every request a worker admitted
 * counted once in requests and once by how its stream ended, with its tokens, and a
 * refused submit nowhere; a request whose worker died mid-stream failed once, and one
 * re-queued to another chip counted once. The workloads answer counts every end
 * published before it, so what a client read to its end is counted when it asks.
 * Part of check_chipd. */
#include "chipd_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#define RESTART_MS 10000u

static const char *const two_chips[] = {"--chips", "2", NULL};

static chipd_stream *submit(struct cd *d, int32_t chip, const struct chipd_param *p, uint32_t np,
			    uint64_t *id)
{
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = np, .chip = chip};
	struct chipd_error err;
	chipd_stream *s = NULL;

	ck_assert_msg(chipd_submit(d->conn, &req, CD_CALL_MS, id, &s, &err) == 0, "%s",
		      err.message);
	return s;
}

/* Reads @n tokens of @s, the first ones of its stream. */
static void read_tokens(chipd_stream *s, uint32_t n)
{
	struct chipd_token tok;
	struct chipd_error err;

	for (uint32_t i = 0; i < n; i++) {
		ck_assert_msg(chipd_stream_next(s, &tok, CD_CALL_MS, &err) == 0, "%s", err.message);
		ck_assert_uint_eq(tok.seq, i);
	}
}

/* Three streams completed (3, 5 and 7 tokens), one cancelled after a few tokens, one
 * failed with device_error after 2: each counted once, by how it ended, with the
 * tokens its client read; two refusals (a chip the node lacks, a parameter out of
 * range) counted nowhere; the other callables untouched. */
START_TEST(counts_each_request_once_by_how_it_ended)
{
	struct chipd_param endless[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	struct chipd_param broken[] = {{"tokens", 5}, {"device_us", 0}, {"fail_step", 2}};
	struct chipd_param bad_tokens[] = {{"tokens", 0}};
	struct chipd_request bad = {.workload = "synthetic", .chip = 7};
	struct chipd_error err;
	enum chipd_code code;
	uint32_t cancelled_tokens;
	chipd_stream *s;
	uint64_t id;
	struct cd d;

	cd_start(&d, two_chips, NULL);
	cd_expect_counts(&d, "synthetic", 0, 0, 0, 0, 0);
	for (uint32_t n = 3; n <= 7; n += 2)
		cd_expect_stream(cd_submit(&d, n, 0), n, CHIPD_OK, CD_CALL_MS);
	/* cancelled: the tokens already on their way still come, then the end */
	s = submit(&d, -1, endless, 2, &id);
	read_tokens(s, 2);
	ck_assert_int_eq(chipd_cancel(d.conn, id, CD_CALL_MS, &err), 0);
	cancelled_tokens = 2 + cd_drain_stream_from(s, 2, &code, CD_CALL_MS);
	ck_assert_int_eq(code, CHIPD_E_CANCELLED);
	chipd_stream_close(s, CD_CALL_MS);
	s = submit(&d, 0, broken, 3, &id);
	ck_assert_uint_eq(cd_drain_stream(s, &code, CD_CALL_MS), 2);
	ck_assert_int_eq(code, CHIPD_E_DEVICE_ERROR);
	chipd_stream_close(s, CD_CALL_MS);
	/* refused by the router, and by the validator */
	ck_assert_int_eq(chipd_submit(d.conn, &bad, CD_CALL_MS, &id, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	bad.chip = -1;
	bad.params = bad_tokens;
	bad.nparams = 1;
	ck_assert_int_eq(chipd_submit(d.conn, &bad, CD_CALL_MS, &id, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);

	cd_expect_counts(&d, "synthetic", 5, 3, 1, 1, 3 + 5 + 7 + cancelled_tokens + 2);
	cd_expect_counts(&d, "gemm", 0, 0, 0, 0, 0);
	cd_expect_counts(&d, "paged_attention", 0, 0, 0, 0, 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Chip 0's worker dies with two requests on it: one mid-stream ends worker_lost (the
 * supervisor writes its end) and counts as failed once, with the tokens before the
 * end; one with no token out yet is re-queued to chip 1 and completes, one request
 * and one completion. The counts are the supervisor's: they outlive the worker, and
 * the restarted one's requests add to them. */
START_TEST(worker_death_counts_once)
{
	struct chipd_param slow[] = {{"tokens", 1 << 20}, {"device_us", 20000}};
	/* its first token is 300 ms away when the worker dies */
	struct chipd_param late[] = {{"tokens", 3}, {"device_us", 300000}};
	struct chipd_param quick[] = {{"tokens", 3}, {"device_us", 0}};
	enum chipd_code code;
	chipd_stream *mid, *moved;
	uint32_t lost_tokens;
	uint64_t id;
	struct cd d;
	pid_t w0;

	cd_start(&d, two_chips, NULL);
	mid = submit(&d, 0, slow, 2, &id);
	read_tokens(mid, 2);
	moved = submit(&d, 0, late, 2, &id);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	lost_tokens = 2 + cd_drain_stream_from(mid, 2, &code, CD_CALL_MS); /* more may come */
	ck_assert_int_eq(code, CHIPD_E_WORKER_LOST);
	chipd_stream_close(mid, CD_CALL_MS);
	cd_expect_stream(moved, 3, CHIPD_OK, CD_CALL_MS);
	cd_expect_counts(&d, "synthetic", 2, 1, 1, 0, lost_tokens + 3);

	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, RESTART_MS));
	cd_expect_stream(submit(&d, 0, quick, 2, &id), 3, CHIPD_OK, CD_CALL_MS);
	cd_expect_counts(&d, "synthetic", 3, 2, 1, 0, lost_tokens + 6);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

void cd_add_clstat_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"clstat_by_end", counts_each_request_once_by_how_it_ended},
	    {"clstat_worker_death", worker_death_counts_once},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
