/* testutil.h - small helpers shared by the Check suites: shared memory for tests,
 * children that cannot outlive their test, bounded waits for them. */
#ifndef CHIPD_TESTUTIL_H
#define CHIPD_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* One tcase of a suite: its name and its test. */
struct tu_case {
	const char *name;
	const TTest *test;
};

/* Adds one tcase per entry of @cases (@n of them) to @s, each named after its case. */
void tu_add_cases(Suite *s, const struct tu_case *cases, size_t n);
/* The same with each tcase's timeout set to @timeout_s seconds (for tcases that run a
 * real chipd or wait seconds on a loaded machine; the others keep CK_DEFAULT_TIMEOUT). */
void tu_add_cases_timeout(Suite *s, const struct tu_case *cases, size_t n, double timeout_s);
/* The same with @setup and @teardown run around each tcase (a checked fixture: in the
 * tcase's own process). */
void tu_add_cases_fixture(Suite *s, const struct tu_case *cases, size_t n, double timeout_s,
			  SFun setup, SFun teardown);

/* Runs @s in fork mode, prints Check's report, removes /dev/shm/chipd-test.* regions
 * that tests of dead processes left behind (a failed tcase skips its cleanup), and
 * returns the program's exit status (0 all passed, 1 otherwise). */
int tu_run(Suite *s);

/* Exit code of a test program that needs a facility this machine lacks. */
#define TU_SKIP 77

/* An anonymous MAP_SHARED mapping of @size bytes (page aligned, zeroed) that
 * survives fork; aborts the test on failure. Free with tu_unmap. */
void *tu_shared(size_t size);
void tu_unmap(void *p, size_t size);

/* A region name unique to this process and call: "/chipd-test.<pid>.<n>.<tag>". */
void tu_region_name(char *out, size_t cap, const char *tag);

/* Forks a child that runs @fn(@arg) and _exit()s with its return value. The child
 * dies with its parent (PR_SET_PDEATHSIG). Returns the pid. */
pid_t tu_fork(int (*fn)(void *), void *arg);

/* Waits up to @timeout_ms for @pid to exit. Returns its exit status (0-255), 128+sig
 * if it was killed, or -1 on timeout (the child is then killed and reaped). */
int tu_wait(pid_t pid, unsigned timeout_ms);

/* The parent of @pid, from /proc/PID/stat (0 when it cannot be read). */
pid_t tu_parent_pid(pid_t pid);

/* SIGKILLs @pid and reaps it. */
void tu_kill(pid_t pid);

/* Sleeps @ms milliseconds. */
void tu_sleep_ms(unsigned ms);

/* What a test's own process writes to stderr (its in-process threads' log lines),
 * kept from tu_stderr_begin to tu_stderr_end. */
struct tu_capture {
	int saved; /* the stderr to restore */
	FILE *f;   /* where it went meanwhile */
};
void tu_stderr_begin(struct tu_capture *c);
/* Restores stderr; what was written meanwhile (NUL-terminated, at most 64 KiB, the
 * caller frees it). */
char *tu_stderr_end(struct tu_capture *c);

/* Polls @cond(@arg) every millisecond for up to @timeout_ms; true if it held. */
bool tu_eventually(bool (*cond)(void *), void *arg, unsigned timeout_ms);

/* Whether every thread of @pid is stopped (SIGSTOP) within @ms: kill() returns before
 * a thread running on another CPU has stopped, and may still serve a request. */
bool tu_all_threads_stopped(pid_t pid, unsigned ms);

#endif
