/* mbox_reap.c - the mailbox's reaper (mbox.h, mbox_reap and mbox_reap_by): slots whose
 * owner died go back to FREE, a TAKEN one through the server's acknowledged reset,
 * and lost doorbells are healed. */
#include "mbox.h"
#include "mbox_internal.h"
#include "proc.h"

/* The start time of @s's owner in control word @c when it is known to belong to the
 * same generation, else 0. */
static uint64_t owner_start(struct mbox_slot *s, uint64_t c)
{
	if (atomic_load_explicit(&s->owner_gen, memory_order_acquire) == MBOX_CTL_GEN(c))
		return atomic_load_explicit(&s->owner_start, memory_order_relaxed);
	return 0;
}

/* Whether the owner of @s in control word @c is alive. */
static bool owner_alive(struct mbox_slot *s, uint64_t c)
{
	return shm_proc_alive(MBOX_CTL_PID(c), owner_start(s, c));
}

int mbox_reap(struct mbox *mb)
{
	return mbox_reap_by(mb, NULL, NULL);
}

int mbox_reap_by(struct mbox *mb, mbox_owner_fn alive, void *ctx)
{
	int freed = 0, server = -1; /* asked once, and only when a slot needs it */

	for (uint32_t i = 0; i < mb->nslots; i++) {
		struct mbox_slot *s = slot_at(mb, i);
		uint64_t c = load_ctl(s);
		enum mbox_state st = MBOX_CTL_STATE(c);

		if (st == MBOX_FREE)
			continue;
		if (server < 0) /* a /proc read: an idle mailbox's reap costs none */
			server = mbox_server_alive(mb);
		if (st == MBOX_RESET || (st == MBOX_TAKEN && !server)) {
			if (!server) {
				if (free_slot(s, c))
					freed++;
			} else if (st == MBOX_RESET) {
				/* the server acknowledges it: heals a lost doorbell, and a RESET
				 * a client wrote by hand without raising attention */
				raise_attention(mb, i);
			}
			continue;
		}
		if (alive ? alive(ctx, i, c, owner_start(s, c)) : owner_alive(s, c)) {
			if (st == MBOX_POSTED) /* heal a lost doorbell */
				raise_attention(mb, i);
			continue;
		}
		if (st == MBOX_TAKEN) {
			/* The server holds it: let it cancel the work and acknowledge (its
			 * acknowledgement frees the slot, so it is not counted here). */
			if (cas_ctl(s, &c, MBOX_CTL(MBOX_CTL_GEN(c), MBOX_CTL_PID(c), MBOX_RESET)))
				raise_attention(mb, i);
			continue;
		}
		if (free_slot(s, c))
			freed++;
	}
	return freed;
}
