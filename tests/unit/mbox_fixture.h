/* mbox_fixture.h - a mailbox in anonymous shared memory for the check_mbox suites,
 * and the few steps every mailbox test repeats. */
#ifndef CHIPD_MBOX_FIXTURE_H
#define CHIPD_MBOX_FIXTURE_H

#include "mbox.h"

#include <check.h>
#include <stddef.h>

#define MS (1000ull * 1000ull)

struct fixture {
	void *mem;
	size_t size;
	struct mbox mb;
};

/* Lays out a mailbox of this shape in fresh shared memory. */
void fx_init(struct fixture *fx, uint32_t nslots, uint32_t req_cap, uint32_t resp_cap);
void fx_fini(struct fixture *fx);

enum mbox_state state_of(struct fixture *fx, uint32_t slot);
uint32_t gen_of(struct fixture *fx, uint32_t slot);

/* Claims, writes @text (NUL included) and posts. */
struct mbox_ticket post_text(struct fixture *fx, const char *text);

/* The next server event, which must come within 2 s. */
struct mbox_event next_event(struct fixture *fx);

/* Adds the tcases with dying, sleeping and streaming processes (mbox_peers.c). */
void mbox_add_peer_tcases(Suite *s);

#endif
