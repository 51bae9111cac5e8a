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
#include "wait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int sup_conn_listen(struct sup *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int n, fd, rc;

	s->listen_fd = -1;
	s->conns = calloc(s->cfg.max_clients, sizeof(*s->conns));
	s->slot_seen_ctl = calloc(s->node.mbox.nslots, sizeof(*s->slot_seen_ctl));
	s->slot_seen_ns = calloc(s->node.mbox.nslots, sizeof(*s->slot_seen_ns));
	s->slot_last_ctl = calloc(s->node.mbox.nslots, sizeof(*s->slot_last_ctl));
	s->slot_last_ns = calloc(s->node.mbox.nslots, sizeof(*s->slot_last_ns));
	s->slot_take_ctl = calloc(s->node.mbox.nslots, sizeof(*s->slot_take_ctl));
	s->slot_keys = calloc(s->node.mbox.nslots, sizeof(*s->slot_keys));
	if (!s->conns || !s->slot_seen_ctl || !s->slot_seen_ns || !s->slot_last_ctl ||
	    !s->slot_last_ns || !s->slot_take_ctl || !s->slot_keys)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->cfg.max_clients; i++)
		s->conns[i].fd = s->conns[i].pidfd = -1;
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
static void conn_retire(struct sup *s, struct sup_conn *c)
{
	c->live = false;
	c->closing = true;
	c->want_fd = c->want_pid = false;
	atomic_fetch_add_explicit(&s->conn_epoch, 1, memory_order_release);
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
	if (s->sock_path[0])
		unlink(s->sock_path);
	s->sock_path[0] = '\0';
	free(s->conns);
	free(s->slot_seen_ctl);
	free(s->slot_seen_ns);
	free(s->slot_last_ctl);
	free(s->slot_last_ns);
	free(s->slot_take_ctl);
	free(s->slot_keys);
	s->conns = NULL;
	s->slot_seen_ctl = s->slot_seen_ns = NULL;
	s->slot_last_ctl = s->slot_last_ns = s->slot_take_ctl = s->slot_keys = NULL;
}

bool sup_conn_pid_live(const struct sup *s, pid_t pid)
{
	for (uint32_t i = 0; pid > 0 && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].pid == pid)
			return true;
	return false;
}

uint32_t sup_conn_slots_held(const struct mbox *mb, pid_t pid, uint32_t slot, uint32_t *below)
{
	uint32_t held = 0;

	*below = 0;
	/* the mailbox's own slot count, never the header's; the owner field is 24 bits */
	for (uint32_t i = 0; pid > 0 && i < mb->nslots; i++) {
		uint64_t c = mbox_ctl(mb, i);

		if (MBOX_CTL_STATE(c) == MBOX_FREE || MBOX_CTL_PID(c) != (pid & 0xffffff))
			continue;
		held++;
		*below += i < slot;
	}
	return held;
}

bool sup_conn_router_check(struct sup *s, pid_t pid)
{
	uint32_t epoch = atomic_load_explicit(&s->conn_epoch, memory_order_acquire);
	bool live;

	if (pid > 0 && pid == s->router_ok_pid && epoch == s->router_ok_epoch)
		return true;
	pthread_mutex_lock(&s->lock);
	epoch = atomic_load_explicit(&s->conn_epoch, memory_order_acquire);
	live = sup_conn_pid_live(s, pid);
	pthread_mutex_unlock(&s->lock);
	if (live) {
		s->router_ok_pid = pid;
		s->router_ok_epoch = epoch;
	}
	return live;
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

void sup_conn_accept(struct sup *s)
{
	for (;;) {
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		struct sup_conn *c = NULL;
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), pidfd;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				SUP_WARN(-1, 0, "handshake socket: accept: %s", strerror(errno));
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
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
		c->slots_taken = 0;
		c->slots_warned_ns = 0;
		c->want_fd = c->want_pid = true;
		pthread_mutex_unlock(&s->lock);
	}
}

/* The reaper's liveness at a client's end: every owner but the gone pid counts as
 * alive (the tick judges the others). */
static bool gone_pid_alive(void *ctx, uint32_t slot, uint64_t ctl, uint64_t start)
{
	const pid_t *gone = ctx;

	(void)slot, (void)start;
	return MBOX_CTL_PID(ctl) != *gone;
}

/* Reclaims what client @pid held, if it has no live connection left: its mailbox slots
 * (a TAKEN one goes RESET for the router to acknowledge), its streams' readers, and
 * the rings the sweep can take at once. Under sup.lock. */
static void client_gone(struct sup *s, pid_t pid)
{
	if (sup_conn_pid_live(s, pid))
		return; /* another connection of the same process lives on */
	sup_count(s, PROTO_SUP_mbox_resets, (uint64_t)mbox_reap_by(&s->node.mbox, gone_pid_alive,
								    &pid));
	sup_conn_orphans(s);
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
	conn_retire(s, c);
	if (live)
		client_gone(s, pid);
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
	m = malloc(sizeof(*m)); /* about 41 KiB: not for the event loop's stack */
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
		if (proto_encode_answer(m, out, sizeof(out), &len, &pe) != 0) {
			refuse(c->fd, CHIPD_E_INTERNAL, "%s", pe.message);
		} else {
			/* live before the answer leaves: the client claims a slot only after
			 * reading it, and the router must know the pid by then */
			pthread_mutex_lock(&s->lock);
			c->id = (uint64_t)m->client;
			c->live = true;
			count_clients(s);
			pthread_mutex_unlock(&s->lock);
			/* with the exchange region: the client's mailbox and consumer
			 * lines (docs/protocol.md §8.7, §9) */
			ok = fdpass_send(c->fd, out, len, s->node.xchg.fd, MSG_DONTWAIT) ==
			     (ssize_t)len;
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

static int cmp_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Whether a slot past its owner's bound that has held control word @c for @held_ns
 * (since the sweep that first saw it; 0 when this sweep did) is taken back: CLAIMED
 * once two sweeps saw it (a claim is posted within microseconds), DONE (an answer left
 * unread) or TAKEN (the router's own answers come within SUP_FORWARD_MS, queue_full
 * at once past the bound; one standing this long may be forged) after
 * SUP_UNREAD_SLOT_MS. POSTED is the router's to take, RESET its to acknowledge. */
static bool over_bound_stale(uint64_t c, uint64_t held_ns, bool seen_before)
{
	switch (MBOX_CTL_STATE(c)) {
	case MBOX_CLAIMED:
		return seen_before;
	case MBOX_DONE:
	case MBOX_TAKEN:
		return seen_before && held_ns >= (uint64_t)SUP_UNREAD_SLOT_MS * SHM_NS_PER_MS;
	default:
		return false;
	}
}

/* Marks in slot_take_ctl what this sweep takes back for --max-client-slots: of each
 * connected owner's slots (any state but FREE) in slot order, those past its first
 * max_client_slots that over_bound_stale picks. One left standing that long past the
 * bound holds a slot other clients need. A slot within the bound is never taken back,
 * however long it is held (its client may be building a request, or read its answer
 * later). Every control word is read once, each slot index is below the mailbox's own
 * count; the times are the supervisor's own, never in shared memory. Under sup.lock. */
static void mark_over_bound(struct sup *s, uint64_t now)
{
	const struct mbox *mb = &s->node.mbox;
	uint32_t bound = s->cfg.max_client_slots, n = 0;

	for (uint32_t i = 0; i < mb->nslots; i++) {
		uint64_t c = mbox_ctl(mb, i);
		bool seen = c == s->slot_last_ctl[i];

		if (!seen) {
			s->slot_last_ctl[i] = c;
			s->slot_last_ns[i] = now;
		}
		s->slot_take_ctl[i] = over_bound_stale(c, now - s->slot_last_ns[i], seen) ? c : 0;
		if (MBOX_CTL_STATE(c) != MBOX_FREE)
			s->slot_keys[n++] = (uint64_t)MBOX_CTL_PID(c) << 32 | i;
	}
	/* grouped by owner, each owner's slots in slot order */
	qsort(s->slot_keys, n, sizeof(*s->slot_keys), cmp_key);
	for (uint32_t k = 0, end; k < n; k = end) {
		pid_t pid = (pid_t)(s->slot_keys[k] >> 32);
		bool live = sup_conn_pid_live(s, pid);

		for (end = k; end < n && (pid_t)(s->slot_keys[end] >> 32) == pid; end++)
			if (!live || end - k < bound)
				s->slot_take_ctl[(uint32_t)s->slot_keys[end]] = 0;
	}
}

/* The connection entry of live client @pid (the first, when it has several), or NULL.
 * Under sup.lock. */
static struct sup_conn *conn_of_pid(struct sup *s, pid_t pid)
{
	for (uint32_t i = 0; pid > 0 && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].pid == pid)
			return &s->conns[i];
	return NULL;
}

/* The tick's liveness of a slot owner: connected, or a live process whose slot has not
 * stood in one state for SUP_UNCONNECTED_MS (time to read the router's refusal); a
 * dead pid is dead at once. A connected owner's slot that mark_over_bound marked, with
 * the control word it marked, counts as dead (and towards the owner's next warning):
 * the reaper moves it to FREE with the next generation (a TAKEN one through RESET), so
 * the owner's late post, wait or read of it fails. Under sup.lock. */
static bool tick_alive(void *ctx, uint32_t slot, uint64_t ctl, uint64_t start)
{
	struct sup *s = ctx;
	uint64_t now = shm_now_ns();
	struct sup_conn *owner = conn_of_pid(s, MBOX_CTL_PID(ctl));

	if (owner) {
		if (slot >= s->node.mbox.nslots || s->slot_take_ctl[slot] != ctl)
			return true;
		owner->slots_taken++;
		return false;
	}
	if (!shm_proc_alive(MBOX_CTL_PID(ctl), start))
		return false;
	if (s->slot_seen_ctl[slot] != ctl) {
		s->slot_seen_ctl[slot] = ctl;
		s->slot_seen_ns[slot] = now;
		return true;
	}
	if (now - s->slot_seen_ns[slot] < SUP_UNCONNECTED_MS * SHM_NS_PER_MS)
		return true;
	SUP_INFO(-1, 0, "mailbox slot %u: owner pid %d never connected: reclaimed", slot,
		 (int)MBOX_CTL_PID(ctl));
	return false;
}

/* One warning per client per SUP_SLOT_WARN_MS about the slots taken back from it,
 * with the count since the last: a hoarding client cannot flood the log. Under
 * sup.lock. */
static void warn_taken(struct sup *s, uint64_t now)
{
	for (uint32_t i = 0; i < s->cfg.max_clients; i++) {
		struct sup_conn *c = &s->conns[i];

		if (!c->slots_taken || (c->slots_warned_ns != 0 &&
					now - c->slots_warned_ns <
					    (uint64_t)SUP_SLOT_WARN_MS * SHM_NS_PER_MS))
			continue;
		SUP_WARN(-1, 0,
			 "took back %u mailbox slots held past the per-client bound "
			 "max-client-slots=%u (claimed and not posted, or answers left unread "
			 "for %u ms) (pid %d)",
			 c->slots_taken, s->cfg.max_client_slots, SUP_UNREAD_SLOT_MS, (int)c->pid);
		c->slots_taken = 0;
		c->slots_warned_ns = now;
	}
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
	mark_over_bound(s, now);
	sup_count(s, PROTO_SUP_mbox_resets, (uint64_t)mbox_reap_by(&s->node.mbox, tick_alive, s));
	warn_taken(s, now);
	pthread_mutex_unlock(&s->lock);
}

void sup_conn_orphans(struct sup *s)
{
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used || e->ended || e->forwarding || e->reader_closed || e->client == 0 ||
		    sup_conn_pid_live(s, e->client))
			continue;
		SUP_INFO((int)e->chip, e->id, "client pid %d is gone: cancelling", (int)e->client);
		sup_table_close_reader(s, e);
	}
	sup_table_sweep(s);
}
