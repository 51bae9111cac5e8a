/* wrk_sched.c - the scheduler thread (S): takes the published epochs in order,
 * launches each request's lane of a step on a stream of its own, finishes each lane on
 * its own when its work completed (token published, or the request failed) and
 * returns a bank once every lane in it finished. A slow lane holds up only its own
 * request: the others' tokens are published, and their next steps built and
 * launched, while it runs. */
#include "chipd_callable.h"
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

_Static_assert(RING_PAYLOAD_MAX == CHIPD_CL_PAYLOAD_MAX, "a record carries a step's payload");

/* Bound of one wait for an epoch while no lane is in flight. O's publish and O's exit
 * both wake S (the wait's ready test sees them), so this only bounds a lost wake;
 * long, so an idle worker does not wake for nothing. */
#define SCHED_EPOCH_WAIT_NS (1000u * 1000u * 1000u)
/* While lanes are in flight S looks at them this often: a lane's end wakes nobody
 * (the device does not ring S), O's publish does. S spins first (spin_ns), then
 * sleeps this long at most, so a token is published within about this much of its
 * lane's end. */
#define SCHED_LANE_POLL_NS (50u * 1000u)

static void ctr_s(struct wrk *w, enum proto_wrk_ctr c, uint64_t d)
{
	ctr_add(w->ctr, wrk_ctr_index(c), d);
}

/* Runs @rq's output hook (wl_req_output) into the client's data area; *@len the bytes
 * written. Returns CHIPD_OK, or the code its stream ends with: too_large when the
 * output does not fit (-EMSGSIZE, -ENOSPC), device_error for any other failure. */
static enum chipd_code write_output(struct wrk *w, struct wrk_req *rq, uint32_t *len)
{
	char msg[WL_MSG_MAX];
	int rc = wl_req_output(rq->wl, rq->out_dst, len, msg, sizeof(msg));

	if (rc == 0)
		return CHIPD_OK;
	fprintf(stderr, "chipd worker %u: request %llu: output: %s\n", w->cfg.chip,
		(unsigned long long)rq->id, msg);
	return rc == -EMSGSIZE || rc == -ENOSPC ? CHIPD_E_TOO_LARGE : CHIPD_E_DEVICE_ERROR;
}

/* Publishes one request's token of a completed step. FINAL goes with the last
 * token: by now its step and every earlier one have completed. Returns a code to
 * fail the request with, or CHIPD_OK. Inside S's pass section (publish). */
static enum chipd_code publish_in(struct wrk *w, struct wrk_entry *e)
{
	struct wrk_req *rq = e->rq;
	struct ring_rec rec = {.request_id = rq->id, .seq = e->step};
	bool last = e->step + 1 == rq->limit;
	uint64_t tok;

	/* The token is read where the build said it lands (wl.h, struct wl_out). The
	 * entry's own step is the order check: S is a request's only token reader and
	 * runs its steps in build order, and a request that drops one step (failed,
	 * cancelled) publishes no later one. */
	if (e->out.step != e->step || !e->out.token)
		return CHIPD_E_INTERNAL;
	/* The supervisor took the ring back (protocol.md 5.7: its reader broke it, and
	 * undid the close O would have seen): the ring, and maybe the client region of
	 * the output, may be another stream's by now. Nothing more of this one is written;
	 * it ends cancelled, and O writes no record for it (wrk_req_end_error). */
	/* seq_cst: inside S's pass section, the Dekker of wrk_pass_enter */
	if (atomic_load_explicit(&rq->s_ring.hdr->generation, memory_order_seq_cst) != rq->ring_gen)
		return CHIPD_E_CANCELLED;
	/* Past its deadline: O stops building at the deadline, but the steps it built
	 * before still run; their tokens (a FINAL too) are not published, the stream
	 * ends timeout at this step (O writes the record) */
	if (rq->deadline_ns && shm_now_ns() >= rq->deadline_ns)
		return CHIPD_E_TIMEOUT;
	tok = (uint64_t)(uint32_t)*e->out.token;
	rec.value = tok;
	/* the payload the build wrote after the token (payload_bytes, checked at load) */
	if (e->out.payload_len > RING_PAYLOAD_MAX)
		return CHIPD_E_INTERNAL;
	rec.payload_len = e->out.payload_len;
	memcpy(rec.payload, e->out.payload, e->out.payload_len);
	rec.flags = last ? RING_F_FINAL : 0;
	/* the output goes into the client's data area before FINAL: the push's release
	 * (ring_push's seq_cst store of head) orders its bytes before the record */
	if (last && rq->out_dst) {
		enum chipd_code code = write_output(w, rq, &rec.out_len);

		if (code != CHIPD_OK)
			return code;
		/* The deadline passed while the output hook ran (it runs after the last
		 * step, for as long as the callable takes): FINAL is not published after
		 * it, as for a step running at the deadline. The bytes written lie in
		 * the request's own range, which no FINAL announces. */
		if (rq->deadline_ns && shm_now_ns() >= rq->deadline_ns)
			return CHIPD_E_TIMEOUT;
	}
	/* the id is free before FINAL is visible: a client that read it may resubmit */
	if (last)
		wrk_req_end_final(w, rq);
	/* A terminal always fits, and O only builds a step when the ring has room for
	 * every token in flight: only a peer that broke the ring makes a push fail. The
	 * request then fails, FINAL too (s_final stays 0; its id is free already): O
	 * writes its ERROR record, or counts that the ring refused that too. */
	if (ring_publish(&rq->s_ring, &rec))
		return CHIPD_E_INTERNAL;
	/* counted right after the record is visible, before the reader's wake (a system
	 * call), so a worker killed meanwhile leaves it uncounted only within these few
	 * instructions (protocol.md 8.1) */
	ctr_s(w, PROTO_WRK_tokens, 1);
	if (last) {
		ctr_s(w, PROTO_WRK_completed, 1);
		atomic_store_explicit(&rq->s_final, 1, memory_order_release);
	}
	atomic_store_explicit(&rq->s_pushed, e->step + 1, memory_order_relaxed);
	ring_wake_reader(&rq->s_ring);
	return CHIPD_OK;
}

/* publish_in inside S's pass section: from before the generation check to after the
 * reader's wake, every write into the client's region (the output, the wake word of
 * its consumer line) is one the supervisor waits for before it scrubs that region. */
static enum chipd_code publish(struct wrk *w, struct wrk_entry *e)
{
	_Atomic uint64_t *pass = &w->node->dir[w->cfg.chip].pass_s;
	enum chipd_code code;

	wrk_pass_enter(pass);
	code = publish_in(w, e);
	wrk_pass_leave(pass);
	return code;
}

/* Finishes one lane: publishes the request's token, or fails the request when its
 * lane failed (@res, -errno): device_error, or internal when the device layer refused
 * the lane's arguments before queueing them (@e->refused: the fault is the host's,
 * as a failed build's, docs/protocol.md 8.3); its steps finish in order. */
static void finish_entry(struct wrk *w, struct wrk_entry *e, int res)
{
	struct wrk_req *rq = e->rq;
	enum chipd_code code = CHIPD_OK;

	if (atomic_load_explicit(&rq->s_fail, memory_order_relaxed)) {
		/* failed earlier: its later steps are dropped */
	} else if (res && e->refused) {
		code = CHIPD_E_INTERNAL;
	} else if (res) {
		ctr_s(w, PROTO_WRK_device_errors, 1);
		code = CHIPD_E_DEVICE_ERROR;
	} else if (!atomic_load_explicit(&rq->cancel, memory_order_acquire)) {
		code = publish(w, e);
	}
	if (code != CHIPD_OK)
		atomic_store_explicit(&rq->s_fail, code, memory_order_relaxed);
	/* release: O reads the ring, s_fail and s_final after it sees s_done */
	atomic_store_explicit(&rq->s_done, e->step + 1, memory_order_release);
}

/* S's own state. */
struct sched {
	struct wrk *w;
	struct wrk_bank *held[WRK_MAX_BANKS]; /* banks with lanes not finished, by epoch */
	uint32_t nheld;
	uint32_t busy[WL_EXEC_STREAMS]; /* lanes in flight on each stream */
	bool bad[WL_EXEC_STREAMS];	/* a lane on it failed: replaced once idle */
	uint64_t e;			/* the next epoch to take */
	uint32_t streak, fatal_at;
	/* S is busy from the launch that finds no bank held to the release that leaves
	 * none; it counts that time (and O's busy time inside it) and records it as S run
	 * spans in pieces, each ending where S is about to publish tokens, so a token's
	 * reader finds the run that made it already counted and traced */
	uint64_t seg_t0, seg_o0;
};

/* A stream for a request with nothing in flight: a live one with the fewest lanes in
 * flight, so a fast request does not queue behind a slow one while another stream is
 * free. Returns nstreams when every stream is lost or failed. */
static unsigned pick_stream(struct sched *sc)
{
	struct wl_exec *x = sc->w->exec;
	unsigned n = wl_exec_nstreams(x), best = n;

	for (unsigned s = 0; s < n; s++) {
		if (sc->bad[s] || !wl_exec_stream_ok(x, s))
			continue;
		if (best == n || sc->busy[s] < sc->busy[best])
			best = s;
	}
	return best;
}

/* Replaces every failed or lost stream with nothing in flight (a failed stream stays
 * failed; a lost one is retried at each launch). */
static void mend_streams(struct sched *sc)
{
	struct wl_exec *x = sc->w->exec;

	for (unsigned s = 0; s < wl_exec_nstreams(x); s++)
		if ((sc->bad[s] || !wl_exec_stream_ok(x, s)) && sc->busy[s] == 0 &&
		    wl_exec_stream_reset(x, s) == 0)
			sc->bad[s] = false;
}

/* Launches every lane of @b's step without waiting for any. */
static void launch(struct sched *sc, struct wrk_bank *b)
{
	struct wrk *w = sc->w;
	unsigned nstreams = wl_exec_nstreams(w->exec);
	int rc = 0;

	WRK_OWNED(b, WRK_OWNER_S);
	if (sc->nheld == 0) {
		sc->seg_t0 = shm_now_ns();
		sc->seg_o0 = wrk_o_busy_at(&w->sync, sc->seg_t0);
	}
	sc->held[sc->nheld++] = b;
	b->npending = b->nents;
	b->ok = b->failed = false;
	mend_streams(sc);
	for (uint32_t i = 0; i < b->nents; i++) {
		struct wrk_req *rq = b->ents[i].rq;
		unsigned s = rq->s_inflight ? rq->s_stream : pick_stream(sc);

		/* no live stream: stream 0, lost or failed, fails the lane */
		b->lanes[i] =
		    (struct wl_lane){.stream = s < nstreams ? s : 0, .done = b->ents[i].done};
		/* counted at once, so the next lane of this step picks another stream */
		if (s < nstreams)
			sc->busy[s]++;
		b->ents[i].counted = s < nstreams;
	}
	if (b->nents)
		rc = wl_exec_launch(w->exec, &b->step, b->lanes, b->nents);
	for (uint32_t i = 0; i < b->nents; i++) {
		struct wrk_entry *e = &b->ents[i];
		struct wl_lane *ln = &b->lanes[i];

		e->pending = true;
		e->stream = ln->stream;
		e->recorded = !rc && ln->recorded;
		e->err = rc ? rc : ln->err;
		e->refused = !rc && ln->refused;
		if (e->recorded && !e->counted)
			sc->busy[ln->stream]++; /* on a failed stream S had no better one for */
		else if (!e->recorded && e->counted)
			sc->busy[ln->stream]--; /* nothing of it is in flight */
		if (e->recorded) {
			e->rq->s_inflight++;
			e->rq->s_stream = ln->stream;
		} else if (!e->err) {
			e->err = -EIO;
		}
		/* the test hook: this lane fails as a device error would */
		if (w->cfg.fault && w->cfg.fault(w->cfg.fault_arg, e->rq->id, e->step)) {
			e->err = -EIO;
			e->refused = false;
		}
	}
}

/* Whether @e can finish now: its request's earlier steps have, and its lane's work
 * completed (*@res: 0 or the stream's error). A lost device answers every query with
 * the loss at once, its work done or not (as a GPU runtime does; the sim's kernel may
 * still run): such a lane is left to the give-up's drain, which waits for it before
 * its bank or its request's memory can be used again. */
static bool entry_ready(struct wrk_entry *e, int *res)
{
	int q;

	if (!e->pending || e->step != atomic_load_explicit(&e->rq->s_done, memory_order_relaxed))
		return false;
	if (!e->recorded) {
		*res = 0;
		return true;
	}
	q = dev_event_query(e->done);
	if (q == -EBUSY || q == DEV_ERR_LOST)
		return false;
	*res = q;
	return true;
}

/* Ends the piece of S's busy time that began at seg_t0 (a bank is held): counts it
 * and O's busy time inside it, records it (arg: the oldest held epoch) and begins the
 * next piece. */
static void run_piece(struct sched *sc)
{
	struct wrk *w = sc->w;
	uint64_t t1 = shm_now_ns();
	uint64_t o1 = wrk_o_busy_at(&w->sync, t1), busy = t1 - sc->seg_t0;

	ctr_s(w, PROTO_WRK_s_busy_ns, busy);
	ctr_s(w, PROTO_WRK_overlap_ns, o1 - sc->seg_o0 < busy ? o1 - sc->seg_o0 : busy);
	wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_RUN, sc->seg_t0, t1,
		       (uint32_t)sc->held[0]->epoch);
	sc->seg_t0 = t1;
	sc->seg_o0 = o1;
}

/* Finishes every lane that can finish, oldest epoch first, and releases the banks
 * whose lanes all finished. Returns how many lanes finished; sets *@fatal when S must
 * give the device up. */
static uint32_t poll_lanes(struct sched *sc, bool *fatal, int *fatal_err)
{
	struct wrk *w = sc->w;
	uint64_t t0 = shm_now_ns();
	uint32_t n = 0;

	for (uint32_t h = 0; h < sc->nheld;) {
		struct wrk_bank *b = sc->held[h];
		int last_err = 0;

		for (uint32_t i = 0; i < b->nents; i++) {
			struct wrk_entry *e = &b->ents[i];
			int q, res;

			if (!entry_ready(e, &q))
				continue;
			if (n == 0)
				run_piece(sc); /* before the first token of this pass */
			if (e->recorded) {
				sc->busy[e->stream]--;
				e->rq->s_inflight--;
				if (q) /* a failed stream stays failed */
					sc->bad[e->stream] = true;
			}
			res = e->err ? e->err : q;
			e->pending = false;
			if (q) /* its stream failed too: whatever was refused, a device error */
				e->refused = false;
			if (res && e->refused) {
				/* the request's own fault, found before anything of the task was
				 * queued: neither a failed nor a completed lane for the step's
				 * verdict (the streak), and nothing to hold back for it */
				if (!atomic_load_explicit(&e->rq->s_fail, memory_order_relaxed))
					fprintf(stderr,
						"chipd worker %u: request %llu: %s: step %u: the "
						"device layer refused a task's arguments\n",
						w->cfg.chip, (unsigned long long)e->rq->id,
						wl_req_workload(e->rq->wl), e->step);
				finish_entry(w, e, res);
			} else if (res) {
				b->failed = true;
				last_err = res;
				/* its end waits for the step's verdict (below) */
				e->err = res;
				e->held_back = true;
			} else {
				b->ok = true;
				finish_entry(w, e, res);
			}
			b->npending--;
			n++;
		}
		if (b->npending) {
			h++;
			continue;
		}
		/* a step fails when none of its lanes completed and one failed: one bad
		 * request fails its own lanes, a device that fails every lane is gone */
		if (b->nents)
			sc->streak = b->ok ? 0 : b->failed ? sc->streak + 1 : sc->streak;
		if (last_err)
			*fatal_err = last_err;
		/* the step that makes S give up (its streak, or a device found lost): the
		 * chip leaves the router's choice before any of its failed requests can end,
		 * so a client that reads that end and submits again is never sent back here
		 * (O sees s_done after this) */
		if (sc->streak >= sc->fatal_at || dev_lost(w->dev)) {
			wrk_mark_unhealthy(w);
			*fatal = true;
		}
		for (uint32_t i = 0; i < b->nents; i++)
			if (b->ents[i].held_back) {
				b->ents[i].held_back = false;
				finish_entry(w, &b->ents[i], b->ents[i].err);
			}
		if (sc->nheld == 1)
			run_piece(sc); /* the last held bank goes: S's busy time ends */
		for (uint32_t k = h + 1; k < sc->nheld; k++)
			sc->held[k - 1] = sc->held[k];
		sc->nheld--;
		wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_PUBLISH, t0, shm_now_ns(),
			       (uint32_t)b->epoch);
		wrk_bank_release(w, b);
	}
	if (dev_lost(w->dev)) { /* every later step would fail: give the device up now */
		/* DRAINING before any request ends worker_lost (s_fatal) */
		wrk_mark_unhealthy(w);
		*fatal = true;
		*fatal_err = DEV_ERR_LOST;
	}
	if (n) {
		/* seq_cst after the s_done stores: O sleeps until this word changes */
		atomic_fetch_add_explicit(&w->sync.finished, n, memory_order_seq_cst);
		shm_wake_all(&w->sync.o_wake);
	}
	return n;
}

struct lane_wait_arg {
	struct sched *sc;
};

/* A new epoch, a lane that can finish, or a lost device (poll_lanes gives it up). */
static bool lanes_ready(void *arg)
{
	struct sched *sc = ((struct lane_wait_arg *)arg)->sc;
	int res;

	if (atomic_load_explicit(&sc->w->sync.published, memory_order_seq_cst) >= sc->e ||
	    dev_lost(sc->w->dev))
		return true;
	for (uint32_t h = 0; h < sc->nheld; h++)
		for (uint32_t i = 0; i < sc->held[h]->nents; i++)
			if (entry_ready(&sc->held[h]->ents[i], &res))
				return true;
	return false;
}

/* S gives up: every lane it saw fail in a step not yet judged (held back: another
 * lane of that step was still running) fails its request now (device_error), as in
 * a judged step, so O ends it with its own code and not worker_lost (retryable: it
 * would be offered to another chip and fail there the same way). Before drain, so
 * that a request with nothing else in flight ends at once, not after the chip,
 * DRAINING already, may have been restarted. Publishes nothing. */
static void fail_held_back(struct sched *sc)
{
	uint32_t n = 0;

	for (uint32_t h = 0; h < sc->nheld; h++)
		for (uint32_t i = 0; i < sc->held[h]->nents; i++) {
			struct wrk_entry *e = &sc->held[h]->ents[i];

			if (e->held_back) {
				e->held_back = false;
				finish_entry(sc->w, e, e->err);
				n++;
			}
		}
	if (n) { /* as poll_lanes: O sleeps until this word changes */
		atomic_fetch_add_explicit(&sc->w->sync.finished, n, memory_order_seq_cst);
		shm_wake_all(&sc->w->sync.o_wake);
	}
}

/* S gives up while lanes are in flight: their work must complete before O ends their
 * requests and frees what the work uses (a lost device answers every query with the
 * loss at once, while the sim's running kernel still writes). Then each request whose
 * lane the device failed fails (device_error; on a lost device every lane waited
 * for), O ends the others cancelled or worker_lost. Only s_fail is written: s_done stays (a
 * request's lanes finish in order, and O ends none of these before S gave up). */
static void drain(struct sched *sc)
{
	for (uint32_t h = 0; h < sc->nheld; h++)
		for (uint32_t i = 0; i < sc->held[h]->nents; i++)
			if (sc->held[h]->ents[i].pending && sc->held[h]->ents[i].recorded)
				(void)dev_event_sync(sc->held[h]->ents[i].done);
	for (uint32_t h = 0; h < sc->nheld; h++)
		for (uint32_t i = 0; i < sc->held[h]->nents; i++) {
			struct wrk_entry *e = &sc->held[h]->ents[i];
			int res;

			if (!e->pending)
				continue;
			res = e->err ? e->err : e->recorded ? dev_event_query(e->done) : 0;
			if (res && !atomic_load_explicit(&e->rq->s_fail, memory_order_relaxed)) {
				ctr_s(sc->w, PROTO_WRK_device_errors, 1);
				atomic_store_explicit(&e->rq->s_fail, CHIPD_E_DEVICE_ERROR,
						      memory_order_relaxed);
			}
		}
}

/* S gives up for good: the error word first (O ends every stream it holds once it
 * sees it, M stops admitting), then S touches no request again. */
static void s_fatal(struct wrk *w, int err, uint32_t streak)
{
	char msg[DEV_ERRMSG_MAX];

	if (err == DEV_ERR_LOST) {
		dev_last_error(w->dev, msg, sizeof(msg));
		fprintf(stderr, "chipd worker %u: scheduler: device lost: %s\n", w->cfg.chip, msg);
	} else {
		fprintf(stderr,
			"chipd worker %u: scheduler: %u steps in a row failed (%s); device lost\n",
			w->cfg.chip, streak, strerror(-err));
	}
	atomic_store_explicit(&w->sync.s_err, err, memory_order_seq_cst);
	wrk_mark_unhealthy(w);
	shm_wake_all(&w->sync.o_wake);
}

void *wrk_sched_main(void *arg)
{
	struct sched sc = {.w = arg, .e = 1};
	struct wrk *w = sc.w;
	struct lane_wait_arg la = {&sc};
	bool fatal = false;
	int fatal_err = -EIO;

	sc.fatal_at = w->cfg.s_fatal_streak ? w->cfg.s_fatal_streak : WRK_S_FATAL_STREAK_DEFAULT;
	for (;;) {
		struct wrk_bank *b;
		uint64_t t0, t1;
		uint32_t n;
		int err;

		if (sc.nheld == 0) {
			t0 = shm_now_ns();
			b = wrk_bank_next(w, sc.e, shm_deadline_in(SCHED_EPOCH_WAIT_NS), &err);
			if (!b && err == -ETIMEDOUT && !dev_lost(w->dev))
				continue;
			if (!b && err != -ETIMEDOUT && err != DEV_ERR_LOST)
				break; /* O is gone and every epoch it published has run */
			/* b NULL here: the device was lost with nothing in flight (a fill met
			 * the loss); poll_lanes gives it up */
			t1 = shm_now_ns();
			wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_WAIT, t0, t1,
				       (uint32_t)sc.e);
		} else {
			/* at most nbanks epochs are out: a published one finds a bank free */
			b = wrk_bank_poll(w, sc.e);
		}
		if (b) {
			launch(&sc, b);
			sc.e++;
		}
		n = poll_lanes(&sc, &fatal, &fatal_err);
		if (b || n) /* progress: a step launched or a lane finished */
			atomic_fetch_add_explicit(&w->sync.s_rounds, 1, memory_order_relaxed);
		if (fatal) {
			fail_held_back(&sc);
			drain(&sc);
			s_fatal(w, fatal_err < 0 ? fatal_err : -EIO, sc.streak);
			break;
		}
		if (!b && !n && sc.nheld) {
			struct shm_waiter how = {lanes_ready, NULL, &la, w->cfg.spin_ns, 0};

			(void)shm_wait(&w->sync.s_wake, &how, shm_deadline_in(SCHED_LANE_POLL_NS));
		}
	}
	atomic_store_explicit(&w->sync.s_exited, 1, memory_order_seq_cst);
	return NULL;
}
