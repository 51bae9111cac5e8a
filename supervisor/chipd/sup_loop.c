/* sup_loop.c - the supervisor's event loop on liburing: a signalfd (TERM, INT, HUP,
 * CHLD), one pidfd per running worker, a periodic timerfd, and the handshake socket:
 * the listening socket, each client connection and each client's pidfd (sup_conn.c).
 * Worker deaths arrive through the pidfds, client ends through their connections'
 * hang-up or pidfds; the tick drives heartbeats, restarts, hello timeouts, slots of
 * unconnected owners, readiness, the watchdog, and the drain and stop sequence:
 *
 *   RUN -drain/stop/TERM-> DRAINING (new work refused: draining; in-flight requests
 *   finish until the grace ends) -> SHUTDOWN (every worker gets shutdown: the streams
 *   still open end exactly once) -> KILL (SIGKILL to the groups still there) -> done
 *
 * The routine work waits for no worker: heartbeats, shutdowns and the re-queue of a
 * dead worker's unstarted requests are posted on one tick and their answers read on
 * later ones (sup_post), and a dead client's streams are cancelled through their rings
 * (sup_table_close_reader), so one stuck worker never delays another chip's death, a
 * signal or a heartbeat. Nor does the spawner: a restart is asked of it on one tick
 * and ends when its socket becomes readable with the reply (or 5 s later, given up).
 * (--trace's start and collect still wait, each call bounded by SUP_FORWARD_MS.)
 */
#include "sup.h"
#include "sup_spawner.h"
#include "sup_files.h"
#include "sup_log.h"
#include "sup_notify.h"

#include "proc.h"
#include "proto.h"
#include "ring.h"
#include "wait.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define TAG_SIGNAL	 1ull
#define TAG_TIMER	 2ull
#define TAG_WAKE	 3ull
#define TAG_SPAWNER	 4ull	/* the spawner's pidfd: its death ends chipd */
#define TAG_LISTEN	 5ull	/* the handshake socket: connections to accept */
#define TAG_IGNORE	 6ull	/* the completion of a poll removal */
#define TAG_SPAWN_REPLY	 7ull	/* the spawner's socket: a restart's reply came */
#define TAG_PIDFD	 100ull /* + chip */
/* A client connection's poll: kind << 56 | the entry's generation << 24 | its index,
 * so that the completion of a poll of a released entry is recognised and dropped. */
#define TAG_CONN_FD	 1ull
#define TAG_CONN_PID	 2ull
#define CONN_TAG(kind, gen, i) ((kind) << 56 | (uint64_t)(gen) << 24 | (uint64_t)(i))
#define CONN_TAG_KIND(t)       ((t) >> 56)
#define CONN_TAG_GEN(t)	       ((uint32_t)((t) >> 24))
#define CONN_TAG_INDEX(t)      ((uint32_t)((t)&0xffffffu))
#define SHUTDOWN_WAIT_MS 3000u	/* after shutdown, before SIGKILL */
#define KILL_WAIT_MS	 2000u	/* after SIGKILL, before giving up on a pidfd */

enum phase { PH_START, PH_RUN, PH_DRAIN, PH_SHUTDOWN, PH_KILL, PH_DONE };

struct loop {
	struct sup *s;
	struct io_uring ring;
	int sigfd, timerfd;
	int armed[CHIPD_MAX_CHIPS]; /* the pidfd polled for each chip, -1 none */
	bool spawn_armed; /* the spawner's socket is polled (a restart awaits its reply) */
	enum phase phase;
	uint64_t deadline_ns; /* of the current phase */
	uint32_t tick_ms;     /* the timer's period now: SUP_TICK_MS or SUP_IDLE_TICK_MS */
	/* 0, or when chipd's own grace after a SIGTERM or SIGINT ends: the drain ends then
	 * at the latest, even one a request began first with a longer grace (drain_over) */
	uint64_t signal_deadline_ns;
	int exit_code;
	/* the listening socket is not polled: accepting failed for want of descriptors
	 * (sup_conn_accept), it is polled again on the next tick */
	bool listen_paused;
	/* SHUTDOWN: each chip's shutdown call, and whether it went out (posted, or the
	 * worker was gone or killed); one not out yet is posted again on the next tick */
	struct sup_post shut[CHIPD_MAX_CHIPS];
	bool shut_out[CHIPD_MAX_CHIPS];
};

static int set_tick(struct loop *l, uint32_t ms)
{
	struct itimerspec its = {
	    .it_interval = {ms / 1000u, (long)(ms % 1000u) * (long)SHM_NS_PER_MS},
	    .it_value = {ms / 1000u, (long)(ms % 1000u) * (long)SHM_NS_PER_MS},
	};

	if (timerfd_settime(l->timerfd, 0, &its, NULL) != 0)
		return -errno;
	l->tick_ms = ms;
	return 0;
}

/* Whether anything may need the fine tick: a phase other than RUN, a chip not
 * READY (starting, backing off, failed), a live request, or a watchdog whose half
 * interval is shorter than the idle tick. (A heartbeat's answer is read at the next
 * tick either way; the stuck limit is seconds.) */
static bool node_busy(struct loop *l)
{
	struct sup *s = l->s;
	bool busy = l->phase != PH_RUN ||
		    (s->cfg.watchdog_usec && s->cfg.watchdog_usec / 2u < SUP_IDLE_TICK_MS * 1000u);

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->cfg.chips && !busy; i++)
		busy = s->workers[i].state != CHIPD_CHIP_READY || s->workers[i].load > 0;
	pthread_mutex_unlock(&s->lock);
	return busy;
}

static struct io_uring_sqe *get_sqe(struct loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	return sqe;
}

static int arm_events(struct loop *l, int fd, uint64_t tag, unsigned events)
{
	struct io_uring_sqe *sqe = get_sqe(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, fd, events);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)tag);
	return 0;
}

static int arm(struct loop *l, int fd, uint64_t tag)
{
	return arm_events(l, fd, tag, POLLIN);
}

/* Cancels the poll armed with @tag (its completion, -ECANCELED, is then dropped for
 * its stale generation). */
static void disarm(struct loop *l, uint64_t tag)
{
	struct io_uring_sqe *sqe = get_sqe(l);

	if (!sqe)
		return;
	io_uring_prep_poll_remove(sqe, tag);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)TAG_IGNORE);
}

/* Arms the polls each connection wants, and releases retired ones once their polls
 * are cancelled. */
static void arm_conns(struct loop *l)
{
	struct sup *s = l->s;
	bool cancelled = false;

	for (uint32_t i = 0; i < s->cfg.max_clients; i++) {
		struct sup_conn *c = &s->conns[i];

		if (c->fd < 0)
			continue;
		if (c->closing) {
			if (c->armed_fd)
				disarm(l, CONN_TAG(TAG_CONN_FD, c->gen, i));
			if (c->armed_pid)
				disarm(l, CONN_TAG(TAG_CONN_PID, c->gen, i));
			cancelled |= c->armed_fd || c->armed_pid;
			c->armed_fd = c->armed_pid = false;
			continue;
		}
		if (c->want_fd && !c->armed_fd &&
		    arm_events(l, c->fd, CONN_TAG(TAG_CONN_FD, c->gen, i), POLLIN | POLLRDHUP) == 0) {
			c->armed_fd = true;
			c->want_fd = false;
		}
		if (c->want_pid && !c->armed_pid &&
		    arm(l, c->pidfd, CONN_TAG(TAG_CONN_PID, c->gen, i)) == 0) {
			c->armed_pid = true;
			c->want_pid = false;
		}
	}
	/* the removals go in before any descriptor closes: closed under an armed poll, a
	 * socket would stay open in the ring and its client would never see it end */
	if (cancelled)
		io_uring_submit(&l->ring);
	for (uint32_t i = 0; i < s->cfg.max_clients; i++)
		if (s->conns[i].fd >= 0 && s->conns[i].closing)
			sup_conn_release(s, i);
}

/* A connection's poll completed with @res: dropped when the entry was released since
 * (another generation); else the connection's event or its process's exit. */
static void on_conn(struct loop *l, uint64_t tag, int res)
{
	struct sup *s = l->s;
	uint32_t i = CONN_TAG_INDEX(tag);
	struct sup_conn *c;

	if (i >= s->cfg.max_clients)
		return;
	c = &s->conns[i];
	if (c->fd < 0 || c->gen != CONN_TAG_GEN(tag))
		return;
	if (CONN_TAG_KIND(tag) == TAG_CONN_FD) {
		c->armed_fd = false;
		if (res == -ECANCELED)
			return;
		sup_conn_event(s, i, res < 0 ? POLLERR : (uint32_t)res);
	} else {
		c->armed_pid = false;
		if (res == -ECANCELED)
			return;
		sup_conn_exited(s, i);
	}
}

static void arm_pidfds(struct loop *l)
{
	for (uint32_t i = 0; i < l->s->cfg.chips; i++) {
		int fd = l->s->workers[i].pidfd;

		if (fd >= 0 && l->armed[i] != fd && arm(l, fd, TAG_PIDFD + i) == 0)
			l->armed[i] = fd;
	}
}

/* A restart awaits the spawner's reply: its socket is polled, so that the restart
 * ends when the reply comes (sup_workers_spawn_reply), not at the next tick. */
static void arm_spawn_reply(struct loop *l)
{
	if (l->s->spawn_worker && !l->spawn_armed && arm(l, l->s->spawn_fd, TAG_SPAWN_REPLY) == 0)
		l->spawn_armed = true;
}

static int loop_open(struct loop *l, struct sup *s)
{
	sigset_t set;
	int rc;

	memset(l, 0, sizeof(*l));
	l->s = s;
	l->sigfd = l->timerfd = -1;
	for (uint32_t i = 0; i < CHIPD_MAX_CHIPS; i++)
		l->armed[i] = -1;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	l->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->sigfd < 0 || l->timerfd < 0)
		return -errno;
	rc = set_tick(l, SUP_TICK_MS);
	if (rc)
		return rc;
	rc = io_uring_queue_init(256, &l->ring, 0);
	if (rc)
		return rc;
	if (arm(l, l->sigfd, TAG_SIGNAL) || arm(l, l->timerfd, TAG_TIMER) ||
	    arm(l, s->loop_wake_fd, TAG_WAKE) || arm(l, s->spawner_pidfd, TAG_SPAWNER) ||
	    arm(l, s->listen_fd, TAG_LISTEN))
		return -EBUSY;
	arm_pidfds(l);
	return 0;
}

static void loop_close(struct loop *l)
{
	io_uring_queue_exit(&l->ring);
	if (l->sigfd >= 0)
		close(l->sigfd);
	if (l->timerfd >= 0)
		close(l->timerfd);
}

/* A SIGTERM, SIGINT or SIGQUIT stops chipd within its own grace (--grace-ms), also
 * when a drain or stop request with a longer grace came first: scancel and systemctl
 * stop SIGKILL after their own limits (Slurm's KillWait, 30 s; TimeoutStopSec). */
static void signal_grace(struct loop *l)
{
	uint64_t end = shm_now_ns() + (uint64_t)l->s->cfg.grace_ms * SHM_NS_PER_MS;

	if (!l->signal_deadline_ns || end < l->signal_deadline_ns)
		l->signal_deadline_ns = end;
	if (l->phase == PH_DRAIN && l->deadline_ns > l->signal_deadline_ns)
		SUP_INFO(-1, 0, "grace cut to %u ms (chipd's own, at a signal)",
			 l->s->cfg.grace_ms);
}

/* Whether the drain's grace is over at @now: its own, or a signal's or a later
 * request's (stop_cut_ns) if that ends first. */
static bool drain_over(const struct loop *l, uint64_t now)
{
	uint64_t cut = atomic_load_explicit(&l->s->stop_cut_ns, memory_order_relaxed);

	return now >= l->deadline_ns || (l->signal_deadline_ns && now >= l->signal_deadline_ns) ||
	       (cut && now >= cut);
}

static void on_signals(struct loop *l)
{
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
		case SIGQUIT: /* a stop as any other (Ctrl-\ in a terminal), not a core dump */
			SUP_INFO(-1, 0, "signal %u from pid %u: stopping", si.ssi_signo,
				 si.ssi_pid);
			sup_ask_stop(l->s, l->s->cfg.grace_ms);
			signal_grace(l);
			break;
		case SIGHUP:
			SUP_INFO(-1, 0,
				 "SIGHUP: nothing to reload (configuration is fixed at start)");
			break;
		default: /* SIGCHLD: workers are reaped through their pidfds */
			break;
		}
	}
}

static void set_sup_state(struct sup *s, enum chipd_sup_state st)
{
	atomic_store_explicit(&s->sup_state, (int)st, memory_order_release);
}

/* Start-up is over once every chip is READY or FAILED. */
static void check_ready(struct loop *l)
{
	struct sup *s = l->s;
	bool any = false;
	char msg[96];

	if (!sup_workers_settled(s))
		return;
	for (uint32_t i = 0; i < s->cfg.chips; i++)
		any |= s->workers[i].state == CHIPD_CHIP_READY;
	if (!any) {
		SUP_ERR(-1, 0, "no worker could start: giving up");
		l->exit_code = 1;
		sup_ask_stop(s, 0);
		l->phase = PH_RUN;
		return;
	}
	{
		int starting = CHIPD_SUP_STARTING;

		/* a stop asked for meanwhile wins: never READY after DRAINING */
		if (!atomic_compare_exchange_strong_explicit(&s->sup_state, &starting,
							     CHIPD_SUP_READY, memory_order_acq_rel,
							     memory_order_acquire)) {
			l->phase = PH_RUN;
			return;
		}
	}
	atomic_store_explicit(&s->node.desc->started_ns, shm_now_ns(), memory_order_relaxed);
	shm_region_ready(&s->node.region);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving %u chips", s->cfg.chips);
	sup_notify(s->cfg.notify_socket, msg);
	if (s->notify_fd >= 0) {
		sup_notify_fd(s->notify_fd);
		s->notify_fd = -1;
	}
	sup_detached_ready(s);
	SUP_INFO(-1, 0, "ready: instance %s, %u chips, region %s", s->cfg.instance, s->cfg.chips,
		 s->region_name);
	l->phase = PH_RUN;
}

/* Clients that are gone (no live connection: sup_conn.c) with streams open: their
 * streams' readers are closed, so each request is cancelled by its worker at its next
 * round, without a call to the worker (a stuck one holds nothing up; it is the
 * heartbeat's); the sweep reclaims the rings once ended (or takes them back). A
 * client's hang-up does all this at once; the tick catches a submit the router was
 * serving meanwhile, slots of owners that never connected and hellos that never came. */
static void dead_clients(struct sup *s, uint64_t now)
{
	sup_conn_tick(s, now);
	pthread_mutex_lock(&s->lock);
	sup_conn_orphans(s);
	pthread_mutex_unlock(&s->lock);
}

/* Posts each worker's shutdown not yet out, and reads the answers that came. A worker
 * answers once its streams ended; its exit comes through its pidfd, and one still
 * there at the phase's deadline is killed (stop_tick). */
static void shutdown_tick(struct loop *l)
{
	struct sup *s = l->s;
	struct proto_msg *m = NULL;

	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];
		int rc;

		if (l->shut[i].pending) {
			rc = sup_post_poll(w, &l->shut[i], NULL);
			if (rc != -EINPROGRESS && rc != 0 && rc != -EPIPE)
				SUP_WARN((int)i, 0, "shutdown: %s", strerror(-rc));
			continue;
		}
		if (l->shut_out[i])
			continue;
		if (w->pid <= 0) {
			l->shut_out[i] = true;
			continue;
		}
		if (!m && !(m = malloc(sizeof(*m))))
			return; /* the next tick tries again; the deadline kills the rest */
		proto_msg_init(m, PROTO_OP_SHUTDOWN);
		rc = sup_post_send(w, &l->shut[i], m);
		if (rc == -EAGAIN)
			continue; /* every slot busy: the next tick */
		l->shut_out[i] = true;
		if (rc) {
			SUP_WARN((int)i, 0, "cannot post shutdown to pid %d (%s): SIGKILL",
				 (int)w->pid, strerror(-rc));
			(void)sup_pidfd_signal(w->pidfd, SIGKILL); /* the spawner kills its group */
		}
	}
	free(m);
}

static void start_shutdown(struct loop *l, uint64_t now)
{
	struct sup *s = l->s;

	if (s->cfg.trace[0]) {
		uint64_t ev = 0, dr = 0;
		struct proto_error err;

		if (sup_trace(s, PROTO_TRACE_COLLECT, -1, s->cfg.trace, &ev, &dr, &err) == CHIPD_OK)
			SUP_INFO(-1, 0, "trace: %llu events in %s", (unsigned long long)ev,
				 s->cfg.trace);
		else
			SUP_WARN(-1, 0, "trace: %s", err.message);
	}
	/* a re-queue still pending would only hold the stop up: it ends now */
	sup_workers_requeue_end_all(s);
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->cfg.chips; i++)
		s->workers[i].stopping = true;
	pthread_mutex_unlock(&s->lock);
	l->phase = PH_SHUTDOWN;
	l->deadline_ns = now + SHUTDOWN_WAIT_MS * SHM_NS_PER_MS;
	shutdown_tick(l);
}

static bool workers_gone(struct sup *s)
{
	for (uint32_t i = 0; i < s->cfg.chips; i++)
		if (s->workers[i].pid > 0)
			return false;
	return true;
}

static void stop_tick(struct loop *l, uint64_t now)
{
	struct sup *s = l->s;
	uint32_t live;

	switch (l->phase) {
	case PH_RUN: {
		uint64_t req = atomic_load_explicit(&s->stop_req, memory_order_acquire);
		/* set by whoever asked: the request's, or the configured one */
		uint32_t grace = (uint32_t)req;

		if (!req)
			return;
		set_sup_state(s, CHIPD_SUP_DRAINING);
		shm_region_set_state(&s->node.region, SHM_STATE_DRAINING);
		sup_notify(s->cfg.notify_socket, "STOPPING=1");
		SUP_INFO(-1, 0, "draining: grace %u ms", grace);
		l->phase = PH_DRAIN;
		l->deadline_ns = now + (uint64_t)grace * SHM_NS_PER_MS;
	}
		return;
	case PH_DRAIN:
		pthread_mutex_lock(&s->lock);
		live = sup_table_live(s);
		pthread_mutex_unlock(&s->lock);
		if (live == 0 || drain_over(l, now)) {
			if (live)
				SUP_WARN(-1, 0, "grace over with %u requests in flight", live);
			start_shutdown(l, now);
		}
		return;
	case PH_SHUTDOWN:
		shutdown_tick(l);
		if (workers_gone(s)) {
			l->phase = PH_DONE;
		} else if (now >= l->deadline_ns) {
			for (uint32_t i = 0; i < s->cfg.chips; i++)
				if (s->workers[i].pid > 0) {
					SUP_WARN((int)i, 0, "worker pid %d still there: SIGKILL",
						 (int)s->workers[i].pid);
					(void)sup_pidfd_signal(s->workers[i].pidfd, SIGKILL);
				}
			l->phase = PH_KILL;
			l->deadline_ns = now + KILL_WAIT_MS * SHM_NS_PER_MS;
		}
		return;
	case PH_KILL:
		if (workers_gone(s) || now >= l->deadline_ns)
			l->phase = PH_DONE;
		return;
	default:
		return;
	}
}

static void on_tick(struct loop *l)
{
	struct sup *s = l->s;
	uint64_t now = shm_now_ns(), expirations;

	while (read(l->timerfd, &expirations, sizeof(expirations)) > 0)
		;
	sup_workers_tick(s, now);
	if (l->phase == PH_START && atomic_load_explicit(&s->stop_req, memory_order_acquire))
		l->phase = PH_RUN; /* stopped before it was ready */
	if (l->phase == PH_START)
		check_ready(l);
	if (l->phase == PH_RUN || l->phase == PH_DRAIN)
		dead_clients(s, now);
	stop_tick(l, now);
	if (node_busy(l) != (l->tick_ms == SUP_TICK_MS))
		(void)set_tick(l, l->tick_ms == SUP_TICK_MS ? SUP_IDLE_TICK_MS : SUP_TICK_MS);
	/* WATCHDOG=1 at least every half of WATCHDOG_USEC: sent a tick before the last
	 * tick before the half is over (a late tick stays in time), not on the first tick
	 * after it (up to 250 ms late) */
	if (s->cfg.watchdog_usec &&
	    now + 2ull * l->tick_ms * SHM_NS_PER_MS >= s->watchdog_next_ns) {
		sup_notify(s->cfg.notify_socket, "WATCHDOG=1");
		s->watchdog_next_ns = now + (uint64_t)s->cfg.watchdog_usec * 1000u / 2;
	}
}

int sup_loop_run(struct sup *s)
{
	struct loop l;
	int rc = loop_open(&l, s);

	if (rc) {
		SUP_ERR(-1, 0, "event loop: %s", strerror(-rc));
		loop_close(&l);
		return 1;
	}
	while (l.phase != PH_DONE) {
		struct io_uring_cqe *cqe;
		uint64_t tag;
		int res;

		io_uring_submit(&l.ring);
		rc = io_uring_wait_cqe(&l.ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc) {
			SUP_ERR(-1, 0, "io_uring_wait_cqe: %s", strerror(-rc));
			l.exit_code = 1;
			break;
		}
		tag = (uint64_t)(uintptr_t)io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&l.ring, cqe);
		if (tag == TAG_SIGNAL) {
			on_signals(&l);
			arm(&l, l.sigfd, TAG_SIGNAL);
		} else if (tag == TAG_TIMER) {
			on_tick(&l);
			arm(&l, l.timerfd, TAG_TIMER);
			if (l.listen_paused) /* out of descriptors: tried again once a tick */
				l.listen_paused = arm(&l, s->listen_fd, TAG_LISTEN) != 0;
		} else if (tag == TAG_WAKE) {
			uint64_t n;

			while (read(s->loop_wake_fd, &n, sizeof(n)) > 0)
				;
			on_tick(&l); /* a stop was asked: start it now, on the fine tick */
			arm(&l, s->loop_wake_fd, TAG_WAKE);
		} else if (tag == TAG_SPAWNER) { /* not re-armed: it dies once */
			l.exit_code = sup_spawner_lost(s);
			on_tick(&l); /* the stop starts now */
		} else if (tag == TAG_LISTEN) {
			l.listen_paused = !sup_conn_accept(s);
			if (!l.listen_paused)
				arm(&l, s->listen_fd, TAG_LISTEN);
		} else if (tag == TAG_SPAWN_REPLY) {
			l.spawn_armed = false; /* re-armed below while the reply is awaited */
			sup_workers_spawn_reply(s, shm_now_ns());
		} else if (CONN_TAG_KIND(tag) == TAG_CONN_FD || CONN_TAG_KIND(tag) == TAG_CONN_PID) {
			on_conn(&l, tag, res);
		} else if (tag >= TAG_PIDFD && tag < TAG_PIDFD + s->cfg.chips) {
			uint32_t chip = (uint32_t)(tag - TAG_PIDFD);

			l.armed[chip] = -1;
			sup_worker_exited(s, &s->workers[chip]); /* re-armed below if not reaped */
			if (l.tick_ms != SUP_TICK_MS) /* its restart is due on the fine tick */
				(void)set_tick(&l, SUP_TICK_MS);
		}
		arm_pidfds(&l);
		arm_conns(&l);
		arm_spawn_reply(&l);
	}
	sup_workers_spawn_abandon(s);
	loop_close(&l);
	return l.exit_code;
}
