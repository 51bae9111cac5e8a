/* sup_region.c - the client regions (docs/protocol.md §8.7): one sealed memfd per
 * connection, holding that client's own mailbox and the consumer lines of the rings it
 * holds, so that a stray write of one client reaches its own requests only.
 *
 * The node created the pool before the workers forked (proto_node_create), so every
 * process of chipd maps every region; a client gets one with its hello answer and no
 * other. Its life, under sup.lock:
 *
 *   FREE --hello--> LIVE --hang-up--> GONE --no entry uses it, grace passed--> SCRUB
 *   SCRUB --router--> FREE
 *
 * GONE lasts while a stream of the gone client still uses the region (its ring's
 * consumer line is there: the worker reads the closed word to cancel it), and then
 * while a live worker may still be writing into it for a stream released meanwhile:
 * the grace (sup_region_grace). A worker thread that writes into a client region for
 * a request (S: the output and the token's wake; O: an ERROR's wake) does it inside a
 * pass section, its pass word odd (worker/wrk_internal.h); the region waits until
 * every pass word seen odd at a release moved, or that worker died. A worker stalled
 * inside one is killed within --progress-ms or --stuck-ms: the wait is bounded. The router
 * scrubs a region (every page given back, the mailbox laid out anew) in its own thread,
 * between two requests, so it never holds a ticket in a region being scrubbed; free
 * regions are handed out oldest first.
 *
 * The router serves every live region's mailbox: it polls them round robin, spins,
 * then sleeps on all their doorbells at once (futex_waitv) together with the router
 * bell, a futex word in its own memory that the event loop rings when a region went
 * live or is to be scrubbed. Each doorbell is in its client's region: a client that
 * scribbles its own doorbell delays only its own requests, by at most the router's
 * slice. */
#include "sup.h"
#include "sup_cancel.h"
#include "sup_log.h"

#include "wait.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* With more live regions than one futex_waitv holds (the router bell takes one word),
 * the router sleeps at most this long, and looks at the others after each sleep. */
#define SUP_REGION_POLL_NS (1ull * SHM_NS_PER_MS)

int sup_region_init(struct sup *s)
{
	uint32_t n = s->node.npool;

	s->region_state = calloc(n, sizeof(*s->region_state));
	s->region_pid = calloc(n, sizeof(*s->region_pid));
	s->region_free = calloc(n, sizeof(*s->region_free));
	s->view.idx = calloc(n, sizeof(*s->view.idx));
	s->view.pid = calloc(n, sizeof(*s->view.pid));
	s->region_grace = calloc((size_t)n * s->cfg.chips, sizeof(*s->region_grace));
	if (!s->region_state || !s->region_pid || !s->region_free || !s->view.idx ||
	    !s->view.pid || !s->region_grace)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		s->region_free[i] = i;
	s->free_head = 0;
	s->free_count = n;
	/* the view is built at the router's first look */
	s->view.epoch = atomic_load_explicit(&s->region_epoch, memory_order_relaxed) - 1;
	return 0;
}

void sup_region_free(struct sup *s)
{
	free(s->region_state);
	free(s->region_pid);
	free(s->region_free);
	free(s->view.idx);
	free(s->view.pid);
	free(s->region_grace);
	s->region_grace = NULL;
	s->region_state = NULL;
	s->region_pid = NULL;
	s->region_free = NULL;
	s->view.idx = NULL;
	s->view.pid = NULL;
}

void sup_router_wake(struct sup *s)
{
	atomic_fetch_add_explicit(&s->router_bell, 1, memory_order_seq_cst);
	(void)shm_futex_wake_private(&s->router_bell);
}

/* A region changed state: the router's view is stale. Under sup.lock. */
static void changed(struct sup *s)
{
	/* the epoch before the bell: a router that read the bell after this ring sees
	 * the epoch moved (ready) */
	atomic_fetch_add_explicit(&s->region_epoch, 1, memory_order_seq_cst);
	sup_router_wake(s);
}

uint32_t sup_region_take(struct sup *s, pid_t pid)
{
	uint32_t k;

	if (s->free_count == 0)
		return SUP_REGION_NONE;
	k = s->region_free[s->free_head];
	s->free_head = (s->free_head + 1) % s->node.npool;
	s->free_count--;
	/* its mailbox is laid out now, so a region's pages are touched only once a
	 * client gets it; the router is its server (the same process) from here on */
	if (proto_node_client_open(&s->node, k) != 0 ||
	    mbox_server_attach(&s->node.pool_mbox[k]) < 0) {
		SUP_ERR(-1, 0, "client region %u: its mailbox could not be laid out: retired", k);
		return SUP_REGION_NONE;
	}
	mbox_server_take_oversize(&s->node.pool_mbox[k]);
	s->region_state[k] = SUP_REGION_LIVE;
	s->region_pid[k] = pid;
	changed(s);
	return k;
}

/* The reaper's liveness in a region whose client is gone: nobody. */
static bool nobody_alive(void *ctx, uint32_t slot, uint64_t ctl, uint64_t start)
{
	(void)ctx, (void)slot, (void)ctl, (void)start;
	return false;
}

void sup_region_release(struct sup *s, uint32_t k)
{
	if (k >= s->node.npool || s->region_state[k] != SUP_REGION_LIVE)
		return;
	sup_count(s, PROTO_SUP_mbox_resets,
		  (uint64_t)mbox_reap_by(&s->node.pool_mbox[k], nobody_alive, NULL));
	s->region_state[k] = SUP_REGION_GONE;
	s->region_pid[k] = 0;
	changed(s);
}

void sup_region_grace(struct sup *s, uint32_t k, uint32_t chip, pid_t pid)
{
	const struct proto_node_worker *d;
	struct sup_grace *g;
	uint64_t o, st;

	if (k >= s->node.npool || chip >= s->cfg.chips || pid <= 0 || !s->region_grace ||
	    s->workers[chip].pid != pid)
		return; /* no live worker: a dead one writes nothing */
	d = &s->node.dir[chip];
	g = &s->region_grace[(size_t)k * s->cfg.chips + chip];
	/* Dekker with wrk_pass_enter, all seq_cst: the generation bump (the caller's,
	 * ring_reset's seq_cst RMW) before, the pass words' loads here. A word read even
	 * means any section the worker enters later sees the new generation, or (a stream
	 * the worker ended itself) is for another stream. */
	o = atomic_load_explicit(&d->pass_o, memory_order_seq_cst);
	st = atomic_load_explicit(&d->pass_s, memory_order_seq_cst);
	if (!(o & 1) && !(st & 1))
		return;
	/* a later release's odd words supersede an earlier one's: a word that moved
	 * past the earlier one's value was seen moving, or is the one awaited now */
	*g = (struct sup_grace){pid, s->workers[chip].pid_start, o & 1 ? o : 0, st & 1 ? st : 0};
}

/* Whether a pass word seen odd (@seen; 0: none awaited) moved. Acquire: it was moved
 * by wrk_pass_leave (release) or a later step of that release sequence, so the
 * section's writes come before the scrub. */
static bool passed(uint64_t seen, _Atomic uint64_t *word)
{
	return !seen || atomic_load_explicit(word, memory_order_acquire) != seen;
}

/* Whether region @k still waits for a worker that may write into it. Every wait ends
 * once that worker's words moved or it died, looked at on every collect (each tick). */
static bool in_grace(struct sup *s, uint32_t k)
{
	bool wait = false;

	for (uint32_t c = 0; c < s->cfg.chips; c++) {
		struct sup_grace *g = &s->region_grace[(size_t)k * s->cfg.chips + c];
		struct proto_node_worker *d = &s->node.dir[c];

		if (!g->pid)
			continue;
		if (s->workers[c].pid != g->pid || s->workers[c].pid_start != g->pid_start ||
		    (passed(g->pass_o, &d->pass_o) && passed(g->pass_s, &d->pass_s)))
			*g = (struct sup_grace){0};
		else
			wait = true;
	}
	return wait;
}

void sup_region_collect(struct sup *s)
{
	bool any = false;

	if (!s->region_state)
		return;
	for (uint32_t k = 0; k < s->node.npool; k++) {
		bool used = false;

		if (s->region_state[k] != SUP_REGION_GONE)
			continue;
		for (uint32_t i = 0; i < s->nreqs && !used; i++)
			used = s->reqs[i].used && s->reqs[i].region == k;
		if (used || in_grace(s, k))
			continue;
		s->region_state[k] = SUP_REGION_SCRUB;
		any = true;
	}
	if (any)
		changed(s);
}

bool sup_region_still(struct sup *s, uint32_t k, pid_t pid)
{
	bool live;

	if (atomic_load_explicit(&s->region_epoch, memory_order_acquire) == s->view.epoch)
		return true; /* nothing changed since the view was built */
	pthread_mutex_lock(&s->lock);
	live = k < s->node.npool && s->region_state[k] == SUP_REGION_LIVE &&
	       s->region_pid[k] == pid;
	pthread_mutex_unlock(&s->lock);
	return live;
}

/* Scrubs region @k for its next client and frees it. Router thread, region SCRUB:
 * nobody else touches it. The slots its gone client still held (a RESET not yet
 * acknowledged, a slot written after the reap) are counted as the resets they are. */
static void scrub(struct sup *s, uint32_t k)
{
	struct mbox *mb = &s->node.pool_mbox[k];
	uint32_t held = 0;
	int rc;

	for (uint32_t i = 0; i < mb->nslots; i++)
		held += MBOX_CTL_STATE(mbox_ctl(mb, i)) != MBOX_FREE;
	sup_count(s, PROTO_SUP_mbox_resets, held);
	rc = proto_node_client_scrub(&s->node, k);
	pthread_mutex_lock(&s->lock);
	if (rc) {
		/* never handed out again: a region half scrubbed is no client's */
		SUP_ERR(-1, 0, "client region %u: scrub failed (%s): retired", k, strerror(-rc));
	} else {
		s->region_state[k] = SUP_REGION_FREE;
		s->region_free[(s->free_head + s->free_count) % s->node.npool] = k;
		s->free_count++;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Rebuilds the router's view when a region changed, scrubbing those handed over. */
static void refresh(struct sup *s)
{
	struct sup_view *v = &s->view;
	uint32_t epoch = atomic_load_explicit(&s->region_epoch, memory_order_acquire);
	uint32_t nscrub = 0;

	if (epoch == v->epoch)
		return;
	pthread_mutex_lock(&s->lock);
	v->epoch = atomic_load_explicit(&s->region_epoch, memory_order_acquire);
	v->n = 0;
	for (uint32_t k = 0; k < s->node.npool; k++) {
		if (s->region_state[k] == SUP_REGION_LIVE) {
			v->idx[v->n] = k;
			v->pid[v->n++] = s->region_pid[k];
		} else if (s->region_state[k] == SUP_REGION_SCRUB) {
			nscrub++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (v->cursor >= v->n)
		v->cursor = 0;
	/* SCRUB regions are the router's alone: nothing else changes their state */
	for (uint32_t k = 0; nscrub && k < s->node.npool; k++) {
		pthread_mutex_lock(&s->lock);
		bool mine = s->region_state[k] == SUP_REGION_SCRUB;
		pthread_mutex_unlock(&s->lock);
		if (mine) {
			scrub(s, k);
			nscrub--;
		}
	}
}

/* One round over the live regions from the cursor: the first event, or false. */
static bool poll_round(struct sup *s, struct mbox_event *ev, uint32_t *region, pid_t *pid)
{
	struct sup_view *v = &s->view;

	for (uint32_t j = 0; j < v->n; j++) {
		uint32_t at = (v->cursor + j) % v->n, k = v->idx[at];

		if (mbox_server_poll(&s->node.pool_mbox[k], ev)) {
			/* the next round starts after this region: no client waits behind
			 * another's stream of requests */
			v->cursor = (at + 1) % v->n;
			*region = k;
			*pid = v->pid[at];
			return true;
		}
	}
	return false;
}

/* Whether the router has something to look at: an attention bit of a live region,
 * the bell rung since @bell, a region changed since the view was built (a change that
 * came between the view and the bell's read rang a bell already read), or the quit.
 * seq_cst: pairs with the announcements. */
static bool ready(struct sup *s, uint32_t bell)
{
	struct sup_view *v = &s->view;

	if (atomic_load_explicit(&s->router_quit, memory_order_seq_cst) ||
	    atomic_load_explicit(&s->router_bell, memory_order_seq_cst) != bell ||
	    atomic_load_explicit(&s->region_epoch, memory_order_seq_cst) != v->epoch ||
	    sup_fwd_ready(s) || sup_ccl_ready(s))
		return true;
	for (uint32_t j = 0; j < v->n; j++)
		if (mbox_server_ready(&s->node.pool_mbox[v->idx[j]]))
			return true;
	return false;
}

struct ready_arg {
	struct sup *s;
	uint32_t bell;
};

static bool ready_fn(void *arg)
{
	struct ready_arg *a = arg;

	return ready(a->s, a->bell);
}

/* Spins on ready() for the spin budget (the plain one, then the router's adaptive
 * extra; shm_spin), then sleeps on the bell, every live region's doorbell (the first
 * of them that fit SHM_WAITV_MAX; with more, for at most SUP_REGION_POLL_NS) and the
 * slots of the submits in flight until @deadline_ns. */
static void wait_any(struct sup *s, uint64_t deadline_ns)
{
	struct sup_view *v = &s->view;
	struct shm_waitv w[SHM_WAITV_MAX];
	uint32_t bell = atomic_load_explicit(&s->router_bell, memory_order_seq_cst), n = 1;
	struct ready_arg ra = {s, bell};
	uint64_t start = shm_now_ns(), now;
	bool all;

	/* as every wait: past its first 2 us the spin yields, so on fewer cores than
	 * threads the worker and the client it waits for get the CPU it would burn */
	if (shm_spin(ready_fn, &ra, SHM_SPIN_NS_DEFAULT, shm_spin_budget(&s->router_spin, 0),
		     deadline_ns))
		return;
	now = shm_now_ns();
	w[0] = (struct shm_waitv){&s->router_bell, bell, true};
	for (uint32_t j = 0; j < v->n && n < SHM_WAITV_MAX; j++, n++) {
		_Atomic uint32_t *word;

		w[n].expected = mbox_server_announce(&s->node.pool_mbox[v->idx[j]], &word);
		w[n].word = word;
		w[n].private_word = false;
	}
	all = v->n + 1 <= SHM_WAITV_MAX;
	/* the workers' answers to submits and cancels in flight wake it too */
	n = sup_fwd_announce(s, w, n, SHM_WAITV_MAX, &all);
	n = sup_ccl_announce(s, w, n, SHM_WAITV_MAX, &all);
	if (!all && deadline_ns - now > SUP_REGION_POLL_NS)
		deadline_ns = now + SUP_REGION_POLL_NS;
	if (ready(s, bell))
		return;
	if (shm_futex_waitv(w, n, deadline_ns) == -ENOSYS) /* before Linux 5.16: poll */
		(void)shm_futex_wait_private(&s->router_bell, bell,
					     now + SUP_REGION_POLL_NS < deadline_ns
						 ? now + SUP_REGION_POLL_NS
						 : deadline_ns);
	/* woken by work (not the deadline): how long it slept teaches the spin */
	if (ready(s, bell))
		shm_spin_learn(&s->router_spin, start, shm_now_ns(), true);
}

int sup_region_next(struct sup *s, struct mbox_event *ev, uint32_t *region, pid_t *pid,
		    uint64_t deadline_ns)
{
	for (;;) {
		if (atomic_load_explicit(&s->router_quit, memory_order_acquire))
			return -EINTR;
		refresh(s);
		if (poll_round(s, ev, region, pid))
			return 0;
		if (sup_fwd_ready(s) || sup_ccl_ready(s))
			return -EAGAIN;
		if (shm_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		wait_any(s, deadline_ns);
	}
}
