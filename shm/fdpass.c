/* fdpass.c - a datagram with one descriptor attached (see fdpass.h). */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for a few descriptors: a peer that sends more than one must not leak the
 * others into this process unseen (MSG_CTRUNC would drop them without closing). */
#define FDPASS_MAX 4

union fdpass_ctl {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
};

ssize_t fdpass_send(int sock, const void *buf, size_t len, int fd, int flags)
{
	union fdpass_ctl ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	memset(&ctl, 0, sizeof(ctl));
	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? n : -EPIPE;
}

/* Closes every descriptor carried by @mh's control data. */
static void close_all(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

ssize_t fdpass_recv(int sock, void *buf, size_t cap, int *fd, int flags)
{
	union fdpass_ctl ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	memset(&ctl, 0, sizeof(ctl));
	n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	c = CMSG_FIRSTHDR(&mh);
	/* descriptors came that the kernel could not install here (it truncates the
	 * control data to none and says MSG_CTRUNC): this process is out of them */
	if (!c && (mh.msg_flags & MSG_CTRUNC))
		return -EMFILE;
	if (!c)
		return n;
	if ((mh.msg_flags & MSG_CTRUNC) || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)) ||
	    CMSG_NXTHDR(&mh, c)) {
		close_all(&mh);
		return -EBADMSG;
	}
	memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}
