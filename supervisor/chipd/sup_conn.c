/* sup_conn.c - the handshake socket (docs/protocol.md §9): who a client is, and when it
 * is gone, from the kernel rather than from anything written into shared memory.
 *
 * A client process connects to RUNTIME_DIR/chipd.UID.INSTANCE.sock (SOCK_SEQPACKET)
 * and sends one hello; the supervisor takes its pid and uid from SO_PEERCRED and a
 * pidfd of it at accept, answers with the client's id and bounds, and from then on
 * serves mailbox slots owned by that pid. The connection's hang-up (EOF, POLLHUP,
 * POLLRDHUP) or the pidfd (the process exited, even while a forked child still holds
 * the socket) ends the client: its slots are reaped, its streams' readers closed (the
 * workers cancel them at their next round, sup_table_close_reader) and its rings
 * reclaimed by the sweep, all at once, without a call to any worker.
 *
 * The event loop (sup_loop.c) polls the listening socket, each connection and each
 * pidfd; the router thread asks whether a slot's owner pid is connected. The table is
 * under sup.lock; conn_epoch lets the router skip the lock while no connection went.
 */
#include "sup.h"
#include "sup_files.h"
#include "sup_log.h"

#include "fdpass.h"
#include "hello.h"
#include "proc.h"
#include "ring.h"
#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int sup_conn_listen(struct sup *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	size_t slots = (size_t)s->node.npool * s->node.pool_slots;
	int n, fd, rc;

	s->listen_fd = -1;
	s->conns = calloc(s->cfg.max_clients, sizeof(*s->conns));
	s->slot_seen_ctl = calloc(slots, sizeof(*s->slot_seen_ctl));
	s->slot_seen_ns = calloc(slots, sizeof(*s->slot_seen_ns));
	if (!s->conns || !s->slot_seen_ctl || !s->slot_seen_ns || sup_region_init(s))
		return -ENOMEM;
	for (uint32_t i = 0; i < s->cfg.max_clients; i++) {
		s->conns[i].fd = s->conns[i].pidfd = -1;
		s->conns[i].region = SUP_REGION_NONE;
	}
	n = snprintf(s->sock_path, sizeof(s->sock_path), "%s/chipd.%u.%s.sock", s->cfg.runtime_dir,
		     (unsigned)geteuid(), s->cfg.instance);
	if (n < 0 || (size_t)n >= sizeof(s->sock_path) || (size_t)n >= sizeof(sa.sun_path)) {
		SUP_ERR(-1, 0,
			"handshake socket %s/chipd.%u.%s.sock: longer than %zu bytes (set "
			"CHIPD_RUNTIME_DIR to a shorter directory)",
			s->cfg.runtime_dir, (unsigned)geteuid(), s->cfg.instance,
			sizeof(sa.sun_path) - 1);
		s->sock_path[0] = '\0';
		return -ENAMETOOLONG;
	}
	/* the pid file guards the instance, and the directory is private: a socket at the
	 * name was left by a chipd of this instance that died; anything else is refused */
	if (lstat(s->sock_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			SUP_ERR(-1, 0, "handshake socket %s: something else is there: remove it",
				s->sock_path);
			s->sock_path[0] = '\0';
			return -EEXIST;
		}
		unlink(s->sock_path);
	}
	memcpy(sa.sun_path, s->sock_path, (size_t)n + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* with --allow-group its members connect too (sup_admit.c judges each peer) */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    (s->cfg.allow_group[0] && chown(s->sock_path, (uid_t)-1, s->cfg.allow_gid) != 0) ||
	    chmod(s->sock_path, s->cfg.allow_group[0] ? 0660 : 0600) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		rc = -errno;
		SUP_ERR(-1, 0, "handshake socket %s: %s", s->sock_path, strerror(-rc));
		close(fd);
		unlink(s->sock_path);
		s->sock_path[0] = '\0';
		return rc;
	}
	s->listen_fd = fd;
	memcpy(s->node.desc->sock_path, s->sock_path, sizeof(s->sock_path));
	return 0;
}

/* Retires @c: its pid is no client from now on; the event loop cancels its polls and
 * then closes its descriptors (sup_conn_release), since a descriptor closed under an
 * armed poll stays open in the ring. Under sup.lock. */
static void conn_retire(struct sup_conn *c)
{
	c->live = false;
	c->closing = true;
	c->want_fd = c->want_pid = false;
}

void sup_conn_release(struct sup *s, uint32_t i)
{
	struct sup_conn *c = &s->conns[i];

	pthread_mutex_lock(&s->lock);
	if (c->fd >= 0)
		close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->fd = c->pidfd = -1;
	c->closing = c->live = false;
	c->want_fd = c->want_pid = false;
	c->gen++;
	pthread_mutex_unlock(&s->lock);
}

void sup_conn_close_all(struct sup *s)
{
	if (s->conns)
		for (uint32_t i = 0; i < s->cfg.max_clients; i++)
			if (s->conns[i].fd >= 0)
				sup_conn_release(s, i);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
	if (s->spare_fd >= 0)
		close(s->spare_fd);
	s->spare_fd = -1;
	if (s->sock_path[0])
		unlink(s->sock_path);
	s->sock_path[0] = '\0';
	free(s->conns);
	free(s->slot_seen_ctl);
	free(s->slot_seen_ns);
	sup_region_free(s);
	s->conns = NULL;
	s->slot_seen_ctl = s->slot_seen_ns = NULL;
}

bool sup_conn_pid_live(const struct sup *s, pid_t pid)
{
	for (uint32_t i = 0; pid > 0 && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].pid == pid)
			return true;
	return false;
}

uint64_t sup_conn_id_of(const struct sup *s, pid_t pid, uint32_t region)
{
	for (uint32_t i = 0; pid > 0 && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].pid == pid && s->conns[i].region == region)
			return s->conns[i].id;
	return 0;
}

bool sup_conn_id_live(const struct sup *s, uint64_t id)
{
	for (uint32_t i = 0; id && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].id == id)
			return true;
	return false;
}

bool sup_conn_reader_live(const struct sup *s, const struct sup_req *e)
{
	/* no pool books (before the socket, or after the stop closed it): nobody reads */
	return e->client > 0 && s->region_state && e->region < s->node.npool &&
	       s->region_state[e->region] == SUP_REGION_LIVE &&
	       s->region_pid[e->region] == e->client;
}

/* Sends the error envelope @code/@fmt on @fd, best effort (the socket is closed next). */
__attribute__((format(printf, 3, 4))) static void refuse(int fd, enum chipd_code code,
							const char *fmt, ...)
{
	struct proto_error e = {.chip = -1};
	char buf[256];
	size_t len;
	va_list ap;

	e.code = code;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	if (proto_encode_error(&e, buf, sizeof(buf), &len) == 0)
		(void)!send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Gauge of the live connections. Under sup.lock. */
static void count_clients(struct sup *s)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->cfg.max_clients; i++)
		n += s->conns[i].live;
	sup_gauge(s, PROTO_SUP_clients, n);
}

static bool out_of_fds(int err)
{
	return err == EMFILE || err == ENFILE;
}

/* Refuses connection @fd, which chipd has no descriptor to serve (@err), with
 * queue_full, and closes it. */
static void refuse_no_fds(struct sup *s, int fd, int err)
{
	char drop[PROTO_REQ_MAX];

	sup_count(s, PROTO_SUP_clients_refused, 1);
	refuse(fd, CHIPD_E_QUEUE_FULL,
	       "chipd is out of file descriptors (%s): retry later, or raise its limit "
	       "(ulimit -n, LimitNOFILE=)",
	       strerror(err));
	while (recv(fd, drop, sizeof(drop), MSG_DONTWAIT) > 0) /* as for max-clients */
		;
	close(fd);
}

enum starved { STARVED_REFUSED, STARVED_EMPTY, STARVED_STUCK };

/* Connections are refused for want of descriptors (@what failed with @err): the first
 * refusal is logged, not each; the next connection taken whole logs how many were. */
static void starved_note(struct sup *s, const char *what, int err)
{
	if (!s->accept_starved)
		SUP_WARN(-1, 0,
			 "handshake socket: %s: %s: connections are refused until descriptors "
			 "are free",
			 what, strerror(err));
	s->accept_starved = true;
}

/* accept failed with @err, out of descriptors: the first connection waiting is taken
 * with the spare descriptor and refused (STARVED_REFUSED), so that its client learns
 * why at once rather than when its hello times out; STARVED_EMPTY when none was
 * waiting (accept fails for want of a descriptor before it looks), STARVED_STUCK when
 * even the spare could not take one. The first failure is logged, not each. */
static enum starved accept_starved(struct sup *s, int err)
{
	struct rlimit rl;
	int fd, again;

	starved_note(s, "accept", err);
	if (s->spare_fd < 0)
		s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (s->spare_fd < 0)
		return STARVED_STUCK;
	/* a limit lowered under the spare's own number (prlimit on a running chipd): its
	 * number, once closed, is one accept may not take, and the spare could not be
	 * taken again, lost for the next shortage. Kept: connections wait unanswered
	 * (their hello times out) until the limit is raised */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)s->spare_fd >= rl.rlim_cur) {
		if (!s->spare_over_limit)
			SUP_WARN(-1, 0,
				 "handshake socket: the descriptor limit (%llu) is below chipd's "
				 "spare descriptor (%d): connections wait unanswered, not refused, "
				 "until it is raised",
				 (unsigned long long)rl.rlim_cur, s->spare_fd);
		s->spare_over_limit = true;
		return STARVED_STUCK;
	}
	close(s->spare_fd);
	fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	again = fd < 0 ? errno : 0;
	if (fd >= 0) {
		refuse_no_fds(s, fd, err);
		s->starved_refused++;
	}
	s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return STARVED_REFUSED;
	return again == EAGAIN ? STARVED_EMPTY : STARVED_STUCK;
}

bool sup_conn_accept(struct sup *s)
{
	/* a spare lost to a shortage it could not relieve is taken again once descriptors
	 * are free, so that the next shortage refuses its first connection with the
	 * reason instead of leaving it to time out */
	if (s->spare_fd < 0)
		s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (;;) {
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		struct sup_conn *c = NULL;
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), pidfd;

		if (fd < 0) {
			int err = errno;

			if (err == EINTR || err == ECONNABORTED)
				continue;
			if (out_of_fds(err)) {
				enum starved st = accept_starved(s, err);

				if (st == STARVED_REFUSED)
					continue;
				return st == STARVED_EMPTY;
			}
			if (err != EAGAIN)
				SUP_WARN(-1, 0, "handshake socket: accept: %s", strerror(err));
			return true;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.pid <= 0) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->lock);
		for (uint32_t i = 0; i < s->cfg.max_clients && !c; i++)
			if (s->conns[i].fd < 0)
				c = &s->conns[i];
		pthread_mutex_unlock(&s->lock);
		if (!c) {
			char drop[PROTO_REQ_MAX];

			sup_count(s, PROTO_SUP_clients_refused, 1);
			refuse(fd, CHIPD_E_QUEUE_FULL,
			       "%u connections already (the node's bound max-clients=%u)",
			       s->cfg.max_clients, s->cfg.max_clients);
			/* a hello left unread would make the close reset the connection, and
			 * the client's first read fail before it sees the refusal */
			while (recv(fd, drop, sizeof(drop), MSG_DONTWAIT) > 0)
				;
			SUP_WARN(-1, 0, "pid %d refused: max-clients=%u connections already",
				 (int)cr.pid, s->cfg.max_clients);
			close(fd);
			continue;
		}
		/* the pidfd names the process that connected: it was taken while the
		 * connection is open, and a peer that died before would have hung it up
		 * (the hang-up is seen first, the pidfd only frees the entry sooner) */
		pidfd = sup_pidfd_open(cr.pid);
		if (pidfd < 0 && out_of_fds(-pidfd)) {
			starved_note(s, "pidfd_open", -pidfd);
			refuse_no_fds(s, fd, -pidfd);
			s->starved_refused++;
			continue;
		}
		if (pidfd < 0) {
			close(fd); /* it is gone already */
			continue;
		}
		pthread_mutex_lock(&s->lock);
		c->fd = fd;
		c->pidfd = pidfd;
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->gid = cr.gid;
		c->id = 0;
		c->live = false;
		c->accepted_ns = shm_now_ns();
		c->region = SUP_REGION_NONE;
		c->want_fd = c->want_pid = true;
		pthread_mutex_unlock(&s->lock);
		if (s->accept_starved) {
			SUP_INFO(-1, 0,
				 "handshake socket: descriptors free again; connections refused "
				 "meanwhile: %llu",
				 (unsigned long long)s->starved_refused);
			s->accept_starved = false;
			s->spare_over_limit = false;
			s->starved_refused = 0;
		}
	}
}

/* Reclaims what connection @c held: its client region's slots (a TAKEN one goes RESET
 * for the router to acknowledge), the readers of the streams read through it, the rings
 * the sweep can take at once, and the region itself once nothing uses it. Under
 * sup.lock. */
static void client_gone(struct sup *s, struct sup_conn *c)
{
	sup_region_release(s, c->region);
	c->region = SUP_REGION_NONE;
	sup_conn_orphans(s);
	sup_region_collect(s);
}

/* Ends connection @c: its entry is freed (the loop cancelled or will drop its polls)
 * and, when it was the process's last, everything the process held is reclaimed.
 * Under sup.lock. */
static void conn_end(struct sup *s, struct sup_conn *c, const char *why)
{
	pid_t pid = c->pid;
	bool live = c->live;

	if (live)
		SUP_DEBUG(-1, 0, "client %llu (pid %d) %s", (unsigned long long)c->id, (int)pid, why);
	else
		SUP_DEBUG(-1, 0, "connection of pid %d %s before its hello", (int)pid, why);
	conn_retire(c);
	if (live)
		client_gone(s, c);
	count_clients(s);
}

/* The hello on @c: judged and answered; false when the connection is to be closed. */
static bool hello(struct sup *s, struct sup_conn *c)
{
	char buf[PROTO_REQ_MAX + 1], out[256], why[224];
	struct proto_msg *m;
	struct proto_error pe;
	size_t len;
	ssize_t got = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	bool ok = false;

	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return true; /* nothing yet: polled again */
	if (got <= 0)
		return false;
	if ((size_t)got > PROTO_REQ_MAX) {
		refuse(c->fd, CHIPD_E_TOO_LARGE, "hello longer than %u bytes", PROTO_REQ_MAX);
		return false;
	}
	if (!sup_admit_peer(s, c, why, sizeof(why))) {
		sup_count(s, PROTO_SUP_clients_refused, 1); /* counted before it is seen */
		refuse(c->fd, CHIPD_E_BAD_REQUEST, "%s", why);
		SUP_WARN(-1, 0, "pid %d of uid %u refused: %s", (int)c->pid, (unsigned)c->uid,
			 why);
		return false;
	}
	m = malloc(sizeof(*m)); /* about 42 KiB: not for the event loop's stack */
	if (!m) {
		refuse(c->fd, CHIPD_E_INTERNAL, "out of memory");
		return false;
	}
	if (proto_decode_request(buf, (size_t)got, m, &pe) != 0) {
		refuse(c->fd, (enum chipd_code)pe.code, "%s", pe.message);
	} else if (m->op != PROTO_OP_HELLO) {
		refuse(c->fd, CHIPD_E_BAD_REQUEST,
		       "\"op\": %s is not served on the handshake socket (hello only; requests "
		       "go through the mailbox)",
		       proto_op_name(m->op));
	} else {
		proto_msg_init(m, PROTO_OP_HELLO);
		m->ok = true;
		m->client = (int64_t)++s->next_client;
		m->pid = s->pid;
		m->max_pending = s->cfg.max_client_pending;
		m->max_rings = s->cfg.max_client_rings;
		/* live, with its own region, before the answer leaves: the client claims a
		 * slot only after reading it, and the router must serve the region by then */
		pthread_mutex_lock(&s->lock);
		c->region = sup_region_take(s, c->pid);
		if (c->region != SUP_REGION_NONE) {
			c->id = (uint64_t)m->client;
			c->live = true;
			count_clients(s);
		}
		pthread_mutex_unlock(&s->lock);
		if (c->region == SUP_REGION_NONE) {
			/* every region is some connection's, or still used by a gone one's
			 * streams: those come back within the stuck bound */
			sup_count(s, PROTO_SUP_clients_refused, 1);
			refuse(c->fd, CHIPD_E_QUEUE_FULL,
			       "every client region is in use or being reclaimed (the node's bound "
			       "max-clients=%u): retry",
			       s->cfg.max_clients);
		} else if (proto_encode_answer(m, out, sizeof(out), &len, &pe) != 0) {
			refuse(c->fd, CHIPD_E_INTERNAL, "%s", pe.message);
		} else {
			/* with its own client region: its mailbox and consumer lines
			 * (docs/protocol.md §8.7, §9), no other client's */
			ok = fdpass_send(c->fd, out, len, s->node.pool[c->region].fd,
					 MSG_DONTWAIT) == (ssize_t)len;
			if (ok)
				SUP_DEBUG(-1, 0, "client %llu: pid %d", (unsigned long long)c->id,
					  (int)c->pid);
		}
	}
	free(m);
	return ok;
}

void sup_conn_event(struct sup *s, uint32_t i, uint32_t revents)
{
	struct sup_conn *c = &s->conns[i];
	const char *why = NULL;
	char b;

	if (c->fd < 0 || c->closing)
		return;
	if (!c->live) {
		/* the hello is read before a hang-up that came with it is looked at */
		bool keep = (revents & POLLIN) ? hello(s, c)
					       : !(revents & (POLLHUP | POLLERR | POLLRDHUP));

		if (!keep)
			why = c->live ? "could not be answered" : "closed";
	} else if (revents & (POLLHUP | POLLERR | POLLRDHUP)) {
		why = "hung up";
	} else if (revents & POLLIN) {
		ssize_t got = recv(c->fd, &b, 1, MSG_DONTWAIT);

		if (got == 0)
			why = "hung up";
		else if (got > 0)
			why = "sent more than its hello: closed";
		else if (errno != EAGAIN && errno != EINTR)
			why = "failed";
	}
	pthread_mutex_lock(&s->lock);
	if (why)
		conn_end(s, c, why);
	else
		c->want_fd = true; /* polled again */
	pthread_mutex_unlock(&s->lock);
}

void sup_conn_exited(struct sup *s, uint32_t i)
{
	struct sup_conn *c = &s->conns[i];

	pthread_mutex_lock(&s->lock);
	if (c->fd >= 0 && !c->closing)
		conn_end(s, c, "exited");
	pthread_mutex_unlock(&s->lock);
}

/* The tick's liveness of a slot owner in live region @k: the region's client, or a
 * live process whose slot has not stood in one state for SUP_UNCONNECTED_MS (time to
 * read the router's refusal: a forked child of the client, or a pid written by hand);
 * a dead pid is dead at once. Under sup.lock. */
struct tick_ctx {
	struct sup *s;
	uint32_t k;
};

static bool tick_alive(void *ctx, uint32_t slot, uint64_t ctl, uint64_t start)
{
	const struct tick_ctx *t = ctx;
	struct sup *s = t->s;
	uint64_t now = shm_now_ns();
	size_t at = (size_t)t->k * s->node.pool_mbox[t->k].nslots + slot;

	if (MBOX_CTL_PID(ctl) == (s->region_pid[t->k] & 0xffffff))
		return true;
	if (slot >= s->node.pool_mbox[t->k].nslots)
		return true;
	if (!shm_proc_alive(MBOX_CTL_PID(ctl), start))
		return false;
	if (s->slot_seen_ctl[at] != ctl) {
		s->slot_seen_ctl[at] = ctl;
		s->slot_seen_ns[at] = now;
		return true;
	}
	if (now - s->slot_seen_ns[at] < SUP_UNCONNECTED_MS * SHM_NS_PER_MS)
		return true;
	SUP_INFO(-1, 0, "client region %u, slot %u: owner pid %d is not its client: reclaimed",
		 t->k, slot, (int)MBOX_CTL_PID(ctl));
	return false;
}

void sup_conn_tick(struct sup *s, uint64_t now)
{
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->cfg.max_clients; i++) {
		struct sup_conn *c = &s->conns[i];

		if (c->fd >= 0 && !c->live && !c->closing &&
		    now - c->accepted_ns >= (uint64_t)PROTO_HELLO_WAIT_MS * SHM_NS_PER_MS)
			conn_end(s, c, "sent no hello within 2 s: closed");
	}
	for (uint32_t k = 0; k < s->node.npool; k++) {
		struct tick_ctx t = {s, k};

		if (s->region_state[k] == SUP_REGION_LIVE)
			sup_count(s, PROTO_SUP_mbox_resets,
				  (uint64_t)mbox_reap_by(&s->node.pool_mbox[k], tick_alive, &t));
	}
	sup_region_collect(s);
	pthread_mutex_unlock(&s->lock);
}

void sup_conn_orphans(struct sup *s)
{
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used || e->ended || e->forwarding || e->reader_closed || e->client == 0 ||
		    sup_conn_reader_live(s, e))
			continue;
		/* a client that read its stream to the end and went away before the sweep
		 * saw the end: nothing to cancel, and the sweep below gives the ring back */
		if (ring_end_flags(sup_table_ring(s, e)))
			continue;
		SUP_INFO((int)e->chip, e->id, "client pid %d (its region %u) is gone: cancelling",
			 (int)e->client, e->region);
		sup_table_close_reader(s, e);
	}
	sup_table_sweep(s);
}
