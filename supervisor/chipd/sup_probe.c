/* sup_probe.c - a callable's file tried in a short-lived process before the
 * supervisor loads it (sup_probe.h).
 *
 * The child is chipd itself (/proc/self/exe: the binary this supervisor runs, even
 * one replaced on disk since), spawned with posix_spawn (the supervisor has threads)
 * into its own process group, every signal at its default and none blocked, its
 * verdict pipe on SUP_PROBE_FD and nothing else of the supervisor's open. It drops
 * core dumps, bounds its CPU time, dies with the supervisor, loads the file and
 * writes one record (smaller than PIPE_BUF: written at once) before it exits with
 * _exit (no destructor of the library runs after the verdict). The supervisor reads
 * the record once the child exited (waitid): a child that ended otherwise, or did
 * not end in time, has no verdict to trust. */
#include "sup_probe.h"

#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROBE_MAGIC 0x70726f62u /* "prob" */

/* What the probe writes on its pipe. */
struct probe_verdict {
	uint32_t magic;
	int32_t rc; /* wl_load_file_as's */
	struct wl_file_id file;
	char msg[512];
};

_Static_assert(sizeof(struct probe_verdict) <= PIPE_BUF, "the verdict is written at once");

/* How long a killed probe may take to be reaped here before it is left to a later
 * look (sup_probe.stray): SIGKILL ends a process at once unless the kernel holds it. */
#define REAP_MS 1000u

int sup_probe_main(int argc, char **argv)
{
	static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	struct probe_verdict v = {.magic = PROBE_MAGIC};
	/* past SUP_PROBE_MS of CPU time the supervisor kills it anyway */
	struct rlimit core = {0, 0}, cpu = {SUP_PROBE_MS / 1000u + 1u, SUP_PROBE_MS / 1000u + 2u};
	ssize_t n;

	if (argc != 4 || fcntl(SUP_PROBE_FD, F_GETFD) < 0) {
		fprintf(stderr, "chipd: %s is chipd's own mode, not an option\n", SUP_PROBE_ARG);
		return 2;
	}
	/* a fault is the probe's death by that signal, the verdict: not caught by a
	 * handler of a sanitizer build, which would exit with its own status instead */
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		(void)sigaction(faults[i], &dfl, NULL);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)setrlimit(RLIMIT_CORE, &core);
	(void)setrlimit(RLIMIT_CPU, &cpu);
	v.rc = wl_load_file_as(argv[2], argv[3][0] ? argv[3] : NULL, NULL, &v.file, v.msg,
			       sizeof(v.msg));
	do
		n = write(SUP_PROBE_FD, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
	_exit(n == (ssize_t)sizeof(v) ? 0 : 1);
}

void sup_probe_clear(struct sup_probe *p)
{
	*p = (struct sup_probe){.fd = -1};
}

bool sup_probe_busy(const struct sup_probe *p)
{
	return p->pid > 0 || p->passed;
}

bool sup_probe_owns(const struct sup_probe *p, uint32_t region, struct mbox_ticket t)
{
	return sup_probe_busy(p) && p->region == region && p->t.slot == t.slot && p->t.gen == t.gen;
}

/* Reaps a killed probe left unreaped, without waiting. */
static void reap_stray(struct sup_probe *p)
{
	siginfo_t si = {0};

	if (p->stray > 0 &&
	    (waitid(P_PID, (id_t)p->stray, &si, WEXITED | WNOHANG) != 0 || si.si_pid == p->stray))
		p->stray = 0;
}

int sup_probe_start(struct sup_probe *p, const char *path, const char *name, uint32_t region,
		    struct mbox_ticket t, char *msg, size_t cap)
{
	char *argv[] = {"chipd", SUP_PROBE_ARG, (char *)path, (char *)(name ? name : ""), NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int pipefd[2], rc;
	pid_t pid;

	reap_stray(p);
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = errno;
		snprintf(msg, cap, "callable %s: cannot start its probe: pipe: %s", path,
			 strerror(rc));
		return -rc;
	}
	sigemptyset(&none);
	sigfillset(&all);
	rc = posix_spawn_file_actions_init(&fa);
	if (rc == 0) {
		/* the read end and everything else of ours is O_CLOEXEC or closed here:
		 * the probe holds its pipe's write end and the standard descriptors */
		rc = posix_spawn_file_actions_adddup2(&fa, pipefd[1], SUP_PROBE_FD);
		if (rc == 0)
			rc = posix_spawn_file_actions_addclosefrom_np(&fa, SUP_PROBE_FD + 1);
		if (rc == 0)
			rc = posix_spawnattr_init(&at);
		if (rc == 0) {
			(void)posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
								POSIX_SPAWN_SETSIGMASK |
								POSIX_SPAWN_SETSIGDEF);
			(void)posix_spawnattr_setpgroup(&at, 0);
			(void)posix_spawnattr_setsigmask(&at, &none);
			(void)posix_spawnattr_setsigdefault(&at, &all);
			rc = posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, environ);
			posix_spawnattr_destroy(&at);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		snprintf(msg, cap, "callable %s: cannot start its probe: %s", path, strerror(rc));
		return -rc;
	}
	p->pid = pid;
	p->fd = pipefd[0];
	p->deadline_ns = shm_now_ns() + (uint64_t)SUP_PROBE_MS * SHM_NS_PER_MS;
	p->region = region;
	p->t = t;
	p->passed = false;
	snprintf(p->path, sizeof(p->path), "%s", path);
	return 0;
}

/* Kills the running probe's process group (what the library forked too) and reaps
 * the probe, waiting at most REAP_MS; one not reaped by then is reaped later. */
static void kill_and_reap(struct sup_probe *p)
{
	struct timespec ms = {0, 1000000L};
	siginfo_t si;

	(void)kill(-p->pid, SIGKILL);
	for (uint32_t waited = 0;; waited++) {
		si.si_pid = 0;
		if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG) != 0 || si.si_pid == p->pid)
			break;
		if (waited == REAP_MS) {
			p->stray = p->pid;
			break;
		}
		nanosleep(&ms, NULL);
	}
	p->pid = 0;
}

static void close_pipe(struct sup_probe *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* The verdict of a probe that exited with status 0. */
static int read_verdict(struct sup_probe *p, char *msg, size_t cap)
{
	struct probe_verdict v;
	ssize_t n;

	do
		n = read(p->fd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(v) || v.magic != PROBE_MAGIC) {
		snprintf(msg, cap, "callable %s: its probe ended without a verdict", p->path);
		return -EREMOTEIO;
	}
	v.msg[sizeof(v.msg) - 1] = '\0';
	if (v.rc != 0) {
		snprintf(msg, cap, "%s", v.msg);
		return -EREMOTEIO;
	}
	p->passed = true;
	p->file = v.file;
	return 0;
}

int sup_probe_poll(struct sup_probe *p, uint64_t now_ns, char *msg, size_t cap)
{
	siginfo_t si = {0};
	bool ended;
	int rc;

	if (p->pid <= 0)
		return p->passed ? 0 : -ECHILD;
	/* WNOWAIT: the group is killed before the probe's pid can be reused */
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
		rc = errno;
		snprintf(msg, cap, "callable %s: its probe: waitid: %s", p->path, strerror(rc));
		kill_and_reap(p);
		close_pipe(p);
		return -rc;
	}
	ended = si.si_pid == p->pid;
	if (!ended && now_ns < p->deadline_ns)
		return -EINPROGRESS;
	kill_and_reap(p); /* whatever the library left running in its group too */
	rc = -EREMOTEIO;
	if (!ended) {
		snprintf(msg, cap,
			 "callable %s: load timed out: its code did not return within %u ms (the "
			 "probe was killed)",
			 p->path, SUP_PROBE_MS);
	} else if (si.si_code == CLD_EXITED && si.si_status == 0) {
		rc = read_verdict(p, msg, cap);
	} else if (si.si_code == CLD_EXITED) {
		snprintf(msg, cap,
			 "callable %s: load exited with code %d: its code ended the probe", p->path,
			 si.si_status);
	} else {
		snprintf(msg, cap,
			 "callable %s: load died of signal SIG%s (%s): its code killed the probe",
			 p->path, sigabbrev_np(si.si_status) ?: "?",
			 sigdescr_np(si.si_status) ?: "unknown signal");
	}
	close_pipe(p);
	return rc;
}

int sup_probe_wait(struct sup_probe *p, char *msg, size_t cap)
{
	struct timespec ms = {0, 1000000L};
	int rc;

	while ((rc = sup_probe_poll(p, shm_now_ns(), msg, cap)) == -EINPROGRESS)
		nanosleep(&ms, NULL);
	return rc;
}

void sup_probe_end(struct sup_probe *p)
{
	pid_t stray = p->stray;

	if (p->pid > 0)
		kill_and_reap(p);
	close_pipe(p);
	stray = p->stray ? p->stray : stray;
	sup_probe_clear(p);
	p->stray = stray;
	reap_stray(p);
}
