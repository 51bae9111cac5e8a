/* sup_workers.c - one worker process per chip: its control region, fork, the child's
 * set-up, death, re-queue of its unstarted requests (posted on one tick,
 * completed on a later one: the loop never waits for a worker), restart with
 * exponential backoff, and the crash-loop limit. Runs on the event loop thread (and
 * on main before any thread starts); the router only reads worker state under
 * sup.lock and calls workers through sup_call_run. */
#include "sup.h"
#include "sup_spawner.h"
#include "sup_files.h"
#include "sup_log.h"
#include "sup_register.h"

#include "proc.h"
#include "proto.h"
#include "ring.h"
#include "wait.h"
#include "wrk.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t ctl_size(void)
{
	return SHM_BODY_OFFSET + mbox_size(SUP_WRK_SLOTS, PROTO_REQ_MAX, PROTO_RESP_MAX);
}

int sup_workers_init(struct sup *s)
{
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];
		int rc;

		w->chip = i;
		w->gpu = s->cfg.backend == SUP_BACKEND_SIM ? -1 : s->cfg.gpus[i];
		w->pidfd = -1;
		w->backoff_ms = s->cfg.backoff_min_ms;
		rc = shm_region_create_anon(&w->ctl, SHM_KIND_CONTROL, ctl_size());
		if (rc == 0)
			rc = mbox_init(&w->mb, shm_region_body(&w->ctl),
				       shm_region_body_size(&w->ctl), SUP_WRK_SLOTS, PROTO_REQ_MAX,
				       PROTO_RESP_MAX);
		if (rc)
			return rc;
		shm_region_ready(&w->ctl);
		s->node.dir[i].gpu = w->gpu;
	}
	return 0;
}

void sup_workers_free(struct sup *s)
{
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		if (s->workers[i].pidfd >= 0)
			close(s->workers[i].pidfd);
		s->workers[i].pidfd = -1;
		shm_region_detach(&s->workers[i].ctl);
	}
}

void sup_worker_set_state(struct sup *s, struct sup_worker *w, enum chipd_chip_state st)
{
	w->state = st;
	/* release: a reader that sees the state sees the pid and times stored before */
	atomic_store_explicit(&s->node.dir[w->chip].state, (uint32_t)st, memory_order_release);
}

struct sup_call *sup_call_new(enum proto_op op)
{
	struct sup_call *c = malloc(sizeof(*c));

	if (c)
		proto_msg_init(&c->req, op);
	return c;
}

void sup_call_free(struct sup_call *c)
{
	free(c);
}

enum chipd_code sup_call_run(struct sup *s, struct sup_worker *w, struct sup_call *c,
			     struct proto_error *err)
{
	struct proto_error local;
	size_t len;
	uint32_t alen;

	(void)s;
	if (!err)
		err = &local;
	c->rc = proto_encode_request(&c->req, c->buf, PROTO_REQ_MAX, &len, err);
	if (c->rc == 0)
		c->rc = mbox_call(&w->mb, c->buf, (uint32_t)len, c->buf, sizeof(c->buf), &alen,
				  shm_deadline_in(SUP_FORWARD_MS * SHM_NS_PER_MS));
	if (c->rc == 0 && proto_decode_answer(c->req.op, c->buf, alen, &c->ans, err))
		c->rc = -EPROTO;
	if (c->rc == 0 || c->rc == -ETIMEDOUT)
		atomic_store_explicit(&w->call_silent_ns, c->rc ? shm_now_ns() : 0,
				      memory_order_relaxed);
	if (c->rc) {
		proto_fail(err, CHIPD_E_WORKER_LOST, "chip %u did not answer (%s)", w->chip,
			   strerror(-c->rc));
	} else if (!c->ans.ok) {
		*err = c->ans.err; /* its refusal, as it said it */
	} else {
		return CHIPD_OK;
	}
	err->chip = w->chip;
	return (enum chipd_code)err->code;
}

bool sup_worker_silent(struct sup *s, struct sup_worker *w)
{
	uint64_t since = atomic_load_explicit(&w->call_silent_ns, memory_order_relaxed);

	return since && atomic_load_explicit(&s->node.dir[w->chip].heartbeat_ns,
					     memory_order_relaxed) < since;
}

/* ---- the child ---- */

_Noreturn void sup_worker_child(struct sup *s, struct sup_worker *w, pid_t parent, bool trace)
{
	struct wrk_config cfg;
	sigset_t none, stop;
	int rc;

	/* its own group: the supervisor ends a worker and anything it started at once */
	setpgid(0, 0);
	/* racy by nature: set it, then check the parent is still the one */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(70);
	/* The supervisor ends a worker through its mailbox (shutdown: every stream ends
	 * exactly once) and then SIGKILL. Slurm sends SIGTERM to every process of the
	 * step at once; a worker killed by it would cut its streams short while the
	 * supervisor drains, so the worker keeps TERM, INT, QUIT and HUP blocked. */
	sigemptyset(&none);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGQUIT);
	sigaddset(&stop, SIGHUP);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_SETMASK, &none, NULL);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	closefrom(3); /* the ring, signalfd, timerfd, pidfds, pid file: the parent's */
	if (w->gpu >= 0)
		setproctitle("worker %u (gpu %d)", w->chip, w->gpu);
	else
		setproctitle("worker %u (sim)", w->chip);

	wrk_config_default(&cfg);
	cfg.chip = w->chip;
	cfg.dev_kind = s->cfg.backend == SUP_BACKEND_HIP ? DEV_HIP : DEV_SIM;
	cfg.dev_index = w->gpu < 0 ? 0 : w->gpu;
	cfg.no_overlap = s->cfg.no_overlap;
	cfg.nbanks = s->cfg.no_overlap ? 1 : s->cfg.banks;
	cfg.queue_cap = s->cfg.queue;
	cfg.kv_blocks = s->cfg.kv_blocks;
	cfg.max_request_host_bytes = s->cfg.max_request_host_bytes;
	cfg.max_request_dev_bytes = s->cfg.max_request_device_bytes;
	cfg.max_request_steps = s->cfg.max_request_steps;
	cfg.registry = s->reg.entries;
	cfg.registry_len = s->reg.n;
	/* chipd --trace: every worker records from its start, a restarted one too; so
	 * does one started while a trace op records on its chip (it lives as long as
	 * this process: nothing to free) */
	if ((s->cfg.trace[0] || trace) && wrk_trace_create(&cfg.trace, WRK_TRACE_SPANS) != 0)
		SUP_WARN((int)w->chip, 0, "trace: no memory for this worker's spans");
	rc = wrk_main(&cfg, &w->ctl, &s->node);
	if (rc)
		SUP_ERR((int)w->chip, 0, "worker ended with %s", strerror(-rc));
	_exit(rc ? 1 : 0);
}

/* ---- start ---- */

/* Asks the spawner for @w's worker, its state reset for it first. Returns 0 or -errno
 * (-EINPROGRESS while an earlier start is unanswered: the caller retries). */
static int spawn_ask(struct sup *s, struct sup_worker *w)
{
	bool trace;
	int rc;

	/* a worker of an earlier start given up on is gone before this one's state is
	 * reset; while that start is unanswered, none is asked */
	rc = sup_spawner_idle(s);
	if (rc)
		return rc;
	sup_worker_hb_drop(w);
	/* a restarted worker finds its control region reset (mbox_server_attach recovers
	 * what the dead one held) */
	shm_region_bump_generation(&w->ctl);
	/* the dead worker may have said it refuses new work (sup_worker_routable) */
	shm_region_ready(&w->ctl);
	/* a chip whose trace records (chipctl trace) gets a worker that records from
	 * its start */
	pthread_mutex_lock(&s->lock);
	trace = w->tracing;
	w->spawn_trace = trace;
	pthread_mutex_unlock(&s->lock);
	return sup_spawner_ask(s, w->chip, trace);
}

/* Records the worker @pid (a start's reply; @pidfd from the spawner, opened before it
 * could reap the worker: it names this worker for good, a pid can be reused) as @w's:
 * STARTING, its heartbeats from now. */
static void spawned(struct sup *s, struct sup_worker *w, pid_t pid, int pidfd)
{
	struct proto_node_worker *d = &s->node.dir[w->chip];
	uint64_t now = shm_now_ns();

	pthread_mutex_lock(&s->lock);
	w->pid = pid;
	w->pid_start = shm_proc_start_time(pid);
	w->pidfd = pidfd;
	w->stopping = false;
	sup_worker_set_state(s, w, CHIPD_CHIP_STARTING);
	pthread_mutex_unlock(&s->lock);
	atomic_store_explicit(&d->pid_start, w->pid_start, memory_order_relaxed);
	atomic_store_explicit(&d->started_ns, now, memory_order_relaxed);
	atomic_store_explicit(&d->restarts, w->restarts, memory_order_relaxed);
	atomic_fetch_add_explicit(&d->incarnation, 1, memory_order_relaxed);
	atomic_store_explicit(&d->pid, (uint32_t)pid, memory_order_release);
	sup_worker_health_reset(w, now);
	w->healthy_since_ns = now;
	sup_count(s, PROTO_SUP_worker_starts, 1);
	SUP_INFO((int)w->chip, 0, "worker started, pid %d", (int)pid);
}

int sup_worker_spawn(struct sup *s, struct sup_worker *w)
{
	pid_t pid;
	int pidfd, rc = spawn_ask(s, w);

	if (rc)
		return rc;
	pid = sup_spawner_reply(s, &pidfd, true);
	if (pid < 0)
		return pid;
	spawned(s, w, pid, pidfd);
	return 0;
}

/* The restart of @w is due: its start is asked of the spawner, and ends when the reply
 * comes (sup_workers_spawn_reply), the event loop serving meanwhile. A registration
 * waits for the start to end (sup_register_spawn_begin), so the worker is either
 * running when one begins (it gets the load or the unload) or forked after it ended
 * (it reads the final entry). Not while one is under way: a later tick. */
static void restart(struct sup *s, struct sup_worker *w, uint64_t now)
{
	int rc;

	if (!sup_register_spawn_begin(s))
		return;
	rc = spawn_ask(s, w);
	if (rc == 0) {
		s->spawn_worker = w; /* the registration's lock is held until it ends */
		return;
	}
	sup_register_spawn_end(s);
	if (rc == -EINPROGRESS) /* said once, at its -ETIMEDOUT */
		SUP_DEBUG((int)w->chip, 0,
			  "cannot start the worker yet: the spawner has not answered an earlier "
			  "start");
	else
		SUP_ERR((int)w->chip, 0, "cannot start the worker: %s", strerror(-rc));
	w->restart_at_ns = now + (uint64_t)w->backoff_ms * SHM_NS_PER_MS;
}

void sup_workers_spawn_reply(struct sup *s, uint64_t now)
{
	struct sup_worker *w = s->spawn_worker;
	pid_t pid;
	int pidfd;

	if (!w)
		return;
	pid = sup_spawner_reply(s, &pidfd, false);
	if (pid == -EINPROGRESS)
		return;
	s->spawn_worker = NULL;
	sup_register_spawn_end(s);
	if (pid < 0) {
		SUP_ERR((int)w->chip, 0, "cannot start the worker: %s", strerror((int)-pid));
		w->restart_at_ns = now + (uint64_t)w->backoff_ms * SHM_NS_PER_MS;
		return;
	}
	if (atomic_load_explicit(&s->sup_state, memory_order_acquire) >= CHIPD_SUP_DRAINING) {
		/* chipd stops: the worker would only be shut down again */
		SUP_INFO((int)w->chip, 0, "worker pid %d started during the stop: SIGKILL",
			 (int)pid);
		(void)sup_pidfd_signal(pidfd, SIGKILL); /* the spawner reaps it */
		close(pidfd);
		return;
	}
	spawned(s, w, pid, pidfd);
}

void sup_workers_spawn_abandon(struct sup *s)
{
	if (!s->spawn_worker)
		return;
	/* its reply, if it comes, is the spawner's to forget: it leaves at the close of
	 * its socket, and the worker dies with it */
	s->spawn_worker = NULL;
	s->spawn_awaited = false;
	sup_register_spawn_end(s);
}

bool sup_workers_settled(struct sup *s)
{
	for (uint32_t i = 0; i < s->cfg.chips; i++)
		if (s->workers[i].state != CHIPD_CHIP_READY &&
		    s->workers[i].state != CHIPD_CHIP_FAILED)
			return false;
	return true;
}

/* ---- death ---- */

struct sup_worker *sup_worker_pick(struct sup *s, uint64_t skip)
{
	struct sup_worker *best = NULL;

	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];

		if (!(skip & (1ull << i)) && sup_worker_routable(w) &&
		    (!best || w->unended < best->unended))
			best = w;
	}
	return best;
}

void sup_worker_move(struct sup *s, struct sup_req *e, struct sup_worker *to)
{
	struct sup_worker *from = &s->workers[e->chip];

	if (from->load > 0)
		from->load--;
	if (from->unended > 0)
		from->unended--;
	to->load++;
	to->unended++;
	e->chip = to->chip;
}

/* Whether @e's posted re-queue landed: @to's worker (still the pid it was posted to)
 * admitted it (@rc and @m: the poll of its post), and the ring went to that worker,
 * which is its producer from now on. Under sup.lock. */
static bool requeue_landed(struct sup *s, struct sup_req *e, struct sup_worker *to, int rc,
			   const struct proto_msg *m)
{
	if (rc != 0 || !m->ok || to->pid != e->rq_pid ||
	    ring_hand_over(sup_table_ring(s, e), e->rq_pid) != 0)
		return false;
	e->producer = e->rq_pid;
	e->requeue = false;
	e->forwarding = false;
	return true;
}

/* Ends the re-queue of @e with @code (requeue_end: worker_lost): the supervisor holds
 * its ring, so it writes the terminal record as the producer's stand-in. Under
 * sup.lock. */
static void requeue_end_as(struct sup *s, struct sup_req *e, enum chipd_code code,
			   const char *why)
{
	e->requeue = false;
	e->forwarding = false; /* so that sup_table_end counts the end */
	sup_table_end(s, e, code);
	SUP_INFO((int)e->chip, e->id, "re-queue from chip %u failed (%s): %s", e->rq_from, why,
		 chipd_code_name(code));
}

static void requeue_end(struct sup *s, struct sup_req *e, const char *why)
{
	requeue_end_as(s, e, CHIPD_E_WORKER_LOST, why);
}

/* Takes the unstarted stream @e of the dead worker @dead over for a re-queue: the
 * supervisor holds the ring (ring_take_over) until another worker admitted the
 * request, and only then names it the producer (requeue_step), so a refused or failed
 * move can still be ended here; the reader keeps waiting meanwhile (protocol.md 5.4).
 * Under sup.lock. */
static void requeue_start(struct sup *s, struct sup_worker *dead, struct sup_req *e)
{
	e->rq_from = dead->chip;
	if (ring_take_over(sup_table_ring(s, e)) != 0) {
		requeue_end(s, e, "its ring cannot be taken over");
		return;
	}
	e->producer = shm_proc_self();
	e->requeue = true;
	e->forwarding = true;
	e->rq_since_ns = shm_now_ns();
	e->rq_post = (struct sup_post){0};
	e->rq_refused = 0;
}

/* One tick of @e's re-queue, without waiting: a posted assign's answer is read (ok:
 * the ring goes to that worker; no_capacity: the next tick tries another READY chip;
 * refused otherwise, failed, or its worker gone: worker_lost; none
 * within SUP_FORWARD_MS: given up, the ring's reader closed so that a worker that
 * admitted it cancels it, worker_lost); else the assign is posted to the least loaded
 * READY worker (every slot busy: the next tick, for up to SUP_FORWARD_MS). A stream
 * nobody reads any more is not worth a move: it ends. @m is scratch. Under sup.lock. */
static void requeue_step(struct sup *s, struct sup_req *e, struct proto_msg *m, uint64_t now)
{
	struct sup_worker *to = &s->workers[e->chip];
	struct ring *r = sup_table_ring(s, e);
	struct proto_error err;
	const char *why;
	int rc;

	if (e->rq_post.pending) {
		rc = sup_post_poll(to, &e->rq_post, m);
		if (rc == -EINPROGRESS) {
			if (now < e->rq_post.posted_ns ||
			    now - e->rq_post.posted_ns <= (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS)
				return;
			sup_post_drop(to, &e->rq_post);
			sup_table_close_reader(s, e);
			requeue_end(s, e, "no answer to the assign: given up");
			return;
		}
		if (requeue_landed(s, e, to, rc, m)) {
			SUP_INFO((int)to->chip, e->id, "re-queued from chip %u", e->rq_from);
			return;
		}
		if (rc == 0 && !m->ok && m->err.code == CHIPD_E_NO_CAPACITY) {
			/* that chip has no room now: the next tick offers it to another,
			 * as a submit's forward does (sup_forward.c) */
			e->rq_refused |= 1ull << to->chip;
			e->rq_post = (struct sup_post){0};
			return;
		}
		if (rc != 0 || m->ok) /* it may hold the request: it cancels it */
			sup_table_close_reader(s, e);
		if (rc)
			why = strerror(-rc);
		else
			why = m->ok ? "its worker is gone" : m->err.message;
		requeue_end(s, e, why);
		return;
	}
	if (e->client == 0 || e->reader_closed || ring_reader_closed(r) ||
	    !sup_conn_reader_live(s, e)) {
		requeue_end(s, e, "nobody reads it");
		return;
	}
	/* its callable quarantined (this request was in flight on the deaths that did
	 * it) or being unregistered: cancelled, not moved to kill another chip */
	if (sup_register_refuses(s, e->wl, &err) != CHIPD_OK) {
		requeue_end_as(s, e, CHIPD_E_CANCELLED, err.message);
		return;
	}
	/* skipping the chips without its callable (a replay of it failed there) */
	to = sup_worker_pick(s, e->rq_refused | ~sup_register_chips(s, e->wl));
	if (!to) {
		requeue_end(s, e, e->rq_refused ? "no ready chip has room for it" : "no ready chip");
		return;
	}
	sup_table_assign(s, e, m);
	rc = sup_post_send(to, &e->rq_post, m);
	if (rc == -EAGAIN && (now < e->rq_since_ns ||
			      now - e->rq_since_ns <= (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS))
		return; /* every slot busy: the next tick */
	if (rc) {
		requeue_end(s, e, strerror(-rc));
		return;
	}
	sup_worker_move(s, e, to);
	e->rq_pid = to->pid;
}

/* Re-queue work due on this tick. After a tick this late that the supervisor itself
 * did not run (@resumed), the bounds start again: the workers were not asked. Event
 * loop. */
static void requeues_tick(struct sup *s, uint64_t now, bool resumed)
{
	struct proto_msg *m = NULL;

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used || !e->requeue)
			continue;
		if (resumed)
			e->rq_since_ns = e->rq_post.posted_ns = now;
		if (!m && !(m = malloc(sizeof(*m))))
			break; /* the next tick tries again */
		requeue_step(s, e, m, now);
	}
	pthread_mutex_unlock(&s->lock);
	free(m);
}

void sup_workers_requeue_end_all(struct sup *s)
{
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used || !e->requeue)
			continue;
		if (e->rq_post.pending) {
			sup_post_drop(&s->workers[e->chip], &e->rq_post);
			sup_table_close_reader(s, e);
		}
		/* the stop's grace is over for it, as for every stream still open then */
		requeue_end_as(s, e, CHIPD_E_CANCELLED, "chipd is stopping (the grace is over)");
	}
	pthread_mutex_unlock(&s->lock);
}

struct sup_worker *sup_workers_requeue_cancel(struct sup *s, struct sup_req *e,
					      struct proto_msg *m)
{
	struct sup_worker *to = &s->workers[e->chip];

	/* admitted there: one producer per ring, so that worker ends it, not us */
	if (e->rq_post.pending && requeue_landed(s, e, to, sup_post_poll(to, &e->rq_post, m), m)) {
		e->cancel_asked = true;
		SUP_INFO((int)to->chip, e->id, "re-queued from chip %u, being cancelled",
			 e->rq_from);
		return to;
	}
	/* still unanswered: a worker that admits it after this look finds its reader
	 * closed and cancels it, as after a re-queue given up (requeue_step) */
	if (e->rq_post.pending)
		sup_table_close_reader(s, e);
	sup_post_drop(to, &e->rq_post);
	requeue_end_as(s, e, CHIPD_E_CANCELLED, "cancelled by its client");
	return NULL;
}

/* Ends or moves every stream of the dead worker @w: an unstarted one (no token out) is
 * taken over for a re-queue when @requeue_unstarted, unless its client cancelled it
 * (it ends cancelled); one whose re-queue was posted to @w is re-queued again, or
 * ends. One the stop's grace left running ends cancelled, as its worker's shutdown
 * would have ended it (docs/protocol.md 8.4, drain): @w died while it was being
 * stopped, killed when it did not end in time. */
static void orphaned_streams(struct sup *s, struct sup_worker *w, bool requeue_unstarted)
{
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];
		struct ring *r = &s->rings[i]; /* its capacity ours, not the header's */
		bool unstarted;

		if (!e->used || e->ended || e->chip != w->chip)
			continue;
		unstarted = atomic_load_explicit(&r->hdr->head, memory_order_acquire) == 0;
		if (e->requeue) {
			/* its slot went with the worker; the next tick posts it elsewhere */
			sup_post_drop(w, &e->rq_post);
			if (!requeue_unstarted || !unstarted)
				requeue_end(s, e, "the worker it was posted to died");
			continue;
		}
		if (e->forwarding)
			continue;
		sup_worker_orphan(s, w, e, requeue_unstarted);
	}
	pthread_mutex_unlock(&s->lock);
}

void sup_worker_orphan(struct sup *s, struct sup_worker *w, struct sup_req *e,
		       bool requeue_unstarted)
{
	struct ring *r = sup_table_ring(s, e); /* its capacity ours, not the header's */
	bool unstarted = atomic_load_explicit(&r->hdr->head, memory_order_acquire) == 0;

	if (ring_finished(r)) {
		e->ended = true;
		return;
	}
	if (requeue_unstarted && unstarted && !e->data_in_len && !e->cancel_asked &&
	    !e->fill_held) {
		requeue_start(s, w, e);
	} else {
		/* a stream its client cancelled, or the grace is over for, ends as its
		 * worker would have ended it */
		enum chipd_code code = e->cancel_asked || w->stopping ? CHIPD_E_CANCELLED
				       : e->fill_held		      ? CHIPD_E_TIMEOUT
								      : CHIPD_E_WORKER_LOST;

		sup_table_end(s, e, code);
		SUP_INFO((int)w->chip, e->id, "stream ended: %s%s", chipd_code_name(code),
			 e->cancel_asked  ? " (its client had cancelled it: not moved)"
			 : w->stopping	  ? " (the stop's grace is over)"
			 : e->fill_held	  ? " (its fill held the loader past --fill-ms: not moved)"
			 : e->data_in_len ? " (its input was in the data area: not moved)"
					  : "");
	}
}

/* Decides what follows a crash: a restart after the backoff, or FAILED. */
static void schedule_restart(struct sup *s, struct sup_worker *w, uint64_t now)
{
	uint32_t limit = s->cfg.crash_limit, recent = 0;
	uint64_t window = (uint64_t)s->cfg.crash_window_ms * SHM_NS_PER_MS;

	if (now - w->healthy_since_ns >= window)
		w->backoff_ms = s->cfg.backoff_min_ms; /* it ran well for a while */
	w->deaths_ns[w->ndeaths++ % 16] = now;
	for (uint32_t i = 0; i < 16 && i < w->ndeaths; i++)
		if (now - w->deaths_ns[i] < window)
			recent++;
	if (limit && recent >= limit) {
		sup_worker_set_state(s, w, CHIPD_CHIP_FAILED);
		SUP_ERR((int)w->chip, 0, "%u deaths in %u ms: chip failed, not restarted", recent,
			s->cfg.crash_window_ms);
		return;
	}
	w->restart_at_ns = now + (uint64_t)w->backoff_ms * SHM_NS_PER_MS;
	SUP_INFO((int)w->chip, 0, "restart in %u ms", w->backoff_ms);
	w->backoff_ms =
	    w->backoff_ms * 2 > s->cfg.backoff_max_ms ? s->cfg.backoff_max_ms : w->backoff_ms * 2;
	sup_worker_set_state(s, w, CHIPD_CHIP_BACKOFF);
}

/* The dead worker's stand-in as the writer of its counter block: its gauges (queue
 * depth, active requests, KV blocks in use) said what it held, and it holds nothing
 * now. Counters stay: they count what happened. A restarted worker writes its own. */
static void zero_gauges(struct sup *s, struct sup_worker *w)
{
	struct ctr_block *b = &s->node.wrk_ctr[w->chip];

	for (uint32_t i = 0; i < b->count; i++)
		if (ctr_kind_of(b, i) == CTR_GAUGE)
			ctr_set(b, i, 0);
}

void sup_worker_exited(struct sup *s, struct sup_worker *w)
{
	uint64_t now = shm_now_ns();
	bool ours;
	pid_t pid = w->pid;

	/* a readable pidfd means the process ended; the spawner reaps it and logs its
	 * status. Closed under the lock: the router signals through it under the lock */
	sup_worker_hb_drop(w);
	pthread_mutex_lock(&s->lock);
	close(w->pidfd);
	w->pidfd = -1;
	ours = w->stopping ||
	       atomic_load_explicit(&s->sup_state, memory_order_acquire) >= CHIPD_SUP_DRAINING;
	w->pid = 0;
	/* not READY from here on: the router must not choose it */
	sup_worker_set_state(s, w, ours ? CHIPD_CHIP_STOPPED : CHIPD_CHIP_BACKOFF);
	pthread_mutex_unlock(&s->lock);
	atomic_store_explicit(&s->node.dir[w->chip].pid, 0, memory_order_release);
	sup_log(ours ? SUP_LOG_INFO : SUP_LOG_WARN, (int)w->chip, 0, "worker pid %d ended%s",
		(int)pid, ours ? " (stopping)" : "");
	if (!ours)
		sup_register_worker_died(s, w);
	orphaned_streams(s, w, !ours);
	zero_gauges(s, w);
	sup_trace_parts_remove(s, w->chip);
	if (ours)
		return;
	sup_count(s, PROTO_SUP_worker_deaths, 1);
	pthread_mutex_lock(&s->lock);
	w->restarts++; /* the router's status reads it under the lock */
	schedule_restart(s, w, now);
	pthread_mutex_unlock(&s->lock);
}

void sup_workers_tick(struct sup *s, uint64_t now)
{
	bool draining =
	    atomic_load_explicit(&s->sup_state, memory_order_acquire) >= CHIPD_SUP_DRAINING;
	/* A tick this late means the supervisor itself did not run (SIGSTOP, a
	 * scheduling stall, a slow call on the loop): the workers were not asked
	 * meanwhile, so their heartbeat deadlines start again. */
	bool resumed =
	    s->workers_tick_ns && now - s->workers_tick_ns > SUP_STALL_MS * SHM_NS_PER_MS;

	if (resumed)
		SUP_WARN(-1, 0, "the supervisor did not run for %llu ms: heartbeats start again",
			 (unsigned long long)((now - s->workers_tick_ns) / SHM_NS_PER_MS));
	s->workers_tick_ns = now;
	requeues_tick(s, now, resumed);
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];

		if (w->pid > 0 && (w->state == CHIPD_CHIP_STARTING || w->state == CHIPD_CHIP_READY))
			sup_worker_heartbeat(s, w, now, resumed);
		/* one start at a time; not while a registration is under way: a later tick
		 * (sup_register.h) */
		if (w->state == CHIPD_CHIP_BACKOFF && now >= w->restart_at_ns && !draining &&
		    !s->spawn_worker)
			restart(s, w, now);
	}
	/* a start whose 5 s passed ends here (its reply ends it at once: sup_loop.c) */
	sup_workers_spawn_reply(s, now);
}
