/* check_sup_notify.c - pins what the supervisor tells the world outside: systemd's
 * notify datagrams (path and abstract sockets), the s6 notification fd, and the one
 * line per event of its log on stderr. */
#include "sup_log.h"
#include "sup_notify.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* How long a test waits for a datagram that must have arrived already. */
#define RECV_TIMEOUT_MS 2000
#define LOG_THREADS	4
#define LOG_LINES	500

/* A datagram listener bound to @sa (@len bytes of it). */
static int listener(const struct sockaddr_un *sa, socklen_t len)
{
	struct timeval tv = {RECV_TIMEOUT_MS / 1000, (RECV_TIMEOUT_MS % 1000) * 1000};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (const struct sockaddr *)sa, len), 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	return fd;
}

/* Receives one datagram on @fd and checks that it is exactly @want. */
static void expect_datagram(int fd, const char *want)
{
	char buf[512];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	ck_assert_int_eq(n, (ssize_t)strlen(want));
	ck_assert_int_eq(memcmp(buf, want, (size_t)n), 0);
}

/* The messages chipd sends, in its order. */
static void send_all_and_check(const char *where, int fd)
{
	static const char *const msgs[] = {
	    "READY=1\nSTATUS=serving 2 chips",
	    "WATCHDOG=1",
	    "STOPPING=1",
	};

	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		ck_assert_int_eq(sup_notify(where, msgs[i]), 0);
		expect_datagram(fd, msgs[i]);
	}
}

START_TEST(notify_reaches_a_path_socket)
{
	char dir[] = "/tmp/chipd-test-notify.XXXXXX", path[128];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	strcpy(sa.sun_path, path);
	fd = listener(&sa, sizeof(sa));
	send_all_and_check(path, fd);
	close(fd);
	unlink(path);
	/* nobody listens any more: an error, no signal */
	ck_assert_int_eq(sup_notify(path, "READY=1"), -ENOENT);
	rmdir(dir);
}
END_TEST

START_TEST(notify_reaches_an_abstract_socket)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char name[64], at[80];
	size_t len;
	int fd;

	len = (size_t)snprintf(name, sizeof(name), "chipd-test-%d", (int)getpid());
	snprintf(at, sizeof(at), "@%s", name);
	memcpy(sa.sun_path + 1, name, len);
	/* bound with exactly the name's bytes: a sender that counted one byte more (a NUL)
	 * or the whole sun_path would address another socket and get ECONNREFUSED */
	fd = listener(&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len));
	send_all_and_check(at, fd);
	close(fd);
	ck_assert_int_eq(sup_notify(at, "READY=1"), -ECONNREFUSED);
}
END_TEST

START_TEST(notify_without_a_socket_does_nothing)
{
	char big[200];

	ck_assert_int_eq(sup_notify("", "READY=1"), 0);
	ck_assert_int_eq(sup_notify(NULL, "READY=1"), 0);
	ck_assert_int_eq(sup_notify("/run/x", NULL), -EINVAL);
	ck_assert_int_eq(sup_notify("vsock:2:99", "READY=1"), -EAFNOSUPPORT);
	ck_assert_int_eq(sup_notify("relative/notify", "READY=1"), -EAFNOSUPPORT);
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(sup_notify(big, "READY=1"), -ENAMETOOLONG);
	big[0] = '@';
	ck_assert_int_eq(sup_notify(big, "READY=1"), -ENAMETOOLONG);
}
END_TEST

START_TEST(notify_fd_writes_a_newline_and_closes)
{
	char buf[8];
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(sup_notify_fd(p[1]), 0);
	ck_assert_int_eq(fcntl(p[1], F_GETFD), -1); /* closed */
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 1);
	ck_assert_int_eq(buf[0], '\n');
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 0); /* and nothing more: EOF */
	close(p[0]);
	ck_assert_int_eq(sup_notify_fd(-1), 0);
}
END_TEST

/* ---- the log ---- */

/* Sends stderr into a pipe; returns its read end and keeps the old stderr in @saved. */
static int capture_stderr(int *saved)
{
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	*saved = dup(STDERR_FILENO);
	ck_assert_int_ge(dup2(p[1], STDERR_FILENO), 0);
	close(p[1]);
	return p[0];
}

/* Restores stderr and reads what the pipe holds (all writers are done) into @buf. */
static size_t end_capture(int rd, int saved, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	dup2(saved, STDERR_FILENO);
	close(saved);
	while (n < cap - 1 && (r = read(rd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(rd);
	return n;
}

/* One log line without its newline, as the format promises it. */
static void compile_line(regex_t *re, const char *rest)
{
	char pat[512];

	snprintf(pat, sizeof(pat),
		 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		 "chipd\\[%d\\] %s$",
		 (int)getpid(), rest);
	ck_assert_int_eq(regcomp(re, pat, REG_EXTENDED), 0);
}

static void expect_line(const char *line, const char *rest)
{
	regex_t re;

	compile_line(&re, rest);
	ck_assert_msg(regexec(&re, line, 0, NULL, 0) == 0, "\"%s\" is not \"%s\"", line, rest);
	regfree(&re);
}

/* Cuts @buf into its lines (newlines dropped); returns how many, at most @max. */
static int split_lines(char *buf, char **lines, int max)
{
	int n = 0;

	for (char *p = buf, *nl; n < max && (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		*nl = '\0';
		lines[n++] = p;
	}
	return n;
}

START_TEST(log_line_has_time_pid_level_chip_request)
{
	char buf[4096], year[16];
	char *l[5];
	int saved, rd;
	time_t now = time(NULL);
	struct tm tm;

	sup_log_init(SUP_LOG_DEBUG, "chipd");
	rd = capture_stderr(&saved);
	errno = EAGAIN;
	SUP_INFO(1, 42, "worker ready, pid %d", 77);
	ck_assert_int_eq(errno, EAGAIN); /* logging keeps errno */
	SUP_WARN(-1, 0, "no chip, no request");
	SUP_DEBUG(0, 0, "chip zero is a chip");
	SUP_ERR(-1, 18446744073709551615ull, "a request alone");
	end_capture(rd, saved, buf, sizeof(buf));

	ck_assert_int_eq(split_lines(buf, l, 5), 4);
	expect_line(l[0], "info chip=1 request=42: worker ready, pid 77");
	expect_line(l[1], "warn: no chip, no request");
	expect_line(l[2], "debug chip=0: chip zero is a chip");
	expect_line(l[3], "error request=18446744073709551615: a request alone");
	/* UTC, now: the year matches (a test at New Year's midnight may be unlucky) */
	gmtime_r(&now, &tm);
	snprintf(year, sizeof(year), "%04d-", tm.tm_year + 1900);
	ck_assert_int_eq(strncmp(l[0], year, 5), 0);
}
END_TEST

START_TEST(log_level_filters_and_names)
{
	char buf[1024];
	int saved, rd;
	enum sup_log_level lvl;

	sup_log_init(SUP_LOG_WARN, NULL);
	rd = capture_stderr(&saved);
	SUP_INFO(0, 1, "hidden");
	SUP_DEBUG(0, 1, "hidden");
	SUP_WARN(0, 1, "shown");
	end_capture(rd, saved, buf, sizeof(buf));
	ck_assert_ptr_null(strstr(buf, "hidden"));
	ck_assert_ptr_nonnull(strstr(buf, "warn chip=0 request=1: shown\n"));

	for (int i = SUP_LOG_ERROR; i <= SUP_LOG_DEBUG; i++) {
		ck_assert_int_eq(sup_log_level_parse(sup_log_level_name(i), &lvl), 0);
		ck_assert_int_eq(lvl, i);
	}
	ck_assert_int_eq(sup_log_level_parse("WARN", &lvl), 0);
	ck_assert_int_eq(lvl, SUP_LOG_WARN);
	ck_assert_int_eq(sup_log_level_parse("loud", &lvl), -EINVAL);
	ck_assert_str_eq(sup_log_level_name(99), "?");
}
END_TEST

START_TEST(log_truncates_and_keeps_one_line)
{
	char big[3000], buf[4096];
	char *l[3];
	int saved, rd;

	sup_log_init(SUP_LOG_INFO, "chipd");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	rd = capture_stderr(&saved);
	SUP_INFO(3, 0, "%s", big);
	SUP_INFO(3, 0, "two\nlines\r");
	end_capture(rd, saved, buf, sizeof(buf));

	ck_assert_int_eq(split_lines(buf, l, 3), 2);
	ck_assert_uint_eq(strlen(l[0]) + 1, SUP_LOG_LINE_MAX); /* the newline included */
	expect_line(l[0], "info chip=3: x+\\.\\.\\.");
	expect_line(l[1], "info chip=3: two lines ");
}
END_TEST

/* Writes LOG_LINES lines tagged with its number. */
static void *log_writer(void *arg)
{
	int t = (int)(intptr_t)arg;

	for (int i = 0; i < LOG_LINES; i++)
		SUP_INFO(t, (uint64_t)i + 1, "thread %d line %d %s", t, i,
			 "padding so that lines are long enough to tear if they could");
	return NULL;
}

START_TEST(log_lines_of_threads_never_interleave)
{
	static char buf[LOG_THREADS * LOG_LINES * 200];
	pthread_t th[LOG_THREADS];
	int count[LOG_THREADS] = {0};
	int saved, rd, lines = 0;
	size_t n = 0;
	ssize_t r;
	regex_t re;

	sup_log_init(SUP_LOG_INFO, "chipd");
	compile_line(&re, "info chip=([0-9]) request=[0-9]+: thread [0-9] line [0-9]+ padding so "
			  "that lines are long enough to tear if they could");
	rd = capture_stderr(&saved);
	for (int t = 0; t < LOG_THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, log_writer, (void *)(intptr_t)t), 0);
	/* read while they write: the pipe holds far less than they write */
	while (lines < LOG_THREADS * LOG_LINES && n < sizeof(buf) - 1 &&
	       (r = read(rd, buf + n, sizeof(buf) - 1 - n)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			lines += buf[n + (size_t)i] == '\n';
		n += (size_t)r;
	}
	for (int t = 0; t < LOG_THREADS; t++)
		pthread_join(th[t], NULL);
	end_capture(rd, saved, buf + n, sizeof(buf) - n);

	lines = 0;
	for (char *p = buf, *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		regmatch_t m[2];

		*nl = '\0';
		ck_assert_msg(regexec(&re, p, 2, m, 0) == 0, "torn line: %s", p);
		count[p[m[1].rm_so] - '0']++;
		lines++;
	}
	regfree(&re);
	ck_assert_int_eq(lines, LOG_THREADS * LOG_LINES);
	for (int t = 0; t < LOG_THREADS; t++)
		ck_assert_int_eq(count[t], LOG_LINES);
}
END_TEST

static Suite *sup_notify_suite(void)
{
	Suite *s = suite_create("sup_notify");
	const struct tu_case cases[] = {
	    {"notify_reaches_a_path_socket", notify_reaches_a_path_socket},
	    {"notify_reaches_an_abstract_socket", notify_reaches_an_abstract_socket},
	    {"notify_without_a_socket_does_nothing", notify_without_a_socket_does_nothing},
	    {"notify_fd_writes_a_newline_and_closes", notify_fd_writes_a_newline_and_closes},
	    {"log_line_has_time_pid_level_chip_request", log_line_has_time_pid_level_chip_request},
	    {"log_level_filters_and_names", log_level_filters_and_names},
	    {"log_truncates_and_keeps_one_line", log_truncates_and_keeps_one_line},
	    {"log_lines_of_threads_never_interleave", log_lines_of_threads_never_interleave},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(sup_notify_suite());
}
