/* hello_fixture.c - see hello_fixture.h. */
#include "hello_fixture.h"

#include "fdpass.h"
#include "proto.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Sends @len bytes of @buf on @fd with @n copies of @xfd attached (SCM_RIGHTS). */
static void send_fds(int fd, const char *buf, size_t len, int xfd, int n)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf};
	struct cmsghdr *c;

	memset(&ctl, 0, sizeof(ctl));
	n = n > 8 ? 8 : n;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + (size_t)i * sizeof(int), &xfd, sizeof(int));
	(void)!sendmsg(fd, &mh, MSG_NOSIGNAL);
}

/* Answers the hello waiting on @fd: {"v":1,"ok":true,"client":N,...}, with @nfds
 * descriptors (hx.nfds). */
static void answer(int fd, int64_t client, int xfd, int nfds)
{
	static struct proto_msg m; /* the server thread's only */
	struct proto_error pe;
	char buf[PROTO_REQ_MAX];
	size_t len;

	if (recv(fd, buf, sizeof(buf), 0) <= 0)
		return;
	proto_msg_init(&m, PROTO_OP_HELLO);
	m.ok = true;
	m.client = client;
	m.pid = getpid();
	m.max_pending = 64;
	m.max_rings = 64;
	if (proto_encode_answer(&m, buf, sizeof(buf), &len, &pe) != 0)
		return;
	if (nfds > 1)
		send_fds(fd, buf, len, xfd, nfds);
	else
		(void)!fdpass_send(fd, buf, len, xfd, 0); /* with the exchange region */
}

static void *serve(void *arg)
{
	struct hx *h = arg;

	while (!atomic_load(&h->stop)) {
		struct pollfd p = {.fd = h->lfd, .events = POLLIN};
		int fd;

		if (poll(&p, 1, 20) != 1)
			continue;
		fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		p = (struct pollfd){.fd = fd, .events = POLLIN};
		if (!atomic_load(&h->mute) && poll(&p, 1, 2000) == 1)
			answer(fd, h->nconns + 1, h->xfd, atomic_load(&h->nfds));
		if (h->nconns < HX_CONNS)
			h->conns[h->nconns++] = fd;
		else
			close(fd);
	}
	return NULL;
}

void hx_start(struct hx *h, struct proto_node *n)
{
	static _Atomic unsigned seq;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(h, 0, sizeof(*h));
	snprintf(h->path, sizeof(h->path), "/tmp/chipd-test-hx.%d.%u.sock", (int)getpid(),
		 atomic_fetch_add(&seq, 1));
	unlink(h->path);
	memcpy(sa.sun_path, h->path, strlen(h->path) + 1);
	h->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(h->lfd, 0);
	ck_assert_int_eq(bind(h->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(h->lfd, 64), 0);
	memcpy(n->desc->sock_path, h->path, sizeof(h->path));
	h->xfd = n->pool ? n->pool[0].fd : n->xchg.fd; /* the first client region */
	ck_assert_int_eq(pthread_create(&h->thread, NULL, serve, h), 0);
}

void hx_stop(struct hx *h)
{
	atomic_store(&h->stop, 1);
	pthread_join(h->thread, NULL);
	for (int i = 0; i < h->nconns; i++)
		close(h->conns[i]);
	close(h->lfd);
	unlink(h->path);
}
