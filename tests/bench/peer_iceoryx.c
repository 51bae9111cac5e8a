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

#include "iox_roudi.h"
#include "wait.h"

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
#define GRACE_NS       (2 * NS_PER_SEC)	 /* abort flag -> SIGTERM -> SIGKILL */
#define POLL_NS	       10000000L	 /* caller's wait loops sleep 10 ms */
#define MATCH_POLL_NS  1000000L		 /* client waits for the server: 1 ms */
#define STOP_SEQ       UINT64_MAX
#define SUB_QUEUE      2 /* one message in flight, plus slack */

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

static volatile sig_atomic_t child_stop;

static void sleep_ns(long ns)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};

	nanosleep(&ts, NULL);
}

/* Removes the runtime's IPC socket and lock, which a killed child leaves behind. */
static void runtime_files_clean(const struct iox_run *run)
{
	char path[128];

	for (int role = 0; role < NR_ROLES; role++) {
		snprintf(path, sizeof(path), IOX_TMP_DIR "%s", run->runtime[role]);
		iox_unlink_quiet(path);
		snprintf(path, sizeof(path), IOX_TMP_DIR "%s.lock", run->runtime[role]);
		iox_unlink_quiet(path);
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
	       shm_now_ns() > run->deadline;
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
			return shm_now_ns() > run->deadline ? -ETIMEDOUT : -ECANCELED;
		shm_cpu_relax();
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
		if (shm_now_ns() > run->setup_deadline)
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
	uint64_t start = shm_now_ns();
	struct iox_msg req, resp;
	const void *chunk;
	int rc;

	memset(&req, 0xa5, sizeof(req));
	for (uint64_t i = 0; i < total; i++) {
		if (i == warmup)
			start = shm_now_ns();
		uint64_t t0 = shm_now_ns();

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
			sh->samples[i - warmup] = shm_now_ns() - t0;
	}
	sh->elapsed_ns = shm_now_ns() - start;
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
		now = shm_now_ns();
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
	run->setup_deadline = shm_now_ns() + SETUP_LIMIT_NS;
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
	run.deadline = shm_now_ns() + TOTAL_LIMIT_NS;
	snprintf(run.instance, sizeof(run.instance), "iox%ld", (long)getpid());
	snprintf(run.runtime[CLIENT], sizeof(run.runtime[CLIENT]), "chipbench_iox_cli_%ld",
		 (long)getpid());
	snprintf(run.runtime[SERVER], sizeof(run.runtime[SERVER]), "chipbench_iox_srv_%ld",
		 (long)getpid());

	if (iox_find_on_path(ROUDI_NAME, bin, sizeof(bin))) {
		bench_skip(out, "%s not found on PATH (Debian package iceoryx)", ROUDI_NAME);
		return 0;
	}
	if (iox_roudi_start(&roudi, bin, opts, why, sizeof(why))) {
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
	iox_roudi_stop(&roudi);
	runtime_files_clean(&run);
	return rc;
}
