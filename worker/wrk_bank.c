/* wrk_bank.c - arena banks and the epoch words that move them between O and S. */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int wrk_banks_init(struct wrk *w)
{
	const struct wrk_config *c = &w->cfg;

	for (uint32_t i = 0; i < w->nbanks; i++) {
		struct wrk_bank *b = &w->banks[i];
		int err;

		b->index = i;
		atomic_init(&b->owner, WRK_OWNER_FREE);
		/* pinned on a GPU: the per-step token copies into it do not block S */
		err = dev_host_alloc(w->dev, c->bank_host_bytes, &b->host_mem);
		if (err) {
			b->host_mem = NULL;
			return err;
		}
		b->ents = calloc(c->max_batch, sizeof(*b->ents));
		b->lanes = calloc(c->max_batch, sizeof(*b->lanes));
		if (!b->ents || !b->lanes)
			return -ENOMEM;
		err = dev_alloc(w->dev, c->bank_dev_bytes, &b->dev_mem);
		if (err) {
			b->dev_mem = NULL;
			return err;
		}
		/* one completion event per lane (S) */
		for (uint32_t k = 0; k < c->max_batch; k++) {
			err = dev_event_create(w->dev, &b->ents[k].done);
			if (err) {
				b->ents[k].done = NULL;
				return err;
			}
		}
		wl_arena_init(&b->host, b->host_mem, c->bank_host_bytes);
		wl_arena_init(&b->dev, b->dev_mem, c->bank_dev_bytes);
	}
	return 0;
}

void wrk_banks_destroy(struct wrk *w)
{
	for (uint32_t i = 0; i < w->nbanks; i++) {
		struct wrk_bank *b = &w->banks[i];

		if (b->dev_mem)
			dev_free(w->dev, b->dev_mem);
		for (uint32_t k = 0; b->ents && k < w->cfg.max_batch; k++)
			dev_event_destroy(b->ents[k].done); /* NULL: never made */
		dev_host_free(w->dev, b->host_mem);
		free(b->ents);
		free(b->lanes);
		b->dev_mem = b->host_mem = NULL;
		b->ents = NULL;
		b->lanes = NULL;
	}
}

void wrk_bank_check(struct wrk_bank *b, enum wrk_owner who, const char *fn)
{
	int owner = atomic_load_explicit(&b->owner, memory_order_relaxed);

	if (owner != (int)who) {
		fprintf(stderr, "chipd worker: %s touched bank %u owned by %d, not %d\n", fn,
			b->index, owner, (int)who);
		abort();
	}
}

struct o_wait_arg {
	struct wrk *w;
	uint64_t need; /* released must reach this */
};

static bool bank_free(void *arg)
{
	struct o_wait_arg *a = arg;

	return atomic_load_explicit(&a->w->sync.released, memory_order_seq_cst) >= a->need;
}

static bool s_lost(void *arg)
{
	struct o_wait_arg *a = arg;

	return atomic_load_explicit(&a->w->sync.s_err, memory_order_seq_cst) != 0;
}

static bool bank_free_or_s_lost(void *arg)
{
	return bank_free(arg) || s_lost(arg);
}

struct wrk_bank *wrk_bank_acquire(struct wrk *w, uint64_t deadline_ns, int *err)
{
	uint64_t e = atomic_load_explicit(&w->sync.published, memory_order_relaxed) + 1;
	struct o_wait_arg a = {w, e > w->nbanks ? e - w->nbanks : 0};
	/* S's failure must end the wait at once, not at the next sleep slice: S wakes O
	 * when it fails (ready sees it), so the slice is only a backstop */
	struct shm_waiter how = {bank_free_or_s_lost, s_lost, &a, w->cfg.spin_ns,
				 WRK_PEER_SLICE_NS};
	struct wrk_bank *b;
	int owner = WRK_OWNER_FREE;

	*err = shm_wait(&w->sync.o_wake, &how, deadline_ns);
	if (*err)
		return NULL;
	if (!bank_free(&a)) {
		*err = -EPIPE;
		return NULL;
	}
	/* released >= e - nbanks: at most nbanks - 1 epochs are out, so a bank is FREE
	 * (S stored FREE before it counted the release; the seq_cst load above saw it) */
	b = NULL;
	for (uint32_t i = 0; i < w->nbanks && !b; i++) {
		owner = WRK_OWNER_FREE;
		if (atomic_compare_exchange_strong_explicit(&w->banks[i].owner, &owner, WRK_OWNER_O,
							    memory_order_acquire,
							    memory_order_relaxed))
			b = &w->banks[i];
	}
	if (!b) { /* cannot happen: the count says one is free */
		fprintf(stderr, "chipd worker: no free bank for epoch %llu\n",
			(unsigned long long)e);
		abort();
	}
	b->epoch = e;
	b->nents = 0;
	wl_arena_reset(&b->host);
	wl_arena_reset(&b->dev);
	return b;
}

void wrk_bank_publish(struct wrk *w, struct wrk_bank *b)
{
	WRK_OWNED(b, WRK_OWNER_O);
	atomic_store_explicit(&b->owner, WRK_OWNER_S, memory_order_relaxed);
	atomic_store_explicit(&w->sync.epoch_bank[b->epoch % WRK_MAX_BANKS], b->index,
			      memory_order_relaxed);
	/* seq_cst store: publishes the bank's contents and pairs with S's wait */
	atomic_store_explicit(&w->sync.published, b->epoch, memory_order_seq_cst);
	shm_wake_all(&w->sync.s_wake);
}

struct s_wait_arg {
	struct wrk *w;
	uint64_t e;
};

static bool epoch_ready(void *arg)
{
	struct s_wait_arg *a = arg;

	return atomic_load_explicit(&a->w->sync.published, memory_order_seq_cst) >= a->e;
}

static bool o_lost(void *arg)
{
	struct s_wait_arg *a = arg;

	return atomic_load_explicit(&a->w->sync.o_err, memory_order_seq_cst) != 0 ||
	       atomic_load_explicit(&a->w->sync.o_done, memory_order_seq_cst) != 0;
}

/* An epoch, O gone, or the device lost while S had nothing to run (a fill met it). */
static bool epoch_or_o_lost(void *arg)
{
	return epoch_ready(arg) || o_lost(arg) || dev_lost(((struct s_wait_arg *)arg)->w->dev);
}

struct wrk_bank *wrk_bank_next(struct wrk *w, uint64_t e, uint64_t deadline_ns, int *err)
{
	struct s_wait_arg a = {w, e};
	/* O's exit must end the wait at once, not at the next sleep slice: O wakes S when
	 * it leaves (ready sees it), so the slice is only a backstop */
	struct shm_waiter how = {epoch_or_o_lost, o_lost, &a, w->cfg.spin_ns, WRK_PEER_SLICE_NS,
				 &w->s_epoch_spin};

	*err = shm_wait(&w->sync.s_wake, &how, deadline_ns);
	if (*err)
		return NULL;
	if (!epoch_ready(&a)) {
		*err = o_lost(&a) ? -EPIPE : DEV_ERR_LOST;
		return NULL;
	}
	return wrk_bank_poll(w, e);
}

struct wrk_bank *wrk_bank_poll(struct wrk *w, uint64_t e)
{
	struct wrk_bank *b;

	if (atomic_load_explicit(&w->sync.published, memory_order_seq_cst) < e)
		return NULL;
	b = &w->banks[atomic_load_explicit(&w->sync.epoch_bank[e % WRK_MAX_BANKS],
					   memory_order_relaxed)];
	WRK_OWNED(b, WRK_OWNER_S);
	return b;
}

void wrk_bank_release(struct wrk *w, struct wrk_bank *b)
{
	WRK_OWNED(b, WRK_OWNER_S);
	/* release: O's acquire of the owner takes the bank with S done with it */
	atomic_store_explicit(&b->owner, WRK_OWNER_FREE, memory_order_release);
	atomic_fetch_add_explicit(&w->sync.released, 1, memory_order_seq_cst);
	shm_wake_all(&w->sync.o_wake);
}

uint64_t wrk_o_busy_at(struct wrk_sync *s, uint64_t now)
{
	uint64_t seq, acc, since;

	do {
		seq = atomic_load_explicit(&s->o_seq, memory_order_seq_cst);
		acc = atomic_load_explicit(&s->o_busy_acc, memory_order_seq_cst);
		since = atomic_load_explicit(&s->o_busy_since, memory_order_seq_cst);
	} while ((seq & 1) || seq != atomic_load_explicit(&s->o_seq, memory_order_seq_cst));
	return acc + (since && now > since ? now - since : 0);
}

void wrk_o_busy_begin(struct wrk_sync *s, uint64_t now)
{
	atomic_fetch_add_explicit(&s->o_seq, 1, memory_order_seq_cst);
	atomic_store_explicit(&s->o_busy_since, now, memory_order_seq_cst);
	atomic_fetch_add_explicit(&s->o_seq, 1, memory_order_seq_cst);
}

void wrk_o_busy_end(struct wrk_sync *s, uint64_t now)
{
	uint64_t since = atomic_load_explicit(&s->o_busy_since, memory_order_relaxed);
	uint64_t acc = atomic_load_explicit(&s->o_busy_acc, memory_order_relaxed);

	atomic_fetch_add_explicit(&s->o_seq, 1, memory_order_seq_cst);
	atomic_store_explicit(&s->o_busy_acc, acc + (now > since ? now - since : 0),
			      memory_order_seq_cst);
	atomic_store_explicit(&s->o_busy_since, 0, memory_order_seq_cst);
	atomic_fetch_add_explicit(&s->o_seq, 1, memory_order_seq_cst);
}
