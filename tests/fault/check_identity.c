/* check_identity.c - who a client is, and when it is gone, comes from the handshake
 * socket (docs/protocol.md §9), never from a pid written into shared memory; and one
 * client cannot take what the node has for every client (per-client bounds).
 *
 * Each tcase runs a real chipd (sim chips) and:
 * - forges a slot's owner pid (pid 1, a live process that never connected, a dead
 *   pid): the request is not served (bad_request naming the handshake; nothing
 *   admitted) and the slot comes back FREE;
 * - SIGKILLs a connected client holding streams and a slot: everything comes back
 *   within a bound (rings_in_use, queue_depth, the slot, the workers' cancelled);
 * - lets a process that attached without hello, and a forked child using its
 *   parent's handle, call: both get the clear error, and a child that connects
 *   itself is served;
 * - gives a client the old node layout version (EPROTONOSUPPORT and what to do), and
 *   an impostor's socket (refused);
 * - runs a client into its per-client bounds (queue_full naming them) while a second
 *   client is served, and the connection limit;
 * - sends garbage, nothing, a wrong op, and more than a hello on connections: each is
 *   closed and the supervisor keeps serving;
 * - (identity_fds.c) starts chipd under a descriptor limit too low for --max-clients
 *   (the bound is lowered to what fits, the next connection refused naming it), and
 *   takes chipd's descriptors away while it runs (each connection refused at once,
 *   queue_full, until they come back); a client with no descriptor for its hello's
 *   region is told so.
 */
#include "fault.h"
#include "hello_fixture.h"
#include "identity_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define LONG_TOKENS 1000000u /* a stream that runs until it is cancelled */
#define LONG_US	    1000u

static size_t submit_msg(unsigned char *buf, size_t cap, uint32_t tokens)
{
	struct proto_msg *m = malloc(sizeof(*m));
	size_t len;

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_SUBMIT);
	snprintf(m->wl, sizeof(m->wl), "synthetic");
	m->nparams = 1;
	snprintf(m->params[0].key, sizeof(m->params[0].key), "tokens");
	m->params[0].value = tokens;
	len = ft_encode(m, buf, cap);
	free(m);
	return len;
}

static struct mbox_slot *slot_of(struct proto_node *n, uint32_t i)
{
	return (struct mbox_slot *)(n->mbox.slots + (size_t)i * n->mbox.stride);
}

/* Posts @msg in a free slot of @n's mailbox with owner pid @pid written by hand, as a
 * client that forges its identity would. Returns its ticket. */
static struct mbox_ticket forge_post(struct proto_node *n, pid_t pid, const void *msg,
				     uint32_t len)
{
	struct mbox *mb = &n->mbox;

	for (uint32_t i = 0; i < mb->nslots; i++) {
		struct mbox_slot *s = slot_of(n, i);
		uint64_t c = atomic_load(&s->ctl), claimed;
		uint32_t g = MBOX_CTL_GEN(c);

		if (MBOX_CTL_STATE(c) != MBOX_FREE ||
		    !atomic_compare_exchange_strong(&s->ctl, &c, MBOX_CTL(g, pid, MBOX_CLAIMED)))
			continue;
		memcpy(mbox_req_buf(mb, (struct mbox_ticket){i, g}), msg, len);
		atomic_store(&s->req_len, len);
		claimed = MBOX_CTL(g, pid, MBOX_CLAIMED);
		ck_assert(atomic_compare_exchange_strong(&s->ctl, &claimed,
							 MBOX_CTL(g, pid, MBOX_POSTED)));
		atomic_fetch_or(&mb->attention[i / 64], 1ull << (i % 64));
		shm_wake_all(&mb->hdr->doorbell);
		return (struct mbox_ticket){i, g};
	}
	ck_abort_msg("no free slot");
	return (struct mbox_ticket){0, 0};
}

/* The answer in @t's DONE slot, decoded as a submit's; false when it was reclaimed
 * before it could be read (a dead owner's slot is reaped at once). */
static bool read_answer(struct proto_node *n, struct mbox_ticket t, struct proto_msg *m)
{
	struct proto_error pe;
	uint64_t c = atomic_load(&slot_of(n, t.slot)->ctl);
	uint32_t len = atomic_load(&slot_of(n, t.slot)->resp_len);

	if (MBOX_CTL_STATE(c) != MBOX_DONE || MBOX_CTL_GEN(c) != t.gen)
		return false;
	ck_assert_uint_le(len, mbox_resp_cap(&n->mbox));
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_SUBMIT, mbox_resp_buf(&n->mbox, t), len, m,
					     &pe),
			 0);
	return true;
}

static int sleep_forever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int exit_now(void *arg)
{
	(void)arg;
	return 0;
}

/* A slot whose owner pid has no connection is answered bad_request ("connect through
 * the socket first"), nothing is admitted, and the slot comes back FREE within the
 * bound (SUP_UNCONNECTED_MS for a live owner, a tick for a dead one). */
START_TEST(forged_owner_pid_not_served_and_reclaimed)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	unsigned char msg[256];
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_node n;
	struct cd d;
	pid_t live = tu_fork(sleep_forever, NULL), dead = tu_fork(exit_now, NULL);
	pid_t forged[] = {1, live, dead};
	uint32_t len = (uint32_t)submit_msg(msg, sizeof(msg), 4);
	uint64_t bad0, resets0;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(tu_wait(dead, 5000), 0);
	ft_start(&d, one_chip);
	ft_node_attach(&d, &n); /* this process is connected: its own pid is not forged */
	for (size_t k = 0; k < sizeof(forged) / sizeof(forged[0]); k++) {
		struct mbox_ticket t;

		bad0 = cd_stat(&d, "supervisor", "err_bad_request");
		resets0 = cd_stat(&d, "supervisor", "mbox_resets");
		t = forge_post(&n, forged[k], msg, len);
		ck_assert_msg(ft_slot_wait(&n, t.slot, MBOX_DONE, t.gen, 3000) ||
				  ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 0),
			      "pid %d: slot %u in state %d", (int)forged[k], t.slot,
			      ft_slot_state(&n, t.slot));
		if (read_answer(&n, t, m)) {
			ck_assert(!m->ok);
			ck_assert_int_eq(m->err.code, CHIPD_E_BAD_REQUEST);
			ck_assert_msg(strstr(m->err.message, "connect through the socket first"),
				      "%s", m->err.message);
		}
		ck_assert_msg(ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 3000),
			      "pid %d: slot %u not reclaimed (state %d)", (int)forged[k], t.slot,
			      ft_slot_state(&n, t.slot));
		/* a dead owner's POSTED slot may be reaped before the router takes it */
		ck_assert_uint_le(cd_stat(&d, "supervisor", "err_bad_request"), bad0 + 1);
		if (forged[k] != dead)
			ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_bad_request"), bad0 + 1);
		/* the reaper counts its resets once its pass is over: just after the slot
		 * is FREE */
		ck_assert_uint_eq(cd_stat_reaches(&d, "supervisor", "mbox_resets", resets0 + 1,
						  3000),
				  resets0 + 1);
	}
	ck_assert_uint_eq(cd_stat(&d, "chip0", "admitted"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "rings_in_use"), 0);
	tu_kill(live);
	proto_node_detach(&n);
	free(m);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

struct holder {
	struct cd *d;
	int wfd;
};

/* A client with 3 endless streams and a CLAIMED slot; reports, then waits to die. */
static int hold_and_wait(void *arg)
{
	struct holder *h = arg;
	struct chipd_param p[] = {{"tokens", LONG_TOKENS}, {"device_us", LONG_US}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_error err;
	struct proto_node n;
	struct mbox_ticket t;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;
	char ok = 1;

	if (chipd_connect(h->d->instance, &c, &err))
		return 2;
	for (int i = 0; i < 3; i++)
		if (chipd_submit(c, &req, 5000, &id, &s, &err))
			return 3;
	ft_node_attach(h->d, &n);
	if (mbox_claim(&n.mbox, &t))
		return 4;
	if (write(h->wfd, &ok, 1) != 1)
		return 5;
	for (;;)
		pause();
	return 0;
}

/* Everything a killed client held comes back at once: its hang-up (not a pid poll)
 * closes its streams' readers, the workers cancel them, the sweep reclaims the rings,
 * and its slot is reaped. */
START_TEST(killed_client_reclaimed_within_bound)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct holder h;
	struct pollfd pfd;
	struct cd d;
	uint64_t resets0, cancelled0, t0;
	int p[2];
	pid_t pid;
	char c;

	ft_start(&d, args);
	ck_assert_int_eq(pipe(p), 0);
	h = (struct holder){&d, p[1]};
	pid = tu_fork(hold_and_wait, &h);
	close(p[1]);
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	ck_assert_msg(poll(&pfd, 1, 10000) == 1 && read(p[0], &c, 1) == 1,
		      "the client did not set up");
	close(p[0]);
	/* the sweep publishes the gauges every tick */
	for (t0 = ft_now_ms(); cd_stat(&d, "supervisor", "rings_in_use") != 3;)
		ck_assert_msg(ft_now_ms() - t0 < 3000, "rings_in_use %llu, not 3",
			      (unsigned long long)cd_stat(&d, "supervisor", "rings_in_use"));
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "clients"), 3); /* ours, its two */
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	cancelled0 = cd_stat(&d, "chip0", "cancelled");
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	t0 = ft_now_ms();
	while (cd_stat(&d, "supervisor", "rings_in_use") != 0 ||
	       cd_stat(&d, "supervisor", "queue_depth") != 0 ||
	       cd_stat(&d, "supervisor", "mbox_resets") != resets0 + 1) {
		ck_assert_msg(ft_now_ms() - t0 < 2000,
			      "after 2 s: rings_in_use %llu, queue_depth %llu, mbox_resets +%llu",
			      (unsigned long long)cd_stat(&d, "supervisor", "rings_in_use"),
			      (unsigned long long)cd_stat(&d, "supervisor", "queue_depth"),
			      (unsigned long long)(cd_stat(&d, "supervisor", "mbox_resets") -
						   resets0));
		usleep(2000);
	}
	ck_assert_uint_eq(cd_stat(&d, "chip0", "cancelled"), cancelled0 + 3);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_cancelled"), 3);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "clients"), 1);
	tu_wait(pid, 1000);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

struct unconnected {
	struct cd *d;
	bool inherited; /* use the parent's handle (a forked child) */
};

/* Calls ping without a connection of its own: 0 when the answer is the clear error. */
static int call_unconnected(void *arg)
{
	struct unconnected *u = arg;
	struct chipd_error err;
	struct proto_node n;
	struct proto_msg *m = malloc(sizeof(*m));
	char name[SHM_NAME_MAX];
	struct shm_diag diag;
	chipd_conn *c = NULL;
	struct ring r;
	int rc;

	if (!m)
		return 10;
	if (u->inherited) {
		rc = chipd_ping(u->d->conn, 5000, NULL, &err);
		if (rc != -EREMOTEIO || err.code != CHIPD_E_BAD_REQUEST ||
		    !strstr(err.message, "connect through the socket first"))
			return 11;
		/* connected itself, it is served */
		if (chipd_connect(u->d->instance, &u->d->conn, &err) ||
		    chipd_ping(u->d->conn, 5000, NULL, &err))
			return 12;
		return 0;
	}
	if (shm_region_name(name, sizeof(name), (unsigned)geteuid(), u->d->instance) ||
	    proto_node_attach(&n, name, &diag))
		return 13;
	/* without a hello there is no mailbox at all (node layout 3 on): the node region
	 * is read-only and the client region comes only with the hello answer */
	memset(&r, 0x5a, sizeof(r));
	if (n.xchg.base || n.mbox.hdr || proto_node_ring(&n, 0, &r) != -ENOTCONN || r.hdr)
		return 14;
	/* and libchipd's own calls on a handle without the handshake: -ENOTCONN */
	if (chipd_connect_monitor(u->d->instance, &c, &err) ||
	    chipd_ping(c, 5000, NULL, &err) != -ENOTCONN)
		return 15;
	chipd_close(c);
	proto_node_detach(&n);
	free(m);
	return 0;
}

START_TEST(unconnected_process_gets_the_clear_error)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	struct unconnected u;
	struct cd d;

	ft_start(&d, one_chip);
	u = (struct unconnected){&d, false};
	ck_assert_int_eq(tu_wait(tu_fork(call_unconnected, &u), 10000), 0);
	u.inherited = true;
	ck_assert_int_eq(tu_wait(tu_fork(call_unconnected, &u), 10000), 0);
	/* only the inherited mapping reached the router */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_bad_request"), 1);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0); /* the parent still is */
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A node region of the old layout version: EPROTONOSUPPORT, saying what to do. */
START_TEST(old_layout_version_refused)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	struct chipd_error err;
	struct proto_node n;
	chipd_conn *c = NULL;
	struct cd d;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	if (!cd_node_make_writable(&n)) { /* an old client's region: only root can fake one */
		proto_node_detach(&n);
		ft_stop_clean(&d, NULL, 0);
		return;
	}
	n.desc->version = 1;
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), -EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.message, "node layout 1") &&
			  strstr(err.message, "use the libchipd and chipctl of the running chipd"),
		      "%s", err.message);
	n.desc->version = PROTO_NODE_VERSION;
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), 0);
	chipd_close(c);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

struct impostor {
	struct cd *d;
	int wfd;
};

/* Serves hello on a socket of its own and points the node region at it. */
static int pose(void *arg)
{
	struct impostor *im = arg;
	struct proto_node n;
	struct hx h;
	char ok = 1;

	ft_node_attach(im->d, &n);
	if (!cd_node_make_writable(&n)) /* the descriptor is the supervisor's to write */
		return 3;
	hx_start(&h, &n);
	if (write(im->wfd, &ok, 1) != 1)
		return 2;
	for (;;)
		pause();
	return 0;
}

/* A socket served by another process than the region's creator is refused. */
START_TEST(impostor_server_refused)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	char saved[PROTO_NODE_SOCK_MAX];
	struct chipd_error err;
	struct impostor im;
	struct proto_node n;
	struct pollfd pfd;
	chipd_conn *c = NULL;
	struct cd d;
	int p[2];
	pid_t pid;
	char b;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	/* an impostor would have to rewrite the read-only descriptor: only root can */
	if (!cd_node_make_writable(&n)) {
		proto_node_detach(&n);
		ft_stop_clean(&d, NULL, 0);
		return;
	}
	memcpy(saved, n.desc->sock_path, sizeof(saved));
	ck_assert_int_eq(pipe(p), 0);
	im = (struct impostor){&d, p[1]};
	pid = tu_fork(pose, &im);
	close(p[1]);
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	ck_assert(poll(&pfd, 1, 5000) == 1 && read(p[0], &b, 1) == 1);
	close(p[0]);
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), -EACCES);
	ck_assert_msg(strstr(err.message, "impostor") && strstr(err.message, "creator"), "%s",
		      err.message);
	tu_kill(pid);
	memcpy(n.desc->sock_path, saved, sizeof(saved));
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), 0);
	chipd_close(c);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* Waits until chip 0's worker completed @n streams. */
static void wait_completed(struct cd *d, uint64_t n)
{
	uint64_t t0 = ft_now_ms();

	while (cd_stat(d, "chip0", "completed") < n) {
		ck_assert_msg(ft_now_ms() - t0 < 5000, "streams did not end");
		usleep(5000);
	}
}

static int submit_one(chipd_conn *c, uint32_t tokens, chipd_stream **s, struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"device_us", LONG_US}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	uint64_t id;

	return chipd_submit(c, &req, 5000, &id, s, err);
}

/* Another process: connects and runs one short stream to its end. */
static int second_client(void *arg)
{
	struct cd *d = arg;
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	chipd_conn *c;

	if (chipd_connect(d->instance, &c, &err) || submit_one(c, 2, &s, &err))
		return 2;
	return cd_drain_stream(s, &code, 5000) == 2 && code == CHIPD_OK ? 0 : 3;
}

START_TEST(per_client_bounds_answer_queue_full)
{
	static const char *const args[] = {"--chips",		   "1", "--max-client-pending",
					   "2",			   "--max-client-rings", "3",
					   NULL};
	chipd_stream *shrt[3], *lng[3], *s;
	struct chipd_error err;
	enum chipd_code code;
	struct cd d;

	ft_start(&d, args);
	/* rings: three short streams ended and unread hold three rings (each ends before
	 * the next is sent: two in flight is the other bound) */
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(submit_one(d.conn, 1, &shrt[i], &err) == 0, "%s", err.message);
		wait_completed(&d, (uint64_t)i + 1);
	}
	ck_assert_int_eq(submit_one(d.conn, 1, &s, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "max-client-rings=3"), "%s", err.message);
	/* another client is served meanwhile */
	ck_assert_int_eq(tu_wait(tu_fork(second_client, &d), 10000), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(cd_drain_stream(shrt[i], &code, 5000), 1);
		chipd_stream_close(shrt[i], 5000);
	}
	/* pending: two endless streams in flight */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(submit_one(d.conn, LONG_TOKENS, &lng[i], &err), 0);
	ck_assert_int_eq(submit_one(d.conn, LONG_TOKENS, &lng[2], &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert_msg(strstr(err.message, "max-client-pending=2"), "%s", err.message);
	ck_assert_int_eq(tu_wait(tu_fork(second_client, &d), 10000), 0);
	for (int i = 0; i < 2; i++)
		chipd_stream_close(lng[i], 5000);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 2);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

START_TEST(connection_limit_answers_queue_full)
{
	static const char *const args[] = {"--chips", "1", "--max-clients", "2", NULL};
	struct chipd_error err;
	chipd_conn *c2 = NULL, *c3 = NULL;
	uint64_t t0;
	struct cd d;
	int rc;

	ft_start(&d, args); /* its connection is the first */
	ck_assert_int_eq(chipd_connect(d.instance, &c2, &err), 0);
	ck_assert_int_eq(chipd_connect(d.instance, &c3, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "max-clients=2"), "%s", err.message);
	chipd_close(c2);
	/* the hang-up frees the place as soon as the event loop sees it */
	for (t0 = ft_now_ms(); (rc = chipd_connect(d.instance, &c3, &err)) != 0;) {
		ck_assert_msg(ft_now_ms() - t0 < 2000, "%s", err.message);
		usleep(5000);
	}
	ck_assert_int_eq(chipd_ping(c3, 5000, NULL, &err), 0);
	chipd_close(c3);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A raw connection to @d's handshake socket. */
static int raw_connect(struct proto_node *n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[PROTO_NODE_SOCK_MAX];
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(proto_node_sock_path(n, path), 0);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Reads the next message of @fd within @ms: its length, 0 at end of file, -1 none. */
static ssize_t next_msg(int fd, void *buf, size_t cap, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, ms) != 1)
		return -1;
	return recv(fd, buf, cap, 0);
}

/* Expects the error envelope @code, then the end of the connection. */
static void expect_refused_then_closed(int fd, enum chipd_code code)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error pe;
	char buf[PROTO_REQ_MAX];
	ssize_t n = next_msg(fd, buf, sizeof(buf), 3000);

	ck_assert_ptr_nonnull(m);
	ck_assert_msg(n > 0, "no answer (%zd)", n);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_HELLO, buf, (size_t)n, m, &pe), 0);
	ck_assert(!m->ok);
	ck_assert_int_eq(m->err.code, code);
	ck_assert_int_eq(next_msg(fd, buf, sizeof(buf), 3000), 0);
	close(fd);
	free(m);
}

START_TEST(bad_connections_closed_and_loop_serves)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	static const unsigned char garbage[] = {0xc1, 0xc1, 0x00};
	unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_node n;
	uint64_t t0;
	struct cd d;
	int fd;

	ck_assert_ptr_nonnull(m);
	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	/* garbage */
	fd = raw_connect(&n);
	ck_assert_int_eq(send(fd, garbage, sizeof(garbage), 0), (ssize_t)sizeof(garbage));
	expect_refused_then_closed(fd, CHIPD_E_BAD_REQUEST);
	/* another op than hello */
	fd = raw_connect(&n);
	proto_msg_init(m, PROTO_OP_PING);
	ck_assert_int_eq(send(fd, buf, ft_encode(m, buf, sizeof(buf)), 0) > 0, 1);
	expect_refused_then_closed(fd, CHIPD_E_BAD_REQUEST);
	/* nothing at all: closed after PROTO_HELLO_WAIT_MS */
	fd = raw_connect(&n);
	t0 = ft_now_ms();
	ck_assert_int_eq(next_msg(fd, buf, sizeof(buf), 5000), 0);
	ck_assert_uint_ge(ft_now_ms() - t0, PROTO_HELLO_WAIT_MS - 100);
	close(fd);
	/* a hello, then more: answered, then closed */
	fd = raw_connect(&n);
	proto_msg_init(m, PROTO_OP_HELLO);
	ck_assert_int_eq(send(fd, buf, ft_encode(m, buf, sizeof(buf)), 0) > 0, 1);
	ck_assert_int_gt(next_msg(fd, buf, sizeof(buf), 3000), 0);
	ck_assert_int_eq(send(fd, "x", 1, 0), 1);
	ck_assert_int_eq(next_msg(fd, buf, sizeof(buf), 3000), 0);
	close(fd);
	/* the loop serves on */
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "clients"), 2); /* cd's, ft_node_attach's */
	proto_node_detach(&n);
	free(m);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"forged_owner_pid_not_served_and_reclaimed", forged_owner_pid_not_served_and_reclaimed},
	    {"killed_client_reclaimed_within_bound", killed_client_reclaimed_within_bound},
	    {"unconnected_process_gets_the_clear_error", unconnected_process_gets_the_clear_error},
	    {"old_layout_version_refused", old_layout_version_refused},
	    {"impostor_server_refused", impostor_server_refused},
	    {"per_client_bounds_answer_queue_full", per_client_bounds_answer_queue_full},
	    {"connection_limit_answers_queue_full", connection_limit_answers_queue_full},
	    {"bad_connections_closed_and_loop_serves", bad_connections_closed_and_loop_serves},
	};
	Suite *s = suite_create("identity");
	int rc;

	ft_set_owner();
	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 60);
	identity_add_fd_tcases(s, 60);
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
