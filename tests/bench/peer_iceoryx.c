/* peer_iceoryx.c - iceoryx busy-poll ping-pong peer for chipbench (see peer_iceoryx.h).
 *
 * Processes: the caller never creates an iceoryx runtime itself. PoshRuntime is a
 * per-process singleton that aborts the whole process on fatal errors (RouDi gone, name
 * clash) and cannot be re-created against a restarted RouDi, so the caller only starts
 * RouDi (when none runs yet) and forks a client and a server; each calls
 * iox_runtime_init() under its own name. The client writes its samples into a MAP_SHARED
 * region that the caller reads after both are reaped.
 *
 * Children leave through exit(), not _exit(): iceoryx deregisters a runtime from RouDi
 * (and removes /tmp/<runtime>{,.lock}) in C++ static destructors. A runtime that died
 * without deregistering makes iox-roudi 2.0.3 abort on SIGTERM (it asserts when it
 * cannot SIGTERM a registered, dead process) and leave all of its files behind, which
 * is why the caller checks for and removes those files after every RouDi it started.
 */
#include "peer_iceoryx.h"

#include <iceoryx_binding_c/enums.h>
#include <iceoryx_binding_c/log.h>
#include <iceoryx_binding_c/publisher.h>
#include <iceoryx_binding_c/runtime.h>
#include <iceoryx_binding_c/subscriber.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define IOX_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IOX_UNDER_TSAN 1
#endif
#endif

#define MSG	       64
#define NS_PER_SEC     1000000000ull
#define TOTAL_LIMIT_NS (60 * NS_PER_SEC) /* whole measurement, from the call */
#define SETUP_LIMIT_NS (10 * NS_PER_SEC) /* runtime init + matching, after fork */
#define ROUDI_START_NS (5 * NS_PER_SEC)
#define ROUDI_STOP_NS  (5 * NS_PER_SEC)
#define GRACE_NS       (2 * NS_PER_SEC) /* abort flag -> SIGTERM -> SIGKILL */
#define POLL_NS	       10000000L	/* caller's wait loops sleep 10 ms */
#define MATCH_POLL_NS  1000000L		/* client waits for the server: 1 ms */
#define STOP_SEQ       UINT64_MAX
#define SUB_QUEUE      2 /* one message in flight, plus slack */

/* Where iceoryx 2.0 keeps RouDi's and each runtime's files (hard-coded in iceoryx). */
#define IOX_TMP_DIR  "/tmp/"
#define ROUDI_SOCKET IOX_TMP_DIR "roudi"
#define ROUDI_LOCK   IOX_TMP_DIR "iox-unique-roudi.lock"
#define ROUDI_NAME   "iox-roudi"

/* Private RouDi config: one segment, one mempool that fits a 64-byte payload. */
static const char roudi_config[] = "[general]\n"
				   "version = 1\n"
				   "\n"
				   "[[segment]]\n"
				   "\n"
				   "[[segment.mempool]]\n"
				   "size = 128\n"
				   "count = 256\n";

enum role { CLIENT, SERVER, NR_ROLES };

static const char *const role_name[NR_ROLES] = {"client", "server"};

struct iox_msg {
	uint64_t seq;
	uint8_t body[MSG - sizeof(uint64_t)];
};
_Static_assert(sizeof(struct iox_msg) == MSG, "iceoryx peer message must be 64 bytes");

/* Shared (MAP_SHARED) between the caller and both children. */
struct iox_shared {
	_Atomic int abort;	     /* anyone sets it: everybody leaves */
	_Atomic int first_fail;	     /* role that failed first, -1: none */
	_Atomic int up[NR_ROLES];    /* iox_runtime_init() returned */
	int rc[NR_ROLES];	     /* 0 or -errno */
	bool setup_failed[NR_ROLES]; /* failed before the first message */
	char why[NR_ROLES][120];
	uint64_t elapsed_ns;
	uint64_t n;
	uint64_t samples[];
};

struct iox_run {
	const struct bench_opts *opts;
	struct iox_shared *sh;
	size_t sh_len;
	pid_t parent;
	pid_t pid[NR_ROLES];
	char runtime[NR_ROLES][64]; /* iox_runtime_init names, unique per process */
	char instance[32];	    /* service instance, unique per process */
	uint64_t deadline;	    /* CLOCK_MONOTONIC ns: whole measurement */
	uint64_t setup_deadline;
};

struct iox_roudi {
	pid_t pid;    /* 0: none of ours (another RouDi is used) */
	char dir[64]; /* private directory: config and log */
	char cfg[96];
	char log[96];
};

static volatile sig_atomic_t child_stop;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};

	nanosleep(&ts, NULL);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Copies the last non-empty line of @path into @buf without terminal escapes. */
static void last_log_line(const char *path, char *buf, size_t len)
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
static int find_on_path(const char *prog, char *buf, size_t len)
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
static bool roudi_alive(void)
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
static bool roudi_lock_held(void)
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
static void unlink_quiet(const char *path)
{
	(void)unlink(path);
}

/* Removes what a RouDi that did not shut down cleanly (crashed, or killed by us) leaves
 * behind. Only called once our own RouDi has been reaped; roudi_start() made sure no
 * other RouDi held the lock before, so nothing else owns these names. */
static void roudi_files_clean(void)
{
	struct group *gr = getgrgid(getegid());
	char seg[300];

	unlink_quiet("/dev/shm/iceoryx_mgmt");
	/* the payload segment is named after RouDi's (writer) group */
	if (gr && gr->gr_name && !strchr(gr->gr_name, '/')) {
		snprintf(seg, sizeof(seg), "/dev/shm/%s", gr->gr_name);
		unlink_quiet(seg);
	}
	unlink_quiet(ROUDI_SOCKET);
	unlink_quiet(IOX_TMP_DIR "roudi.lock");
	unlink_quiet(ROUDI_LOCK);
}

static void roudi_dir_remove(struct iox_roudi *r)
{
	unlink_quiet(r->cfg);
	unlink_quiet(r->log);
	rmdir(r->dir);
}

static int write_file(const char *path, const char *text)
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
static void roudi_unpin(const struct bench_opts *opts)
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
roudi_exec(const struct iox_roudi *r, const char *bin, const struct bench_opts *opts, pid_t parent,
	   int log_fd)
{
	sigset_t none;
	int null_fd = open("/dev/null", O_RDONLY);

	/* dies with the benchmark; SIGTERM lets it clean up after itself */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	roudi_unpin(opts);
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
static int roudi_start(struct iox_roudi *r, const char *bin, const struct bench_opts *opts,
		       char *why, size_t len)
{
	char line[120];
	uint64_t give_up;
	pid_t parent = getpid();
	int log_fd, status, rc;

	memset(r, 0, sizeof(*r));
	if (roudi_alive())
		return 0;
	if (roudi_lock_held()) {
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
	rc = write_file(r->cfg, roudi_config);
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
		roudi_exec(r, bin, opts, parent, log_fd);
	rc = r->pid < 0 ? -errno : 0;
	close(log_fd);
	if (rc) {
		r->pid = 0;
		snprintf(why, len, "fork for %s: %s", ROUDI_NAME, strerror(-rc));
		goto remove_dir;
	}

	give_up = now_ns() + ROUDI_START_NS;
	for (;;) {
		if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
			r->pid = 0;
			last_log_line(r->log, line, sizeof(line));
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
		if (roudi_alive())
			return 0;
		if (now_ns() > give_up)
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
	roudi_files_clean();
remove_dir:
	roudi_dir_remove(r);
	return rc;
}

/* Stops the RouDi that roudi_start() started (nothing when it reused another one):
 * SIGTERM, up to 5 s, then SIGKILL; then removes whatever it left behind unless it
 * exited cleanly (iox-roudi 2.0.3 removes its files itself on SIGTERM). */
static void roudi_stop(struct iox_roudi *r)
{
	uint64_t give_up = now_ns() + ROUDI_STOP_NS;
	int status;

	if (!r->pid)
		return;
	kill(r->pid, SIGTERM);
	while (waitpid(r->pid, &status, WNOHANG) != r->pid) {
		if (now_ns() > give_up) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &status, 0);
			break;
		}
		sleep_ns(POLL_NS);
	}
	r->pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		roudi_files_clean();
	roudi_dir_remove(r);
}

/* Removes the runtime's IPC socket and lock, which a killed child leaves behind. */
static void runtime_files_clean(const struct iox_run *run)
{
	char path[128];

	for (int role = 0; role < NR_ROLES; role++) {
		snprintf(path, sizeof(path), IOX_TMP_DIR "%s", run->runtime[role]);
		unlink_quiet(path);
		snprintf(path, sizeof(path), IOX_TMP_DIR "%s.lock", run->runtime[role]);
		unlink_quiet(path);
	}
}

/* ---- children ---- */

static void child_on_term(int sig)
{
	(void)sig;
	child_stop = 1;
}

static bool child_should_stop(const struct iox_run *run)
{
	return child_stop || atomic_load_explicit(&run->sh->abort, memory_order_relaxed) ||
	       now_ns() > run->deadline;
}

/* Records why @role failed and tells everybody to leave. The first failure wins
 * first_fail, except -ECANCELED: that one only follows somebody else's abort. Returns
 * @err. */
static int __attribute__((format(printf, 5, 6)))
child_fail(struct iox_run *run, enum role role, bool setup, int err, const char *fmt, ...)
{
	struct iox_shared *sh = run->sh;
	int none = -1;
	va_list ap;

	sh->rc[role] = err;
	sh->setup_failed[role] = setup;
	va_start(ap, fmt);
	vsnprintf(sh->why[role], sizeof(sh->why[role]), fmt, ap);
	va_end(ap);
	if (err != -ECANCELED)
		atomic_compare_exchange_strong(&sh->first_fail, &none, (int)role);
	atomic_store(&sh->abort, 1);
	return err;
}

static iox_pub_t pub_open(iox_pub_storage_t *st, const struct iox_run *run, const char *event)
{
	iox_pub_options_t o;

	iox_pub_options_init(&o);
	o.historyCapacity = 0;
	o.offerOnCreate = true;
	return iox_pub_init(st, "chipbench", run->instance, event, &o);
}

static iox_sub_t sub_open(iox_sub_storage_t *st, const struct iox_run *run, const char *event)
{
	iox_sub_options_t o;

	iox_sub_options_init(&o);
	o.queueCapacity = SUB_QUEUE;
	o.historyRequest = 0;
	o.subscribeOnCreate = true;
	o.requirePublisherHistorySupport = false;
	return iox_sub_init(st, "chipbench", run->instance, event, &o);
}

/* Loans a 64-byte chunk, copies @msg into it and publishes it. */
static int msg_send(iox_pub_t pub, const struct iox_msg *msg)
{
	void *chunk = NULL;
	enum iox_AllocationResult res = iox_pub_loan_chunk(pub, &chunk, MSG);

	if (res != AllocationResult_SUCCESS)
		return -ENOMEM;
	memcpy(chunk, msg, MSG);
	iox_pub_publish_chunk(pub, chunk);
	return 0;
}

/* Busy-polls iox_sub_take_chunk() until a chunk arrives; gives up when told to stop. */
static int msg_take(const struct iox_run *run, iox_sub_t sub, const void **chunk)
{
	for (unsigned i = 1;; i++) {
		enum iox_ChunkReceiveResult res = iox_sub_take_chunk(sub, chunk);

		if (res == ChunkReceiveResult_SUCCESS)
			return 0;
		if (res != ChunkReceiveResult_NO_CHUNK_AVAILABLE)
			return -EIO;
		if ((i & 1023) == 0 && child_should_stop(run))
			return now_ns() > run->deadline ? -ETIMEDOUT : -ECANCELED;
		cpu_relax();
	}
}

/* Waits (sleeping, bounded by the setup deadline) until the server's subscriber hangs
 * on our publisher and our subscriber on the server's publisher. */
static int client_wait_match(struct iox_run *run, iox_pub_t pub, iox_sub_t sub)
{
	while (!iox_pub_has_subscribers(pub) ||
	       iox_sub_get_subscription_state(sub) != SubscribeState_SUBSCRIBED) {
		if (child_should_stop(run))
			return child_fail(run, CLIENT, true, -ECANCELED,
					  "client: aborted while waiting for the server");
		if (now_ns() > run->setup_deadline)
			return child_fail(run, CLIENT, true, -ETIMEDOUT,
					  "client: server ports not matched within %llu s",
					  (unsigned long long)(SETUP_LIMIT_NS / NS_PER_SEC));
		sleep_ns(MATCH_POLL_NS);
	}
	return 0;
}

static int client_measure(struct iox_run *run, iox_pub_t pub, iox_sub_t sub)
{
	struct iox_shared *sh = run->sh;
	uint64_t warmup = run->opts->warmup, total = warmup + run->opts->iters;
	uint64_t start = now_ns();
	struct iox_msg req, resp;
	const void *chunk;
	int rc;

	memset(&req, 0xa5, sizeof(req));
	for (uint64_t i = 0; i < total; i++) {
		if (i == warmup)
			start = now_ns();
		uint64_t t0 = now_ns();

		req.seq = i;
		rc = msg_send(pub, &req);
		if (rc)
			return child_fail(
			    run, CLIENT, i == 0, rc,
			    "client: iox_pub_loan_chunk(%d) failed at round trip %llu", MSG,
			    (unsigned long long)i);
		rc = msg_take(run, sub, &chunk);
		if (rc)
			return child_fail(run, CLIENT, false, rc,
					  "client: no reply to round trip %llu (%s)",
					  (unsigned long long)i, strerror(-rc));
		memcpy(&resp, chunk, MSG);
		iox_sub_release_chunk(sub, chunk);
		if (resp.seq != i)
			return child_fail(run, CLIENT, false, -EPROTO,
					  "client: reply %llu to request %llu",
					  (unsigned long long)resp.seq, (unsigned long long)i);
		if (i >= warmup)
			sh->samples[i - warmup] = now_ns() - t0;
	}
	sh->elapsed_ns = now_ns() - start;
	sh->n = run->opts->iters;
	return 0;
}

static int client_run(struct iox_run *run)
{
	iox_pub_storage_t pub_st;
	iox_sub_storage_t sub_st;
	struct iox_msg stop = {.seq = STOP_SEQ};
	iox_pub_t pub;
	iox_sub_t sub;
	int rc;

	iox_runtime_init(run->runtime[CLIENT]);
	atomic_store(&run->sh->up[CLIENT], 1);
	pub = pub_open(&pub_st, run, "ping");
	if (!pub)
		return child_fail(run, CLIENT, true, -EINVAL, "client: iox_pub_init failed");
	sub = sub_open(&sub_st, run, "pong");
	if (!sub) {
		rc = child_fail(run, CLIENT, true, -EINVAL, "client: iox_sub_init failed");
		goto deinit_pub;
	}
	rc = client_wait_match(run, pub, sub);
	if (!rc)
		rc = client_measure(run, pub, sub);
	msg_send(pub, &stop); /* best effort: the server also watches the abort flag */
	iox_sub_deinit(sub);
deinit_pub:
	iox_pub_deinit(pub);
	return rc;
}

static int server_run(struct iox_run *run)
{
	iox_pub_storage_t pub_st;
	iox_sub_storage_t sub_st;
	const void *chunk;
	iox_pub_t pub;
	iox_sub_t sub;
	int rc = 0;

	iox_runtime_init(run->runtime[SERVER]);
	atomic_store(&run->sh->up[SERVER], 1);
	sub = sub_open(&sub_st, run, "ping");
	if (!sub)
		return child_fail(run, SERVER, true, -EINVAL, "server: iox_sub_init failed");
	pub = pub_open(&pub_st, run, "pong");
	if (!pub) {
		rc = child_fail(run, SERVER, true, -EINVAL, "server: iox_pub_init failed");
		goto deinit_sub;
	}
	for (uint64_t n = 0;; n++) {
		const struct iox_msg *req;

		rc = msg_take(run, sub, &chunk);
		if (rc == -ECANCELED) {
			rc = 0; /* the client is gone, or failed and tells why */
			break;
		}
		if (rc) {
			child_fail(run, SERVER, n == 0, rc, "server: no request %llu (%s)",
				   (unsigned long long)n, strerror(-rc));
			break;
		}
		req = chunk;
		if (req->seq == STOP_SEQ) {
			iox_sub_release_chunk(sub, chunk);
			break;
		}
		rc = msg_send(pub, req);
		iox_sub_release_chunk(sub, chunk);
		if (rc) {
			child_fail(run, SERVER, n == 0, rc, "server: iox_pub_loan_chunk(%d) failed",
				   MSG);
			break;
		}
	}
	iox_pub_deinit(pub);
deinit_sub:
	iox_sub_deinit(sub);
	return rc;
}

static void __attribute__((noreturn)) child_main(struct iox_run *run, enum role role)
{
	struct sigaction sa = {.sa_handler = child_on_term};
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != run->parent)
		_exit(111);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	bench_pin(role == CLIENT ? run->opts->cpu_client : run->opts->cpu_server);
	iox_set_loglevel(Iceoryx_LogLevel_Error);
	rc = role == CLIENT ? client_run(run) : server_run(run);
	fflush(NULL);
	/* exit(), not _exit(): iceoryx's static destructors deregister from RouDi */
	exit(rc ? 1 : 0);
}

/* ---- the caller's side ---- */

/* How the children ended, as children_wait() saw it. */
struct iox_reap {
	int status[NR_ROLES];	  /* waitpid() status; -1: never started */
	bool signalled[NR_ROLES]; /* we sent it SIGTERM or SIGKILL */
	bool timed_out;		  /* the 60 s deadline passed */
	bool setup_stuck;	  /* a runtime was not up by the setup deadline */
};

static void signal_alive(const struct iox_run *run, const bool *reaped, int sig,
			 struct iox_reap *rp)
{
	for (int role = 0; role < NR_ROLES; role++) {
		if (run->pid[role] > 0 && !reaped[role]) {
			kill(run->pid[role], sig);
			rp->signalled[role] = true;
		}
	}
}

/* Waits for both children, bounded: once something failed, the client is done or a
 * deadline passed, raises the abort flag, then SIGTERM, then SIGKILL, GRACE_NS apart.
 * A SIGKILLed iceoryx process can die holding a mutex in shared memory (they are not
 * robust in 2.0), which can leave its partner stuck for good: hence the SIGKILL. */
static void children_wait(struct iox_run *run, struct iox_reap *rp)
{
	bool reaped[NR_ROLES];
	uint64_t next = 0;
	int stage = 0; /* 0 running, 1 abort flag raised, 2 SIGTERM sent */

	memset(rp, 0, sizeof(*rp));
	for (int role = 0; role < NR_ROLES; role++) {
		reaped[role] = run->pid[role] <= 0;
		rp->status[role] = -1;
	}
	for (;;) {
		bool all = true, failed = false;
		uint64_t now;

		for (int role = 0; role < NR_ROLES; role++) {
			if (!reaped[role] &&
			    waitpid(run->pid[role], &rp->status[role], WNOHANG) == run->pid[role])
				reaped[role] = true;
			if (!reaped[role])
				all = false;
			else if (rp->status[role] != 0)
				failed = true;
		}
		if (all)
			return;
		now = now_ns();
		if (stage == 0) {
			if (now > run->deadline)
				rp->timed_out = true;
			else if (now > run->setup_deadline && !(atomic_load(&run->sh->up[CLIENT]) &&
								atomic_load(&run->sh->up[SERVER])))
				rp->setup_stuck = true;
			/* a finished client leaves the server nothing to answer */
			if (failed || rp->timed_out || rp->setup_stuck || reaped[CLIENT] ||
			    atomic_load(&run->sh->abort) || run->pid[SERVER] <= 0) {
				atomic_store(&run->sh->abort, 1);
				stage = 1;
				next = now + GRACE_NS;
			}
		} else if (now > next && stage == 1) {
			signal_alive(run, reaped, SIGTERM, rp);
			stage = 2;
			next = now + GRACE_NS;
		} else if (now > next) {
			signal_alive(run, reaped, SIGKILL, rp);
			for (int role = 0; role < NR_ROLES; role++)
				if (!reaped[role])
					waitpid(run->pid[role], &rp->status[role], 0);
			return;
		}
		sleep_ns(POLL_NS);
	}
}

static void describe_status(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "not started");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d, %s", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

/* Turns what the children left into *out. Returns 0 (measured, or skipped for a
 * missing piece) or -errno (the measurement failed). */
static int children_verdict(struct iox_run *run, const struct iox_reap *rp,
			    struct bench_result *out)
{
	struct iox_shared *sh = run->sh;
	int first = atomic_load(&sh->first_fail);
	char how[80];

	if (rp->timed_out) {
		bench_skip(out, "aborted: no result within %llu s",
			   (unsigned long long)(TOTAL_LIMIT_NS / NS_PER_SEC));
		return -ETIMEDOUT;
	}
	for (int role = 0; role < NR_ROLES; role++) {
		if (atomic_load(&sh->up[role]))
			continue;
		if (rp->setup_stuck) {
			bench_skip(out, "iox_runtime_init did not return within %llu s in the %s",
				   (unsigned long long)(SETUP_LIMIT_NS / NS_PER_SEC),
				   role_name[role]);
			return 0;
		}
		if (rp->status[role] != 0 && first < 0 && !rp->signalled[role]) {
			describe_status(rp->status[role], how, sizeof(how));
			bench_skip(out, "iox_runtime_init failed in the %s (%s)", role_name[role],
				   how);
			return 0;
		}
	}
	if (first >= 0) {
		bench_skip(out, "%s", sh->why[first]);
		return sh->setup_failed[first] ? 0 : (sh->rc[first] ? sh->rc[first] : -EIO);
	}
	/* nobody said why: a crash explains more than a failed exit, and either more
	 * than a child we had to stop ourselves afterwards */
	for (int pass = 0; pass < 3; pass++) {
		for (int role = 0; role < NR_ROLES; role++) {
			int st = rp->status[role];

			if (st == 0 || (pass < 2 && rp->signalled[role]) ||
			    (pass == 0 && !(st > 0 && WIFSIGNALED(st))))
				continue;
			describe_status(rp->status[role], how, sizeof(how));
			bench_skip(out, "%s process failed (%s)%s", role_name[role], how,
				   rp->signalled[role] ? " after the abort" : "");
			return -EIO;
		}
	}
	if (sh->n != run->opts->iters) {
		bench_skip(out, "client measured %llu of %u round trips", (unsigned long long)sh->n,
			   run->opts->iters);
		return -EIO;
	}
	bench_fill(out, sh->samples, sh->n, sh->elapsed_ns);
	return 0;
}

/* Forks server and client, waits for both (bounded) and fills *out. */
static int children_run(struct iox_run *run, struct bench_result *out)
{
	struct iox_reap reap;
	int rc = 0;

	fflush(NULL);
	run->parent = getpid();
	run->setup_deadline = now_ns() + SETUP_LIMIT_NS;
	for (int role = SERVER; role >= CLIENT; role--) {
		pid_t pid = fork();

		if (pid == 0)
			child_main(run, (enum role)role);
		if (pid < 0) {
			rc = -errno;
			break;
		}
		run->pid[role] = pid;
	}
	children_wait(run, &reap);
	if (rc) {
		bench_skip(out, "fork: %s", strerror(-rc));
		return rc;
	}
	return children_verdict(run, &reap, out);
}

int peer_iceoryx_pingpong(const struct bench_opts *opts, struct bench_result *out)
{
	struct iox_roudi roudi;
	struct iox_run run = {.opts = opts};
	char bin[PATH_MAX], why[160];
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "iceoryx_busy");
	snprintf(out->label, sizeof(out->label), "iceoryx pub/sub busy-poll ping-pong (64 B)");
	if (!opts->iters) {
		bench_skip(out, "no round trips requested");
		return -EINVAL;
	}
#ifdef IOX_UNDER_TSAN
	/* TSan rejects the process-shared mutexes iceoryx keeps in shared memory (EINVAL),
	 * and iceoryx then asserts: there is nothing to measure */
	bench_skip(out, "not under ThreadSanitizer (iceoryx's shared-memory mutexes)");
	return 0;
#endif
	run.deadline = now_ns() + TOTAL_LIMIT_NS;
	snprintf(run.instance, sizeof(run.instance), "iox%ld", (long)getpid());
	snprintf(run.runtime[CLIENT], sizeof(run.runtime[CLIENT]), "chipbench_iox_cli_%ld",
		 (long)getpid());
	snprintf(run.runtime[SERVER], sizeof(run.runtime[SERVER]), "chipbench_iox_srv_%ld",
		 (long)getpid());

	if (find_on_path(ROUDI_NAME, bin, sizeof(bin))) {
		bench_skip(out, "%s not found on PATH (Debian package iceoryx)", ROUDI_NAME);
		return 0;
	}
	if (roudi_start(&roudi, bin, opts, why, sizeof(why))) {
		bench_skip(out, "%s", why);
		return 0;
	}

	run.sh_len = sizeof(*run.sh) + (size_t)opts->iters * sizeof(uint64_t);
	run.sh = mmap(NULL, run.sh_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (run.sh == MAP_FAILED) {
		rc = -errno;
		bench_skip(out, "mmap %zu bytes for samples: %s", run.sh_len, strerror(-rc));
		goto stop_roudi;
	}
	atomic_store(&run.sh->first_fail, -1);

	rc = children_run(&run, out);

	munmap(run.sh, run.sh_len);
stop_roudi:
	roudi_stop(&roudi);
	runtime_files_clean(&run);
	return rc;
}
