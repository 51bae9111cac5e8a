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
 * Lifetimes chain: the spawner dies with the supervisor (PR_SET_PDEATHSIG), each
 * worker with the spawner; the spawner leaves when the supervisor closes its end. */
#include "sup.h"
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
#define SPAWN_POLL_MS                                                                              \
	1000 /* how often the spawner reaps while idle (deaths are seen                            \
	      * through pidfds: reaping late only keeps a zombie longer) */

struct spawn_msg {
	uint32_t chip;
	int32_t pid; /* reply: the worker's pid, or -errno */
};

/* Reaps every worker that ended and says how. */
static void reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (WIFSIGNALED(status))
			SUP_DEBUG(-1, 0, "spawner: worker pid %d killed by signal %d", (int)pid,
				  WTERMSIG(status));
		else
			SUP_DEBUG(-1, 0, "spawner: worker pid %d exited with status %d", (int)pid,
				  WEXITSTATUS(status));
	}
}

static void spawner_main(struct sup *s, int fd, pid_t supervisor)
{
	struct spawn_msg m;
	pid_t self = getpid();

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor)
		_exit(70);
	setproctitle("spawner (instance %s)", s->cfg.instance);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;
		int rc = poll(&pfd, 1, SPAWN_POLL_MS);

		reap();
		if (rc == 0 || (rc < 0 && errno == EINTR))
			continue;
		n = recv(fd, &m, sizeof(m), 0);
		if (n == 0 || (n < 0 && errno != EINTR))
			break; /* the supervisor closed its end, or is gone */
		if (n != (ssize_t)sizeof(m) || m.chip >= s->cfg.chips) {
			m.pid = -EINVAL;
		} else {
			pid_t pid = fork();

			if (pid == 0)
				sup_worker_child(s, &s->workers[m.chip], self);
			if (pid > 0)
				setpgid(pid, pid); /* as the child does: whoever is first */
			m.pid = pid > 0 ? pid : -errno;
		}
		if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
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
	return 0;
}

pid_t sup_spawner_fork(struct sup *s, uint32_t chip)
{
	struct spawn_msg m = {.chip = chip};
	struct pollfd pfd = {.fd = s->spawn_fd, .events = POLLIN};
	ssize_t n;

	if (s->spawn_fd < 0)
		return -EPIPE;
	if (send(s->spawn_fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -EPIPE;
	do
		n = poll(&pfd, 1, SPAWN_REPLY_MS);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		return -ETIMEDOUT;
	n = recv(s->spawn_fd, &m, sizeof(m), 0);
	if (n != (ssize_t)sizeof(m) || m.chip != chip)
		return -EPIPE;
	return m.pid;
}

void sup_spawner_stop(struct sup *s)
{
	int status;

	if (s->spawn_fd >= 0)
		close(s->spawn_fd);
	s->spawn_fd = -1;
	if (s->spawner_pid > 0)
		waitpid(s->spawner_pid, &status, 0); /* it leaves on EOF, after reaping */
	s->spawner_pid = 0;
}
