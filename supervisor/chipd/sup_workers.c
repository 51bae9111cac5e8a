/* sup_workers.c - one worker process per chip: its control region, fork, the child's
 * set-up, heartbeats, death, re-queue of its unstarted requests, restart with
 * exponential backoff, and the crash-loop limit. Runs on the event loop thread (and
 * on main before any thread starts); the router only reads worker state under
 * sup.lock and calls workers through sup_call_run. */
#include "sup.h"
#include "sup_log.h"

#include "proc.h"
#include "proto.h"
#include "ring.h"
#include "wait.h"
#include "wrk.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

/* ---- the child ---- */

_Noreturn void sup_worker_child(struct sup *s, struct sup_worker *w, pid_t parent)
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
	 * supervisor drains, so the worker keeps TERM, INT and HUP blocked. */
	sigemptyset(&none);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
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
	rc = wrk_main(&cfg, &w->ctl, &s->node);
	if (rc)
		SUP_ERR((int)w->chip, 0, "worker ended with %s", strerror(-rc));
	_exit(rc ? 1 : 0);
}

/* ---- start ---- */

static void hb_drop(struct sup_worker *w)
{
	if (w->hb_pending)
		mbox_give_up(&w->mb, w->hb_ticket);
	w->hb_pending = false;
}

int sup_worker_spawn(struct sup *s, struct sup_worker *w)
{
	struct proto_node_worker *d = &s->node.dir[w->chip];
	uint64_t now = shm_now_ns();
	pid_t pid;
	int pidfd;

	hb_drop(w);
	/* a restarted worker finds its control region reset (mbox_server_attach recovers
	 * what the dead one held) */
	shm_region_bump_generation(&w->ctl);
	pid = sup_spawner_fork(s, w->chip);
	if (pid < 0)
		return pid;
	/* a pidfd works for any process: the spawner is the parent, we watch */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int rc = -errno;

		kill(-pid, SIGKILL);
		return rc;
	}
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
	w->hb_last_ok_ns = now; /* the stuck clock starts now */
	w->hb_next_ns = now;
	w->healthy_since_ns = now;
	sup_count(s, PROTO_SUP_worker_starts, 1);
	SUP_INFO((int)w->chip, 0, "worker started, pid %d", (int)pid);
	return 0;
}

/* ---- heartbeats ---- */

static void hb_send(struct sup_worker *w, uint64_t now)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;
	size_t len;

	w->hb_next_ns = now;
	if (!m || mbox_claim(&w->mb, &w->hb_ticket) != 0) {
		free(m);
		return; /* every slot busy: try again next tick */
	}
	proto_msg_init(m, PROTO_OP_HEARTBEAT);
	m->seq = (int64_t)++w->hb_seq;
	if (proto_encode_request(m, mbox_req_buf(&w->mb, w->hb_ticket), PROTO_REQ_MAX, &len,
				 &err) != 0 ||
	    mbox_post(&w->mb, w->hb_ticket, (uint32_t)len) != 0) {
		mbox_give_up(&w->mb, w->hb_ticket);
		free(m);
		return;
	}
	w->hb_pending = true;
	free(m);
}

/* Checks a pending heartbeat without waiting: true when it was answered. */
static bool hb_poll(struct sup *s, struct sup_worker *w, uint64_t now)
{
	struct proto_msg *m;
	struct proto_error err;
	const void *buf;
	uint32_t len;
	bool ok = false;
	int rc = mbox_wait(&w->mb, w->hb_ticket, now);

	if (rc == -ETIMEDOUT)
		return false;
	if (rc != 0) { /* the worker left or reset: its death arrives through its pidfd */
		hb_drop(w);
		return false;
	}
	m = malloc(sizeof(*m));
	if (m && mbox_response(&w->mb, w->hb_ticket, &buf, &len) == 0 &&
	    proto_decode_answer(PROTO_OP_HEARTBEAT, buf, len, m, &err) == 0 && m->ok &&
	    m->seq == (int64_t)w->hb_seq)
		ok = true;
	mbox_release(&w->mb, w->hb_ticket);
	w->hb_pending = false;
	free(m);
	if (ok) {
		w->hb_last_ok_ns = now;
		atomic_store_explicit(&s->node.dir[w->chip].heartbeat_ns, now,
				      memory_order_relaxed);
	}
	return ok;
}

static void worker_heartbeat(struct sup *s, struct sup_worker *w, uint64_t now)
{
	if (w->hb_pending && hb_poll(s, w, now) && w->state == CHIPD_CHIP_STARTING) {
		pthread_mutex_lock(&s->lock);
		sup_worker_set_state(s, w, CHIPD_CHIP_READY);
		pthread_mutex_unlock(&s->lock);
		SUP_INFO((int)w->chip, 0, "worker ready, pid %d", (int)w->pid);
	}
	if (!w->hb_pending &&
	    (w->state == CHIPD_CHIP_STARTING ||
	     now >= w->hb_next_ns + (uint64_t)s->cfg.heartbeat_ms * SHM_NS_PER_MS))
		hb_send(w, now);
	if (now - w->hb_last_ok_ns > (uint64_t)s->cfg.stuck_ms * SHM_NS_PER_MS && !w->stopping) {
		SUP_WARN((int)w->chip, 0, "no heartbeat for %u ms: killing pid %d", s->cfg.stuck_ms,
			 (int)w->pid);
		kill(-w->pid, SIGKILL);
		w->hb_last_ok_ns = now; /* its death comes through the pidfd */
	}
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

/* The least loaded READY worker other than @not, or NULL. Under sup.lock. */
static struct sup_worker *pick_other(struct sup *s, const struct sup_worker * not )
{
	struct sup_worker *best = NULL;

	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];

		if (w != not &&w->state == CHIPD_CHIP_READY && (!best || w->load < best->load))
			best = w;
	}
	return best;
}

/* Moves @e (not started: no token out) to another worker, or ends it worker_lost.
 * Called with sup.lock held; drops it around the call to the new worker. The
 * supervisor holds the ring (ring_take_over) until the new worker admitted the
 * request and only then names it the producer, so a refused or failed move can still
 * be ended here. */
static void requeue(struct sup *s, struct sup_worker *dead, struct sup_req *e)
{
	struct sup_worker *to = pick_other(s, dead);
	struct sup_call *c = NULL;
	struct ring r;
	pid_t pid = 0;
	int rc = -ENODEV;

	(void)proto_node_ring(&s->node, sup_table_index(s, e), &r);
	if (to && e->client != 0 && ring_take_over(&r) == 0)
		c = sup_call_new(PROTO_OP_ASSIGN);
	if (c) {
		sup_table_assign(s, e, &c->req);
		pid = to->pid;
		dead->load--;
		to->load++;
		e->chip = to->chip;
		e->producer = shm_proc_self();
		e->forwarding = true;
		pthread_mutex_unlock(&s->lock);
		if (sup_call_run(s, to, c, NULL) != CHIPD_OK)
			rc = c->rc ? c->rc : -EREMOTEIO;
		else
			rc = 0;
		pthread_mutex_lock(&s->lock);
		e->forwarding = false;
		if (rc == 0 && to->pid != pid)
			rc = -EPIPE; /* the new worker died meanwhile */
		if (rc == 0)
			rc = ring_hand_over(&r, pid);
		if (rc == 0)
			e->producer = pid;
	}
	if (rc == 0)
		SUP_INFO((int)to->chip, e->id, "re-queued from chip %u", dead->chip);
	else
		sup_table_end(s, e, CHIPD_E_WORKER_LOST);
	sup_call_free(c);
}

/* Ends or moves every stream of the dead worker @w. */
static void orphaned_streams(struct sup *s, struct sup_worker *w, bool requeue_unstarted)
{
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];
		struct ring r;

		if (!e->used || e->ended || e->forwarding || e->chip != w->chip)
			continue;
		(void)proto_node_ring(&s->node, i, &r);
		if (ring_finished(&r)) {
			e->ended = true;
			continue;
		}
		if (requeue_unstarted &&
		    atomic_load_explicit(&r.hdr->head, memory_order_acquire) == 0)
			requeue(s, w, e);
		else {
			sup_table_end(s, e, CHIPD_E_WORKER_LOST);
			SUP_INFO((int)w->chip, e->id, "stream ended: worker_lost");
		}
	}
	pthread_mutex_unlock(&s->lock);
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

void sup_worker_exited(struct sup *s, struct sup_worker *w)
{
	uint64_t now = shm_now_ns();
	bool ours;
	pid_t pid = w->pid;

	/* a readable pidfd means the process ended; the spawner reaps it and logs its
	 * status */
	close(w->pidfd);
	w->pidfd = -1;
	hb_drop(w);
	pthread_mutex_lock(&s->lock);
	ours = w->stopping ||
	       atomic_load_explicit(&s->sup_state, memory_order_acquire) >= CHIPD_SUP_DRAINING;
	w->pid = 0;
	/* not READY from here on: the router must not choose it */
	sup_worker_set_state(s, w, ours ? CHIPD_CHIP_STOPPED : CHIPD_CHIP_BACKOFF);
	pthread_mutex_unlock(&s->lock);
	atomic_store_explicit(&s->node.dir[w->chip].pid, 0, memory_order_release);
	sup_log(ours ? SUP_LOG_INFO : SUP_LOG_WARN, (int)w->chip, 0, "worker pid %d ended%s",
		(int)pid, ours ? " (stopping)" : "");
	orphaned_streams(s, w, !ours);
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

	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];

		if (w->pid > 0 && (w->state == CHIPD_CHIP_STARTING || w->state == CHIPD_CHIP_READY))
			worker_heartbeat(s, w, now);
		if (w->state == CHIPD_CHIP_BACKOFF && now >= w->restart_at_ns && !draining) {
			int rc = sup_worker_spawn(s, w);

			if (rc) {
				SUP_ERR((int)w->chip, 0, "cannot start the worker: %s",
					strerror(-rc));
				w->restart_at_ns = now + (uint64_t)w->backoff_ms * SHM_NS_PER_MS;
			}
		}
	}
}
