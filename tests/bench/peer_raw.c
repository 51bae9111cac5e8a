/* peer_raw.c - baseline transports for chipbench (see peer_raw.h). */
#include "peer_raw.h"

#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define MSG 64
/* A baseline server gives up if the client says nothing for this long. */
#define IDLE_LIMIT_NS (30ull * 1000 * 1000 * 1000)
#define STOP_SEQ      UINT32_MAX

/* Request and answer words and buffers, each on its own cache line. */
struct raw_channel {
	_Atomic uint32_t req_seq;
	uint8_t pad0[60];
	uint8_t req[MSG];
	_Atomic uint32_t resp_seq;
	uint8_t pad1[60];
	uint8_t resp[MSG];
};

static struct raw_channel *channel_new(void)
{
	void *p = mmap(NULL, sizeof(struct raw_channel), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void channel_free(struct raw_channel *ch)
{
	munmap(ch, sizeof(*ch));
}

/* Spins until *word != old; gives up after IDLE_LIMIT_NS. */
static int spin_until_changed(_Atomic uint32_t *word, uint32_t old, uint32_t *now)
{
	uint64_t give_up = shm_now_ns() + IDLE_LIMIT_NS;

	for (unsigned i = 0;; i++) {
		*now = atomic_load_explicit(word, memory_order_acquire);
		if (*now != old)
			return 0;
		shm_cpu_relax();
		if ((i & 1023) == 0 && shm_now_ns() > give_up)
			return -ETIMEDOUT;
	}
}

/* Sleeps on the futex at once, every time, until *word != old. */
static int futex_until_changed(_Atomic uint32_t *word, uint32_t old, uint32_t *now)
{
	uint64_t give_up = shm_now_ns() + IDLE_LIMIT_NS;

	for (;;) {
		*now = atomic_load_explicit(word, memory_order_acquire);
		if (*now != old)
			return 0;
		if (shm_futex_wait(word, old, give_up) == -ETIMEDOUT)
			return -ETIMEDOUT;
	}
}

typedef int (*wait_fn)(_Atomic uint32_t *, uint32_t, uint32_t *);

static int serve(struct raw_channel *ch, wait_fn wait, bool wake)
{
	uint32_t seen = 0;

	for (;;) {
		if (wait(&ch->req_seq, seen, &seen))
			return 1;
		if (seen == STOP_SEQ)
			return 0;
		memcpy(ch->resp, ch->req, MSG);
		atomic_store_explicit(&ch->resp_seq, seen, memory_order_release);
		if (wake)
			shm_futex_wake(&ch->resp_seq, 1);
	}
}

static int round_trip(struct raw_channel *ch, uint64_t i, wait_fn wait, bool wake)
{
	uint32_t seq = (uint32_t)(i % (STOP_SEQ - 1)) + 1, got;
	uint32_t old = atomic_load_explicit(&ch->resp_seq, memory_order_relaxed);
	uint8_t out[MSG];

	memset(ch->req, (int)(seq & 0xff), MSG);
	atomic_store_explicit(&ch->req_seq, seq, memory_order_release);
	if (wake)
		shm_futex_wake(&ch->req_seq, 1);
	if (wait(&ch->resp_seq, old, &got))
		return -ETIMEDOUT;
	memcpy(out, ch->resp, MSG);
	return got == seq && out[0] == (uint8_t)(seq & 0xff) ? 0 : -EPROTO;
}

static int stop_server(struct raw_channel *ch, bool wake)
{
	atomic_store_explicit(&ch->req_seq, STOP_SEQ, memory_order_release);
	if (wake)
		shm_futex_wake(&ch->req_seq, 1);
	return 0;
}

static int spin_server(void *ctx)
{
	return serve(ctx, spin_until_changed, false);
}

static int spin_round_trip(void *ctx, uint64_t i)
{
	return round_trip(ctx, i, spin_until_changed, false);
}

static int spin_stop(void *ctx)
{
	return stop_server(ctx, false);
}

static int futex_server(void *ctx)
{
	return serve(ctx, futex_until_changed, true);
}

static int futex_round_trip(void *ctx, uint64_t i)
{
	return round_trip(ctx, i, futex_until_changed, true);
}

static int futex_stop(void *ctx)
{
	return stop_server(ctx, true);
}

static int run_channel(const struct bench_opts *opts, struct bench_pingpong *pp,
		       struct bench_result *out)
{
	struct raw_channel *ch = channel_new();

	if (!ch) {
		bench_name(out, pp->name, pp->label);
		bench_skip(out, "mmap: %s", strerror(errno));
		return -ENOMEM;
	}
	pp->ctx = ch;
	int rc = bench_pingpong(opts, pp, out);
	channel_free(ch);
	return rc;
}

int peer_spin_pingpong(const struct bench_opts *opts, struct bench_result *out)
{
	struct bench_pingpong pp = {
	    .name = "raw_spin",
	    .label = "raw shared-memory spin ping-pong (floor)",
	    .server = spin_server,
	    .round_trip = spin_round_trip,
	    .stop = spin_stop,
	};

	return run_channel(opts, &pp, out);
}

int peer_futex_pingpong(const struct bench_opts *opts, unsigned iters, struct bench_result *out)
{
	struct bench_pingpong pp = {
	    .name = "raw_futex",
	    .label = "raw futex ping-pong (sleep every time)",
	    .server = futex_server,
	    .round_trip = futex_round_trip,
	    .stop = futex_stop,
	    .iters = iters,
	    .warmup = iters / 10 + 1,
	};

	return run_channel(opts, &pp, out);
}

/* The socket pair: [0] for the client, [1] for the server. */
struct sock_ctx {
	int fd[2];
};

static int sock_server(void *ctx)
{
	struct sock_ctx *s = ctx;
	uint8_t buf[MSG];

	close(s->fd[0]);
	for (;;) {
		ssize_t n = recv(s->fd[1], buf, sizeof(buf), 0);
		if (n == 0)
			return 0; /* client closed: stop */
		if (n != MSG || send(s->fd[1], buf, MSG, 0) != MSG)
			return 1;
	}
}

static int sock_round_trip(void *ctx, uint64_t i)
{
	struct sock_ctx *s = ctx;
	uint8_t buf[MSG];

	memset(buf, (int)(i & 0xff), MSG);
	if (send(s->fd[0], buf, MSG, 0) != MSG || recv(s->fd[0], buf, MSG, 0) != MSG)
		return -errno;
	return buf[0] == (uint8_t)(i & 0xff) ? 0 : -EPROTO;
}

static int sock_stop(void *ctx)
{
	struct sock_ctx *s = ctx;

	shutdown(s->fd[0], SHUT_WR);
	return 0;
}

int peer_seqpacket_pingpong(const struct bench_opts *opts, unsigned iters, struct bench_result *out)
{
	struct sock_ctx s;
	struct bench_pingpong pp = {
	    .name = "unix_seqpacket",
	    .label = "unix SOCK_SEQPACKET socket pair",
	    .ctx = &s,
	    .server = sock_server,
	    .round_trip = sock_round_trip,
	    .stop = sock_stop,
	    .iters = iters,
	    .warmup = iters / 10 + 1,
	};

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s.fd) != 0) {
		bench_name(out, pp.name, pp.label);
		bench_skip(out, "socketpair: %s", strerror(errno));
		return -errno;
	}
	/* Bound every call: a dead server must not hang the benchmark. */
	struct timeval tv = {.tv_sec = 30};
	setsockopt(s.fd[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s.fd[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = bench_pingpong(opts, &pp, out);
	close(s.fd[0]);
	close(s.fd[1]);
	return rc;
}

/* Two pipes: req client -> server, resp server -> client. A 64-byte write is atomic
 * (below PIPE_BUF). The client waits for the answer in poll with a bound (a pipe has
 * no receive timeout), then reads: what an event loop reading a pipe does. */
struct pipe_ctx {
	int req[2], resp[2]; /* -1 once closed in the client */
};

static int pipe_server(void *ctx)
{
	struct pipe_ctx *p = ctx;
	uint8_t buf[MSG];

	close(p->req[1]);
	close(p->resp[0]);
	for (;;) {
		struct pollfd pfd = {.fd = p->req[0], .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, (int)(IDLE_LIMIT_NS / 1000000)) != 1)
			return 1; /* the client said nothing for IDLE_LIMIT_NS */
		n = read(p->req[0], buf, sizeof(buf));
		if (n == 0)
			return 0; /* client closed: stop */
		if (n != MSG || write(p->resp[1], buf, MSG) != MSG)
			return 1;
	}
}

static int pipe_round_trip(void *ctx, uint64_t i)
{
	struct pipe_ctx *p = ctx;
	struct pollfd pfd = {.fd = p->resp[0], .events = POLLIN};
	uint8_t buf[MSG];

	if (p->req[0] >= 0) { /* the server (forked by now) holds its own copies */
		close(p->req[0]);
		close(p->resp[1]);
		p->req[0] = p->resp[1] = -1;
	}
	memset(buf, (int)(i & 0xff), MSG);
	if (write(p->req[1], buf, MSG) != MSG)
		return -errno;
	if (poll(&pfd, 1, (int)(IDLE_LIMIT_NS / 1000000)) != 1)
		return -ETIMEDOUT;
	if (read(p->resp[0], buf, MSG) != MSG) /* 0: the server is gone */
		return -EPIPE;
	return buf[0] == (uint8_t)(i & 0xff) ? 0 : -EPROTO;
}

static int pipe_stop(void *ctx)
{
	struct pipe_ctx *p = ctx;

	close(p->req[1]); /* EOF for the server */
	p->req[1] = -1;
	return 0;
}

int peer_pipe_pingpong(const struct bench_opts *opts, unsigned iters, struct bench_result *out)
{
	struct pipe_ctx p = {.req = {-1, -1}, .resp = {-1, -1}};
	struct bench_pingpong pp = {
	    .name = "pipe_pair",
	    .label = "two pipes (poll, then read)",
	    .ctx = &p,
	    .server = pipe_server,
	    .round_trip = pipe_round_trip,
	    .stop = pipe_stop,
	    .iters = iters,
	    .warmup = iters / 10 + 1,
	};
	int rc;

	if (pipe2(p.req, O_CLOEXEC) != 0 || pipe2(p.resp, O_CLOEXEC) != 0) {
		rc = -errno;
		bench_name(out, pp.name, pp.label);
		bench_skip(out, "pipe2: %s", strerror(-rc));
	} else {
		rc = bench_pingpong(opts, &pp, out);
	}
	for (int e = 0; e < 2; e++) {
		if (p.req[e] >= 0)
			close(p.req[e]);
		if (p.resp[e] >= 0)
			close(p.resp[e]);
	}
	return rc;
}
