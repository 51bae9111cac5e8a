/* hello.c - the client's side of the handshake (see hello.h, docs/protocol.md §9). */
#include "hello.h"

#include "fdpass.h"
#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A connect refused because the listener's backlog is full is tried again after this
 * long at first, then twice as long each time up to CONNECT_RETRY_MAX_NS. */
#define CONNECT_RETRY_NS     (1u * SHM_NS_PER_MS)
#define CONNECT_RETRY_MAX_NS (16u * SHM_NS_PER_MS)

__attribute__((format(printf, 4, 5))) static int say(char *why, size_t cap, int rc,
						     const char *fmt, ...)
{
	va_list ap;

	if (why && cap) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Waits until @fd is readable or @deadline_ns passes. Returns 0, -ETIMEDOUT or -errno. */
static int wait_readable(int fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = shm_now_ns();
		int ms, rc;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		ms = (int)((deadline_ns - now + SHM_NS_PER_MS - 1) / SHM_NS_PER_MS);
		rc = poll(&p, 1, ms);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

/* Connects @fd (non-blocking) to @sa by @deadline_ns, then makes it blocking again. A
 * unix socket whose backlog is full (a server that stopped accepting) refuses a
 * non-blocking connect with EAGAIN, where a blocking one would wait for an accept
 * with no bound: tried again until the deadline. Returns 0, -ETIMEDOUT or -errno. */
static int connect_by(int fd, const struct sockaddr_un *sa, uint64_t deadline_ns)
{
	uint64_t pause = CONNECT_RETRY_NS;
	int flags;

	while (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0) {
		uint64_t now = shm_now_ns(), left;
		struct timespec ts;

		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		left = deadline_ns - now;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(pause < left ? pause : left);
		nanosleep(&ts, NULL);
		pause = pause * 2 < CONNECT_RETRY_MAX_NS ? pause * 2 : CONNECT_RETRY_MAX_NS;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
		return -errno;
	return 0;
}

/* recv(2) of one answer datagram that may carry the exchange region's fd (into
 * *@xfd, which must be -1): the bytes, or -1 with errno set, as recv answers. */
static ssize_t recv_answer(int fd, void *buf, size_t cap, int *xfd)
{
	int got_fd = -1;
	ssize_t n = fdpass_recv(fd, buf, cap, &got_fd, MSG_DONTWAIT);

	if (n < 0) {
		errno = (int)-n;
		return -1;
	}
	if (got_fd >= 0) {
		if (*xfd >= 0)
			close(*xfd);
		*xfd = got_fd;
	}
	return n;
}

int proto_hello(struct proto_node *n, uint32_t timeout_ms, struct proto_hello *out,
		char *why, size_t cap)
{
	uint64_t deadline = shm_deadline_in((uint64_t)timeout_ms * SHM_NS_PER_MS);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[PROTO_NODE_SOCK_MAX], buf[PROTO_REQ_MAX];
	/* the creator's pid, copied once: the header is shared memory */
	pid_t creator = (pid_t)n->region.hdr->creator_pid;
	struct proto_error pe;
	struct proto_msg *m = NULL;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	size_t len;
	ssize_t got;
	bool reset_seen = false;
	int fd, rc, xfd = -1;
	struct shm_diag diag = {""};

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (proto_node_sock_path(n, path) < 0)
		return say(why, cap, -EBADMSG,
			   "node region %s names no valid handshake socket (an older chipd?)",
			   n->region.name);
	memcpy(sa.sun_path, path, sizeof(path) < sizeof(sa.sun_path) ? sizeof(path)
								      : sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return say(why, cap, -errno, "socket: %s", strerror(errno));
	rc = connect_by(fd, &sa, deadline);
	if (rc == -ETIMEDOUT) {
		say(why, cap, rc,
		    "cannot connect to %s within %u ms: its backlog is full (the supervisor "
		    "accepts no connection)",
		    path, timeout_ms);
		goto err_close;
	}
	if (rc) {
		say(why, cap, rc, "cannot connect to %s: %s", path, strerror(-rc));
		goto err_close;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0) {
		rc = -errno;
		say(why, cap, rc, "%s: SO_PEERCRED: %s", path, strerror(-rc));
		goto err_close;
	}
	if (cr.pid != creator) {
		rc = say(why, cap, -EACCES,
			 "%s is served by pid %d, not by the region's creator pid %d: refusing "
			 "an impostor",
			 path, (int)cr.pid, (int)creator);
		goto err_close;
	}
	out->server_pid = cr.pid;
	m = malloc(sizeof(*m)); /* about 42 KiB: not for an arbitrary caller's stack */
	if (!m) {
		rc = say(why, cap, -ENOMEM, "out of memory");
		goto err_close;
	}
	proto_msg_init(m, PROTO_OP_HELLO);
	rc = proto_encode_request(m, buf, sizeof(buf), &len, &pe);
	if (rc) {
		say(why, cap, rc, "hello: %s", pe.message);
		goto err_close;
	}
	if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
		/* a supervisor that refuses the connection at once (max-clients) answers
		 * and closes before the hello is read: its answer is still there */
		rc = -errno;
		got = recv_answer(fd, buf, sizeof(buf), &xfd);
		if (got < 0 && errno == ECONNRESET) /* the error first, then what is queued */
			got = recv_answer(fd, buf, sizeof(buf), &xfd);
		if (got <= 0) {
			say(why, cap, rc, "%s: send: %s", path, strerror(-rc));
			goto err_close;
		}
	} else {
		got = -1;
	}
	while (got < 0) {
		rc = wait_readable(fd, deadline);
		if (rc == -ETIMEDOUT)
			say(why, cap, rc, "%s: no answer to hello within %u ms", path, timeout_ms);
		else if (rc)
			say(why, cap, rc, "%s: poll: %s", path, strerror(-rc));
		if (rc)
			goto err_close;
		got = recv_answer(fd, buf, sizeof(buf), &xfd);
		/* a supervisor that closed with our hello unread makes the first read fail
		 * ECONNRESET (and clears the error): its answer may still be queued */
		if (got < 0 && errno == ECONNRESET && !reset_seen) {
			reset_seen = true;
			got = recv_answer(fd, buf, sizeof(buf), &xfd);
			if (got < 0 && errno == EAGAIN)
				errno = ECONNRESET;
		}
		if (got < 0 && errno != EAGAIN && errno != EINTR)
			break;
	}
	if (got < 0 && errno == EMFILE) { /* fdpass_recv: the memfd could not be installed */
		rc = say(why, cap, -EMFILE,
			 "%s: out of file descriptors (ulimit -n): the hello answer's "
			 "region could not be received",
			 path);
		goto err_close;
	}
	if (got < 0 && errno == EBADMSG) { /* fdpass_recv: closed what came, read the rest */
		rc = say(why, cap, -EBADMSG,
			 "%s: the hello answer carried descriptors other than the exchange "
			 "region's one memfd (more than one, or not SCM_RIGHTS): refused, and "
			 "closed",
			 path);
		goto err_close;
	}
	if (got <= 0) {
		rc = got == 0 ? -EPIPE : -errno;
		say(why, cap, rc, "%s: the supervisor closed the connection without an answer",
		    path);
		goto err_close;
	}
	if (proto_decode_answer(PROTO_OP_HELLO, buf, (size_t)got, m, &pe)) {
		rc = say(why, cap, -EBADMSG, "%s: malformed hello answer: %s", path, pe.message);
		goto err_close;
	}
	if (!m->ok) {
		out->err = m->err;
		rc = say(why, cap, -EREMOTEIO, "%s", m->err.message);
		goto err_close;
	}
	if (m->pid != cr.pid) {
		rc = say(why, cap, -EBADMSG, "%s: hello answer names pid %lld, the server is %d",
			 path, (long long)m->pid, (int)cr.pid);
		goto err_close;
	}
	if (xfd < 0) {
		rc = say(why, cap, -EPROTO,
			 "%s: the hello answer carries no exchange region (an older chipd?): use "
			 "the libchipd and chipctl of the running chipd",
			 path);
		goto err_close;
	}
	/* the mailbox and the consumer lines: checked (seals, size, header) and mapped */
	rc = proto_node_attach_xchg(n, xfd, &diag);
	xfd = -1; /* taken */
	if (rc && rc != -EALREADY) {
		say(why, cap, rc, "%s", diag.msg);
		goto err_close;
	}
	out->fd = fd;
	out->client = m->client;
	out->max_pending = m->max_pending;
	out->max_rings = m->max_rings;
	free(m);
	return 0;
err_close:
	if (xfd >= 0)
		close(xfd);
	free(m);
	close(fd);
	return rc;
}
