/* sup_register.c - callables registered while the node runs (docs/callables.md,
 * "Registration"): the supervisor's registry, the register and unregister ops, and
 * the quarantine of a callable that keeps killing its workers.
 *
 * The registry is an array of struct wrk_reg_entry in anonymous shared memory made
 * before the spawner is forked, so every worker (a restarted one too) sees it: a
 * starting worker loads every LIVE entry before it serves its mailbox, that is before
 * it can be READY (wrk_register.c). A registration first runs the library's code in
 * a probe, a short-lived child process bounded in time (sup_probe.c), while the router
 * serves other clients (the op is put off and run again until the probe answers);
 * once it passed, the supervisor loads that same file here (the file's checks, its
 * table, its init: the workloads op answers its parameters from here), then on every
 * running worker through its mailbox (load), one after the other; the first refusal
 * or a worker that does not answer within SUP_FORWARD_MS (dead or stuck) unloads it
 * again from the chips that took it and from here, and the caller gets that chip's
 * error. Only then is the entry LIVE.
 *
 * An unregistration's step posts each chip's unload and reads the answers to those
 * posted before, without waiting (unload_left): the caller, or the router for a caller
 * gone, asks again.
 *
 * reg_lock (router thread) covers a whole registration or unregistration step; the event
 * loop starts a worker only when it can take it (sup_register_spawn_begin), so a
 * worker is forked either before one began (it is running, and gets the load or the
 * unload) or after it ended (it reads the final entry): none misses one. The books
 * (draining, crashes) are under sup.lock: the router's admission reads them. */
#include "sup.h"
#include "sup_cancel.h"
#include "sup_clstat.h"
#include "sup_log.h"
#include "sup_probe.h"
#include "sup_register.h"

#include "wl.h"
#include "wrk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* libchipd checks a name to register by chipd's rule before it sends it */
_Static_assert(CHIPD_CALLABLE_NAME_MAX == WL_NAME_MAX, "a callable's name, as libchipd checks it");

/* At most this many of a name's requests are cancelled per unregister call (the
 * caller asks again until none is left). */
#define CANCEL_BATCH 64u
/* An unregister refused for requests in flight names this many of their ids: three
 * ids of 19 digits and a name of 23 characters fit an error envelope (159 bytes). */
#define IDS_NAMED 3u

int sup_register_init(struct sup *s)
{
	size_t size = (size_t)s->cfg.max_callables * sizeof(struct wrk_reg_entry);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	s->reg.entries = p;
	s->reg.n = s->cfg.max_callables;
	s->reg.books = calloc(s->reg.n, sizeof(*s->reg.books));
	s->reg.probe = malloc(sizeof(*s->reg.probe));
	if (!s->reg.books || !s->reg.probe) {
		free(s->reg.books);
		free(s->reg.probe);
		s->reg.books = NULL;
		s->reg.probe = NULL;
		munmap(p, size);
		s->reg.entries = NULL;
		return -ENOMEM;
	}
	sup_probe_clear(s->reg.probe);
	pthread_mutex_init(&s->reg.lock, NULL);
	return 0;
}

void sup_register_free(struct sup *s)
{
	if (!s->reg.entries)
		return;
	munmap(s->reg.entries, (size_t)s->reg.n * sizeof(struct wrk_reg_entry));
	sup_probe_end(s->reg.probe);
	free(s->reg.probe);
	free(s->reg.books);
	s->reg.entries = NULL;
	pthread_mutex_destroy(&s->reg.lock);
}

bool sup_register_spawn_begin(struct sup *s)
{
	return pthread_mutex_trylock(&s->reg.lock) == 0;
}

void sup_register_spawn_end(struct sup *s)
{
	pthread_mutex_unlock(&s->reg.lock);
}

static uint32_t entry_state(const struct wrk_reg_entry *e)
{
	return atomic_load_explicit(&e->state, memory_order_acquire);
}

/* The registered entry named @name (PENDING or LIVE), or -1. Every submit asks
 * (sup_register_refuses): the walk ends once it passed every entry in use. Under
 * sup.lock or on the router thread (the only writer of the entries' states). */
static int find(const struct sup *s, const char *name)
{
	for (uint32_t i = 0, seen = 0; i < s->reg.n && seen < s->reg.used; i++) {
		if (entry_state(&s->reg.entries[i]) == WRK_REG_FREE)
			continue;
		if (strcmp(s->reg.entries[i].name, name) == 0)
			return (int)i;
		seen++;
	}
	return -1;
}

/* Bit i for each chip with a running worker. Under sup.lock. */
static uint64_t running_chips(const struct sup *s)
{
	uint64_t m = 0;

	for (uint32_t i = 0; i < s->cfg.chips; i++)
		if (s->workers[i].pid > 0)
			m |= 1ull << i;
	return m;
}

/* The live requests of @name: their count, and up to @cap of their ids and chips.
 * Under sup.lock. */
static uint32_t in_flight(struct sup *s, const char *name, uint64_t *ids, uint32_t *chips,
			  uint32_t cap)
{
	uint32_t n = 0;

	(void)sup_table_live(s); /* marks the streams that ended since the last look */
	for (uint32_t i = 0; i < s->nreqs; i++) {
		const struct sup_req *e = &s->reqs[i];

		if (!e->used || e->ended || strcmp(e->wl, name) != 0)
			continue;
		if (n < cap) {
			ids[n] = e->id;
			chips[n] = e->chip;
		}
		n++;
	}
	return n;
}

/* A count as the wire carries it (int64): one past INT64_MAX is never reached. */
static int64_t wire_count(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

void sup_register_wl_info(struct sup *s, const char *name, struct proto_wl *w)
{
	struct sup_clstat_vals v;
	uint64_t running;
	int i;

	pthread_mutex_lock(&s->lock);
	running = running_chips(s);
	i = find(s, name);
	w->chips = (int64_t)(i < 0 ? running
				   : running & atomic_load_explicit(&s->reg.entries[i].loaded,
								    memory_order_relaxed));
	/* after in_flight, which counts every end published since the last sweep: a
	 * client that read a stream's end sees it counted */
	w->active = in_flight(s, name, NULL, NULL, 0);
	sup_clstat_get(s, name, &v);
	pthread_mutex_unlock(&s->lock);
	w->requests = wire_count(v.requests);
	w->completed = wire_count(v.completed);
	w->failed = wire_count(v.failed);
	w->cancelled = wire_count(v.cancelled);
	w->tokens = wire_count(v.tokens);
}

uint64_t sup_register_chips(struct sup *s, const char *name)
{
	int i = find(s, name);

	return i < 0 ? ~0ull : atomic_load_explicit(&s->reg.entries[i].loaded, memory_order_relaxed);
}

int sup_register_refuses(struct sup *s, const char *name, struct proto_error *err)
{
	int i = find(s, name);

	if (i < 0 || (!s->reg.books[i].draining && entry_state(&s->reg.entries[i]) == WRK_REG_LIVE))
		return CHIPD_OK;
	return proto_fail(err, CHIPD_E_DRAINING, "callable %s is being %s: no new requests for it",
			  name,
			  s->reg.books[i].quarantined ? "quarantined"
			  : s->reg.books[i].draining  ? "unregistered"
						      : "registered");
}

/* Sends @op (load or unload of entry @e) to chip @w; CHIPD_OK or its error in @err.
 * *@died (NULL: not wanted): no answer came because the worker died (its mailbox's
 * server is gone, or a restarted one reset the slot), not because it is slow or
 * stopped (-ETIMEDOUT: it lives, and still has what it had). */
static enum chipd_code chip_call(struct sup *s, struct sup_worker *w, enum proto_op op,
				 const struct wrk_reg_entry *e, struct proto_error *err, bool *died)
{
	struct sup_call *c = sup_call_new(op);
	enum chipd_code code;

	if (died)
		*died = false;
	if (!c)
		return proto_fail(err, CHIPD_E_INTERNAL, "out of memory");
	snprintf(c->req.wl, sizeof(c->req.wl), "%s", e->name);
	if (op == PROTO_OP_LOAD)
		snprintf(c->req.path, sizeof(c->req.path), "%s", e->path);
	code = sup_call_run(s, w, c, err);
	if (died)
		*died = code == CHIPD_E_WORKER_LOST && (c->rc == -EPIPE || c->rc == -ECONNRESET);
	sup_call_free(c);
	return code;
}

/* Unloads entry @i from the chips of @chips, waiting for each (a registration's roll
 * back, under reg_lock: no worker starts meanwhile). A chip whose worker died counts
 * as done: a restarted one reads the entry afresh. */
static void unload_chips(struct sup *s, uint32_t i, uint64_t chips)
{
	struct wrk_reg_entry *e = &s->reg.entries[i];
	struct proto_error err;

	for (uint32_t c = 0; c < s->cfg.chips; c++) {
		bool died;

		if (!(chips & (1ull << c)))
			continue;
		(void)chip_call(s, &s->workers[c], PROTO_OP_UNLOAD, e, &err, &died);
		if (died)
			atomic_fetch_and_explicit(&e->loaded, ~(1ull << c), memory_order_relaxed);
	}
}

/* Whether SUP_FORWARD_MS passed at @now since @since. */
static bool past_bound(uint64_t now, uint64_t since)
{
	return now > since && now - since > (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS;
}

/* One look at the unload of entry @i on chip @c, without waiting: posted when none is
 * (with @skip_silent not to a silent chip, sup_worker_silent), else its answer read.
 * Returns whether the chip still has the callable: its unload not answered yet (it is
 * read at the next step, and given up once SUP_FORWARD_MS passed since its post: the
 * chip is then silent), refused (busy), not posted (every slot busy), or its worker
 * died and a restarted one loaded it again (a chip whose worker died counts as done
 * once the death cleared its bit: a restarted one reads the entry afresh). */
static bool unload_left(struct sup *s, uint32_t i, uint32_t c, bool skip_silent)
{
	struct sup_post *p = &s->reg.books[i].unload[c];
	struct sup_worker *w = &s->workers[c];
	struct wrk_reg_entry *e = &s->reg.entries[i];
	struct proto_msg *m = s->fwd_msg;
	uint64_t now = shm_now_ns();
	int rc;

	if (!p->pending) {
		if (skip_silent && sup_worker_silent(s, w))
			return true;
		proto_msg_init(m, PROTO_OP_UNLOAD);
		snprintf(m->wl, sizeof(m->wl), "%s", e->name);
		pthread_mutex_lock(&s->lock);
		rc = sup_post_send(w, p, m);
		pthread_mutex_unlock(&s->lock);
		if (rc == 0)
			return true; /* its answer is read at the next step */
	} else {
		rc = sup_post_poll(w, p, m);
		if (rc == -EINPROGRESS && !past_bound(now, p->posted_ns))
			return true;
		if (rc == -EINPROGRESS) {
			sup_post_drop(w, p);
			rc = -ETIMEDOUT;
		}
	}
	/* as a call (sup_call_run): an answer clears the chip's silence, none marks it */
	if (rc == 0 || rc == -ETIMEDOUT)
		atomic_store_explicit(&w->call_silent_ns, rc ? now : 0, memory_order_relaxed);
	if (rc == -ETIMEDOUT)
		SUP_WARN((int)c, 0, "callable %s: chip %u did not answer its unload within %u ms",
			 e->name, c, SUP_FORWARD_MS);
	if (rc == 0)
		return !m->ok; /* refused: busy, asked again */
	/* its worker died (gone, or a restarted one took the slot back): done once the
	 * death path cleared its bit, unless a restarted worker loaded the entry again */
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ESTALE)
		return atomic_load_explicit(&e->loaded, memory_order_relaxed) & (1ull << c);
	return true;
}

/* Drops the unloads of entry @i still posted (the entry is freed, or its drain given
 * up): their answers are read by nobody. */
static void unload_drop_all(struct sup *s, uint32_t i)
{
	for (uint32_t c = 0; c < s->cfg.chips; c++)
		sup_post_drop(&s->workers[c], &s->reg.books[i].unload[c]);
}

/* Frees entry @i (after every chip unloaded it) and unloads it here. */
static void entry_free(struct sup *s, uint32_t i)
{
	struct wrk_reg_entry *e = &s->reg.entries[i];
	char msg[WL_MSG_MAX];

	unload_drop_all(s, i);
	pthread_mutex_lock(&s->lock);
	if (atomic_exchange_explicit(&e->state, WRK_REG_FREE, memory_order_acq_rel) !=
	    WRK_REG_FREE)
		s->reg.used--;
	atomic_store_explicit(&e->loaded, 0, memory_order_relaxed);
	if (s->reg.books[i].quarantined) /* carried out (or unregistered by hand) */
		atomic_fetch_sub_explicit(&s->reg.quarantines, 1, memory_order_relaxed);
	if (s->reg.books[i].drainer)
		s->reg.drains--;
	s->reg.books[i] = (struct sup_reg_book){0};
	sup_clstat_drop(s, e->name); /* a later registration of the name starts at 0 */
	pthread_mutex_unlock(&s->lock);
	if (wl_unload(e->name, msg, sizeof(msg)) != 0)
		SUP_WARN(-1, 0, "callable %s: %s", e->name, msg);
}

/* Writes free entry @i for @name at @path (the file @file, as this process loaded it)
 * and makes it PENDING (a registration under way: no worker replays it). The name,
 * path and file are written under the entry's seqlock, for a worker replaying the
 * slot's earlier occupant meanwhile. */
static void entry_fill(struct sup *s, uint32_t i, const char *name, const char *path,
		       const struct wl_file_id *file)
{
	struct wrk_reg_entry *e = &s->reg.entries[i];

	/* odd; acquire: the writes below stay after it (no fence: TSan has none) */
	atomic_fetch_add_explicit(&e->seq, 1, memory_order_acq_rel);
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->file = *file;
	atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
	atomic_store_explicit(&e->loaded, 0, memory_order_relaxed);
	pthread_mutex_lock(&s->lock);
	s->reg.books[i] = (struct sup_reg_book){0};
	atomic_store_explicit(&e->state, WRK_REG_PENDING, memory_order_release);
	s->reg.used++;
	pthread_mutex_unlock(&s->lock);
}

/* Loads entry @i on every running chip, all or nothing. */
static enum chipd_code load_all(struct sup *s, uint32_t i, struct proto_error *err)
{
	struct wrk_reg_entry *e = &s->reg.entries[i];
	uint64_t took = 0, running;
	enum chipd_code code = CHIPD_OK;

	pthread_mutex_lock(&s->lock);
	running = running_chips(s);
	pthread_mutex_unlock(&s->lock);
	for (uint32_t c = 0; c < s->cfg.chips && code == CHIPD_OK; c++) {
		if (!(running & (1ull << c)))
			continue;
		code = chip_call(s, &s->workers[c], PROTO_OP_LOAD, e, err, NULL);
		if (code == CHIPD_OK)
			took |= 1ull << c;
	}
	if (code != CHIPD_OK) {
		SUP_WARN(err->chip, 0,
			 "callable %s refused (%s): rolled back on the chips that took it", e->name,
			 err->message);
		unload_chips(s, i, took);
	}
	return code;
}

/* Takes reg_lock for the router's register or unregister. The event loop holds it
 * through a worker's start, until the spawner answered (up to 5 s: a stopped spawner,
 * sup_register_spawn_begin): rather than wait, serving nobody, the router puts the op
 * off (sup_router_defer) and runs it again once the lock is free. Returns false when
 * put off. */
static bool reg_lock_or_defer(struct sup *s)
{
	if (pthread_mutex_trylock(&s->reg.lock) == 0)
		return true;
	if (sup_router_defer(s))
		return false;
	pthread_mutex_lock(&s->reg.lock); /* nowhere to keep it: bounded by the start's */
	return true;
}

/* The probe of the register being served (sup_probe.c), in the router's slot: started
 * when the op is first in line (ops put off keep their order, so the probe's own op is
 * the first put off while it runs), then looked at each time the router runs the op
 * again, serving other clients in between. Returns CHIPD_OK once it passed (*@file:
 * the file it loaded), PROTO_DEFERRED while it runs, else a refusal in @err. Router
 * thread. */
static int probe_step(struct sup *s, const struct proto_msg *req, struct wl_file_id *file,
		      struct proto_error *err)
{
	struct sup_probe *p = s->reg.probe;
	char msg[WL_MSG_MAX + WL_PATH_MAX];
	int rc;

	if (!sup_probe_busy(p)) {
		if (!s->router_rerun && s->ndefer && sup_router_defer(s))
			return PROTO_DEFERRED; /* behind the ops put off before it */
		rc = sup_probe_start(p, req->path, req->wl, s->router_region, s->router_ticket,
				     msg, sizeof(msg));
		if (rc)
			return proto_fail(err, CHIPD_E_INTERNAL, "%s", msg);
	} else if (!sup_probe_owns(p, s->router_region, s->router_ticket)) {
		/* another register's probe runs: this one waits behind it */
		if (sup_router_defer(s))
			return PROTO_DEFERRED;
		return proto_fail(err, CHIPD_E_NO_CAPACITY,
				  "callable %s: another registration is being checked: try again",
				  req->path);
	}
	rc = sup_probe_poll(p, shm_now_ns(), msg, sizeof(msg));
	if (rc == -EINPROGRESS) {
		if (sup_router_defer(s))
			return PROTO_DEFERRED;
		rc = sup_probe_wait(p, msg, sizeof(msg)); /* nowhere to keep it: its bound */
	}
	if (rc == 0) {
		*file = p->file;
		return CHIPD_OK;
	}
	if (rc == -EREMOTEIO)
		SUP_WARN(-1, 0, "register refused: %s", msg);
	return proto_fail(err, rc == -EREMOTEIO ? CHIPD_E_BAD_REQUEST : CHIPD_E_INTERNAL, "%s",
			  msg);
}

/* The free entry a registration takes, or -1. Router thread (the entries' writer). */
static int free_slot(const struct sup *s)
{
	for (uint32_t i = 0; i < s->reg.n; i++)
		if (entry_state(&s->reg.entries[i]) == WRK_REG_FREE)
			return (int)i;
	return -1;
}

/* The refusal of a registration when every entry is taken. */
static int registry_full(struct sup *s, const struct proto_msg *req, struct proto_error *err)
{
	return proto_fail(err, CHIPD_E_NO_CAPACITY,
			  "callable %s: %u callables are registered (chipd --max-callables %u)",
			  req->path, s->reg.n, s->cfg.max_callables);
}

static int register_run(struct sup *s, const struct proto_msg *req, struct proto_msg *ans,
			struct proto_error *err)
{
	char msg[WL_MSG_MAX + WL_PATH_MAX];
	const char *name, *path;
	struct wl_file_id probed, file;
	uint32_t version = 0;
	int rc, slot;
	enum chipd_code code = sup_admit_node_op(s, "register", err);

	if (code != CHIPD_OK)
		return code;
	if (atomic_load_explicit(&s->sup_state, memory_order_acquire) != CHIPD_SUP_READY)
		return proto_fail(err, CHIPD_E_DRAINING,
				  "chipd is not ready (starting or draining): no registration");
	if (free_slot(s) < 0)
		return registry_full(s, req, err);
	/* the library's code runs in the probe first: what kills, ends or holds it is
	 * refused there, and the supervisor loads only the file the probe loaded */
	rc = probe_step(s, req, &probed, err);
	if (rc != CHIPD_OK)
		return rc;
	if (!reg_lock_or_defer(s))
		return PROTO_DEFERRED; /* the probe's verdict is kept for the next run */
	slot = free_slot(s); /* the one seen above: only this thread fills entries */
	if (slot < 0) {
		pthread_mutex_unlock(&s->reg.lock);
		return registry_full(s, req, err);
	}
	rc = wl_load_file_as(req->path, req->wl[0] ? req->wl : NULL, &probed, &file, msg,
			     sizeof(msg));
	if (rc) {
		pthread_mutex_unlock(&s->reg.lock);
		if (rc == -ENOSPC) /* the loader holds --max-callables, the start's too */
			return proto_fail(err, CHIPD_E_NO_CAPACITY, "%s (chipd --max-callables %u)",
					  msg, s->cfg.max_callables);
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "%s", msg);
	}
	/* the name is the one given, else the table's: the entry just loaded is the last */
	name = req->wl[0] ? req->wl : wl_names()[wl_count() - 1];
	(void)wl_callable_info(name, &version, &path);
	entry_fill(s, (uint32_t)slot, name, req->path, &file);
	code = load_all(s, (uint32_t)slot, err);
	if (code != CHIPD_OK) {
		entry_free(s, (uint32_t)slot);
	} else {
		struct wrk_reg_entry *e = &s->reg.entries[slot];

		atomic_store_explicit(&e->state, WRK_REG_LIVE, memory_order_release);
		SUP_INFO(-1, 0, "callable %s version %" PRIu32 " registered from %s", e->name,
			 version, e->path);
		snprintf(ans->wl, sizeof(ans->wl), "%s", e->name);
		ans->version = version;
	}
	pthread_mutex_unlock(&s->reg.lock);
	return code;
}

int sup_register_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct sup *s = ctx;
	int rc = register_run(s, req, ans, err);

	/* answered: its probe, passed or still running (a refusal before it ended), is
	 * done with; another register's is left alone */
	if (rc != PROTO_DEFERRED &&
	    sup_probe_owns(s->reg.probe, s->router_region, s->router_ticket))
		sup_probe_end(s->reg.probe);
	return rc;
}

void sup_register_probe_drop(struct sup *s, uint32_t region, struct mbox_ticket t, bool all)
{
	if (s->reg.probe && (all || sup_probe_owns(s->reg.probe, region, t)))
		sup_probe_end(s->reg.probe);
}

/* Ends entry @i once its requests ended: the draining step of unregister and of
 * the quarantine. Cancels what is left when @cancel. Returns the requests still in
 * flight (or 1 while a chip still holds one), 0 once the entry is gone. Waits for no
 * chip: the cancels and unloads are posted, their answers read later (sup_cancel.c,
 * unload_left). @retry: a step the router takes on its own, every round
 * (sup_register_tick), which posts nothing more to a silent chip until it answers
 * again. Under reg_lock. */
static uint32_t drain_step(struct sup *s, uint32_t i, bool cancel, bool retry)
{
	struct wrk_reg_entry *e = &s->reg.entries[i];
	uint64_t ids[CANCEL_BATCH], left, replaying = 0;
	uint32_t chips[CANCEL_BATCH], n;

	pthread_mutex_lock(&s->lock);
	s->reg.books[i].draining = true;
	n = in_flight(s, e->name, ids, chips, CANCEL_BATCH);
	pthread_mutex_unlock(&s->lock);
	if (n && cancel) {
		for (uint32_t k = 0; k < n && k < CANCEL_BATCH; k++) {
			struct proto_error err;

			/* posted without waiting (sup_cancel.c), once: the next step finds
			 * it still in flight, or the request ended */
			if ((retry && sup_worker_silent(s, &s->workers[chips[k]])) ||
			    sup_cancel_pending(s, ids[k]))
				continue;
			/* one that ended meanwhile: not_found */
			(void)sup_cancel_start(s, &s->workers[chips[k]], ids[k], false, &err);
		}
	}
	if (n)
		return n;
	/* the chips with a worker not being shut down: one the stop ended or is ending
	 * has nothing to unload, and would only be waited for (the forward bound, 2 s a
	 * chip: a worker that answered its shutdown serves its mailbox no more) */
	pthread_mutex_lock(&s->lock);
	left = running_chips(s) & atomic_load_explicit(&e->loaded, memory_order_relaxed);
	for (uint32_t c = 0; c < s->cfg.chips; c++) {
		if (s->workers[c].stopping)
			left &= ~(1ull << c);
		/* a worker forked between two steps replays the entry, still LIVE, before
		 * it is READY, and only then says it loaded it: the step waits for it to
		 * be READY (or gone), then unloads it there like any other */
		else if (s->workers[c].pid > 0 && s->workers[c].state == CHIPD_CHIP_STARTING)
			replaying |= 1ull << c;
	}
	pthread_mutex_unlock(&s->lock);
	/* posted without waiting, read at the next step: a stopped worker holds up
	 * nobody, the caller asks again (or the router, for a caller gone) */
	for (uint32_t c = 0; c < s->cfg.chips; c++)
		if ((left & (1ull << c)) && !unload_left(s, i, c, retry))
			left &= ~(1ull << c);
	if (left || replaying)
		return 1; /* a chip has not unloaded it yet: ask again */
	entry_free(s, i);
	return 0;
}

/* Book @b's drain is the router client's (@cancel: its mode), or no one's (@resume).
 * Under sup.lock, router thread. */
static void drainer_set(struct sup *s, struct sup_reg_book *b, bool resume, bool cancel)
{
	uint64_t id = resume ? 0 : sup_conn_id_of(s, s->router_client, s->router_region);

	if (b->quarantined)
		return; /* the router carries it out whoever asks */
	s->reg.drains += (id != 0) - (b->drainer != 0);
	b->drainer = id;
	b->drain_cancel = cancel;
}

/* Entry @i's drain is the router client's from now on (drainer_set): once its
 * connection ended, the router completes it (sup_register_tick). Router thread. */
static void drainer_take(struct sup *s, uint32_t i, bool cancel)
{
	pthread_mutex_lock(&s->lock);
	drainer_set(s, &s->reg.books[i], false, cancel);
	pthread_mutex_unlock(&s->lock);
}

int sup_unregister_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		       struct proto_error *err)
{
	struct sup *s = ctx;
	uint64_t ids[IDS_NAMED];
	uint32_t chips[IDS_NAMED], n, version;
	const char *path;
	char list[96] = "";
	int i;
	enum chipd_code code = sup_admit_node_op(s, "unregister", err);

	if (code != CHIPD_OK)
		return code;
	if (!reg_lock_or_defer(s))
		return PROTO_DEFERRED;
	i = find(s, req->wl);
	if (i < 0 || entry_state(&s->reg.entries[i]) != WRK_REG_LIVE) {
		pthread_mutex_unlock(&s->reg.lock);
		if (wl_callable_info(req->wl, &version, &path) == 0)
			return proto_fail(err, CHIPD_E_BAD_REQUEST,
					  "callable %s was loaded at start (--callables): only "
					  "registered ones can be unregistered",
					  req->wl);
		return proto_fail(err, CHIPD_E_NOT_FOUND, "no registered callable %s", req->wl);
	}
	switch (req->mode) {
	case PROTO_UNREG_RESUME:
		unload_drop_all(s, (uint32_t)i);
		pthread_mutex_lock(&s->lock);
		if (!s->reg.books[i].quarantined)
			s->reg.books[i].draining = false;
		drainer_set(s, &s->reg.books[i], true, false);
		pthread_mutex_unlock(&s->lock);
		break;
	case PROTO_UNREG_DRAIN:
	case PROTO_UNREG_CANCEL:
		drainer_take(s, (uint32_t)i, req->mode == PROTO_UNREG_CANCEL);
		ans->active =
		    drain_step(s, (uint32_t)i, req->mode == PROTO_UNREG_CANCEL, false);
		break;
	default:
		pthread_mutex_lock(&s->lock);
		n = in_flight(s, req->wl, ids, chips, IDS_NAMED);
		pthread_mutex_unlock(&s->lock);
		for (uint32_t k = 0; k < n && k < IDS_NAMED; k++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%" PRIu64,
				 k ? ", " : "", ids[k]);
		if (n) {
			code = proto_fail(err, CHIPD_E_BAD_REQUEST,
					  "callable %s: %u requests in flight (ids %s%s): drain or cancel",
					  req->wl, n, list, n > IDS_NAMED ? ", ..." : "");
			break;
		}
		/* none in flight: the name is on its way out (draining), and a chip that
		 * still has it (busy, or silent) is asked again by the caller or, once its
		 * connection ended, by the router, as for a drain */
		drainer_take(s, (uint32_t)i, false);
		ans->active = drain_step(s, (uint32_t)i, false, false);
		break;
	}
	if (code == CHIPD_OK && ans->active == 0 && req->mode != PROTO_UNREG_RESUME)
		SUP_INFO(-1, 0, "callable %s unregistered", req->wl);
	pthread_mutex_unlock(&s->reg.lock);
	return code;
}

void sup_register_worker_died(struct sup *s, struct sup_worker *w)
{
	uint64_t bit = 1ull << w->chip;

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->reg.n; i++) {
		struct wrk_reg_entry *e = &s->reg.entries[i];
		bool hit = false;

		if (entry_state(e) == WRK_REG_FREE)
			continue;
		atomic_fetch_and_explicit(&e->loaded, ~bit, memory_order_relaxed);
		for (uint32_t k = 0; k < s->nreqs && !hit; k++) {
			const struct sup_req *r = &s->reqs[k];

			hit = r->used && !r->ended && r->chip == w->chip &&
			      strcmp(r->wl, e->name) == 0;
		}
		if (!hit || s->reg.books[i].quarantined)
			continue;
		if (++s->reg.books[i].crashes >= s->cfg.callable_crash_limit) {
			s->reg.books[i].quarantined = true;
			s->reg.books[i].draining = true;
			SUP_WARN((int)w->chip, 0,
				 "callable %s was in flight on %u worker deaths: quarantined "
				 "(unregistered on every chip)",
				 e->name, s->reg.books[i].crashes);
			sup_count(s, PROTO_SUP_callables_quarantined, 1);
			/* the router's next round carries it out */
			atomic_fetch_add_explicit(&s->reg.quarantines, 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void sup_register_tick(struct sup *s)
{
	bool drains = s->reg.drains && shm_now_ns() >= s->reg.drains_next_ns;

	/* one relaxed load per round while none is due: the router's loop is hot */
	if ((atomic_load_explicit(&s->reg.quarantines, memory_order_acquire) == 0 && !drains) ||
	    pthread_mutex_trylock(&s->reg.lock) != 0)
		return;
	if (drains) /* a drain whose client is gone: stepped as its client would, 20 ms */
		s->reg.drains_next_ns = shm_now_ns() + 20000000u;
	for (uint32_t i = 0; i < s->reg.n; i++) {
		bool q, orphan, cancel;

		pthread_mutex_lock(&s->lock);
		q = s->reg.books[i].quarantined;
		cancel = s->reg.books[i].drain_cancel;
		orphan =
		    drains && s->reg.books[i].drainer && !sup_conn_id_live(s, s->reg.books[i].drainer);
		pthread_mutex_unlock(&s->lock);
		if ((!q && !orphan) || entry_state(&s->reg.entries[i]) != WRK_REG_LIVE ||
		    drain_step(s, i, q || cancel, true) != 0)
			continue;
		if (q)
			SUP_INFO(-1, 0, "callable %s quarantined: unregistered on every chip",
				 s->reg.entries[i].name);
		else
			SUP_INFO(-1, 0, "callable %s unregistered (its drain's client is gone)",
				 s->reg.entries[i].name);
	}
	pthread_mutex_unlock(&s->reg.lock);
}
