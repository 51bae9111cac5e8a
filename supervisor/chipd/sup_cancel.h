/* sup_cancel.h - the cancels the router passes on to workers without waiting
 * (sup_cancel.c), as it forwards submits (sup_forward.c). Router thread only. */
#ifndef CHIPD_SUP_CANCEL_H
#define CHIPD_SUP_CANCEL_H

#include "sup.h"

/* A cancel the router passed on to a worker and has not ended (sup_cancel.c, router
 * thread only): posted without waiting, as a submit's assign is; a client's is
 * answered in its slot, which stays TAKEN until the worker's answer, its death,
 * SUP_FORWARD_MS or the router's leaving ends it. */
struct sup_ccl {
	uint64_t id; /* the request */
	uint32_t chip;
	pid_t pid;	  /* the worker's pid when posted: another one means it died */
	bool to_client;	  /* a client's cancel, answered in (region, t); else the router's */
	bool client_gone; /* its client reset the slot: the answer reaches nobody */
	uint32_t region;
	struct mbox_ticket t;
	struct sup_post post;
};

/* Allocates the table of cancels in flight. Returns 0 or -ENOMEM. */
int sup_ccl_init(struct sup *s);
void sup_ccl_free(struct sup *s);
/* Passes a cancel of request @id (its entry's cancel_asked set) on to worker @w
 * without waiting: posted, it ends later (sup_ccl_progress) with the outcomes of
 * a call's, a client's (@to_client: the request being served, router_region and
 * router_ticket) answered in its slot then. Returns PROTO_DEFERRED once posted, else
 * the code it ended with at once, @err filled: not posted (every slot of the worker's
 * mailbox busy, or its worker gone), or a client's refused queue_full when the
 * clients' cancels in flight are as many as the node's client slots (clients that
 * gave their slots up left them to a worker that answers none). Never waits. */
int sup_cancel_start(struct sup *s, struct sup_worker *w, uint64_t id, bool to_client,
		     struct proto_error *err);
/* Whether a cancel of @id is in flight. */
bool sup_cancel_pending(const struct sup *s, uint64_t id);
/* Ends every cancel whose answer came, whose worker died or whose bound passed. */
void sup_ccl_progress(struct sup *s);
/* Whether sup_ccl_progress has an answer to read now (seq_cst loads). */
bool sup_ccl_ready(struct sup *s);
/* The client of region @region gave slot @t up: a cancel in that slot is answered to
 * nobody. */
void sup_ccl_client_reset(struct sup *s, uint32_t region, struct mbox_ticket t);
/* Adds the wake words of the cancels in flight to @w, as sup_fwd_announce. */
uint32_t sup_ccl_announce(struct sup *s, struct shm_waitv *w, uint32_t n, uint32_t max, bool *all);
/* Ends every cancel still in flight with worker_lost (the router is leaving). */
void sup_ccl_end_all(struct sup *s);

#endif
