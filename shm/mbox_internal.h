/* mbox_internal.h - the slot helpers mbox.c (claims, posts, the server) and
 * mbox_reap.c (the reaper) share. Not part of the mailbox's contract (mbox.h). */
#ifndef CHIPD_MBOX_INTERNAL_H
#define CHIPD_MBOX_INTERNAL_H

#include "mbox.h"
#include "wait.h"

static inline struct mbox_slot *slot_at(const struct mbox *mb, uint32_t i)
{
	return (struct mbox_slot *)(mb->slots + (size_t)i * mb->stride);
}

static inline uint64_t load_ctl(const struct mbox_slot *s)
{
	return atomic_load_explicit(&((struct mbox_slot *)s)->ctl, memory_order_seq_cst);
}

/* seq_cst CAS: it publishes the buffers written before it (release), makes what the
 * previous holder wrote visible (acquire), and orders against the sleepers
 * announcement of the wake protocol (see wait.h). */
static inline bool cas_ctl(struct mbox_slot *s, uint64_t *expected, uint64_t desired)
{
	return atomic_compare_exchange_strong_explicit(&s->ctl, expected, desired,
						       memory_order_seq_cst, memory_order_seq_cst);
}

/* Tells the server that slot @i needs a look (a post or a reset). */
static inline void raise_attention(struct mbox *mb, uint32_t i)
{
	atomic_fetch_or_explicit(&mb->attention[i / 64], 1ull << (i % 64), memory_order_seq_cst);
	shm_wake_all(&mb->hdr->doorbell);
}

/* Moves slot @s from @c to FREE with the next generation and wakes its sleeper. */
static inline bool free_slot(struct mbox_slot *s, uint64_t c)
{
	if (!cas_ctl(s, &c, MBOX_CTL(MBOX_CTL_GEN(c) + 1, 0, MBOX_FREE)))
		return false;
	shm_wake_all(&s->wake);
	return true;
}

#endif
