/* identity_fds.c - chipd out of file descriptors: a limit too low for --max-clients
 * lowers the bound, descriptors taken away while it runs make every connection
 * refused at once until they come back, and a client with no descriptor for its
 * hello's region is told so. Tcases of check_identity. */
#include "fault.h"
#include "identity_fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Connects clients to @d until one is refused (at most @most): how many were served;
 * each is in @c, the refusal in @err. */
static unsigned connect_until_refused(struct cd *d, chipd_conn **c, unsigned most,
				      struct chipd_error *err)
{
	unsigned n = 0;
	int rc;

	while (n < most && (rc = chipd_connect(d->instance, &c[n], err)) == 0)
		ck_assert_int_eq(chipd_ping(c[n++], 5000, NULL, NULL), 0);
	ck_assert_msg(n < most, "%u connections, none refused", n);
	ck_assert_msg(rc == -EREMOTEIO && err->code == CHIPD_E_QUEUE_FULL && err->retryable,
		      "connection %u: %d [%s] %s", n + 1, rc, chipd_code_name(err->code),
		      err->message);
	return n;
}

START_TEST(descriptor_limit_lowers_max_clients)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct rlimit rl = {.rlim_cur = 128, .rlim_max = 128}; /* chipd inherits it */
	struct chipd_error err;
	chipd_conn *c[128];
	const char *at;
	unsigned n;
	struct cd d;

	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ft_start(&d, args); /* its connection is the first */
	n = connect_until_refused(&d, c, 127, &err);
	at = strstr(err.message, "max-clients=");
	ck_assert_msg(at, "%s", err.message);
	ck_assert_uint_eq(strtoul(at + strlen("max-clients="), NULL, 10), n + 1);
	ck_assert_uint_lt(n + 1, 128);
	while (n)
		chipd_close(c[--n]);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* The highest descriptor number @pid has open, and in @free its lowest free one. */
static int highest_fd(pid_t pid, int *free)
{
	bool used[1024] = {false};
	char path[64];
	struct dirent *e;
	int top = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		top = fd > top ? fd : top;
		if (fd < 1024)
			used[fd] = true;
	}
	closedir(dir);
	for (*free = 0; *free < 1024 && used[*free]; (*free)++)
		;
	return top;
}

START_TEST(out_of_descriptors_refuses_connections_at_once)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct rlimit rl, was;
	struct chipd_error err;
	chipd_conn *c[128], *late;
	uint64_t t0, refused;
	unsigned n;
	struct cd d;
	int rc, lowest;

	ft_start(&d, args);
	/* chipd may keep what it has, but open nothing above its highest descriptor now:
	 * the clients fill its free numbers below, then accept fails (EMFILE) */
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &was), 0);
	rl = was;
	rl.rlim_cur = (rlim_t)highest_fd(d.pid, &lowest) + 1;
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	n = connect_until_refused(&d, c, 128, &err);
	ck_assert_msg(strstr(err.message, "out of file descriptors"), "%s", err.message);
	/* that one may have had its socket and no pidfd; with no free number at all
	 * below the limit, accept itself fails: every connection is still refused, each
	 * at once */
	(void)highest_fd(d.pid, &lowest);
	rl.rlim_cur = (rlim_t)lowest;
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(chipd_connect(d.instance, &late, &err), -EREMOTEIO);
		ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
		ck_assert_msg(strstr(err.message, "out of file descriptors"), "%s", err.message);
	}
	refused = cd_stat(&d, "supervisor", "clients_refused");
	ck_assert_uint_eq(refused, 4);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	/* descriptors again: connections are served again */
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &was, NULL), 0);
	for (t0 = ft_now_ms(); (rc = chipd_connect(d.instance, &late, &err)) != 0;) {
		ck_assert_msg(ft_now_ms() - t0 < 2000, "%s", err.message);
		usleep(5000);
	}
	ck_assert_int_eq(chipd_ping(late, 5000, NULL, NULL), 0);
	chipd_close(late);
	while (n)
		chipd_close(c[--n]);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* One descriptor free in chipd: accept takes it and pidfd_open has none. The client
 * is refused at once, and chipd's log says why when it starts refusing and how many
 * it refused when a connection is taken whole again (the pidfd refusal was counted
 * but never logged). */
START_TEST(pidfd_refusal_is_logged)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct tu_capture cap;
	struct rlimit rl, was;
	struct chipd_error err;
	chipd_conn *late;
	struct cd d;
	int lowest;
	char *log;

	tu_stderr_begin(&cap); /* chipd inherits it: its log */
	ft_start(&d, args);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &was), 0);
	(void)highest_fd(d.pid, &lowest);
	rl = was;
	rl.rlim_cur = (rlim_t)lowest + 1;
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	ck_assert_int_eq(chipd_connect(d.instance, &late, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert_msg(strstr(err.message, "out of file descriptors"), "%s", err.message);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &was, NULL), 0);
	ck_assert_int_eq(chipd_connect(d.instance, &late, &err), 0);
	ck_assert_int_eq(chipd_ping(late, 5000, NULL, NULL), 0);
	chipd_close(late);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "clients_refused"), 1);
	ft_stop_clean(&d, NULL, 0);
	log = tu_stderr_end(&cap);
	ck_assert_msg(strstr(log, "handshake socket: pidfd_open: Too many open files: connections "
				  "are refused until descriptors are free"),
		      "%s", log);
	ck_assert_msg(strstr(log, "descriptors free again; connections refused meanwhile: 1"),
		      "%s", log);
	free(log);
}
END_TEST

/* The descriptor limit lowered under chipd's spare descriptor, then raised: meanwhile
 * a new connection waits unanswered (nothing to accept it with), the log says why,
 * established clients are served; once raised, connections are served again, and
 * the spare is still there for the next shortage, whose first connection is refused
 * with the reason at once (before, the spare was closed to no use, could not be taken
 * again, and that connection timed out too). */
START_TEST(limit_under_the_spare_keeps_it)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct tu_capture cap;
	struct rlimit rl, was;
	struct chipd_error err;
	chipd_conn *late;
	struct cd d;
	uint64_t t0;
	int lowest, rc;
	char *log;

	tu_stderr_begin(&cap); /* chipd inherits it: its log */
	ft_start(&d, args);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &was), 0);
	rl = was;
	rl.rlim_cur = 3; /* under every descriptor past stdio: the spare's included */
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	ck_assert_int_eq(chipd_connect_timeout(d.instance, 500, &late, &err), -ETIMEDOUT);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &was, NULL), 0);
	for (t0 = ft_now_ms(); (rc = chipd_connect(d.instance, &late, &err)) != 0;) {
		ck_assert_msg(ft_now_ms() - t0 < 10000, "%s", err.message);
		usleep(5000);
	}
	ck_assert_int_eq(chipd_ping(late, 5000, NULL, NULL), 0);
	chipd_close(late);
	/* no free number below the limit: accept fails, and the spare refuses */
	(void)highest_fd(d.pid, &lowest);
	rl.rlim_cur = (rlim_t)lowest;
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	rc = chipd_connect_timeout(d.instance, 5000, &late, &err);
	ck_assert_msg(rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL &&
			  strstr(err.message, "out of file descriptors"),
		      "%d %s", rc, err.message);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &was, NULL), 0);
	ft_stop_clean(&d, NULL, 0);
	log = tu_stderr_end(&cap);
	ck_assert_msg(strstr(log, "the descriptor limit (3) is below chipd's spare descriptor"),
		      "%s", log);
	free(log);
}
END_TEST

/* A client with one descriptor free: its socket takes it, and the kernel has nowhere
 * to put the hello answer's memfd. */
static int client_out_of_fds(void *arg)
{
	struct cd *d = arg;
	struct chipd_error err;
	struct rlimit rl;
	chipd_conn *c;
	int free_fd = open("/dev/null", O_RDONLY), rc;

	if (free_fd < 0 || close(free_fd) != 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
	    (rl.rlim_cur = (rlim_t)free_fd + 1, setrlimit(RLIMIT_NOFILE, &rl) != 0))
		return 2;
	rc = chipd_connect(d->instance, &c, &err);
	if (rc != -EMFILE || !strstr(err.message, "out of file descriptors")) {
		fprintf(stderr, "client_out_of_fds: %d: %s\n", rc, err.message);
		return 3;
	}
	return 0;
}

START_TEST(client_out_of_descriptors_says_so)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct cd d;
	uint64_t t0;

	ft_start(&d, args);
	ck_assert_int_eq(tu_wait(tu_fork(client_out_of_fds, &d), 10000), 0);
	/* let go: the fixture's connection only (cd_stat_reaches waits for a rise) */
	for (t0 = ft_now_ms(); cd_stat(&d, "supervisor", "clients") != 1;) {
		ck_assert_msg(ft_now_ms() - t0 < 5000, "clients %llu",
			      (unsigned long long)cd_stat(&d, "supervisor", "clients"));
		usleep(5000);
	}
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

void identity_add_fd_tcases(Suite *s, double timeout_s)
{
	const struct tu_case cases[] = {
	    {"descriptor_limit_lowers_max_clients", descriptor_limit_lowers_max_clients},
	    {"out_of_descriptors_refuses_connections_at_once",
	     out_of_descriptors_refuses_connections_at_once},
	    {"pidfd_refusal_is_logged", pidfd_refusal_is_logged},
	    {"limit_under_the_spare_keeps_it", limit_under_the_spare_keeps_it},
	    {"client_out_of_descriptors_says_so", client_out_of_descriptors_says_so},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), timeout_s);
}
