/* sup_table.c - the supervisor's live streams, one entry per token ring of the node
 * region. An entry holds its ring from submit until the stream ended and its reader
 * read the terminal record (or the reader died): only then may the ring and the
 * request id go to another stream. Every function runs under sup.lock. */
#include "sup.h"
#include "sup_log.h"

#include "proc.h"
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sup_table_init(struct sup *s)
{
	s->nreqs = s->node.desc->nrings;
	s->reqs = calloc(s->nreqs, sizeof(*s->reqs));
	return s->reqs ? 0 : -ENOMEM;
}

void sup_table_free(struct sup *s)
{
	free(s->reqs);
	s->reqs = NULL;
	s->nreqs = 0;
}

uint32_t sup_table_index(const struct sup *s, const struct sup_req *e)
{
	return (uint32_t)(e - s->reqs);
}

static struct ring ring_of(struct sup *s, const struct sup_req *e)
{
	struct ring r;

	/* the index is ours and below nrings: it cannot fail */
	(void)proto_node_ring(&s->node, sup_table_index(s, e), &r);
	return r;
}

void sup_table_release(struct sup *s, struct sup_req *e)
{
	if (!e->used)
		return;
	if (e->chip < s->cfg.chips && s->workers[e->chip].load > 0)
		s->workers[e->chip].load--;
	memset(e, 0, sizeof(*e));
}

/* Counts, once, how @e's request ended, from @flags, its terminal record's
 * (ring_end_flags; 0: none yet, nothing to count): the code of an ERROR record in
 * err_<code>. FINAL (completed) needs no count, nor a stream whose submit was
 * answered with an error (client 0: counted then). */
static void count_end(struct sup *s, struct sup_req *e, uint32_t flags)
{
	uint32_t code;

	/* a forward in progress decides first whether the client gets the stream */
	if (e->counted || e->forwarding || !flags)
		return;
	e->counted = true;
	if (e->client == 0 || (flags & RING_F_FINAL))
		return;
	code = RING_CODE_OF(flags);
	if (code == CHIPD_OK || code >= CHIPD_NCODES)
		code = CHIPD_E_INTERNAL; /* as libchipd reports such a record */
	sup_count_err(s, (enum chipd_code)code);
}

/* Whether @e's ring can be given to another stream: nothing more is written to it
 * (its stream ended) and nobody reads it (the reader took the terminal, or died). Every
 * used entry passes here on each sweep, so every end is counted within a tick. */
static bool reclaimable(struct sup *s, struct sup_req *e)
{
	struct ring r;
	uint32_t flags;

	if (!e->used || e->forwarding)
		return false;
	r = ring_of(s, e);
	flags = ring_end_flags(&r);
	if (!flags)
		return false;
	e->ended = true;
	count_end(s, e, flags);
	return ring_drained(&r) || !shm_proc_alive(e->client, e->client_start);
}

struct sup_req *sup_table_find(struct sup *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used || e->id != id)
			continue;
		if (reclaimable(s, e)) {
			sup_table_release(s, e);
			return NULL;
		}
		return e;
	}
	return NULL;
}

struct sup_req *sup_table_alloc(struct sup *s)
{
	struct sup_req *spare = NULL;

	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used)
			return e;
		if (!spare && reclaimable(s, e))
			spare = e;
	}
	if (spare)
		sup_table_release(s, spare);
	return spare;
}

void sup_table_end(struct sup *s, struct sup_req *e, enum chipd_code code)
{
	struct ring r = ring_of(s, e);
	struct ring_rec rec = {.request_id = e->id, .flags = RING_F_ERROR | RING_F_CODE(code)};
	int rc;

	if (e->ended || ring_finished(&r)) {
		e->ended = true;
		count_end(s, e, ring_end_flags(&r));
		return;
	}
	/* counted before the record is out, so that a reader who saw the end sees the
	 * count (the push's release orders it); the producer is gone, the record ours */
	count_end(s, e, rec.flags);
	rc = ring_take_over(&r);
	if (rc == 0) {
		rec.seq = (uint32_t)atomic_load_explicit(&r.hdr->head, memory_order_acquire);
		rc = ring_push(&r, &rec);
	}
	if (rc && rc != -EALREADY)
		SUP_ERR((int)e->chip, e->id, "cannot end the stream on ring %u: %s",
			sup_table_index(s, e), strerror(-rc));
	e->ended = true;
}

uint32_t sup_table_sweep(struct sup *s)
{
	uint32_t live = 0, used = 0;

	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];

		if (!e->used)
			continue;
		if (reclaimable(s, e)) {
			sup_table_release(s, e);
			continue;
		}
		used++;
		if (!e->ended)
			live++;
	}
	sup_gauge(s, PROTO_SUP_rings_in_use, used);
	sup_gauge(s, PROTO_SUP_queue_depth, live);
	return live;
}

uint32_t sup_table_live(struct sup *s)
{
	uint32_t live = 0;

	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];
		struct ring r;
		uint32_t flags;

		if (!e->used || (e->ended && e->counted))
			continue;
		/* every admission counts the ends seen so far, not only the next sweep */
		r = ring_of(s, e);
		flags = ring_end_flags(&r);
		if (flags) {
			e->ended = true;
			count_end(s, e, flags);
		} else if (!e->ended) {
			live++;
		}
	}
	return live;
}

void sup_table_assign(struct sup *s, const struct sup_req *e, struct proto_msg *m)
{
	proto_msg_init(m, PROTO_OP_ASSIGN);
	m->id = (int64_t)e->id;
	memcpy(m->wl, e->wl, sizeof(m->wl));
	m->nparams = e->nparams;
	for (uint32_t i = 0; i < e->nparams; i++) {
		memcpy(m->params[i].key, e->keys[i], CHIPD_KEY_MAX);
		m->params[i].value = e->params[i].value;
	}
	m->max_tokens = e->max_tokens;
	m->deadline_ns = e->deadline_ns;
	m->ring = sup_table_index(s, e);
	m->ring_gen = e->ring_gen;
	m->client = e->client;
}
