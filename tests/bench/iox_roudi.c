/* iox_roudi.c - starting, stopping and cleaning up after iceoryx's RouDi daemon for
 * chipbench's iceoryx peer (see iox_roudi.h). */
#include "iox_roudi.h"

#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_SEC     1000000000ull
#define ROUDI_START_NS (5 * NS_PER_SEC)
#define ROUDI_STOP_NS  (5 * NS_PER_SEC)
#define POLL_NS	       10000000L /* wait loops sleep 10 ms */

static void sleep_ns(long ns)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};

	nanosleep(&ts, NULL);
}

/* Private RouDi config: one segment, one mempool that fits a 64-byte payload. */
static const char roudi_config[] = "[general]\n"
				   "version = 1\n"
				   "\n"
				   "[[segment]]\n"
				   "\n"
				   "[[segment.mempool]]\n"
				   "size = 128\n"
				   "count = 256\n";

/* Copies the last non-empty line of @path into @buf without terminal escapes. */
static void iox_last_log_line(const char *path, char *buf, size_t len)
{
	char tail[1024];
	ssize_t got = -1;
	size_t o = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd >= 0) {
		off_t size = lseek(fd, 0, SEEK_END);
		off_t from = size > (off_t)sizeof(tail) - 1 ? size - (off_t)sizeof(tail) + 1 : 0;

		got = pread(fd, tail, sizeof(tail) - 1, from);
		close(fd);
	}
	if (got <= 0)
		return;
	while (got > 0 && (tail[got - 1] == '\n' || tail[got - 1] == ' '))
		got--;
	tail[got] = '\0';
	char *s = strrchr(tail, '\n');

	for (s = s ? s + 1 : tail; *s && o + 1 < len; s++) {
		if (*s == '\033') { /* skip "ESC [ ... letter" */
			while (s[1] &&
			       !((s[1] >= 'A' && s[1] <= 'Z') || (s[1] >= 'a' && s[1] <= 'z')))
				s++;
			if (s[1])
				s++;
			continue;
		}
		if ((unsigned char)*s >= 0x20)
			buf[o++] = *s;
	}
	buf[o] = '\0';
}

/* Looks @prog up in $PATH only (not /usr/bin as a fallback, so that PATH=/nonexistent
 * skips the peer). Returns 0 with the full path in @buf, or -ENOENT. */
int iox_find_on_path(const char *prog, char *buf, size_t len)
{
	const char *path = getenv("PATH");

	while (path && *path) {
		const char *end = strchrnul(path, ':');
		int dlen = (int)(end - path);
		int n = snprintf(buf, len, "%.*s/%s", dlen, dlen ? path : ".", prog);

		if (n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
			return 0;
		path = *end ? end + 1 : end;
	}
	return -ENOENT;
}

/* True when some RouDi answers on its socket (connect() fails on a stale one). */
static bool iox_roudi_alive(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = ROUDI_SOCKET};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

/* True when a RouDi (answering or not) holds the lock that keeps RouDi unique; then
 * ours could not start, and the RouDi files are not ours to clean. */
static bool iox_roudi_lock_held(void)
{
	int fd = open(ROUDI_LOCK, O_RDONLY | O_CLOEXEC);
	bool held;

	if (fd < 0)
		return errno != ENOENT; /* EACCES: somebody else's RouDi */
	held = flock(fd, LOCK_EX | LOCK_NB) != 0;
	if (!held)
		flock(fd, LOCK_UN);
	close(fd);
	return held;
}

/* Best effort: ENOENT is the usual answer, and litter is not worth failing a run. */
void iox_unlink_quiet(const char *path)
{
	(void)unlink(path);
}

/* Removes what a RouDi that did not shut down cleanly (crashed, or killed by us) leaves
 * behind. Only called once our own RouDi has been reaped; iox_roudi_start() made sure no
 * other RouDi held the lock before, so nothing else owns these names. */
void iox_roudi_files_clean(void)
{
	struct group *gr = getgrgid(getegid());
	char seg[300];

	iox_unlink_quiet("/dev/shm/iceoryx_mgmt");
	/* the payload segment is named after RouDi's (writer) group */
	if (gr && gr->gr_name && !strchr(gr->gr_name, '/')) {
		snprintf(seg, sizeof(seg), "/dev/shm/%s", gr->gr_name);
		iox_unlink_quiet(seg);
	}
	iox_unlink_quiet(ROUDI_SOCKET);
	iox_unlink_quiet(IOX_TMP_DIR "roudi.lock");
	iox_unlink_quiet(ROUDI_LOCK);
}

static void iox_roudi_dir_remove(struct iox_roudi *r)
{
	iox_unlink_quiet(r->cfg);
	iox_unlink_quiet(r->log);
	rmdir(r->dir);
}

static int iox_write_file(const char *path, const char *text)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = 0;

	if (fd < 0)
		return -errno;
	ssize_t put = write(fd, text, len);

	if (put < 0)
		rc = -errno;
	else if ((size_t)put != len)
		rc = -EIO;
	if (close(fd) && !rc)
		rc = -errno;
	return rc;
}

/* Lets RouDi (and its 100 ms discovery loop) run anywhere but on the two benchmark CPUs,
 * unless those are all there is; the caller may well be pinned to opts->cpu_client. */
static void iox_roudi_unpin(const struct bench_opts *opts)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t set;

	CPU_ZERO(&set);
	for (long cpu = 0; cpu < ncpu && cpu < CPU_SETSIZE; cpu++)
		if (cpu != opts->cpu_client && cpu != opts->cpu_server)
			CPU_SET(cpu, &set);
	if (CPU_COUNT(&set) && sched_setaffinity(0, sizeof(set), &set) == 0)
		return;
	for (long cpu = 0; cpu < ncpu && cpu < CPU_SETSIZE; cpu++)
		CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void __attribute__((noreturn))
iox_roudi_exec(const struct iox_roudi *r, const char *bin, const struct bench_opts *opts,
	       pid_t parent, int log_fd)
{
	sigset_t none;
	int null_fd = open("/dev/null", O_RDONLY);

	/* dies with the benchmark; SIGTERM lets it clean up after itself */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	iox_roudi_unpin(opts);
	if (null_fd >= 0)
		dup2(null_fd, STDIN_FILENO);
	dup2(log_fd, STDOUT_FILENO);
	dup2(log_fd, STDERR_FILENO);
	close_range(3, ~0u, 0);
	/* -k 2: on shutdown, SIGKILL apps that ignore SIGTERM after 2 s, not 45 s */
	execl(bin, ROUDI_NAME, "-c", r->cfg, "-l", "warning", "-k", "2", (char *)NULL);
	_exit(127);
}

/* Makes sure a RouDi runs: reuses one that already answers, or starts @bin with a
 * private config (off the benchmark CPUs) and waits up to 5 s for its socket. Returns 0,
 * or -errno with a one-line reason in @why (everything it created is gone again then). */
int iox_roudi_start(struct iox_roudi *r, const char *bin, const struct bench_opts *opts, char *why,
		    size_t len)
{
	char line[120];
	uint64_t give_up;
	pid_t parent = getpid();
	int log_fd, status, rc;

	memset(r, 0, sizeof(*r));
	if (iox_roudi_alive())
		return 0;
	if (iox_roudi_lock_held()) {
		snprintf(why, len, "a RouDi holds %s but does not answer on %s", ROUDI_LOCK,
			 ROUDI_SOCKET);
		return -EBUSY;
	}

	snprintf(r->dir, sizeof(r->dir), "/tmp/chipbench-iox-XXXXXX");
	if (!mkdtemp(r->dir)) {
		rc = -errno;
		snprintf(why, len, "mkdtemp %s: %s", r->dir, strerror(-rc));
		return rc;
	}
	snprintf(r->cfg, sizeof(r->cfg), "%s/roudi.toml", r->dir);
	snprintf(r->log, sizeof(r->log), "%s/roudi.log", r->dir);
	rc = iox_write_file(r->cfg, roudi_config);
	if (rc) {
		snprintf(why, len, "writing %s: %s", r->cfg, strerror(-rc));
		goto remove_dir;
	}
	log_fd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		rc = -errno;
		snprintf(why, len, "creating %s: %s", r->log, strerror(-rc));
		goto remove_dir;
	}
	fflush(NULL);
	r->pid = fork();
	if (r->pid == 0)
		iox_roudi_exec(r, bin, opts, parent, log_fd);
	rc = r->pid < 0 ? -errno : 0;
	close(log_fd);
	if (rc) {
		r->pid = 0;
		snprintf(why, len, "fork for %s: %s", ROUDI_NAME, strerror(-rc));
		goto remove_dir;
	}

	give_up = shm_now_ns() + ROUDI_START_NS;
	for (;;) {
		if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
			r->pid = 0;
			iox_last_log_line(r->log, line, sizeof(line));
			snprintf(why, len, "%s exited at start (%s %d)%s%s", ROUDI_NAME,
				 WIFEXITED(status) ? "status" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
				 line[0] ? ": " : "", line);
			rc = -ECHILD;
			/* a plain exit cleaned up, or lost a race for the lock: hands off */
			if (WIFEXITED(status))
				goto remove_dir;
			goto clean_files;
		}
		if (iox_roudi_alive())
			return 0;
		if (shm_now_ns() > give_up)
			break;
		sleep_ns(POLL_NS);
	}
	snprintf(why, len, "%s did not come up within %llu s", ROUDI_NAME,
		 (unsigned long long)(ROUDI_START_NS / NS_PER_SEC));
	rc = -ETIMEDOUT;
	kill(r->pid, SIGKILL);
	waitpid(r->pid, &status, 0);
clean_files:
	r->pid = 0;
	iox_roudi_files_clean();
remove_dir:
	iox_roudi_dir_remove(r);
	return rc;
}

/* Stops the RouDi that iox_roudi_start() started (nothing when it reused another one):
 * SIGTERM, up to 5 s, then SIGKILL; then removes whatever it left behind unless it
 * exited cleanly (iox-roudi 2.0.3 removes its files itself on SIGTERM). */
void iox_roudi_stop(struct iox_roudi *r)
{
	uint64_t give_up = shm_now_ns() + ROUDI_STOP_NS;
	int status;

	if (!r->pid)
		return;
	kill(r->pid, SIGTERM);
	while (waitpid(r->pid, &status, WNOHANG) != r->pid) {
		if (shm_now_ns() > give_up) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &status, 0);
			break;
		}
		sleep_ns(POLL_NS);
	}
	r->pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		iox_roudi_files_clean();
	iox_roudi_dir_remove(r);
}
