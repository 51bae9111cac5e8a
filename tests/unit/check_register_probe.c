/* check_register_probe.c - a registration runs the callable's own code in a probe
 * process before the supervisor loads it (supervisor/chipd/sup_probe.c;
 * docs/callables.md, "Registration"), on a real chipd of two sim chips through
 * libchipd: a library whose constructor calls exit(3), or whose init raises SIGSEGV,
 * is refused naming what happened; one whose init does not return is refused once the
 * probe's bound passed, while the router serves other connections (a ping and a submit
 * of a built-in); a client that gives up during the probe leaves nothing behind. In
 * each case chipd lives on, its workers too, the registry is unchanged, and a good
 * callable registers and runs afterwards. */
#include "chipd_fixture.h"
#include "register_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#define WL_CAP 64u

/* How many workloads @d lists. */
static uint32_t listed(struct cd *d)
{
	struct chipd_workload w[WL_CAP];
	struct chipd_error err;
	uint32_t n = 0;

	ck_assert_msg(chipd_workloads(d->conn, CD_CALL_MS, w, WL_CAP, &n, &err) == 0, "%s",
		      err.message);
	return n;
}

/* A ping answered by chipd @d, and a submit of the built-in synthetic streamed to its
 * end, through connection @c. */
static void serves(struct cd *d, chipd_conn *c)
{
	struct chipd_param p[] = {{"tokens", 3}, {"device_us", 0}};
	struct chipd_error err;
	chipd_stream *s = NULL;
	struct cd through = *d;
	uint32_t pid = 0;

	ck_assert_msg(chipd_ping(c, CD_CALL_MS, &pid, &err) == 0, "ping: %s", err.message);
	ck_assert_int_eq((pid_t)pid, d->pid);
	through.conn = c;
	ck_assert_msg(cd_submit_to(&through, "synthetic", -1, p, 2, &s, &err) == 0, "submit: %s",
		      err.message);
	cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
}

/* chipd and its two workers are the ones started, the registry holds what it held
 * (@before workloads, no "tiny"), it serves, and the good callable registers and runs. */
static void unharmed(struct cd *d, pid_t w0, pid_t w1, uint32_t before)
{
	struct chipd_error err;
	chipd_stream *s;

	ck_assert_int_eq(kill(d->pid, 0), 0);
	ck_assert_int_eq(cd_worker_pid(d, 0), w0);
	ck_assert_int_eq(cd_worker_pid(d, 1), w1);
	ck_assert_uint_eq(listed(d), before);
	ck_assert(!cd_listed(d, "tiny", NULL));
	serves(d, d->conn);
	ck_assert_msg(rf_reg(d, rf_cl("tc_good"), NULL, &err) == 0, "%s", err.message);
	for (int32_t chip = 0; chip < 2; chip++) {
		s = rf_submit(d, "tiny", chip, 2, 4, 0, &err);
		ck_assert_msg(s, "chip %d: %s", chip, err.message);
		cd_expect_stream(s, 2, CHIPD_OK, BOUND_MS);
	}
}

/* Registers @variant, which must be refused bad_request with @what in its message,
 * naming no chip. */
static void refused(struct cd *d, const char *variant, const char *what)
{
	struct chipd_error err;

	ck_assert_int_eq(rf_reg(d, rf_cl(variant), NULL, &err), -EREMOTEIO);
	ck_assert_msg(err.code == CHIPD_E_BAD_REQUEST, "%s: %s", chipd_code_name(err.code),
		      err.message);
	ck_assert(!err.has_chip);
	ck_assert_msg(strstr(err.message, what), "%s", err.message);
	ck_assert_msg(strstr(err.message, variant), "%s", err.message);
}

/* A constructor that calls exit(3) and an init that raises SIGSEGV end the probe, not
 * chipd. Before, the supervisor loaded the file itself: chipd exited with status 3
 * (the register failed with the connection's end), and died of SIGSEGV. */
START_TEST(load_that_exits_or_crashes_is_refused)
{
	struct cd d;
	uint32_t before;
	pid_t w0, w1;

	cd_start(&d, NULL, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	before = listed(&d);
	refused(&d, "tc_exit", "exited with code 3");
	refused(&d, "tc_segv", "died of signal SIGSEGV");
	unharmed(&d, w0, w1, before);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

struct reg_call {
	chipd_conn *conn;
	const char *path;
	int rc;
	struct chipd_error err;
	_Atomic bool done;
};

static void *reg_thread(void *arg)
{
	struct reg_call *r = arg;

	r->rc = chipd_register(r->conn, r->path, NULL, CD_CALL_MS * 2, NULL, NULL, &r->err);
	atomic_store_explicit(&r->done, true, memory_order_release);
	return NULL;
}

/* An init that sleeps 30 s is refused once the probe's bound (3 s) passed, and the
 * router serves another connection's ping and submit while the probe runs. Before, the
 * supervisor's router slept in the init: the other connection's ping timed out. */
START_TEST(load_that_hangs_times_out_while_others_are_served)
{
	struct reg_call r = {.rc = 1};
	struct chipd_error err;
	chipd_conn *other;
	pthread_t th;
	uint32_t before;
	pid_t w0, w1;
	struct cd d;

	cd_start(&d, NULL, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	before = listed(&d);
	ck_assert_msg(chipd_connect(d.instance, &other, &err) == 0, "%s", err.message);
	r.conn = d.conn;
	r.path = rf_cl("tc_hang");
	ck_assert_int_eq(pthread_create(&th, NULL, reg_thread, &r), 0);
	/* the registration takes the probe's whole bound, 3 s: this is within it */
	serves(&d, other);
	ck_assert_msg(!atomic_load_explicit(&r.done, memory_order_acquire),
		      "the registration ended before the other connection was served");
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(r.rc, -EREMOTEIO);
	ck_assert_msg(r.err.code == CHIPD_E_BAD_REQUEST, "%s: %s", chipd_code_name(r.err.code),
		      r.err.message);
	ck_assert_msg(strstr(r.err.message, "load timed out"), "%s", r.err.message);
	chipd_close(other);
	unharmed(&d, w0, w1, before);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

/* A client that gives its registration up while the probe runs: the probe is ended
 * with it, and the next registration is served at once rather than waiting behind it. */
START_TEST(register_given_up_during_its_probe)
{
	struct chipd_error err;
	uint32_t before;
	pid_t w0, w1;
	struct cd d;

	cd_start(&d, NULL, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	before = listed(&d);
	ck_assert_int_eq(chipd_register(d.conn, rf_cl("tc_hang"), NULL, 300, NULL, NULL, &err),
			 -ETIMEDOUT);
	unharmed(&d, w0, w1, before);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("register_probe");
	const struct tu_case cases[] = {
	    {"load_that_exits_or_crashes_is_refused", load_that_exits_or_crashes_is_refused},
	    {"load_that_hangs_times_out_while_others_are_served",
	     load_that_hangs_times_out_while_others_are_served},
	    {"register_given_up_during_its_probe", register_given_up_during_its_probe},
	};

	/* each its own directory of callables; a real chipd on a loaded machine */
	tu_add_cases_fixture(s, cases, sizeof(cases) / sizeof(cases[0]), 120, rf_setup,
			     rf_teardown);
	return tu_run(s);
}
