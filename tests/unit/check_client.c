/* check_client.c - libchipd against a server thread on a real node region: calls,
 * token streams in order with their final, cancel, error envelopes as structs,
 * stats from shared memory, one connection shared by threads. Connect errors and
 * timeouts are in client_errors.c. */
#include "client_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define T_MS 2000u

static chipd_conn *connect_to(struct cx *x)
{
	struct chipd_error err;
	chipd_conn *c = NULL;

	ck_assert_msg(chipd_connect(x->instance, &c, &err) == 0, "%s", err.message);
	ck_assert_str_eq(chipd_instance(c), x->instance);
	return c;
}

/* Submits @wl with token count @n; returns the stream. */
static chipd_stream *submit(chipd_conn *c, const char *wl, int64_t n, uint64_t want_id,
			    uint64_t *id)
{
	struct chipd_param p = {"n", n};
	struct chipd_request req = {
	    .workload = wl, .params = &p, .nparams = 1, .id = want_id, .chip = -1};
	struct chipd_error err;
	chipd_stream *s = NULL;

	ck_assert_msg(chipd_submit(c, &req, T_MS, id, &s, &err) == 0, "%s", err.message);
	ck_assert_uint_eq(chipd_stream_id(s), *id);
	return s;
}

START_TEST(ping_answers_with_server_pid)
{
	struct cx x;
	chipd_conn *c;
	uint32_t pid = 0;
	struct chipd_error err;

	cx_start(&x, 4);
	c = connect_to(&x);
	ck_assert_int_eq(chipd_ping(c, T_MS, &pid, &err), 0);
	ck_assert_uint_eq(pid, (uint32_t)getpid());
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(submit_streams_tokens_in_order_then_final)
{
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	/* 40 tokens through a 16-record ring: the reader must keep up, in order. */
	s = submit(c, "synthetic", 40, 77, &id);
	ck_assert_uint_eq(id, 77);
	for (uint32_t i = 0; i < 40; i++) {
		ck_assert_msg(chipd_stream_next(s, &tok, T_MS, &err) == 0, "%u: %s", i,
			      err.message);
		ck_assert_uint_eq(tok.request, 77);
		ck_assert_uint_eq(tok.seq, i);
		ck_assert_uint_eq(tok.value, 100 + i);
		ck_assert_int_eq(tok.final, i == 39);
	}
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -ENODATA);
	ck_assert_int_eq(err.errnum, -ENODATA);
	chipd_stream_close(s, T_MS);
	/* The server chooses the id when the client does not. */
	s = submit(c, "synthetic", 1, 0, &id);
	ck_assert_uint_ne(id, 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert(tok.final);
	chipd_stream_close(s, T_MS);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* The supervisor may give an ended stream's ring to another stream as soon as its
 * terminal record was read: the ended stream still answers -ENODATA, never that its
 * ring was given away (a race seen under load, check_load). */
START_TEST(ended_stream_stays_ended_when_its_ring_is_reused)
{
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *first, *later[CX_RINGS];
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	first = submit(c, "synthetic", 1, 0, &id);
	ck_assert_int_eq(chipd_stream_next(first, &tok, T_MS, &err), 0);
	ck_assert(tok.final);
	/* every ring in use: the first stream's (drained) ring is among them */
	for (uint32_t i = 0; i < CX_RINGS; i++)
		later[i] = submit(c, "synthetic", 2, 0, &id);
	ck_assert_int_eq(chipd_stream_next(first, &tok, 0, &err), -ENODATA);
	ck_assert_int_eq(err.errnum, -ENODATA);
	chipd_stream_close(first, T_MS);
	for (uint32_t i = 0; i < CX_RINGS; i++)
		chipd_stream_close(later[i], T_MS);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* A reader that sleeps at once (spin 0) and one that never sleeps (spin as long as
 * its timeout) read the same stream. */
START_TEST(stream_spin_setting_keeps_every_token)
{
	static const uint32_t spins_us[] = {0, T_MS * 1000u};
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;

	cx_start(&x, 4);
	c = connect_to(&x);
	for (uint32_t k = 0; k < 2; k++) {
		uint64_t id;
		chipd_stream *s = submit(c, "synthetic", 40, 0, &id);

		chipd_stream_set_spin(s, spins_us[k]);
		for (uint32_t i = 0; i < 40; i++) {
			ck_assert_msg(chipd_stream_next(s, &tok, T_MS, &err) == 0, "%u/%u: %s", k,
				      i, err.message);
			ck_assert_uint_eq(tok.seq, i);
			ck_assert_int_eq(tok.final, i == 39);
		}
		ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -ENODATA);
		chipd_stream_close(s, T_MS);
	}
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(cancel_ends_stream_with_cancelled)
{
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	s = submit(c, "hold", 0, 0, &id);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, 20, &err), -ETIMEDOUT);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert_int_eq(chipd_cancel(c, id, T_MS, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_CANCELLED);
	ck_assert(err.has_request);
	ck_assert_uint_eq(err.request, id);
	ck_assert(!err.retryable);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -ENODATA);
	chipd_stream_close(s, T_MS);
	/* A second cancel finds nothing: the envelope arrives as a struct. */
	ck_assert_int_eq(chipd_cancel(c, id, T_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NOT_FOUND);
	ck_assert_uint_eq(err.request, id);
	ck_assert_ptr_nonnull(strstr(err.message, "no live request"));
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* Submits and closes 3 * CX_RINGS "hold" streams that never end by themselves: the
 * rings come back, or the submits run out. With @no_time each close has no time for a
 * cancel call, and the server would not serve one anyway. */
static void open_streams_closed_in_turn(bool no_time)
{
	struct cx x;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	for (int i = 0; i < 3 * CX_RINGS; i++) {
		s = submit(c, "hold", 0, 0, &id);
		if (!no_time) {
			chipd_stream_close(s, T_MS);
			continue;
		}
		atomic_store(&x.mode, CX_SILENT);
		chipd_stream_close(s, 0);
		atomic_store(&x.mode, CX_ANSWER);
	}
	chipd_close(c);
	cx_stop(&x);
}

/* Starts @x's server, connects and submits @wl as request @id, which must fail with
 * @rc and no stream (@err says why); the connection, for the caller to close. */
static chipd_conn *failed_submit(struct cx *x, const char *wl, uint64_t id, int rc,
				 struct chipd_error *err)
{
	struct chipd_request req = {.workload = wl, .chip = -1, .id = id};
	chipd_stream *s = NULL;
	uint64_t got = 0;
	chipd_conn *c;

	cx_start(x, 4);
	c = connect_to(x);
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &got, &s, err), rc);
	ck_assert_ptr_null(s);
	return c;
}

/* A submit admitted, whose answer names a ring that is not its stream's: libchipd
 * cannot read the stream, so chipd_submit fails and cancels the request rather than
 * leave it running with nobody to read or end it (a later cancel finds nothing). */
START_TEST(submit_whose_ring_is_not_its_own_is_cancelled)
{
	struct cx x;
	struct chipd_error err;
	chipd_conn *c = failed_submit(&x, "badring", 77, -EPROTO, &err);

	ck_assert_msg(strstr(err.message, "belongs to another stream"), "%s", err.message);
	ck_assert_int_eq(chipd_cancel(c, 77, T_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NOT_FOUND);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* The same, answered late (after 2 s of the 2.5 s given) by a server that answers
 * nothing more: the cancel gets what is left of the submit's timeout, so the submit
 * fails within it, generously bounded. Before, the cancel waited the whole timeout
 * again: the submit returned after 4.5 s. */
START_TEST(submit_whose_ring_is_not_its_own_keeps_its_timeout)
{
	const struct chipd_param late = {"late_ms", 2000};
	struct chipd_request req = {
	    .workload = "badring_late", .params = &late, .nparams = 1, .chip = -1, .id = 78};
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint64_t got = 0, t0;
	chipd_conn *c;
	struct cx x;

	cx_start(&x, 4);
	c = connect_to(&x);
	t0 = shm_now_ns();
	ck_assert_int_eq(chipd_submit(c, &req, 2500, &got, &s, &err), -EPROTO);
	ck_assert_uint_lt(shm_now_ns() - t0, (2500ull + 1500) * SHM_NS_PER_MS);
	ck_assert_ptr_null(s);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(close_of_open_stream_cancels_it)
{
	open_streams_closed_in_turn(false);
}
END_TEST

/* With no time for a cancel call the ring's closed word alone ends the request. */
START_TEST(close_without_time_cancels_it)
{
	open_streams_closed_in_turn(true);
}
END_TEST

START_TEST(error_envelope_arrives_as_struct)
{
	struct cx x;
	struct chipd_error err;
	chipd_conn *c = failed_submit(&x, "refuse", 5, -EREMOTEIO, &err);

	ck_assert_int_eq(err.errnum, -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_NO_CAPACITY);
	ck_assert(err.retryable);
	ck_assert_str_eq(err.message, "KV pool full");
	ck_assert(err.has_chip);
	ck_assert_uint_eq(err.chip, 1);
	ck_assert(err.has_request); /* the dispatcher attaches the request id */
	ck_assert_uint_eq(err.request, 5);
	/* An op the server does not serve is a bad_request envelope too. */
	ck_assert_int_eq(chipd_drain(c, 0, T_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.message, "not served by the test server"));
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(stream_error_record_arrives_as_struct)
{
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	s = submit(c, "fail", 5, 0, &id);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert(!tok.final);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_DEVICE_ERROR);
	ck_assert_uint_eq(err.request, id);
	ck_assert_ptr_nonnull(strstr(err.message, "device_error"));
	chipd_stream_close(s, T_MS);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* The ring of the stream @id in the fixture. */
static void ring_of(struct cx *x, uint64_t id, struct ring *r)
{
	for (uint32_t i = 0; i < CX_RINGS; i++)
		if (x->streams[i].used && (uint64_t)x->streams[i].id == id) {
			ck_assert_int_eq(proto_node_ring(&x->node, i, r), 0);
			return;
		}
	ck_abort_msg("no ring for request %llu", (unsigned long long)id);
}

/* Submits a "hold" stream (never ends by itself), reads its first two tokens and
 * finds its ring (@r); returns the stream, *@id its request. */
static chipd_stream *held_stream(struct cx *x, chipd_conn *c, uint64_t *id, struct ring *r)
{
	struct chipd_token tok;
	struct chipd_error err;
	chipd_stream *s = submit(c, "hold", 0, 0, id);

	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ring_of(x, *id, r);
	return s;
}

/* A pid that is surely dead: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(tu_wait(pid, 5000), 0);
	return pid;
}

/* The producer and the supervisor (the node region's creator) both dead, or no
 * producer named and the supervisor dead: nobody will ever end the stream, so the
 * reader learns it at once (-EPIPE, node_lost, a message saying the supervisor is
 * gone) instead of at its deadline: not -ETIMEDOUT, not a "ring error". */
START_TEST(reader_of_dead_supervisor_and_worker_gets_epipe)
{
	const uint32_t producers[] = {(uint32_t)dead_pid(), 0};
	struct shm_header *h;
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	struct ring r;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	h = x.node.region.hdr;
	for (size_t i = 0; i < sizeof(producers) / sizeof(producers[0]); i++) {
		uint32_t creator = h->creator_pid, producer;

		s = held_stream(&x, c, &id, &r);
		producer = atomic_load(&r.hdr->producer_pid);
		atomic_store(&r.hdr->producer_pid, producers[i]);
		h->creator_pid = (uint32_t)dead_pid();
		/* far longer than the test may run: returning at all is the point */
		ck_assert_int_eq(chipd_stream_next(s, &tok, 60000, &err), -EPIPE);
		ck_assert_int_eq(err.errnum, -EPIPE);
		ck_assert_int_eq(err.code, CHIPD_E_NODE_LOST);
		ck_assert(err.retryable);
		ck_assert_msg(strstr(err.message, "the supervisor is gone"), "%s", err.message);
		ck_assert(err.has_request && err.request == id);
		/* alive again: the stream is cancelled and read to its end as usual */
		h->creator_pid = creator;
		atomic_store(&r.hdr->producer_pid, producer);
		chipd_stream_close(s, T_MS);
	}
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* The producing worker dead, the supervisor alive but not yet standing in (as while
 * it is slow to notice): a read whose timeout passes meanwhile is a timeout of that
 * read, not the end of the stream, because the supervisor may move the request to
 * another chip. Once a new producer is named, its records follow on the same stream:
 * the reader gets them. Polls with timeout 0 say the same and do not end it either. */
START_TEST(reader_of_dead_worker_waits_for_the_supervisor)
{
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	struct ring r;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	s = held_stream(&x, c, &id, &r);
	uint32_t producer = atomic_load(&r.hdr->producer_pid);
	atomic_store(&r.hdr->producer_pid, (uint32_t)dead_pid());
	ck_assert_int_eq(chipd_stream_next(s, &tok, 200, &err), -ETIMEDOUT);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "its worker died"), "%s", err.message);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(chipd_stream_next(s, &tok, 0, &err), -ETIMEDOUT);
	/* moved: the new producer (here the test process, alive) goes on with seq 2 */
	atomic_store(&r.hdr->producer_pid, producer);
	struct ring_rec rec = {.request_id = id, .seq = 2, .value = 7, .flags = RING_F_FINAL};
	ck_assert_int_eq(ring_push(&r, &rec), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert_uint_eq(tok.seq, 2);
	ck_assert(tok.final);
	chipd_stream_close(s, T_MS);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* A reader waiting on its stream while the supervisor takes the ring back and gives it
 * to another stream (a take-back writes no terminal record: a reader closed by the
 * supervisor whose worker never ended it, or a broken ring): the new stream's records
 * are not this stream's tokens. The wait ends -ESTALE, as a read that starts after the
 * reset does, and returns none of them. */
struct one_read {
	chipd_stream *s;
	struct chipd_token tok;
	struct chipd_error err;
	int rc;
};

static void *read_one(void *arg)
{
	struct one_read *a = arg;

	a->rc = chipd_stream_next(a->s, &a->tok, 30000, &a->err);
	return NULL;
}

static bool reader_asleep(void *arg)
{
	struct ring *r = arg;

	return atomic_load(&r->cons->wake.sleepers) != 0;
}

START_TEST(reader_of_a_ring_given_away_gets_none_of_its_records)
{
	struct cx x;
	struct one_read a = {0};
	struct ring r;
	chipd_conn *c;
	pthread_t t;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	a.s = held_stream(&x, c, &id, &r);
	atomic_store(&r.cons->wake.sleepers, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, read_one, &a), 0);
	ck_assert(tu_eventually(reader_asleep, &r, 10000));
	/* taken back (its consumer line reset where it was) and given to request id + 1 */
	ring_reset(&r, id + 1, getpid(), getpid());
	for (uint32_t seq = 0; seq < 3; seq++) {
		struct ring_rec rec = {.request_id = id + 1, .seq = seq, .value = 900 + seq};

		ck_assert_int_eq(ring_push(&r, &rec), 0);
	}
	pthread_join(t, NULL);
	ck_assert_msg(a.rc == -ESTALE, "read %d: request %llu seq %u value %llu", a.rc,
		      (unsigned long long)a.tok.request, a.tok.seq,
		      (unsigned long long)a.tok.value);
	ck_assert_int_eq(a.err.code, CHIPD_E_INTERNAL);
	ck_assert_msg(strstr(a.err.message, "given to another stream"), "%s", a.err.message);
	chipd_stream_close(a.s, T_MS);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* A non-terminal record no worker writes (payload_len over 24) ends the reading with
 * -EBADMSG, but not the request: its worker goes on and may still write its output.
 * The close then tells it to stop (the ring's reader closed, a cancel, the wait for the
 * end), as for any stream closed before its end. */
START_TEST(record_with_bad_payload_len_is_refused_and_its_close_stops_the_request)
{
	struct chipd_param p = {"n", 0};
	struct chipd_request req = {.workload = "hold", .params = &p, .nparams = 1, .chip = -1,
				    .output_cap = 512u * 1024u};
	struct cx x;
	struct chipd_token tok;
	struct chipd_error err;
	struct ring r;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	cx_start(&x, 4);
	c = connect_to(&x);
	ck_assert_msg(chipd_submit(c, &req, T_MS, &id, &s, &err) == 0, "%s", err.message);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), 0);
	ring_of(&x, id, &r);
	struct ring_rec rec = {.request_id = id, .seq = 2, .payload_len = 100};
	ck_assert_int_eq(ring_push(&r, &rec), 0);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -EBADMSG);
	ck_assert_msg(strstr(err.message, "payload_len 100 is over 24"), "%s", err.message);
	ck_assert_int_eq(chipd_stream_next(s, &tok, T_MS, &err), -ENODATA);
	chipd_stream_close(s, T_MS);
	ck_assert_msg(ring_reader_closed(&r) && ring_finished(&r),
		      "the close left the request running: reader closed %d, ended %d",
		      ring_reader_closed(&r), ring_finished(&r));
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(status_lists_every_chip)
{
	struct cx x;
	struct chipd_status st;
	struct chipd_error err;
	chipd_conn *c;

	cx_start(&x, 4);
	c = connect_to(&x);
	ck_assert_int_eq(chipd_status(c, T_MS, &st, &err), 0);
	ck_assert_int_eq(st.state, CHIPD_SUP_READY);
	ck_assert_uint_eq(st.nchips, 2);
	ck_assert_int_eq(st.chips[1].state, CHIPD_CHIP_READY);
	ck_assert_int_eq(st.chips[1].gpu, -1);
	ck_assert_uint_eq(st.chips[1].restarts, 1);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(stats_read_from_shared_memory)
{
	struct cx x;
	struct chipd_stat st[64];
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n;
	bool seen = false;

	cx_region(&x); /* no server needed */
	ctr_add(&x.node.wrk_ctr[1], PROTO_WRK_tokens, 42);
	ctr_set(&x.node.sup_ctr, PROTO_SUP_queue_depth, 3);
	/* a monitor's handle: counters need no handshake, and any request is refused */
	ck_assert_msg(chipd_connect_monitor(x.instance, &c, &err) == 0, "%s", err.message);
	ck_assert_int_eq(chipd_ping(c, T_MS, NULL, &err), -ENOTCONN);
	ck_assert_ptr_nonnull(strstr(err.message, "chipd_connect_monitor"));
	ck_assert_int_eq(chipd_stats(c, st, 64, &n, &err), 0);
	ck_assert_uint_eq(n, PROTO_NSUP_CTRS + 2 * PROTO_NWRK_CTRS);
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(st[i].block, "chip1") == 0 && strcmp(st[i].name, "tokens") == 0)
			seen = st[i].value == 42 && !st[i].gauge;
		if (strcmp(st[i].name, "queue_depth") == 0 &&
		    strcmp(st[i].block, "supervisor") == 0)
			ck_assert(st[i].gauge && st[i].value == 3);
	}
	ck_assert(seen);
	ck_assert_int_eq(chipd_stats(c, st, 3, &n, &err), -ENOBUFS);
	ck_assert_uint_eq(n, PROTO_NSUP_CTRS + 2 * PROTO_NWRK_CTRS);
	/* a block a peer overwrote after the connect (its header, a name with no NUL, an
	 * unknown kind) gives odd entries, never an error (chipd.h: chipd_connect refused
	 * a corrupt block; chipd_stats has no -EBADMSG) */
	struct ctr_slot_desc *d = (struct ctr_slot_desc *)(uintptr_t)x.node.wrk_ctr[1].descs;
	x.node.wrk_ctr[1].hdr->magic = 0;
	memset(d[0].name, 'z', sizeof(d[0].name));
	d[0].kind = 77;
	ck_assert_int_eq(chipd_stats(c, st, 64, &n, &err), 0);
	ck_assert_uint_eq(n, PROTO_NSUP_CTRS + 2 * PROTO_NWRK_CTRS);
	ck_assert_str_eq(st[PROTO_NSUP_CTRS + PROTO_NWRK_CTRS].block, "chip1");
	ck_assert_uint_eq(strlen(st[PROTO_NSUP_CTRS + PROTO_NWRK_CTRS].name), CTR_NAME_MAX - 1);
	ck_assert(!st[PROTO_NSUP_CTRS + PROTO_NWRK_CTRS].gauge);
	chipd_close(c);
	cx_region_remove(&x);
}
END_TEST

struct worker_arg {
	chipd_conn *c;
	int failures;
	char first[256]; /* what the first failure said */
};

/* Four threads and the fixture's server share the machine (slowed several times
 * under TSan, beside other tests): each call gets a generous bound, since the test
 * is about sharing one connection, never about speed. */
#define T_SHARED_MS 15000u

static void hammer_failed(struct worker_arg *w, const char *what, int rc,
			  const struct chipd_error *err)
{
	if (w->failures++ == 0)
		snprintf(w->first, sizeof w->first, "%s: rc %d: %.200s", what, rc,
			 err ? err->message : "");
}

static void *hammer(void *arg)
{
	struct worker_arg *w = arg;
	struct chipd_token tok;
	struct chipd_error err;
	struct chipd_request req = {.workload = "synthetic", .chip = -1};

	for (int i = 0; i < 20; i++) {
		chipd_stream *s;
		uint64_t id;
		uint32_t n = 0;

		int rc = chipd_ping(w->c, T_SHARED_MS, NULL, &err);

		if (rc != 0)
			hammer_failed(w, "ping", rc, &err);
		/* Rings are few: a refusal is fine, anything else is not. */
		rc = chipd_submit(w->c, &req, T_SHARED_MS, &id, &s, &err);
		if (rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL)
			continue;
		if (rc) {
			hammer_failed(w, "submit", rc, &err);
			continue;
		}
		while ((rc = chipd_stream_next(s, &tok, T_SHARED_MS, &err)) == 0 && tok.seq == n)
			n++;
		if (n != 5)
			hammer_failed(w, "stream", rc, &err);
		chipd_stream_close(s, T_SHARED_MS);
	}
	return NULL;
}

START_TEST(threads_share_one_connection)
{
	struct cx x;
	pthread_t t[4];
	struct worker_arg w[4];
	chipd_conn *c;

	cx_start(&x, 4);
	c = connect_to(&x);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker_arg){c, 0};
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(w[i].failures == 0, "thread %d: %d failures, first %s", i,
			      w[i].failures, w[i].first);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("calls");

	tcase_add_test(tc, ping_answers_with_server_pid);
	tcase_add_test(tc, status_lists_every_chip);
	tcase_add_test(tc, stats_read_from_shared_memory);
	tcase_add_test(tc, error_envelope_arrives_as_struct);
	suite_add_tcase(s, tc);
	tc = tcase_create("streams");
	tcase_add_test(tc, submit_streams_tokens_in_order_then_final);
	tcase_add_test(tc, ended_stream_stays_ended_when_its_ring_is_reused);
	tcase_add_test(tc, stream_spin_setting_keeps_every_token);
	tcase_add_test(tc, cancel_ends_stream_with_cancelled);
	tcase_add_test(tc, submit_whose_ring_is_not_its_own_is_cancelled);
	tcase_add_test(tc, submit_whose_ring_is_not_its_own_keeps_its_timeout);
	tcase_add_test(tc, close_of_open_stream_cancels_it);
	tcase_add_test(tc, close_without_time_cancels_it);
	tcase_add_test(tc, stream_error_record_arrives_as_struct);
	tcase_add_test(tc, reader_of_dead_supervisor_and_worker_gets_epipe);
	tcase_add_test(tc, reader_of_dead_worker_waits_for_the_supervisor);
	tcase_add_test(tc, reader_of_a_ring_given_away_gets_none_of_its_records);
	tcase_add_test(tc, record_with_bad_payload_len_is_refused_and_its_close_stops_the_request);
	suite_add_tcase(s, tc);
	tc = tcase_create("sharing");
	tcase_add_test(tc, threads_share_one_connection);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	client_add_error_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(client_suite());
}
