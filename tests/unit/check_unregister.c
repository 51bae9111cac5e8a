/* check_unregister.c - unregistering a callable while a chip's worker lives but does
 * not answer (docs/callables.md, "Registration"; supervisor/chipd/sup_register.c), on
 * a real chipd of two sim chips through libchipd: the unload it did not answer within
 * the forward bound is sent again, by the caller's next ask or, once the caller's
 * connection ended, by the supervisor; only then is the name gone from every chip. And
 * a registration whose load a live chip ended too late leaves the callable on no chip. */
#include "register_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Starts chipd (no heartbeat kill within the test), registers tiny and unregisters it
 * (mode none, 300 ms: -ETIMEDOUT) while chip 1's worker is SIGSTOPped past the
 * router's forward bound (2 s), from here or (@child) from a child process that then
 * exits; continues the worker once the router gave up on it, unless @keep_stopped.
 * Returns its pid. */
static pid_t unregister_past_stopped_chip1(struct cd *d, bool child, bool keep_stopped)
{
	static const char *const args[] = {"--stuck-ms", "60000", "--progress-ms", "60000", NULL};
	struct chipd_error err;
	chipd_conn *c = NULL;
	pid_t w1, pid = 0;
	int status;

	cd_start(d, args, NULL);
	ck_assert_msg(rf_reg(d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	w1 = cd_worker_pid(d, 1);
	tu_sigstop(w1);
	if (child && (pid = fork()) == 0)
		_exit(chipd_connect(d->instance, &c, &err) == 0 &&
			      chipd_unregister(c, "tiny", CHIPD_UNREGISTER_REFUSE, 300, &err) ==
				  -ETIMEDOUT
			  ? 0
			  : 3);
	if (child) {
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	} else {
		ck_assert_int_eq(
		    chipd_unregister(d->conn, "tiny", CHIPD_UNREGISTER_REFUSE, 300, &err),
		    -ETIMEDOUT);
	}
	/* answered once the router gave up on chip 1 */
	ck_assert_msg(chipd_ping(d->conn, BOUND_MS, NULL, &err) == 0, "%s", err.message);
	if (!keep_stopped)
		ck_assert_int_eq(kill(w1, SIGCONT), 0);
	return w1;
}

/* Chip 1 (the same worker) runs tiny no more; chipd stops. */
static void chip1_unloaded(struct cd *d, pid_t w1)
{
	struct chipd_error err;

	ck_assert_int_eq(cd_worker_pid(d, 1), w1);
	ck_assert_msg(!rf_submit(d, "tiny", 1, 2, 1, 0, &err), "chip 1 still runs tiny");
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_int_eq(cd_stop(d, SIGTERM, BOUND_MS), 0);
}

/* Waits until chipd lists tiny no more (the unregister its client left is done). */
static void gone_from_the_list(struct cd *d)
{
	uint64_t until = rf_now_ns() + BOUND_MS * 1000000ull;

	while (cd_listed(d, "tiny", NULL)) {
		ck_assert_msg(rf_now_ns() < until, "tiny is still registered (draining for ever)");
		usleep(50000);
	}
}

/* An unload a live worker does not answer within the forward bound leaves the name
 * on its chip: asked again once it runs, the unregister unloads it there too. */
START_TEST(silent_chip_keeps_its_unload)
{
	struct cd d;
	struct chipd_error err;
	pid_t w1 = unregister_past_stopped_chip1(&d, false, false);

	ck_assert_msg(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, BOUND_MS, &err) ==
			  0,
		      "%s", err.message);
	chip1_unloaded(&d, w1);
}
END_TEST

/* The same, its client gone before it asked again: the supervisor completes it. */
START_TEST(unload_left_by_a_gone_client_completes)
{
	struct cd d;
	pid_t w1 = unregister_past_stopped_chip1(&d, true, false);

	gone_from_the_list(&d);
	chip1_unloaded(&d, w1);
}
END_TEST

/* The same with chip 1 kept stopped for 6 s: the router completes the gone client's
 * unregister on its own, every round, but asks a chip that left a call unanswered
 * again only once it answers a heartbeat, so other clients are served meanwhile; once
 * chip 1 runs again, its unload is sent and the name goes. Before, every round (20 ms)
 * waited the forward bound (2 s) for chip 1: 3 pings were answered in 6 s. */
START_TEST(silent_chip_does_not_stall_a_gone_clients_unload)
{
	struct cd d;
	struct chipd_error err;
	pid_t w1 = unregister_past_stopped_chip1(&d, true, true);
	uint64_t until = rf_now_ns() + 6000 * 1000000ull;
	unsigned pings = 0;

	for (; rf_now_ns() < until; pings++) {
		ck_assert_msg(chipd_ping(d.conn, BOUND_MS, NULL, &err) == 0, "%s", err.message);
		usleep(10000);
	}
	ck_assert_msg(pings >= 30, "%u pings answered in 6 s: the router waited for chip 1",
		      pings);
	ck_assert(cd_listed(&d, "tiny", NULL)); /* chip 1 still has it */
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	gone_from_the_list(&d);
	chip1_unloaded(&d, w1);
}
END_TEST

/* An unregister by another client (its own connection), asking again every 20 ms for
 * 5 s, made by a thread while the test pings. */
struct unreg_call {
	struct cd *d;
	int rc;
	struct chipd_error err;
	atomic_bool done;
};

static void *unregister_thread(void *arg)
{
	struct unreg_call *u = arg;
	chipd_conn *conn = NULL;

	u->rc = chipd_connect(u->d->instance, &conn, &u->err);
	if (u->rc == 0)
		u->rc = chipd_unregister(conn, "tiny", CHIPD_UNREGISTER_REFUSE, 5000, &u->err);
	chipd_close(conn);
	atomic_store_explicit(&u->done, true, memory_order_release);
	return NULL;
}

/* A client's own unregister while chip 1's worker is stopped: each of its asks posts
 * chip 1's unload (once) and reads its answer at the next ask without waiting, so the
 * other clients are served all along: the test's pings are answered while the
 * unregister asks for 5 s, then fails timeout "a chip has not unloaded it" as before.
 * Once chip 1 runs, the next unregister unloads it there. Before, each ask waited the
 * forward bound (2 s) for chip 1 in the router, serving nobody meanwhile. */
START_TEST(clients_unregister_does_not_stall_the_router)
{
	static const char *const args[] = {"--stuck-ms", "60000", "--progress-ms", "60000", NULL};
	struct unreg_call u = {0};
	struct chipd_error err;
	unsigned pings = 0;
	pthread_t th;
	struct cd d;
	pid_t w1;

	cd_start(&d, args, NULL);
	u.d = &d;
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	w1 = cd_worker_pid(&d, 1);
	tu_sigstop(w1);
	ck_assert_int_eq(pthread_create(&th, NULL, unregister_thread, &u), 0);
	while (!atomic_load_explicit(&u.done, memory_order_acquire)) {
		ck_assert_msg(chipd_ping(d.conn, BOUND_MS, NULL, &err) == 0, "%s", err.message);
		pings++;
		usleep(10000);
	}
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(u.rc == -ETIMEDOUT && strstr(u.err.message, "has not unloaded it"),
		      "unregister: %d (%s)", u.rc, u.err.message);
	/* hundreds in 5 s; a router held 2 s per ask answers a few */
	ck_assert_msg(pings >= 40, "%u pings answered: the router waited for chip 1", pings);
	ck_assert(cd_listed(&d, "tiny", NULL)); /* chip 1 still has it */
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	ck_assert_msg(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, BOUND_MS, &err) ==
			  0,
		      "%s", err.message);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	chip1_unloaded(&d, w1);
}
END_TEST

/* The spawner of the chipd @d: its one child (the workers are the spawner's). */
static pid_t spawner_of(const struct cd *d)
{
	char path[64];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)d->pid, (int)d->pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
	fclose(f);
	return (pid_t)pid;
}

/* A registration by another client (its own connection), made by a thread. */
struct reg_call {
	struct cd *d;
	int rc;
	struct chipd_error err;
	atomic_bool done;
};

static void *register_thread(void *arg)
{
	struct reg_call *r = arg;
	chipd_conn *conn = NULL;
	char name[CHIPD_NAME_MAX];
	uint32_t version;

	r->rc = chipd_connect(r->d->instance, &conn, &r->err);
	if (r->rc == 0)
		r->rc = chipd_register(conn, rf_cl("tc_good"), NULL, BOUND_MS, name, &version,
				       &r->err);
	chipd_close(conn);
	atomic_store_explicit(&r->done, true, memory_order_release);
	return NULL;
}

/* A registration while chip 1's restart waits for a stopped spawner (its start holds
 * the registry's lock until the spawner answers or 5 s passed, so that no worker misses
 * a registration): the router puts the registration off instead of waiting for the
 * lock, serving the test's pings meanwhile, and runs it once the start was given up;
 * the worker started afterwards has the callable. Before, the router waited for the
 * lock, serving nobody for up to 5 s. */
START_TEST(register_during_a_stalled_restart_does_not_stall_the_router)
{
	struct reg_call r = {0};
	struct chipd_error err;
	chipd_stream *st;
	unsigned pings = 0;
	pid_t spawner, w1;
	pthread_t th;
	struct cd d;

	cd_start(&d, NULL, NULL);
	r.d = &d;
	spawner = spawner_of(&d);
	w1 = cd_worker_pid(&d, 1);
	tu_sigstop(spawner);
	ck_assert_int_eq(kill(w1, SIGKILL), 0);
	ck_assert(cd_wait_chip(&d, 1, CHIPD_CHIP_BACKOFF, 0, BOUND_MS));
	/* its restart is asked after the backoff (100 ms), and waits for the spawner:
	 * nothing tells it from outside; a registration before it is not held anyway */
	usleep(400 * 1000);
	ck_assert_int_eq(pthread_create(&th, NULL, register_thread, &r), 0);
	while (!atomic_load_explicit(&r.done, memory_order_acquire)) {
		ck_assert_msg(chipd_ping(d.conn, BOUND_MS, NULL, &err) == 0, "%s", err.message);
		pings++;
		usleep(10000);
	}
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(r.rc == 0, "register: %d (%s)", r.rc, r.err.message);
	ck_assert_int_eq(kill(spawner, SIGCONT), 0);
	/* up to 5 s held: hundreds of pings; a router waiting for the lock answers 1 */
	ck_assert_msg(pings >= 40, "%u pings answered: the router waited for the lock", pings);
	ck_assert(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, w1, BOUND_MS));
	st = rf_submit(&d, "tiny", 1, 2, 1, 0, &err);
	ck_assert_msg(st, "chip 1's new worker: %s", err.message);
	cd_expect_stream(st, 2, CHIPD_OK, BOUND_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* An unregister (mode none) given 3 s while chip 1's worker is SIGSTOPped: its first
 * ask is answered after the forward bound (2 s: chip 1 still has it), the next one
 * waits for chip 1 again and has less than a second left. The call fails -ETIMEDOUT,
 * code timeout, saying what it found: a chip has not unloaded it after the 3000 ms
 * given. Before, the ask's own timeout was the message: "no answer within 9xx ms", a
 * time the caller never gave. Once chip 1 runs, the name goes (the ask given up on may
 * have done it). */
START_TEST(later_ask_timing_out_says_what_it_found)
{
	static const char *const args[] = {"--stuck-ms", "60000", "--progress-ms", "60000", NULL};
	struct chipd_error err;
	struct cd d;
	pid_t w1;
	int rc;

	cd_start(&d, args, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	w1 = cd_worker_pid(&d, 1);
	tu_sigstop(w1);
	ck_assert_int_eq(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, 3000, &err),
			 -ETIMEDOUT);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert_msg(strstr(err.message, "a chip has not unloaded it after 3000 ms"), "%s",
		      err.message);
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	/* the ask it gave up on may have unloaded it meanwhile: then the name is gone */
	rc = chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, BOUND_MS, &err);
	ck_assert_msg(rc == 0 || (rc == -EREMOTEIO && err.code == CHIPD_E_NOT_FOUND), "%s",
		      err.message);
	chip1_unloaded(&d, w1);
}
END_TEST

/* An unregister --drain given 500 ms while the supervisor is SIGSTOPped fails
 * -ETIMEDOUT (code timeout) within its timeout and the 2 s the resume of the drain may
 * take past it (chipd.h), generously bounded; the supervisor, continued, never took
 * the drain: the name takes requests as before. Before, the resume waited
 * CHIPD_TIMEOUT_MS (5 s) of its own: the call took 5.5 s. The drain is sent once every
 * thread of the supervisor stopped: kill() returns before its router, running on
 * another CPU, has, and a router that took the drain then left the name draining. */
START_TEST(drain_to_a_stopped_supervisor_keeps_its_timeout)
{
	struct cd d;
	struct chipd_error err;
	chipd_stream *s;
	uint64_t t0, ms;
	int rc;

	cd_start(&d, NULL, NULL);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	tu_sigstop(d.pid);
	t0 = rf_now_ns();
	rc = chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_DRAIN, 500, &err);
	ms = (rf_now_ns() - t0) / 1000000u;
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	ck_assert_int_eq(rc, -ETIMEDOUT);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert_msg(ms < 500 + 2000 + 1500, "unregister given 500 ms returned after %llu ms",
		      (unsigned long long)ms);
	ck_assert_msg((s = rf_submit(&d, "tiny", -1, 2, 1, 0, &err)) != NULL, "%s", err.message);
	cd_expect_stream(s, 2, CHIPD_OK, BOUND_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A registration whose load a live chip does not answer within the forward bound (its
 * callable's init there takes 3.5 s) fails, worker_lost naming the chip, and is
 * rolled back on every chip, that one included: a submit of the name pinned to either
 * chip is refused (bad_request, no such workload), and the same callable registers
 * from another file afterwards. Before, the slow chip finished the load, found its
 * answer unwanted and kept the callable: it ran requests for a name chipd did not
 * list, and refused the name from any other file. */
START_TEST(failed_registration_leaves_no_chip_with_it)
{
	static const char *const args[] = {"--stuck-ms", "60000", "--progress-ms", "60000", NULL};
	char env_count[192];
	/* inits: the probe's 1st, the supervisor's 2nd, chip 0's 3rd, chip 1's 4th */
	const char *env[] = {env_count, "TC_SLOW_INIT_AT=4", NULL};
	struct chipd_error err;
	chipd_stream *s;
	uint64_t until;
	pid_t w1;
	struct cd d;

	snprintf(env_count, sizeof(env_count), "TC_COUNT_FILE=%s/count", rf_dir);
	cd_start(&d, args, env);
	w1 = cd_worker_pid(&d, 1);
	ck_assert_int_ne(rf_reg(&d, rf_cl("tc_good"), NULL, &err), 0);
	ck_assert_msg(err.code == CHIPD_E_WORKER_LOST && err.chip == 1, "%s (chip %d): %s",
		      chipd_code_name(err.code), err.chip, err.message);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	/* chip 1 ends its load 1.5 s after the supervisor gave up on it */
	until = rf_now_ns() + BOUND_MS * 1000000ull;
	for (int chip = 0; chip < 2; chip++) {
		while ((s = rf_submit(&d, "tiny", chip, 2, 1, 0, &err)) != NULL) {
			cd_expect_stream(s, 2, CHIPD_OK, BOUND_MS);
			ck_assert_msg(rf_now_ns() < until, "chip %d still runs tiny", chip);
			usleep(50000);
		}
		ck_assert_msg(err.code == CHIPD_E_BAD_REQUEST, "chip %d: %s: %s", chip,
			      chipd_code_name(err.code), err.message);
	}
	usleep(2500000); /* past the end of chip 1's slow init */
	ck_assert_msg(!(s = rf_submit(&d, "tiny", 1, 2, 1, 0, &err)), "chip 1 runs tiny");
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_int_eq(cd_worker_pid(&d, 1), w1);
	/* the same callable as another file: a chip that kept the first one refuses it */
	ck_assert_int_eq(link(rf_cl("tc_good"), rf_cl("tc_again")), 0);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_again"), NULL, &err) == 0, "%s", err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* An unregister while chip 0's worker, restarted, replays the registry (the entry is
 * still LIVE: it loads the callable, whose init there takes 3.5 s) completes only once
 * that worker is READY and unloaded it too: a submit of the name pinned to chip 0 is
 * refused afterwards. Before, the unregister finished at its second ask while chip 0
 * was still starting (the death had cleared its bit), and the new worker kept the
 * callable chipd no longer listed: tiny ran on chip 0 (a quarantine let a crashing
 * callable kill a third worker so). */
START_TEST(worker_started_during_an_unregister_unloads_it)
{
	static const char *const args[] = {"--stuck-ms", "60000", "--progress-ms", "60000", NULL};
	char env_count[192];
	/* inits: the probe's 1st, the supervisor's 2nd, chip 0's 3rd, chip 1's 4th, chip
	 * 0's replay 5th */
	const char *env[] = {env_count, "TC_SLOW_INIT_AT=5", NULL};
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;
	pid_t w0;

	snprintf(env_count, sizeof(env_count), "TC_COUNT_FILE=%s/count", rf_dir);
	cd_start(&d, args, env);
	ck_assert_msg(rf_reg(&d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	/* its successor is forked and sleeps in the replay's init */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_STARTING, w0, BOUND_MS));
	ck_assert_msg(chipd_unregister(d.conn, "tiny", CHIPD_UNREGISTER_REFUSE, BOUND_MS, &err) ==
			  0,
		      "%s", err.message);
	ck_assert(!cd_listed(&d, "tiny", NULL));
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, BOUND_MS));
	ck_assert_msg(!(s = rf_submit(&d, "tiny", 0, 2, 1, 0, &err)), "chip 0 runs tiny");
	ck_assert_msg(err.code == CHIPD_E_BAD_REQUEST, "%s: %s", chipd_code_name(err.code),
		      err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("unregister");
	const struct tu_case cases[] = {
	    {"silent_chip_keeps_its_unload", silent_chip_keeps_its_unload},
	    {"unload_left_by_a_gone_client_completes", unload_left_by_a_gone_client_completes},
	    {"silent_chip_does_not_stall_a_gone_clients_unload",
	     silent_chip_does_not_stall_a_gone_clients_unload},
	    {"clients_unregister_does_not_stall_the_router",
	     clients_unregister_does_not_stall_the_router},
	    {"drain_to_a_stopped_supervisor_keeps_its_timeout",
	     drain_to_a_stopped_supervisor_keeps_its_timeout},
	    {"later_ask_timing_out_says_what_it_found", later_ask_timing_out_says_what_it_found},
	    {"worker_started_during_an_unregister_unloads_it",
	     worker_started_during_an_unregister_unloads_it},
	    {"failed_registration_leaves_no_chip_with_it",
	     failed_registration_leaves_no_chip_with_it},
	    {"register_during_a_stalled_restart",
	     register_during_a_stalled_restart_does_not_stall_the_router},
	};

	/* each its own directory of callables; a real chipd on a loaded machine */
	tu_add_cases_fixture(s, cases, sizeof(cases) / sizeof(cases[0]), 120, rf_setup,
			     rf_teardown);
	return tu_run(s);
}
