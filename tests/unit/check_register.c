/* check_register.c - callables registered while the node runs (docs/callables.md,
 * "Registration"; supervisor/chipd/sup_register.c, worker/wrk_register.c), on a real
 * chipd of two sim chips through libchipd: the happy path with tokens from the new
 * callable on both chips and a name of the caller's; a chip that refuses (rolled back
 * on the chip that took it); a worker killed during a registration (a bounded
 * worker_lost, rolled back, and the chip serves it once restarted); the replay to a
 * restarted worker; unregister refused, drained and cancelled, and refused while a
 * chip does not answer; its counts, from 0 at
 * each registration; the --max-callables limit; the quarantine of a callable that
 * keeps killing its workers; bad files refused through the run-time path; and a
 * callable with its own kernel, loaded on each chip or refused by them. */
#include "chipd_fixture.h"
#include "register_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Reads @s to its end: tokens seed * 7 + step, @tokens of them, final. */
static void expect_tokens(chipd_stream *s, int64_t tokens, int64_t seed)
{
	struct chipd_token tok;
	struct chipd_error err;

	for (int64_t i = 0; i < tokens; i++) {
		ck_assert_msg(chipd_stream_next(s, &tok, BOUND_MS, &err) == 0, "%s", err.message);
		ck_assert_uint_eq(tok.seq, (uint32_t)i);
		ck_assert_uint_eq(tok.value, (uint64_t)(seed * 7 + i));
		ck_assert(tok.final == (i == tokens - 1));
	}
	chipd_stream_close(s, CD_CALL_MS);
}

static void run_on_both(struct cd *d, const char *name, int64_t seed)
{
	struct chipd_error err;

	for (int32_t chip = 0; chip < 2; chip++) {
		chipd_stream *s = rf_submit(d, name, chip, 5, seed + chip, 0, &err);

		ck_assert_msg(s, "chip %d: %s", chip, err.message);
		expect_tokens(s, 5, seed + chip);
	}
}

/* Registers the good callable as "tiny" and streams its tokens on both chips. */
static void register_good_and_run(struct cd *d, int64_t seed)
{
	struct chipd_error err;

	ck_assert_msg(rf_reg(d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	run_on_both(d, "tiny", seed);
}

START_TEST(register_run_unregister)
{
	struct cd d;
	struct chipd_workload w;
	struct chipd_error err;
	chipd_stream *s;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	ck_assert(cd_listed(&d, "tiny", &w));
	ck_assert_uint_eq(w.chips, 0x3);
	ck_assert_uint_eq(w.version, 3);
	ck_assert_uint_eq(w.nparams, 3);
	run_on_both(&d, "tiny", 4);
	/* the same file again under its own name: taken; under another: a second one */
	ck_assert_int_eq(rf_reg(&d, rf_cl("tc_good"), NULL, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "is already loaded"), "%s", err.message);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), "tiny_two", &err) == 0, "%s", err.message);
	run_on_both(&d, "tiny_two", 10);
	ck_assert_int_eq(
	    chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, CD_CALL_MS, &err), 0);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	s = rf_submit(&d, "tiny", -1, 2, 1, 0, &err);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	run_on_both(&d, "tiny_two", 20); /* the other one is untouched */
	/* unknown, and a callable of the start: not found, refused */
	ck_assert_int_eq(chipd_unregister(d.conn, "tiny", 0, CD_CALL_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NOT_FOUND);
	ck_assert_int_eq(chipd_unregister(d.conn, "gemm", 0, CD_CALL_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "loaded at start"), "%s", err.message);
	/* registered again after its unregistration */
	register_good_and_run(&d, 30);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Starts chipd with the tests' init counter armed so that the fourth init of the node
 * (the registration's probe's, the supervisor's, chip 0's, chip 1's) fails the way
 * @variant does, registers it, and checks the registration failed with @code, naming
 * chip 1 (with @msg, when not NULL), and left nothing registered. Returns how long the
 * registration took (ns). */
static uint64_t chip1_fails(struct cd *d, const char *variant, enum chipd_code code,
			    const char *msg)
{
	static char env_count[320];
	const char *env[] = {env_count, "TC_REFUSE_AT=4", NULL};
	struct chipd_error err;
	uint64_t t0;

	snprintf(env_count, sizeof(env_count), "TC_COUNT_FILE=%s/count", rf_dir);
	cd_start(d, NULL, env);
	t0 = rf_now_ns();
	ck_assert_int_eq(rf_reg(d, rf_cl(variant), NULL, &err), -EREMOTEIO);
	t0 = rf_now_ns() - t0;
	ck_assert_int_eq(err.code, code);
	ck_assert(err.has_chip);
	ck_assert_uint_eq(err.chip, 1);
	ck_assert_msg(!msg || strstr(err.message, msg), "%s", err.message);
	ck_assert(!cd_listed(d, "tiny", NULL));
	return t0;
}

/* chip 1 refuses: the error is chip 1's, and chip 0 unloaded it again, so the good
 * one registers afterwards. */
START_TEST(one_chip_refuses_rollback)
{
	struct cd d;

	chip1_fails(&d, "tc_refuse", CHIPD_E_BAD_REQUEST, "refused on purpose");
	register_good_and_run(&d, 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* chip 1's worker dies inside the registration: worker_lost within the forward bound,
 * rolled back; once restarted, the chip takes a registration again. */
START_TEST(worker_killed_during_registration)
{
	struct cd d;
	uint64_t took, t0;

	took = chip1_fails(&d, "tc_kill", CHIPD_E_WORKER_LOST, NULL);
	ck_assert_uint_lt(took / 1000000u, 3 * CD_CALL_MS);
	/* its death seen, then its restart */
	t0 = rf_now_ns();
	while (cd_stat(&d, "supervisor", "worker_deaths") == 0 &&
	       rf_now_ns() - t0 < BOUND_MS * 1000000ull)
		tu_sleep_ms(10);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_deaths"), 1);
	ck_assert(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, 0, BOUND_MS));
	register_good_and_run(&d, 2);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Kills chip 1's worker and waits for its restart: @name is listed on both chips
 * again, and its tokens (seed @seed) stream on both. */
static void restart_chip1_and_run(struct cd *d, const char *name, int64_t seed)
{
	struct chipd_workload w;
	pid_t old = cd_worker_pid(d, 1);

	ck_assert_int_eq(kill(old, SIGKILL), 0);
	ck_assert(cd_wait_chip(d, 1, CHIPD_CHIP_READY, old, BOUND_MS));
	ck_assert(cd_listed(d, name, &w));
	ck_assert_uint_eq(w.chips, 0x3);
	run_on_both(d, name, seed);
}

/* A worker restarted after a crash loads the registry before it is READY. */
START_TEST(replayed_after_restart)
{
	struct cd d;
	struct chipd_error err;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), "replayed", &err) == 0, "%s", err.message);
	restart_chip1_and_run(&d, "replayed", 5);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A registered callable's file replaced at its path (another file moved there, as
 * install(1) does): a restarted chip loads the file the supervisor loaded or nothing,
 * never the new one under the old name (other code than the node lists); the path
 * registered again under another name is refused while the old copy is loaded, and
 * registers once that is unregistered. */
START_TEST(replaced_file_not_replayed)
{
	struct cd d;
	struct chipd_error err;
	struct chipd_workload w;
	chipd_stream *s;
	char cmd[600];
	pid_t old;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), "swapped", &err) == 0, "%s", err.message);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", rf_cl("tc_refuse"),
		 rf_cl("tc_good"), rf_cl("tc_good"), rf_cl("tc_good"));
	ck_assert_int_eq(system(cmd), 0);
	old = cd_worker_pid(&d, 1);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	ck_assert(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, old, BOUND_MS));
	ck_assert(cd_listed(&d, "swapped", &w));
	ck_assert_uint_eq(w.chips, 0x1); /* chip 0 keeps the file it loaded */
	s = rf_submit(&d, "swapped", 0, 2, 3, 0, &err);
	ck_assert_msg(s, "%s", err.message);
	expect_tokens(s, 2, 3);
	ck_assert_int_eq(rf_reg(&d, rf_cl("tc_good"), "swapped_new", &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "loaded already as swapped from a file since replaced"),
		      "%s", err.message);
	ck_assert_int_eq(
	    chipd_unregister(d.conn, "swapped", CHIPD_UNREGISTER_REFUSE, CD_CALL_MS, &err), 0);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), "swapped_new", &err) == 0, "%s", err.message);
	run_on_both(&d, "swapped_new", 6);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Registers tc_good as "partial" and makes chip 1's replay of it fail (its file
 * unsafe while chip 1 restarts): it is then on every chip but chip 1. */
static void lose_replay_on_chip_1(struct cd *d, uint64_t chips_left)
{
	struct chipd_error err;
	struct chipd_workload w;
	pid_t old;

	ck_assert_msg(rf_reg(d, rf_cl("tc_good"), "partial", &err) == 0, "%s", err.message);
	ck_assert_int_eq(chmod(rf_cl("tc_good"), 0666), 0);
	old = cd_worker_pid(d, 1);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	ck_assert(cd_wait_chip(d, 1, CHIPD_CHIP_READY, old, BOUND_MS));
	ck_assert_int_eq(chmod(rf_cl("tc_good"), 0755), 0);
	ck_assert(cd_listed(d, "partial", &w));
	ck_assert_uint_eq(w.chips, chips_left);
}

/* A chip whose replay of a callable failed (its file unsafe while the chip
 * restarted) does not have it: a submit that names no chip goes to one that has it,
 * though the other is less loaded. */
START_TEST(replay_failed_chip_gets_no_submit)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *busy, *s;

	cd_start(&d, NULL, NULL);
	lose_replay_on_chip_1(&d, 0x1);
	/* chip 0 holds a long stream, so chip 1 is the less loaded */
	busy = rf_submit(&d, "partial", 0, 64, 1, 100000, &err);
	ck_assert_msg(busy, "%s", err.message);
	for (int i = 0; i < 3; i++) {
		s = rf_submit(&d, "partial", -1, 2, 3, 0, &err);
		ck_assert_msg(s, "submit %d: %s", i, err.message);
		expect_tokens(s, 2, 3);
	}
	chipd_stream_close(busy, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A node of 3 chips with "partial" on chips 0 and 2 (chip 1's replay failed), and
 * chip 2 the busier of those: it runs a long stream, returned. */
static chipd_stream *three_chips_partial_on_0_and_2(struct cd *d)
{
	const char *const args[] = {"--chips", "3", NULL};
	struct chipd_error err;
	chipd_stream *busy;

	cd_start(d, args, NULL);
	lose_replay_on_chip_1(d, 0x5);
	busy = rf_submit(d, "partial", 2, 64, 1, 100000, &err);
	ck_assert_msg(busy, "%s", err.message);
	return busy;
}

/* The same for a re-queue: a request with no token yet whose worker died goes to a
 * chip that has its callable (chip 2), not to the less loaded chip 1 without it. */
START_TEST(replay_failed_chip_gets_no_requeue)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *busy = three_chips_partial_on_0_and_2(&d), *s;

	s = rf_submit(&d, "partial", 0, 2, 3, 1000000, &err);
	ck_assert_msg(s, "%s", err.message);
	tu_sleep_ms(300);
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	expect_tokens(s, 2, 3);
	chipd_stream_close(busy, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* And for a submit its chip refused no_capacity: offered to a chip that has its
 * callable (chip 2, busier), not to the idle chip 1 without it. Seed 998 is refused
 * no_capacity by a worker holding no other request of the callable: chip 0, idle,
 * where the router sends it first. */
START_TEST(replay_failed_chip_gets_no_offer)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *busy = three_chips_partial_on_0_and_2(&d), *s;

	s = rf_submit(&d, "partial", -1, 2, 998, 0, &err);
	ck_assert_msg(s, "%s", err.message);
	expect_tokens(s, 2, 998);
	chipd_stream_close(busy, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Unregister with requests in flight: refused naming them; drained (new ones refused
 * meanwhile, the one in flight completes); cancelled; a drain that times out leaves
 * the name taking requests. */
START_TEST(drain_and_cancel)
{
	struct cd d;
	struct chipd_workload w;
	struct chipd_error err;
	struct chipd_token tok;
	chipd_stream *s, *t;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	/* 20 steps of 100 ms: in flight for about 2 s */
	s = rf_submit(&d, "tiny", 0, 20, 1, 100000, &err);
	ck_assert_msg(s, "%s", err.message);
	ck_assert(cd_listed(&d, "tiny", &w));
	ck_assert_uint_eq(w.active, 1);
	ck_assert_int_eq(
	    chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, CD_CALL_MS, &err),
	    -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, "callable tiny: 1 requests in flight (ids ") &&
			  strstr(err.message, "): drain or cancel"),
		      "%s", err.message);
	/* a drain too short for it: timeout, and the name takes requests again */
	ck_assert_int_eq(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_DRAIN, 150, &err),
			 -ETIMEDOUT);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	t = rf_submit(&d, "tiny", 1, 2, 3, 0, &err);
	ck_assert_msg(t, "%s", err.message);
	expect_tokens(t, 2, 3);
	/* a drain that waits: the request in flight completes, all 20 tokens */
	ck_assert_msg(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_DRAIN, BOUND_MS, &err) == 0,
		      "%s", err.message);
	expect_tokens(s, 20, 1);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	/* cancel: the stream ends cancelled */
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	s = rf_submit(&d, "tiny", 1, 64, 1, 100000, &err);
	ck_assert_msg(s, "%s", err.message);
	ck_assert_msg(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_CANCEL, BOUND_MS, &err) ==
			  0,
		      "%s", err.message);
	for (;;) {
		int rc = chipd_stream_next(s, &tok, BOUND_MS, &err);

		if (rc == 0)
			continue;
		ck_assert_int_eq(rc, -EREMOTEIO);
		ck_assert_int_eq(err.code, CHIPD_E_CANCELLED);
		break;
	}
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Waits (up to 5 s) until a submit of @wl is refused draining: its drain began. */
static void wait_draining(struct cd *d, const char *wl)
{
	uint64_t until = rf_now_ns() + 5000000000ull;
	struct chipd_error err;

	for (;;) {
		chipd_stream *t = rf_submit(d, wl, 1, 1, 1, 0, &err);

		if (!t && err.code == CHIPD_E_DRAINING)
			return;
		if (t)
			chipd_stream_close(t, CD_CALL_MS);
		ck_assert_msg(rf_now_ns() < until, "the drain of %s never began", wl);
		usleep(20000);
	}
}

/* An unregister --drain whose client is killed while it waits (it never sends the
 * resume of its timeout, nor asks again): "drain ... unregister once none is in
 * flight" (docs/protocol.md 8.4) holds all the same. Once the request in flight
 * ended, the name is unregistered: a submit is bad_request (unknown), not draining
 * for ever, and the file registers again. */
START_TEST(drain_of_a_killed_client_completes)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *s;
	pid_t child;
	uint64_t until;
	int status;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	s = rf_submit(&d, "tiny", 0, 10, 1, 100000, &err); /* about 1 s in flight */
	ck_assert_msg(s, "%s", err.message);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		chipd_conn *c = NULL;

		if (chipd_connect(d.instance, &c, &err) != 0)
			_exit(2);
		(void)chipd_unregister(c, "tiny", CHIPD_UNREGISTER_DRAIN, BOUND_MS, &err);
		_exit(3);
	}
	/* the drain began: a submit of the name is refused draining */
	wait_draining(&d, "tiny");
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFSIGNALED(status));
	expect_tokens(s, 10, 1);
	/* the request ended: the drain is carried out without its client */
	until = rf_now_ns() + 5000000000ull;
	while (cd_listed(&d, "tiny", NULL)) {
		ck_assert_msg(rf_now_ns() < until, "tiny is still registered (draining for ever)");
		usleep(50000);
	}
	ck_assert_ptr_null(rf_submit(&d, "tiny", -1, 1, 1, 0, &err));
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	run_on_both(&d, "tiny", 3);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A stop (SIGTERM, --grace-ms 300) while an unregister --drain waits on a request in
 * flight: the grace ends the request, the drain then unloads the callable from no
 * chip the stop already ended. chipd exits within the grace and a second or so, not
 * held by the forward bound (2 s) once per stopped chip, six here. */
START_TEST(stop_during_a_drain_is_not_held_per_chip)
{
	static const char *const args[] = {"--chips", "6", "--grace-ms", "300", NULL};
	struct cd d;
	struct chipd_error err;
	pid_t child;
	uint64_t t0, ms;
	int status;

	cd_start(&d, args, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct chipd_param p[] = {{"tokens", 30}, {"seed", 1}, {"step_us", 100000}};
		struct chipd_request req = {
		    .workload = "tiny", .params = p, .nparams = 3, .chip = 0};
		chipd_conn *c = NULL;
		chipd_stream *st = NULL;
		uint64_t id;

		if (chipd_connect(d.instance, &c, &err) != 0 ||
		    chipd_submit(c, &req, CD_CALL_MS, &id, &st, &err) != 0)
			_exit(2);
		(void)chipd_unregister(c, "tiny", CHIPD_UNREGISTER_DRAIN, BOUND_MS, &err);
		_exit(0);
	}
	wait_draining(&d, "tiny");
	t0 = rf_now_ns();
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS * 2), 0);
	ms = (rf_now_ns() - t0) / 1000000u;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(ms < 5000, "chipd took %llu ms to stop (grace 300 ms)",
		      (unsigned long long)ms);
}
END_TEST

/* A registered callable's counts (docs/callables.md, "Counters") start at 0 with its
 * registration, count its requests on both chips (a submit refused counts nowhere),
 * and go with it: a later registration of the name starts at 0 again. */
START_TEST(counts_start_at_registration)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *s;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	cd_expect_counts(&d, "tiny", 0, 0, 0, 0, 0);
	/* 5 tokens on each chip, then a submit refused (tokens is 1..64) */
	run_on_both(&d, "tiny", 4);
	ck_assert_ptr_null(rf_submit(&d, "tiny", -1, 65, 1, 0, &err));
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	cd_expect_counts(&d, "tiny", 2, 2, 0, 0, 10);
	ck_assert_int_eq(
	    chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, CD_CALL_MS, &err), 0);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	cd_expect_counts(&d, "tiny", 0, 0, 0, 0, 0);
	s = rf_submit(&d, "tiny", 1, 3, 2, 0, &err);
	ck_assert_msg(s, "%s", err.message);
	expect_tokens(s, 3, 2);
	cd_expect_counts(&d, "tiny", 1, 1, 0, 0, 3);
	cd_expect_counts(&d, "synthetic", 0, 0, 0, 0, 0); /* no other name's */
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* --max-callables counts the callables of the start (3 built-ins) and the
 * registered ones. */
START_TEST(limit_reached)
{
	const char *args[] = {"--max-callables", "4", NULL};
	struct cd d;
	struct chipd_error err;

	cd_start(&d, args, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	ck_assert_int_eq(rf_reg(&d, rf_cl("tc_good"), "tiny_two", &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(err.message, "--max-callables 4"), "%s", err.message);
	ck_assert_int_eq(chipd_unregister(d.conn, "tiny", 0, CD_CALL_MS, &err), 0);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), "tiny_two", &err) == 0, "%s", err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Reads the stream of a request that kills its workers to its end, with no token:
 * worker_lost (a death with no ready chip to move it to), or cancelled (its callable
 * quarantined while it waited to be moved). */
static void expect_killer_end(chipd_stream *s)
{
	enum chipd_code got;

	ck_assert_uint_eq(cd_drain_stream(s, &got, BOUND_MS), 0);
	ck_assert_msg(got == CHIPD_E_WORKER_LOST || got == CHIPD_E_CANCELLED,
		      "stream ended %s, not worker_lost or cancelled", chipd_code_name(got));
	chipd_stream_close(s, CD_CALL_MS);
}

/* Registers tc_good on @d and submits its killing request (seed 999) with all
 * @nchips chips ready, again while the answer is a stream or worker_lost (the worker
 * died before answering), at most @max times, until the quarantine refuses it:
 * draining, then unknown (bad_request) once carried out. Then waits until it is gone. */
static void submit_until_quarantined(struct cd *d, uint32_t nchips, int max)
{
	struct chipd_error err;
	chipd_stream *s;
	uint64_t t0;

	ck_assert_msg(rf_reg(d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	for (int submits = 1;; submits++) {
		for (uint32_t chip = 0; chip < nchips; chip++)
			ck_assert(cd_wait_chip(d, chip, CHIPD_CHIP_READY, 0, BOUND_MS));
		s = rf_submit(d, "tiny", -1, 4, 999, 0, &err);
		ck_assert_int_le(submits, max);
		if (s)
			expect_killer_end(s);
		else if (err.code != CHIPD_E_WORKER_LOST)
			break;
	}
	ck_assert_msg(err.code == CHIPD_E_DRAINING || err.code == CHIPD_E_BAD_REQUEST, "%s",
		      err.message);
	t0 = rf_now_ns();
	while (cd_listed(d, "tiny", NULL) && rf_now_ns() - t0 < BOUND_MS * 1000000ull)
		tu_sleep_ms(20);
	ck_assert(!cd_listed(d, "tiny", NULL));
}

/* A callable in flight on --callable-crash-limit worker deaths is unregistered on
 * every chip, counted, and the chips serve the others. A request that kills its
 * worker before its first token is re-queued on the other chip and kills that one
 * too, so one request may count for two deaths: submit until it is refused. */
START_TEST(quarantined)
{
	const char *args[] = {"--callable-crash-limit", "3", "--crash-limit", "16", NULL};
	struct cd d;
	struct chipd_error err;
	chipd_stream *s;

	cd_start(&d, args, NULL);
	submit_until_quarantined(&d, 2, 4);
	ck_assert_uint_ge(cd_stat(&d, "supervisor", "worker_deaths"), 3);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "callables_quarantined"), 1);
	for (int32_t chip = 0; chip < 2; chip++) { /* both chips serve the built-ins */
		const struct chipd_param p = {"tokens", 3};

		ck_assert(cd_wait_chip(&d, (uint32_t)chip, CHIPD_CHIP_READY, 0, BOUND_MS));
		ck_assert_msg(cd_submit_to(&d, "synthetic", chip, &p, 1, &s, &err) == 0, "%s",
			      err.message);
		cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
	}
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* The request in flight on the death that quarantines its callable is not moved to
 * another chip to kill it too: with 3 chips and a limit of 2, exactly 2 workers die
 * whatever the timing (a submit answered worker_lost died before its answer, and was
 * in flight all the same), and a stream waiting to be moved ends cancelled. */
START_TEST(quarantine_moves_nothing_further)
{
	const char *args[] = {"--chips", "3", "--callable-crash-limit", "2", "--crash-limit", "16",
			      NULL};
	struct cd d;

	cd_start(&d, args, NULL);
	submit_until_quarantined(&d, 3, 3);
	for (uint32_t chip = 0; chip < 3; chip++)
		ck_assert(cd_wait_chip(&d, chip, CHIPD_CHIP_READY, 0, BOUND_MS));
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_deaths"), 2);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "callables_quarantined"), 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* Bad files through the run-time path: each refused with the loader's reason,
 * nothing registered, the node serving the next. */
START_TEST(bad_files_refused)
{
	static const struct {
		const char *variant, *mode, *want;
	} cases[] = {
	    {"tc_abi", NULL, "ABI version 99, this chipd loads 2"},
	    {"tc_no_entry", NULL, "no symbol chipd_callable_v2"},
	    {"tc_init", NULL, "init failed: broken on purpose"},
	    {"tc_table", NULL, "its name is not 1..23 characters"},
	    /* called as the entry, the table would crash the supervisor, the node */
	    {"tc_data", NULL, "chipd_callable_v2 is a data symbol, not a function"},
	    {"tc_good", "0666", "writable by group or others (mode 0666)"},
	    /* its directory, as at start: another user could swap the file */
	    {"open/tc_good", NULL, "open: writable by group or others (mode 0777)"},
	    {"link", NULL, "not a regular file"},
	    {"subdir", NULL, "not a regular file"},
	    {"missing", NULL, "No such file"},
	};
	struct cd d;
	struct chipd_error err;
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "ln -s '%s/tc_good.so' '%s/link.so' && mkdir '%s/subdir.so' '%s/open' && "
		 "cp '%s/tc_good.so' '%s/open/' && chmod 0777 '%s/open'",
		 rf_dir, rf_dir, rf_dir, rf_dir, rf_dir, rf_dir, rf_dir);
	ck_assert_int_eq(system(cmd), 0);
	cd_start(&d, NULL, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].mode) {
			snprintf(cmd, sizeof(cmd), "chmod %s '%s'", cases[i].mode,
				 rf_cl(cases[i].variant));
			ck_assert_int_eq(system(cmd), 0);
		}
		ck_assert_int_eq(rf_reg(&d, rf_cl(cases[i].variant), NULL, &err), -EREMOTEIO);
		ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
		ck_assert_msg(strstr(err.message, cases[i].want), "%s: %s", cases[i].variant,
			      err.message);
	}
	/* a relative path never leaves the client */
	ck_assert_int_eq(chipd_register(d.conn, "tc_good.so", NULL, CD_CALL_MS, NULL, NULL, &err),
			 -EINVAL);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST


/* A callable with its own kernel (tc_own, its sim kernel file beside it): each chip
 * loads the kernel at the registration and streams its reference's tokens, again
 * after a worker's restart (the replay) and after an unregister and a new
 * registration; a kernel missing from the file refuses the registration, naming the
 * chip, kernel and file. */
START_TEST(own_kernels_registered)
{
	const char *env[] = {"TC_OWN_FAULT=missing_kernel", NULL};
	struct chipd_error err;
	struct cd d;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_own"), "tiny_own", &err) == 0, "%s", err.message);
	run_on_both(&d, "tiny_own", 40);
	/* a restarted worker loads it again, its kernels with it */
	restart_chip1_and_run(&d, "tiny_own", 50);
	/* unregistered (its kernels unloaded on each chip) and registered again */
	ck_assert_int_eq(
	    chipd_unregister(d.conn, "tiny_own", CHIPD_UNREGISTER_REFUSE, CD_CALL_MS, &err), 0);
	ck_assert(!cd_listed(&d, "tiny_own", NULL));
	ck_assert_msg(rf_reg(&d, rf_cl("tc_own"), "tiny_own", &err) == 0, "%s", err.message);
	run_on_both(&d, "tiny_own", 60);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);

	cd_start(&d, NULL, env);
	ck_assert_int_eq(rf_reg(&d, rf_cl("tc_own"), "tiny_own", &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert(err.has_chip);
	ck_assert_msg(strstr(err.message, "chip ") &&
			  strstr(err.message, "kernel \"tc_nope\" not found in tc_kernels_sim.so"),
		      "%s", err.message);
	ck_assert(!cd_listed(&d, "tiny_own", NULL));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("register");
	const struct tu_case cases[] = {
	    {"register_run_unregister", register_run_unregister},
	    {"one_chip_refuses_rollback", one_chip_refuses_rollback},
	    {"worker_killed_during_registration", worker_killed_during_registration},
	    {"replayed_after_restart", replayed_after_restart},
	    {"replaced_file_not_replayed", replaced_file_not_replayed},
	    {"replay_failed_chip_gets_no_submit", replay_failed_chip_gets_no_submit},
	    {"replay_failed_chip_gets_no_requeue", replay_failed_chip_gets_no_requeue},
	    {"replay_failed_chip_gets_no_offer", replay_failed_chip_gets_no_offer},
	    {"drain_and_cancel", drain_and_cancel},
	    {"drain_of_a_killed_client_completes", drain_of_a_killed_client_completes},
	    {"stop_during_a_drain_is_not_held_per_chip", stop_during_a_drain_is_not_held_per_chip},
	    {"counts_start_at_registration", counts_start_at_registration},
	    {"limit_reached", limit_reached},
	    {"quarantined", quarantined},
	    {"quarantine_moves_nothing_further", quarantine_moves_nothing_further},
	    {"bad_files_refused", bad_files_refused},
	    {"own_kernels_registered", own_kernels_registered},
	};

	/* each its own directory of callables; a real chipd on a loaded machine */
	tu_add_cases_fixture(s, cases, sizeof(cases) / sizeof(cases[0]), 120, rf_setup,
			     rf_teardown);
	return tu_run(s);
}
