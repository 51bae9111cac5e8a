/* sup_table.c - the supervisor's live streams, one entry per token ring of the node
 * region. An entry holds its ring from submit until the stream ended and its reader
 * read the terminal record (or closed the ring, or died): only then may the ring and
 * the request id go to another stream. A ring nobody will end or read (broken by its
 * reader, or closed with no producer) is taken back within a bounded time. The ring
 * header is the reader's to write: nothing read from it bounds an index. Every
 * function runs under sup.lock. */
#include "sup.h"
#include "sup_clstat.h"
#include "sup_log.h"

#include "proc.h"
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sup_table_init(struct sup *s)
{
	s->nreqs = s->node.geom.nrings;
	s->reqs = calloc(s->nreqs, sizeof(*s->reqs));
	s->rings = calloc(s->nreqs, sizeof(*s->rings));
	if (!s->reqs || !s->rings)
		return -ENOMEM;
	/* bound now, while only the supervisor has seen the region: from here on a
	 * ring's capacity (every index mask) and record array are ours, whatever a
	 * reader later writes into its header (the supervisor laid them out: bound with
	 * its own geometry, nothing read from a header) */
	for (uint32_t i = 0; i < s->nreqs; i++) {
		/* the consumer line is rebound to its client's region at each reset */
		int rc = proto_node_ring_bind_in(&s->node, i, 0, &s->rings[i]);

		if (rc)
			return rc;
	}
	return 0;
}

void sup_table_free(struct sup *s)
{
	free(s->reqs);
	free(s->rings);
	s->reqs = NULL;
	s->rings = NULL;
	s->nreqs = 0;
}

uint32_t sup_table_index(const struct sup *s, const struct sup_req *e)
{
	return (uint32_t)(e - s->reqs);
}

struct ring *sup_table_ring(struct sup *s, const struct sup_req *e)
{
	return &s->rings[sup_table_index(s, e)];
}

uint32_t sup_table_reset(struct sup *s, struct sup_req *e, uint64_t id, pid_t producer,
			 pid_t consumer)
{
	struct ring *r = sup_table_ring(s, e);
	struct ring_hdr *h;

	/* the consumer line is in the region of the client the stream is for (e->region,
	 * the supervisor's own index: in range); a take-back resets it where it was */
	if (proto_node_ring_bind_in(&s->node, sup_table_index(s, e), e->region, r) != 0)
		(void)proto_node_ring_bind_in(&s->node, sup_table_index(s, e), 0, r);
	h = r->hdr;
	/* the identity line is the owner's: a reader that overwrote it gets it back, so
	 * the next stream's reader attaches the ring the supervisor laid out */
	h->magic = RING_MAGIC;
	h->version = RING_VERSION;
	h->capacity = r->capacity;
	h->rec_size = sizeof(struct ring_rec);
	/* the worker's start time as the spawner recorded it: no /proc read per submit */
	if (producer > 0 && e->chip < s->cfg.chips && s->workers[e->chip].pid == producer &&
	    s->workers[e->chip].pid_start)
		return ring_reset_started(r, id, producer, s->workers[e->chip].pid_start,
					  consumer);
	return ring_reset(r, id, producer, consumer);
}

void sup_table_close_reader(struct sup *s, struct sup_req *e)
{
	struct ring *r = sup_table_ring(s, e);

	if (e->reader_closed)
		return;
	/* the stream it assigned, never whatever the ring holds now */
	ring_close_stream(r, e->ring_gen);
	e->reader_closed = true;
	e->closed_ns = shm_now_ns();
	e->closed_head = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
}

/* Whether @r still holds what the supervisor wrote for @e and indices a producer and a
 * reader can leave: the consumer line is the reader's to write, so nothing in it is
 * trusted (the capacity and records used are the supervisor's own binding). Tail is read
 * before head, so a moving stream never looks out of range. */
static bool ring_sound(const struct sup_req *e, const struct ring *r)
{
	const struct ring_hdr *h = r->hdr;
	uint32_t tail = RING_TAIL_POS(atomic_load_explicit(&r->cons->tail, memory_order_acquire));
	uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);

	/* positions mod 2^32 (ring.h, RING_TAIL): a tail past head is more than capacity
	 * records behind it */
	return ring_check(r) == 0 &&
	       atomic_load_explicit(&h->generation, memory_order_relaxed) == e->ring_gen &&
	       atomic_load_explicit(&h->request_id, memory_order_relaxed) == e->id &&
	       (uint32_t)head - tail <= r->capacity;
}

void sup_table_release(struct sup *s, struct sup_req *e)
{
	if (!e->used)
		return;
	if (e->chip < s->cfg.chips && s->workers[e->chip].load > 0)
		s->workers[e->chip].load--;
	/* its live worker may still be writing into the client region (a take-back
	 * bumped the generation before, in sup_table_reset): the region waits for it */
	sup_region_grace(s, e->region, e->chip, e->producer);
	memset(e, 0, sizeof(*e));
}

/* Counts, once, how @e's request ended, from @flags, its terminal record's
 * (end_of; 0: none yet, nothing to count), after @tokens tokens: in its callable's
 * counts (sup_clstat.c), and the code of an ERROR record in err_<code>. FINAL
 * (completed) needs no err_<code>, nor a stream whose submit was answered with an
 * error (answered_error: counted then); one whose client gave up on its successful
 * answer (abandoned) is counted by its end, cancelled as a rule. The one place a
 * request's end is counted: the supervisor's own ends (sup_table_end, take_back) and
 * the ones it sees (the sweep, sup_table_live) all come here, and a re-queued request
 * keeps its entry. */
static void count_end(struct sup *s, struct sup_req *e, uint32_t flags, uint64_t tokens)
{
	uint32_t code;

	/* a forward in progress decides first whether the client gets the stream */
	if (e->counted || e->forwarding || !flags)
		return;
	e->counted = true;
	sup_clstat_end(s, e, flags, tokens);
	if (e->answered_error || (flags & RING_F_FINAL))
		return;
	code = RING_CODE_OF(flags);
	if (code == CHIPD_OK || code >= CHIPD_NCODES)
		code = CHIPD_E_INTERNAL; /* as libchipd reports such a record */
	sup_count_err(s, (enum chipd_code)code);
}

/* The flags of @r's terminal record (0: the stream has not ended) and in *@tokens
 * the token records of the stream: its seq, the tokens before it, and FINAL is a
 * token itself. */
static uint32_t end_of(const struct ring *r, uint64_t *tokens)
{
	struct ring_rec rec;

	*tokens = 0;
	if (!ring_end_record(r, &rec))
		return 0;
	*tokens = (uint64_t)rec.seq + (rec.flags & RING_F_FINAL ? 1 : 0);
	return rec.flags;
}

/* Takes @e's ring back at once, its stream counted as ended with @flags after @tokens
 * tokens (@flags 0: it was counted already): a new generation and the identity
 * rewritten, so a reader still attached learns that its ring went to another stream.
 * The caller releases @e. */
static void take_back(struct sup *s, struct sup_req *e, uint32_t flags, uint64_t tokens,
		      const char *why)
{
	count_end(s, e, flags, tokens);
	e->ended = true;
	SUP_WARN((int)e->chip, e->id, "ring %u taken back: %s", sup_table_index(s, e), why);
	(void)sup_table_reset(s, e, 0, 0, 0);
}

/* How long a live worker may still write into a ring it was told to leave: it drops a
 * request whose reader is closed at its next round, once its step in flight is done;
 * one whose threads stall longer is restarted (--progress-ms) or killed (--stuck-ms),
 * and its death path ends the stream. */
static uint64_t holder_bound_ns(const struct sup *s)
{
	uint32_t ms = s->cfg.stuck_ms > s->cfg.progress_ms ? s->cfg.stuck_ms : s->cfg.progress_ms;

	return (uint64_t)(ms > SUP_BROKEN_MS ? ms : SUP_BROKEN_MS) * SHM_NS_PER_MS;
}

/* Whether @e's ring can be given to another stream, taking it back by force where
 * nobody else will end it. Every used entry passes here on each sweep, so every end is
 * counted within a tick, and every ring comes back within a bounded time:
 * - ended (its terminal record published): once the reader took the terminal, closed
 *   the ring or died, or its tail stood still for SUP_UNREAD_MS;
 * - broken (the reader overwrote an index or the identity, or undid the supervisor's
 *   close of it, a terminal was claimed and never published, or the supervisor could
 *   not write the terminal of a dead producer): no producer will end it. Its reader is
 *   closed at once, so a worker still holding the request drops it; it ends internal
 *   and is taken back after SUP_BROKEN_MS once its producer is gone, or after
 *   holder_bound_ns while the worker that produces it lives (a reset ring must not
 *   take its late tokens);
 * - reader closed by the supervisor and never ended by the worker: a worker holding
 *   the request cancels it at its next round; one that produced nothing into it for
 *   the longer of --stuck-ms and --progress-ms does not hold it (the assign never
 *   reached it): a stuck or stalled one is killed or restarted within that bound, and
 *   its death path ends the stream first. */
static bool reclaimable(struct sup *s, struct sup_req *e)
{
	struct ring *r;
	struct ring_hdr *h;
	uint64_t now, pos, tokens;
	uint32_t flags;
	bool broken, reader_gone, held, unsealed;

	if (!e->used || e->forwarding)
		return false;
	r = sup_table_ring(s, e);
	h = r->hdr;
	now = shm_now_ns();
	/* every read below is bounded by the supervisor's own capacity (s->rings) */
	flags = end_of(r, &tokens);
	/* the terminal record is its producer's (no client writes the producer part): how
	 * the request ended, whatever its reader wrote in its own line since. Counted before
	 * the ring is judged, or a reader that broke its line after a FINAL would have the
	 * take-back below count a completed request in err_internal */
	count_end(s, e, flags, tokens);
	unsealed = !flags && atomic_load_explicit(&h->terminal, memory_order_acquire);
	if (!unsealed)
		e->unsealed_ns = 0;
	else if (!e->unsealed_ns)
		e->unsealed_ns = now;
	/* the close is a word of the reader's own line: one that undid it keeps its
	 * producer going, and its ring, its entry and its region (when it hung up) would
	 * never come back */
	if (e->reader_closed && !flags && !ring_reader_closed(r))
		e->reader_reopened = true;
	broken = !ring_sound(e, r) || (e->ended && !flags) || e->reader_reopened ||
		 (unsealed && now - e->unsealed_ns >= SUP_UNSEALED_MS * SHM_NS_PER_MS);
	/* the supervisor's own record of the producer, not the header's */
	held = e->producer > 0 && e->chip < s->cfg.chips && e->producer == s->workers[e->chip].pid;
	if (broken) {
		sup_table_close_reader(s, e);
		if (!e->broken_ns)
			e->broken_ns = now;
		if (now - e->broken_ns <
		    (held ? holder_bound_ns(s) : SUP_BROKEN_MS * SHM_NS_PER_MS))
			return false;
		/* what a broken ring holds is no count of anything: no tokens */
		take_back(s, e, RING_F_ERROR | RING_F_CODE(CHIPD_E_INTERNAL), 0,
			  "broken (an index or its identity overwritten, or no terminal record)");
		return true;
	}
	e->broken_ns = 0;
	if (!flags) {
		if (!e->reader_closed)
			return false;
		pos = atomic_load_explicit(&h->head, memory_order_relaxed);
		if (pos != e->closed_head) { /* its worker still produces: it holds it */
			e->closed_head = pos;
			e->closed_ns = now;
			return false;
		}
		if (now - e->closed_ns < holder_bound_ns(s))
			return false;
		/* sound, with no terminal: head is every token its producer pushed */
		take_back(s, e, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED), pos,
			  "its reader is gone and no worker ended the stream");
		return true;
	}
	e->ended = true; /* counted above, before the ring was judged */
	/* the client's connection says whether it lives (sup_conn.c), never a pid the
	 * ring header holds; a ring its client's usage no longer counts (reader_done) is
	 * done with, whatever its consumer line says now: else a reader that moves its
	 * tail back after each admission holds rings that neither count nor come back.
	 * A close the supervisor wrote itself (e->reader_closed: so that a worker that may
	 * hold the request drops it) says nothing of the reader: a live client still
	 * reads the end, and its ring waits for that (or SUP_UNREAD_MS, below) */
	reader_gone = e->client == 0 || e->reader_done || !sup_conn_reader_live(s, e) ||
		      (!e->reader_closed && ring_reader_closed(r));
	if (ring_drained(r) || reader_gone)
		return true;
	pos = atomic_load_explicit(&r->cons->tail, memory_order_relaxed);
	if (!e->tail_since_ns || pos != e->seen_tail) {
		e->seen_tail = pos;
		e->tail_since_ns = now;
		return false;
	}
	if (now - e->tail_since_ns < SUP_UNREAD_MS * SHM_NS_PER_MS)
		return false;
	take_back(s, e, 0, 0, "ended, and its live reader read nothing for a minute");
	return true;
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

void sup_table_client_usage(struct sup *s, pid_t pid, uint32_t *pending, uint32_t *rings)
{
	*pending = *rings = 0;
	/* reads only (its own reader_done aside): the sweep (reclaimable) alone closes readers and takes rings back,
	 * on its own schedule; a look at every submit would catch rings in the instant
	 * between a producer's terminal claim and its record, and judge them broken */
	for (uint32_t i = 0; pid > 0 && i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];
		const struct ring *r = &s->rings[i];
		uint32_t flags;

		if (!e->used || e->client != pid || e->reader_done)
			continue;
		if (e->forwarding) { /* a re-queue in progress: still in flight */
			(*rings)++;
			(*pending)++;
			continue;
		}
		flags = ring_end_flags(r);
		/* ended and nobody to read it any more: the sweep gives it back; until then
		 * each admission skips it without reading its ring (at a few thousand
		 * requests a second most of the table is such entries) */
		if ((flags || e->ended) &&
		    ((!e->reader_closed && ring_reader_closed(r)) || ring_drained(r))) {
			e->reader_done = true;
			continue;
		}
		(*rings)++;
		if (!flags && !e->ended)
			(*pending)++;
	}
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
	struct ring *r = sup_table_ring(s, e);
	struct ring_rec rec = {.request_id = e->id, .flags = RING_F_ERROR | RING_F_CODE(code)};
	uint64_t tokens;
	uint32_t flags;
	int rc;

	flags = end_of(r, &tokens);
	if (e->ended || flags) {
		e->ended = true;
		count_end(s, e, flags, tokens);
		return;
	}
	rc = ring_take_over(r);
	/* the tokens before the end: every record the producer published */
	rec.seq = (uint32_t)atomic_load_explicit(&r->hdr->head, memory_order_acquire);
	/* counted before the record is out, so that a reader who saw the end sees the
	 * count (the push's release orders it); the producer is gone, the record ours */
	count_end(s, e, rec.flags, rec.seq);
	if (rc == 0)
		rc = ring_push(r, &rec);
	/* a terminal that could not be written (the reader broke the ring) leaves the
	 * ring broken: the sweep takes it back (reclaimable) */
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

	for (uint32_t c = 0; c < s->cfg.chips; c++)
		s->workers[c].unended = 0;
	for (uint32_t i = 0; i < s->nreqs; i++) {
		struct sup_req *e = &s->reqs[i];
		uint64_t tokens;
		uint32_t flags;

		if (!e->used || (e->ended && e->counted))
			continue;
		/* every admission counts the ends seen so far, not only the next sweep */
		flags = end_of(&s->rings[i], &tokens);
		if (flags) {
			e->ended = true;
			count_end(s, e, flags, tokens);
		} else if (!e->ended) {
			live++;
			if (e->chip < s->cfg.chips)
				s->workers[e->chip].unended++;
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
	m->region = e->region;
	m->input_inline_len = e->input_len;
	memcpy(m->input_inline, e->input, e->input_len);
	m->input_off = e->data_in_off;
	m->input_len = e->data_in_len;
	m->output_off = e->data_out_off;
	m->output_cap = e->data_out_cap;
}
