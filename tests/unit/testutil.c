/* testutil.c - helpers for the Check suites (see testutil.h). */
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void *tu_shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_msg(p != MAP_FAILED, "mmap %zu: %d", size, errno);
	return p;
}

void tu_unmap(void *p, size_t size)
{
	munmap(p, size);
}

void tu_region_name(char *out, size_t cap, const char *tag)
{
	static _Atomic unsigned counter;

	snprintf(out, cap, "/chipd-test.%d.%u.%s", (int)getpid(), atomic_fetch_add(&counter, 1),
		 tag);
}

pid_t tu_fork(int (*fn)(void *), void *arg)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	ck_assert_msg(pid >= 0, "fork: %d", errno);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		_exit(fn(arg));
	}
	return pid;
}

void tu_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void tu_stderr_begin(struct tu_capture *c)
{
	c->f = tmpfile();
	ck_assert_ptr_nonnull(c->f);
	fflush(stderr);
	c->saved = dup(STDERR_FILENO);
	ck_assert_int_ge(c->saved, 0);
	ck_assert_int_ge(dup2(fileno(c->f), STDERR_FILENO), 0);
}

char *tu_stderr_end(struct tu_capture *c)
{
	enum { CAP = 1 << 16 };
	char *buf = calloc(1, CAP);
	size_t n;

	ck_assert_ptr_nonnull(buf);
	fflush(stderr);
	ck_assert_int_ge(dup2(c->saved, STDERR_FILENO), 0);
	close(c->saved);
	rewind(c->f);
	n = fread(buf, 1, CAP - 1, c->f);
	buf[n] = '\0';
	fclose(c->f);
	return buf;
}

int tu_wait(pid_t pid, unsigned timeout_ms)
{
	int status;

	for (unsigned waited = 0;; waited++) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (waited >= timeout_ms) {
			tu_kill(pid);
			return -1;
		}
		tu_sleep_ms(1);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

void tu_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

bool tu_eventually(bool (*cond)(void *), void *arg, unsigned timeout_ms)
{
	for (unsigned waited = 0; waited <= timeout_ms; waited++) {
		if (cond(arg))
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

/* The pid of the test process a leftover file in @dir named @name belongs to, or 0:
 * in /dev/shm the regions of tu_region_name (chipd-test.<pid>.*) and the node regions
 * of chipd_fixture's instances (chipd.<uid>.t<pid>-<n>, chipd.<uid>.chipd-test-<pid>-*)
 * and of the fault suites' (chipd.<uid>.f<pid>-*, named after the suite's process);
 * in /tmp those instances' pid files (chipd-test.t<pid>-<n>.pid, chipd-test.f<pid>-*)
 * and hello_fixture's sockets (chipd-test-hx.<pid>.<n>.sock). */
static int leftover_owner(bool shm, const char *name)
{
	unsigned uid;
	int pid;

	if (shm && (sscanf(name, "chipd-test.%d.", &pid) == 1 ||
		    sscanf(name, "chipd.%u.t%d-", &uid, &pid) == 2 ||
		    sscanf(name, "chipd.%u.f%d-", &uid, &pid) == 2 ||
		    sscanf(name, "chipd.%u.chipd-test-%d-", &uid, &pid) == 2))
		return pid;
	if (!shm && (sscanf(name, "chipd-test.t%d-", &pid) == 1 ||
		     sscanf(name, "chipd-test.f%d-", &pid) == 1 ||
		     sscanf(name, "chipd-test-hx.%d.", &pid) == 1))
		return pid;
	return 0;
}

/* Removes what test processes that are gone left in @dir (leftover_owner): a tcase
 * that failed or was killed leaves its chipd's region and pid file behind (the chipd
 * dies with it, by SIGKILL). */
static void remove_leftovers(const char *dir)
{
	bool shm = strcmp(dir, "/dev/shm") == 0;
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int pid = leftover_owner(shm, e->d_name);
		char path[300];

		if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);

	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every tcase; normal by default */
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	remove_leftovers("/dev/shm");
	remove_leftovers("/tmp");
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

void tu_add_cases(Suite *s, const struct tu_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
}

void tu_add_cases_fixture(Suite *s, const struct tu_case *cases, size_t n, double timeout_s,
			  SFun setup, SFun teardown)
{
	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);

		if (setup || teardown)
			tcase_add_checked_fixture(tc, setup, teardown);
		tcase_set_timeout(tc, timeout_s);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
}

void tu_add_cases_timeout(Suite *s, const struct tu_case *cases, size_t n, double timeout_s)
{
	tu_add_cases_fixture(s, cases, n, timeout_s, NULL, NULL);
}

pid_t tu_parent_pid(pid_t pid)
{
	char path[64], buf[512];
	const char *close_paren;
	int ppid = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	close_paren = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool tu_all_threads_stopped(pid_t pid, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	char path[32];

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	for (;;) {
		DIR *dir = opendir(path);
		struct dirent *e;
		bool all = dir != NULL;

		while (dir && (e = readdir(dir))) {
			char stat[320], buf[256], *p;
			int n;
			FILE *f;

			if (e->d_name[0] == '.')
				continue;
			n = snprintf(stat, sizeof(stat), "%s/%.256s/stat", path, e->d_name);
			if (n < 0 || (size_t)n >= sizeof(stat))
				continue;
			f = fopen(stat, "r");
			if (!f)
				continue;
			if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ' &&
			    p[2] != 'T' && p[2] != 't')
				all = false;
			fclose(f);
		}
		if (dir)
			closedir(dir);
		if (all)
			return true;
		if (now_ms() >= end)
			return false;
		usleep(1000);
	}
}
