/* client_stream.c - libchipd's token streams: opening the ring a submit's answer
 * names, reading its records (waiting, with the producer's and the supervisor's
 * liveness watched), and closing the reader (docs/protocol.md 5.4-5.6). */
#include "client_internal.h"
#include "proc.h"
#include "wait.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(CHIPD_PAYLOAD_MAX == RING_PAYLOAD_MAX, "a token carries a record's payload");

chipd_stream *client_stream_new(struct chipd_error *err)
{
	chipd_stream *s = calloc(1, sizeof(*s));

	if (!s)
		client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	return s;
}

int client_stream_open(chipd_conn *c, const struct proto_msg *ans, chipd_stream *s,
		       struct chipd_error *err)
{
	int rc;

	s->conn = c;
	s->id = (uint64_t)ans->id;
	s->gen = (uint32_t)ans->ring_gen;
	s->chip = (uint32_t)ans->chip;
	rc = proto_node_ring(&c->node, (uint32_t)ans->ring, &s->ring);
	if (rc)
		return client_fail(err, rc, CHIPD_E_INTERNAL,
				   "request %" PRIu64 ": ring %" PRId64 " unusable (%d)", s->id,
				   ans->ring, rc);
	if (atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen ||
	    atomic_load_explicit(&s->ring.hdr->request_id, memory_order_relaxed) != s->id)
		return client_fail(err, -EPROTO, CHIPD_E_INTERNAL,
				   "request %" PRIu64 ": ring %" PRId64 " belongs to another stream",
				   s->id, ans->ring);
	ring_set_adapt(&s->ring, &c->stream_spin);
	/* no record of a later stream of the ring is ever taken for this one's */
	ring_set_reader_gen(&s->ring, s->gen);
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

uint64_t chipd_stream_id(const chipd_stream *s)
{
	return s->id;
}

void chipd_stream_set_spin(chipd_stream *s, uint32_t spin_us)
{
	pthread_mutex_lock(&s->lock);
	ring_set_spin(&s->ring, (uint64_t)spin_us * 1000u);
	pthread_mutex_unlock(&s->lock);
}

/* The record that ended a stream with an error, as the error envelope would say it. */
static int stream_error(chipd_stream *s, uint32_t flags, struct chipd_error *err)
{
	uint32_t code = RING_CODE_OF(flags);

	if (code == CHIPD_OK || code >= CHIPD_NCODES)
		code = CHIPD_E_INTERNAL;
	client_fail(err, -EREMOTEIO, (enum chipd_code)code,
		    "request %" PRIu64 " on chip %" PRIu32 ": %s", s->id, s->chip,
		    chipd_code_name((enum chipd_code)code));
	if (err) {
		err->has_request = err->has_chip = true;
		err->request = s->id;
		err->chip = s->chip;
	}
	return -EREMOTEIO;
}

static bool supervisor_alive(const chipd_stream *s)
{
	return shm_region_creator_alive(&s->conn->node.region);
}

/* ring_pop, except that while the ring names no producer (protocol.md 5.4: only the
 * supervisor names one) the supervisor's death ends the wait: -EPIPE. */
static int pop_named(chipd_stream *s, struct ring_rec *rec, uint64_t deadline)
{
	for (;;) {
		uint64_t until = deadline, now;
		int rc;

		if (atomic_load_explicit(&s->ring.hdr->producer_pid, memory_order_acquire) == 0) {
			now = shm_now_ns();
			if (now < deadline && deadline - now > UNNAMED_SLICE_NS)
				until = now + UNNAMED_SLICE_NS;
		}
		rc = ring_pop(&s->ring, rec, until);
		if (rc != -ETIMEDOUT || until == deadline)
			return rc;
		if (!supervisor_alive(s))
			return -EPIPE;
	}
}

/* Whether nobody can end @s's stream any more: its producer is unnamed or dead, and
 * the supervisor, who would end or move it, is dead too. */
static bool node_lost(const chipd_stream *s)
{
	const struct ring_hdr *h = s->ring.hdr;
	pid_t pid = (pid_t)atomic_load_explicit(&h->producer_pid, memory_order_acquire);

	if (pid != 0 &&
	    shm_proc_alive(pid, atomic_load_explicit(&h->producer_start, memory_order_relaxed)))
		return false;
	return !supervisor_alive(s);
}

/* The next record. Returns what ring_pop does, except -EPIPE when the supervisor is
 * gone and no live producer is left (nobody will ever end the stream), and
 * -EOWNERDEAD when the producer died and the supervisor has not yet ended or moved
 * the stream at @deadline (it will: the stream goes on). */
static int stream_pop(chipd_stream *s, struct ring_rec *rec, uint64_t deadline)
{
	int rc = pop_named(s, rec, deadline);
	bool orphaned = false;

	/* A wait too short to reach shm_wait's peer check (a poll with timeout 0, as a
	 * reader of many streams makes) still notices a lost node within one slice: it
	 * looks at most once a slice, so polling costs no /proc read per call. */
	if (rc == -ETIMEDOUT) {
		uint64_t now = shm_now_ns();

		if (now - s->checked_ns >= UNNAMED_SLICE_NS) {
			s->checked_ns = now;
			if (node_lost(s))
				return -EPIPE;
		}
	}

	/* The producing worker died: the supervisor takes the ring over and ends the
	 * stream (worker_lost) or moves the request to another chip; wait for what
	 * follows until the deadline — unless the supervisor is gone too, when nobody
	 * ever will. A deadline that passes first ends this wait, not the stream. */
	while (rc == -EOWNERDEAD || (orphaned && rc == -ETIMEDOUT)) {
		struct timespec ts = {0, ORPHAN_POLL_NS};

		orphaned = true;
		if (!supervisor_alive(s))
			return -EPIPE;
		if (shm_now_ns() >= deadline)
			return -EOWNERDEAD;
		nanosleep(&ts, NULL);
		rc = pop_named(s, rec, deadline);
	}
	return rc;
}

int chipd_stream_next(chipd_stream *s, struct chipd_token *tok, uint32_t timeout_ms,
		      struct chipd_error *err)
{
	uint64_t deadline = client_deadline_ms(timeout_ms);
	struct ring_rec rec;
	int rc;

	pthread_mutex_lock(&s->lock);
	/* An ended stream stays ended: once its terminal record is read, the supervisor
	 * may give the ring to another stream at once, so the generation is looked at
	 * only while the stream is live. */
	if (!s->ended && !s->refused &&
	    atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen) {
		rc =
		    client_fail(err, -ESTALE, CHIPD_E_INTERNAL,
				"request %" PRIu64 ": its ring was given to another stream", s->id);
		goto out_unlock;
	}
	rc = s->ended || s->refused ? -ENODATA : stream_pop(s, &rec, deadline);
	/* a record naming another request is not this stream's either, whatever the
	 * generation said when it was read */
	if (rc == 0 && rec.request_id != s->id)
		rc = -ESTALE;
	if (rc == -ESTALE) {
		rc =
		    client_fail(err, -ESTALE, CHIPD_E_INTERNAL,
				"request %" PRIu64 ": its ring was given to another stream", s->id);
	} else if (rc == -ENODATA) {
		s->ended = !s->refused;
		client_fail(err, rc, CHIPD_OK, "request %" PRIu64 ": the stream has ended", s->id);
	} else if (rc == -ETIMEDOUT) {
		client_fail(err, rc, CHIPD_E_TIMEOUT,
			    "request %" PRIu64 ": no token within %" PRIu32 " ms", s->id,
			    timeout_ms);
	} else if (rc == -EOWNERDEAD) {
		/* Not an end: the supervisor ends the stream or moves the request to
		 * another chip, whose tokens then follow on this same stream. */
		rc =
		    client_fail(err, -ETIMEDOUT, CHIPD_E_TIMEOUT,
				"request %" PRIu64 ": its worker died; nothing came within %" PRIu32
				" ms while the supervisor ends the stream or moves the request",
				s->id, timeout_ms);
	} else if (rc == -EPIPE) {
		client_fail(err, rc, CHIPD_E_NODE_LOST,
			    "request %" PRIu64 ": the supervisor is gone (pid %" PRIu32
			    ") and no live worker produces the stream: nobody will end it",
			    s->id, s->conn->node.region.hdr->creator_pid);
	} else if (rc) {
		client_fail(err, rc, CHIPD_E_INTERNAL, "request %" PRIu64 ": ring error (%d)",
			    s->id, rc);
	} else if (rec.flags & RING_F_ERROR) {
		s->ended = true;
		rc = stream_error(s, rec.flags, err);
	} else if (rec.payload_len > RING_PAYLOAD_MAX) {
		/* a record no worker writes: read nothing past it; the request itself may
		 * go on (the record was no end), so the close still stops it */
		s->refused = true;
		rc = client_fail(err, -EBADMSG, CHIPD_E_INTERNAL,
				 "request %" PRIu64 ": token %" PRIu32 ": payload_len %" PRIu32
				 " is over %u",
				 s->id, rec.seq, rec.payload_len, RING_PAYLOAD_MAX);
	} else {
		tok->request = rec.request_id;
		tok->seq = rec.seq;
		tok->final = rec.flags & RING_F_FINAL;
		tok->value = rec.value;
		tok->ts_ns = rec.ts_ns;
		tok->payload_len = rec.payload_len;
		memset(tok->payload, 0, sizeof(tok->payload));
		memcpy(tok->payload, rec.payload, rec.payload_len);
		tok->out_len = tok->final ? rec.out_len : 0;
		s->ended = tok->final;
		if (tok->final && tok->out_len > s->out.len) { /* more than its range holds */
			tok->out_len = 0;
			rc = client_fail(err, -EBADMSG, CHIPD_E_INTERNAL,
					 "request %" PRIu64 ": out_len %" PRIu32
					 " is over the %" PRIu32 " bytes asked for",
					 s->id, rec.out_len, s->out.len);
		} else if (tok->final) {
			s->out_len = tok->out_len;
			s->out_ready = true;
		}
	}
	if (rc == -EPIPE && err) { /* the request is lost: say which */
		err->has_request = err->has_chip = true;
		err->request = s->id;
		err->chip = s->chip;
	}
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Whether @s's stream has ended or its ring went to another stream (which it does
 * only after the end): read-only, for a reader that closed the ring. */
static bool stream_over(const chipd_stream *s)
{
	return atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen ||
	       ring_finished(&s->ring);
}

int chipd_stream_output(chipd_stream *s, void *buf, uint32_t cap, uint32_t *len,
			struct chipd_error *err)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	*len = s->out_len;
	if (!s->out.len)
		rc = client_fail(err, -ENODATA, CHIPD_E_BAD_REQUEST,
				 "request %" PRIu64 ": no output was asked for", s->id);
	else if (!s->out_ready && (s->ended || s->refused)) /* an ERROR record: never any */
		rc = client_fail(err, -ENODATA, CHIPD_OK,
				 "request %" PRIu64 ": its stream ended with an error: no output",
				 s->id);
	else if (!s->out_ready)
		rc = client_fail(err, -EAGAIN, CHIPD_OK,
				 "request %" PRIu64 ": its final token has not been read", s->id);
	else if (cap < s->out_len)
		rc = client_fail(err, -ENOSPC, CHIPD_E_BAD_REQUEST,
				 "request %" PRIu64 ": %" PRIu32 " bytes of output, room for %" PRIu32,
				 s->id, s->out_len, cap);
	else if (s->out_len)
		memcpy(buf, client_data_at(s->conn, &s->out), s->out_len);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Waits until @s's stream is over, @deadline passes, or the node is found lost (looked
 * at once a slice, as a short read does), whichever comes first: what is left of a
 * close's timeout, so that a caller that gave time may resubmit the id at once. */
static void close_wait(chipd_stream *s, uint64_t deadline)
{
	uint64_t checked = shm_now_ns();

	while (!stream_over(s)) {
		struct timespec ts = {0, ORPHAN_POLL_NS};
		uint64_t now = shm_now_ns();

		if (now >= deadline)
			return;
		if (now - checked >= UNNAMED_SLICE_NS) {
			checked = now;
			if (node_lost(s))
				return;
		}
		nanosleep(&ts, NULL);
	}
}

void chipd_stream_close(chipd_stream *s, uint32_t timeout_ms)
{
	uint64_t deadline = client_deadline_ms(timeout_ms);

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	/* The ring's closed word first: it reaches the worker whatever the cancel call
	 * below makes of @timeout_ms (0 included, or a mailbox with no free slot), and
	 * the worker ends the stream at its next round. Only while the ring is still
	 * this stream's: the generation check keeps the cancel off a ring that was
	 * given to another stream, and ring_close_reader stores this stream's
	 * generation, so a reset that races it closes nothing.
	 * From here on nothing reads the ring: the supervisor gives a closed ring to
	 * another stream as soon as the stream ended, read or not. */
	if (!s->ended &&
	    atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) == s->gen) {
		(void)ring_close_reader(&s->ring); /* bound at open: never -EINVAL */
		/* A lost node (the supervisor gone, no live producer) answers no cancel
		 * and ends nothing: there is nothing to wait for, so return at once. */
		if (!node_lost(s)) {
			/* best effort, sooner than the worker's own look when it gets
			 * through */
			chipd_cancel(s->conn, s->id, timeout_ms, NULL);
			close_wait(s, deadline);
		}
	}
	/* its output's range once no worker will write it: the stream ended (else it
	 * stays held until chipd_close) */
	if (s->ended || stream_over(s))
		client_data_free(s->conn, &s->out);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
