/* sup_spawner.c - the process that forks workers.
 *
 * The supervisor has threads (router, event loop); a child forked from a threaded
 * process inherits locks held by threads that do not exist in it, and sanitizers
 * refuse to run one. So the supervisor forks, before any thread starts, one
 * single-threaded spawner; every worker start (the first ones and every restart) is
 * a request to it over a SOCK_SEQPACKET pair: "chip N" -> fork -> "pid P". The
 * spawner reaps the workers (it is their parent) and logs how each ended; the
 * supervisor watches them through pidfds, which work for any process.
 *
 * Pid reuse: a worker's pid is free for another process once the spawner reaped it,
 * which the supervisor cannot see happen. So the spawner opens each worker's pidfd
 * before it could reap it and hands it over with the reply (SCM_RIGHTS); the
 * supervisor signals workers only through their pidfds, never by number: a worker
 * whose pidfd it could not take (no descriptor free) it asks the spawner to kill
 * (kill_unreaped), which does so only while it has not reaped it. A worker's process
 * group (whatever it started) is killed by the spawner just before it reaps the worker:
 * until then the zombie leader keeps its pid, and so its group id, from being reused,
 * and no other process can be signalled by that kill(-pid).
 *
 * Lifetimes chain: the spawner dies with the supervisor (PR_SET_PDEATHSIG), each
 * worker with the spawner; the spawner leaves when the supervisor closes its end. A
 * spawner that dies first ends chipd (sup_spawner_lost): its replacement could only be
 * forked from the threaded supervisor, which is what it exists to avoid.
 *
 * A start is asked (sup_spawner_ask) and its reply read when the spawner's socket is
 * readable (sup_spawner_reply): the event loop watches the socket meanwhile and goes
 * on serving; only the start-up, before the loop runs, waits for the reply. A spawner
 * that does not run (SIGSTOP, a frozen cgroup) leaves a start unanswered: it is given
 * up after SPAWN_REPLY_MS, and no other start is asked until its reply came (each
 * request carries a number its reply echoes: sup_spawner_idle), so the spawner forks
 * one late worker rather than one per retry, and no start reads an earlier one's reply
 * as its own. The late worker is killed before the next start of its chip. */
#include "sup.h"
#include "sup_spawner.h"

#include "fdpass.h"
#include "sup_files.h"
#include "sup_log.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_REPLY_MS 5000 /* a fork takes milliseconds; beyond this the spawner is gone */
#define SPAWN_STALE_MS 1000 /* a start given up on: its worker killed, its end awaited */
#define SPAWN_LEAVE_MS 3000 /* at the stop, after its socket closed, before SIGKILL */
#define SPAWN_POLL_MS                                                                              \
	1000 /* how often the spawner reaps while idle (deaths are seen                            \
	      * through pidfds: reaping late only keeps a zombie longer) */

struct spawn_msg {
	uint32_t chip;
	int32_t pid;	/* reply: the worker's pid, or -errno; a kill: the worker to kill */
	uint32_t seq;	/* the start's number (sup.spawn_seq), echoed by the reply */
	uint32_t trace; /* 1: the worker records spans from its start */
	uint32_t kill;	/* 1: not a start but a kill (kill_unreaped), answered by no reply */
};

/* Reaps every worker that ended and says how; kills what each left in its process
 * group first (see the top of the file). */
static void reap(void)
{
	for (;;) {
		siginfo_t si = {0};
		int status;
		pid_t pid;

		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid <= 0)
			break;
		pid = si.si_pid;
		(void)kill(-pid, SIGKILL); /* ESRCH: nothing left in its group */
		if (waitpid(pid, &status, 0) != pid)
			break;
		if (WIFSIGNALED(status))
			SUP_DEBUG(-1, 0, "spawner: worker pid %d killed by signal %d", (int)pid,
				  WTERMSIG(status));
		else
			SUP_DEBUG(-1, 0, "spawner: worker pid %d exited with status %d", (int)pid,
				  WEXITSTATUS(status));
	}
}

/* Kills the worker @pid of chip @chip, whose reply's pidfd the supervisor could not
 * take (it had no descriptor free), with its process group: only while @pid is a child
 * of ours not reaped yet, as only this thread reaps, so that the number (and the
 * group's id, the same) is surely that worker's. One reaped already is left alone: the
 * number may be another process's by now. */
static void kill_unreaped(pid_t pid, uint32_t chip)
{
	siginfo_t si = {0};

	if (pid <= 0 || waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return; /* ECHILD: not ours, or reaped already */
	(void)kill(-pid, SIGKILL);
	SUP_WARN((int)chip, 0,
		 "spawner: killed worker pid %d, whose pidfd the supervisor could not take",
		 (int)pid);
}

/* Sends the reply @m, with @pidfd attached when it is >= 0. Returns 0 or -errno. */
static int reply(int fd, const struct spawn_msg *m, int pidfd)
{
	return fdpass_send(fd, m, sizeof(*m), pidfd, 0) == (ssize_t)sizeof(*m) ? 0 : -EPIPE;
}

static void spawner_main(struct sup *s, int fd, pid_t supervisor)
{
	struct spawn_msg m;
	pid_t self = getpid();

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor)
		_exit(70);
	/* Nothing of the caller's or of the supervisor's readiness is held here (or in
	 * the workers, forked from here): detached, the output is the log file at once */
	if (s->log_fd >= 0) {
		dup2(s->log_fd, STDOUT_FILENO);
		dup2(s->log_fd, STDERR_FILENO);
		close(s->log_fd);
	}
	/* (a readiness descriptor that is stdout, --notify-fd 1, stays: it is not ours
	 * to leave closed, and the workers keep 0-2 open) */
	if (s->daemon_fd > STDERR_FILENO)
		close(s->daemon_fd);
	if (s->notify_fd > STDERR_FILENO)
		close(s->notify_fd);
	if (s->spare_fd >= 0) /* the supervisor's reserve, for its handshake socket */
		close(s->spare_fd);
	setproctitle("spawner (instance %s)", s->cfg.instance);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;
		int pidfd = -1, rc = poll(&pfd, 1, SPAWN_POLL_MS);

		reap();
		if (rc == 0 || (rc < 0 && errno == EINTR))
			continue;
		n = recv(fd, &m, sizeof(m), 0);
		if (n == 0 || (n < 0 && errno != EINTR))
			break; /* the supervisor closed its end, or is gone */
		if (n == (ssize_t)sizeof(m) && m.kill) {
			kill_unreaped(m.pid, m.chip);
			continue;
		}
		if (n != (ssize_t)sizeof(m) || m.chip >= s->cfg.chips) {
			m.pid = -EINVAL;
		} else {
			pid_t pid = fork();

			if (pid == 0)
				sup_worker_child(s, &s->workers[m.chip], self, m.trace != 0);
			if (pid > 0)
				setpgid(pid, pid); /* as the child does: whoever is first */
			m.pid = pid > 0 ? pid : -errno;
			/* not reaped before this (reap() runs on this thread): it is ours */
			pidfd = pid > 0 ? sup_pidfd_open(pid) : -1;
			if (pid > 0 && pidfd < 0) {
				m.pid = pidfd; /* unwatched, it must not run */
				(void)kill(-pid, SIGKILL);
			}
		}
		n = reply(fd, &m, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		if (n != 0)
			break;
	}
	reap();
	_exit(0);
}

int sup_spawner_start(struct sup *s)
{
	pid_t self = getpid(), pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		close(sv[0]);
		spawner_main(s, sv[1], self);
	}
	close(sv[1]);
	s->spawn_fd = sv[0];
	s->spawner_pid = pid;
	/* ours and not reaped (only sup_spawner_stop reaps it): the pid is still its */
	s->spawner_pidfd = sup_pidfd_open(pid);
	if (s->spawner_pidfd < 0) {
		int rc = s->spawner_pidfd;

		sup_spawner_stop(s);
		return rc;
	}
	return 0;
}

/* Reads one reply of the spawner, waiting up to @ms. Returns 1 with *@m and *@fd (the
 * worker's pidfd, or -1), 0 when none came, -EPIPE when the socket failed or the reply
 * is malformed (its worker, if any, killed: it cannot be accounted for), -EMFILE when
 * the reply *@m came but its pidfd found no descriptor free (its worker killed). */
static int read_reply(struct sup *s, struct spawn_msg *m, int *fd, int ms)
{
	struct pollfd pfd = {.fd = s->spawn_fd, .events = POLLIN};
	ssize_t n;

	*fd = -1;
	do
		n = poll(&pfd, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n < 0)
		return -EPIPE;
	memset(m, 0, sizeof(*m));
	n = fdpass_recv(s->spawn_fd, m, sizeof(*m), fd, 0);
	if (n == -EMFILE) {
		/* the reply was read and its pidfd dropped: the supervisor is out of
		 * descriptors. Its worker, that nobody can watch, must not run: killed by
		 * the spawner, its parent, which alone knows whether that pid is still its
		 * worker (not reaped) or may be another process's by now, never by number
		 * from here; the start is answered, and failed */
		if (m->pid > 0) {
			struct spawn_msg k = {
			    .chip = m->chip, .pid = m->pid, .seq = m->seq, .kill = 1};

			/* a spawner gone takes its workers with it (PR_SET_PDEATHSIG) */
			(void)send(s->spawn_fd, &k, sizeof(k), MSG_NOSIGNAL);
		}
		return -EMFILE;
	}
	if (n != (ssize_t)sizeof(*m) || (m->pid > 0) != (*fd >= 0)) {
		if (*fd >= 0) { /* a worker we could not account for: it must not run */
			(void)sup_pidfd_signal(*fd, SIGKILL);
			close(*fd);
		}
		*fd = -1;
		return -EPIPE;
	}
	return 1;
}

/* The worker of a start that was given up on (its reply came too late): another start
 * of its chip follows, so it must not run beside that one. Kills it and waits, within
 * SPAWN_STALE_MS, for it to end, so that it holds its chip no more. */
static void drop_late_worker(const struct spawn_msg *m, int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	SUP_WARN((int)m->chip, 0,
		 "the spawner started pid %d after its start was given up on: SIGKILL",
		 (int)m->pid);
	(void)sup_pidfd_signal(fd, SIGKILL);
	while (poll(&pfd, 1, SPAWN_STALE_MS) < 0 && errno == EINTR)
		;
	close(fd);
}

int sup_spawner_idle(struct sup *s)
{
	while (s->spawn_unanswered) {
		struct spawn_msg m;
		int fd, rc = read_reply(s, &m, &fd, 0);

		if (rc == -EMFILE) { /* a late reply, its worker killed all the same */
			if (m.seq == s->spawn_seq)
				s->spawn_unanswered = false;
			continue;
		}
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -EINPROGRESS;
		if (fd >= 0)
			drop_late_worker(&m, fd);
		if (m.seq == s->spawn_seq)
			s->spawn_unanswered = false;
	}
	return 0;
}

int sup_spawner_ask(struct sup *s, uint32_t chip, bool trace)
{
	struct spawn_msg m = {.chip = chip, .trace = trace};
	int rc;

	if (s->spawn_fd < 0)
		return -EPIPE;
	/* one start at a time: a spawner that does not run is asked once, not once per
	 * retry (each would fork a worker when it runs again), and the reply read by
	 * sup_spawner_reply is this start's */
	rc = sup_spawner_idle(s);
	if (rc)
		return rc;
	m.seq = ++s->spawn_seq;
	if (send(s->spawn_fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -EPIPE;
	s->spawn_unanswered = true;
	s->spawn_awaited = true;
	s->spawn_chip = chip;
	s->spawn_until_ns = shm_now_ns() + (uint64_t)SPAWN_REPLY_MS * SHM_NS_PER_MS;
	return 0;
}

pid_t sup_spawner_reply(struct sup *s, int *pidfd, bool wait)
{
	struct spawn_msg m;
	int fd, rc;

	*pidfd = -1;
	if (!s->spawn_awaited)
		return -EINVAL;
	for (;;) {
		uint64_t now = shm_now_ns();
		int left_ms = now >= s->spawn_until_ns
				  ? 0
				  : (int)((s->spawn_until_ns - now - 1) / SHM_NS_PER_MS + 1);

		rc = read_reply(s, &m, &fd, wait ? left_ms : 0);
		if (rc == 0 && left_ms > 0 && !wait)
			return -EINPROGRESS;
		if (rc == -EMFILE && m.seq != s->spawn_seq)
			continue; /* cannot be, as below */
		if (rc == -EMFILE) /* answered, its worker killed: a later start may follow */
			s->spawn_unanswered = false;
		if (rc <= 0) {
			s->spawn_awaited = false;
			return rc < 0 ? rc : -ETIMEDOUT; /* still unanswered: see above */
		}
		if (m.seq != s->spawn_seq) { /* cannot be (the idle check read them all) */
			if (fd >= 0)
				drop_late_worker(&m, fd);
			continue;
		}
		s->spawn_unanswered = false;
		s->spawn_awaited = false;
		if (m.chip != s->spawn_chip) {
			if (fd >= 0) { /* a worker we could not account for: it must not run */
				(void)sup_pidfd_signal(fd, SIGKILL);
				close(fd);
			}
			return -EPIPE;
		}
		*pidfd = fd;
		return m.pid;
	}
}

int sup_spawner_lost(struct sup *s)
{
	SUP_ERR(-1, 0,
		"the spawner (pid %d) died: no worker can be started any more; stopping "
		"(exit %d: restart chipd)",
		(int)s->spawner_pid, SUP_EXIT_SPAWNER_LOST);
	/* every later start fails at once (no write to a dead peer) until the stop */
	if (s->spawn_fd >= 0)
		shutdown(s->spawn_fd, SHUT_RDWR);
	sup_ask_stop(s, s->cfg.grace_ms);
	return SUP_EXIT_SPAWNER_LOST;
}

void sup_spawner_stop(struct sup *s)
{
	int status;

	if (s->spawn_fd >= 0)
		close(s->spawn_fd);
	s->spawn_fd = -1;
	/* it leaves on EOF, after reaping; a dead one is reaped here. One that does not
	 * run (SIGSTOP, a frozen cgroup) never reads the EOF: past SPAWN_LEAVE_MS it is
	 * killed, so that the stop ends (its workers were shut down already) */
	if (s->spawner_pid > 0 && s->spawner_pidfd >= 0) {
		struct pollfd pfd = {.fd = s->spawner_pidfd, .events = POLLIN};
		int n;

		do
			n = poll(&pfd, 1, SPAWN_LEAVE_MS);
		while (n < 0 && errno == EINTR);
		if (n == 0) {
			SUP_WARN(-1, 0, "the spawner (pid %d) did not leave within %d ms: SIGKILL",
				 (int)s->spawner_pid, SPAWN_LEAVE_MS);
			(void)sup_pidfd_signal(s->spawner_pidfd, SIGKILL);
		}
	}
	if (s->spawner_pid > 0)
		waitpid(s->spawner_pid, &status, 0);
	s->spawner_pid = 0;
	if (s->spawner_pidfd >= 0)
		close(s->spawner_pidfd);
	s->spawner_pidfd = -1;
}
