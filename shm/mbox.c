/* mbox.c - multi-slot mailbox with acknowledged reset (contract in mbox.h). */
#include "mbox.h"
#include "mbox_internal.h"

#include "proc.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static size_t round_line(size_t n)
{
	return (n + MBOX_LINE - 1) & ~(size_t)(MBOX_LINE - 1);
}

static uint32_t self_pid24(void)
{
	return (uint32_t)shm_proc_self() & 0xffffffu;
}

static bool shape_ok(uint32_t nslots, uint32_t req_cap, uint32_t resp_cap)
{
	return nslots >= 1 && nslots <= MBOX_MAX_SLOTS && req_cap >= 1 && req_cap <= MBOX_MAX_BUF &&
	       resp_cap >= 1 && resp_cap <= MBOX_MAX_BUF;
}

static uint32_t bitmap_words(uint32_t nslots)
{
	return (nslots + 63) / 64;
}

static size_t slots_offset(uint32_t nslots)
{
	return sizeof(struct mbox_hdr) + round_line(bitmap_words(nslots) * sizeof(uint64_t));
}

static size_t slot_stride(uint32_t req_cap, uint32_t resp_cap)
{
	return sizeof(struct mbox_slot) + round_line(req_cap) + round_line(resp_cap);
}

size_t mbox_size(uint32_t nslots, uint32_t req_cap, uint32_t resp_cap)
{
	if (!shape_ok(nslots, req_cap, resp_cap))
		return 0;
	return slots_offset(nslots) + (size_t)nslots * slot_stride(req_cap, resp_cap);
}

/* Binds @mb to the mailbox at @h of the given shape: every offset, size and count is
 * derived here from the three shape numbers, which the caller chose (init) or read once
 * and validated (attach). Nothing of the shared header is read again for geometry. */
static void bind(struct mbox *mb, struct mbox_hdr *h, uint32_t nslots, uint32_t req_cap,
		 uint32_t resp_cap)
{
	memset(mb, 0, sizeof(*mb));
	mb->hdr = h;
	mb->attention = (_Atomic uint64_t *)((char *)h + sizeof(*h));
	mb->slots = (char *)h + slots_offset(nslots);
	mb->nslots = nslots;
	mb->words = bitmap_words(nslots);
	mb->req_cap = req_cap;
	mb->resp_cap = resp_cap;
	mb->stride = (uint32_t)slot_stride(req_cap, resp_cap);
	mb->spin_ns = SHM_SPIN_NS_DEFAULT;
	atomic_init(&mb->claim_cursor, (uint32_t)shm_proc_self() % nslots);
}

/* One read of a plain header word another process may write at any time: the value is
 * taken once into a local, never re-read. */
static uint32_t peek32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static uint64_t peek64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

int mbox_init(struct mbox *mb, void *mem, size_t avail, uint32_t nslots, uint32_t req_cap,
	      uint32_t resp_cap)
{
	size_t need = mbox_size(nslots, req_cap, resp_cap);

	if (need == 0 || ((uintptr_t)mem & (MBOX_LINE - 1)))
		return -EINVAL;
	if (need > avail)
		return -EMSGSIZE;
	/* Header, bitmap and each slot's header line are zeroed; the request and
	 * response buffers are not: a side writes them before it publishes their length,
	 * and nobody reads beyond a published length. Left untouched, a fresh region's
	 * buffers cost no memory until used (64 slots of 68 KiB: 4.3 MiB otherwise
	 * resident in every process that created the mailbox). */
	memset(mem, 0, slots_offset(nslots));

	struct mbox_hdr *h = mem;
	h->magic = MBOX_MAGIC;
	h->version = MBOX_VERSION;
	h->nslots = nslots;
	h->req_cap = req_cap;
	h->resp_cap = resp_cap;
	h->slot_stride = (uint32_t)slot_stride(req_cap, resp_cap);
	h->slots_offset = (uint32_t)slots_offset(nslots);
	h->bitmap_words = bitmap_words(nslots);
	h->total_size = need;
	atomic_init(&h->server_pid, 0);
	atomic_init(&h->server_epoch, 0);
	atomic_init(&h->server_start, 0);
	shm_wake_init(&h->doorbell);
	bind(mb, h, nslots, req_cap, resp_cap);
	for (uint32_t i = 0; i < nslots; i++) {
		memset(slot_at(mb, i), 0, sizeof(struct mbox_slot));
		atomic_init(&slot_at(mb, i)->ctl, MBOX_CTL(1, 0, MBOX_FREE));
	}
	return 0;
}

int mbox_attach(struct mbox *mb, void *mem, size_t avail)
{
	struct mbox_hdr *h = mem;

	memset(mb, 0, sizeof(*mb));
	if (avail < sizeof(*h) || ((uintptr_t)mem & (MBOX_LINE - 1)))
		return -EMSGSIZE;
	if (peek32(&h->magic) != MBOX_MAGIC)
		return -EBADMSG;
	if (peek32(&h->version) != MBOX_VERSION)
		return -EPROTONOSUPPORT;
	/* The shape is read once; every derived quantity is recomputed from it and must
	 * agree with what the header claims: a peer cannot steer our offsets, neither now
	 * nor by rewriting the header later (bind keeps the values read here). */
	uint32_t nslots = peek32(&h->nslots), req_cap = peek32(&h->req_cap),
		 resp_cap = peek32(&h->resp_cap);
	size_t need = mbox_size(nslots, req_cap, resp_cap);
	if (need == 0 || need > avail || peek64(&h->total_size) != need ||
	    peek32(&h->slot_stride) != slot_stride(req_cap, resp_cap) ||
	    peek32(&h->slots_offset) != slots_offset(nslots) ||
	    peek32(&h->bitmap_words) != bitmap_words(nslots))
		return -EMSGSIZE;
	bind(mb, h, nslots, req_cap, resp_cap);
	return 0;
}

void mbox_set_spin(struct mbox *mb, uint64_t spin_ns)
{
	mb->spin_ns = spin_ns;
}

uint64_t mbox_ctl(const struct mbox *mb, uint32_t slot)
{
	return slot < mb->nslots ? load_ctl(slot_at(mb, slot)) : 0;
}

static bool server_alive(const struct mbox *mb)
{
	pid_t pid;
	uint64_t start;

	if (mb->server_pid > 0) /* a client that knows its server from the kernel */
		return shm_proc_alive(mb->server_pid, mb->server_start);
	pid = (pid_t)atomic_load_explicit(&mb->hdr->server_pid, memory_order_acquire);
	start = atomic_load_explicit(&mb->hdr->server_start, memory_order_relaxed);
	return pid != 0 && shm_proc_alive(pid, start);
}

bool mbox_server_alive(const struct mbox *mb)
{
	return server_alive(mb);
}

void mbox_client_set_server(struct mbox *mb, pid_t pid)
{
	mb->server_pid = pid > 0 ? pid : 0;
	mb->server_start = mb->server_pid ? shm_proc_start_time(mb->server_pid) : 0;
}

/* ---- client side ---- */

static int try_claim(struct mbox *mb, struct mbox_ticket *t)
{
	/* Start at the slot this process released last (or claimed last). */
	uint32_t start = atomic_load_explicit(&mb->claim_cursor, memory_order_relaxed);
	uint32_t pid = self_pid24();

	for (uint32_t k = 0; k < mb->nslots; k++) {
		uint32_t i = (start + k) % mb->nslots;
		struct mbox_slot *s = slot_at(mb, i);
		uint64_t c = atomic_load_explicit(&s->ctl, memory_order_relaxed);

		if (MBOX_CTL_STATE(c) != MBOX_FREE)
			continue;
		uint32_t gen = MBOX_CTL_GEN(c);
		if (!cas_ctl(s, &c, MBOX_CTL(gen, pid, MBOX_CLAIMED)))
			continue;
		/* The start time makes the owner pid unambiguous for the reaper; owner_gen
		 * tells it the start time belongs to this generation. */
		atomic_store_explicit(&s->owner_start, shm_proc_self_start_time(),
				      memory_order_relaxed);
		atomic_store_explicit(&s->owner_gen, gen, memory_order_release);
		atomic_store_explicit(&mb->claim_cursor, i, memory_order_relaxed);
		t->slot = i;
		t->gen = gen;
		return 0;
	}
	return -EAGAIN;
}

int mbox_claim(struct mbox *mb, struct mbox_ticket *t)
{
	if (try_claim(mb, t) == 0)
		return 0;
	if (mbox_reap(mb) == 0)
		return -EAGAIN;
	return try_claim(mb, t);
}

static bool ticket_ok(const struct mbox *mb, struct mbox_ticket t)
{
	return t.slot < mb->nslots;
}

void *mbox_req_buf(struct mbox *mb, struct mbox_ticket t)
{
	return (char *)slot_at(mb, t.slot) + sizeof(struct mbox_slot);
}

void *mbox_resp_buf(struct mbox *mb, struct mbox_ticket t)
{
	return (char *)slot_at(mb, t.slot) + sizeof(struct mbox_slot) + round_line(mb->req_cap);
}

int mbox_post(struct mbox *mb, struct mbox_ticket t, uint32_t len)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;
	if (len > mb->req_cap)
		return -EMSGSIZE;

	struct mbox_slot *s = slot_at(mb, t.slot);
	uint64_t c = MBOX_CTL(t.gen, self_pid24(), MBOX_CLAIMED);
	/* Only the owner may write the length: a stale ticket must not touch a slot
	 * that now belongs to someone else. While CLAIMED by us, no one else changes
	 * the control word (the reaper spares live owners). */
	if (load_ctl(s) != c)
		return -ESTALE;
	atomic_store_explicit(&s->req_len, len, memory_order_relaxed);
	if (!cas_ctl(s, &c, MBOX_CTL(t.gen, self_pid24(), MBOX_POSTED)))
		return -ESTALE;
	raise_attention(mb, t.slot);
	return 0;
}

struct client_wait {
	const struct mbox *mb;
	struct mbox_slot *s;
	uint32_t gen;
};

/* Ready once the slot leaves POSTED/TAKEN of our generation. */
static bool answer_ready(void *arg)
{
	struct client_wait *w = arg;
	uint64_t c = load_ctl(w->s);
	enum mbox_state st = MBOX_CTL_STATE(c);

	return MBOX_CTL_GEN(c) != w->gen || (st != MBOX_POSTED && st != MBOX_TAKEN);
}

/* The server is lost when it died, or left while holding our slot. A POSTED slot
 * with no server attached yet waits for one (the server may be starting). */
static bool answer_peer_lost(void *arg)
{
	struct client_wait *w = arg;
	uint64_t c = load_ctl(w->s);
	pid_t pid = w->mb->server_pid;

	if (pid == 0)
		pid = (pid_t)atomic_load_explicit(&w->mb->hdr->server_pid, memory_order_acquire);
	if (pid == 0 && MBOX_CTL_STATE(c) == MBOX_POSTED)
		return false;
	return !server_alive(w->mb);
}

int mbox_wait(struct mbox *mb, struct mbox_ticket t, uint64_t deadline_ns)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;

	struct client_wait w = {.mb = mb, .s = slot_at(mb, t.slot), .gen = t.gen};
	struct shm_waiter how = {
	    .ready = answer_ready,
	    .peer_lost = answer_peer_lost,
	    .arg = &w,
	    .spin_ns = mb->spin_ns,
	    .adapt = &mb->client_spin,
	};
	int rc = shm_wait(&w.s->wake, &how, deadline_ns);
	if (rc)
		return rc;

	uint64_t c = load_ctl(w.s);
	if (MBOX_CTL_GEN(c) == t.gen && MBOX_CTL_STATE(c) == MBOX_DONE)
		return 0;
	return -ECONNRESET;
}

bool mbox_answered(const struct mbox *mb, struct mbox_ticket t)
{
	struct client_wait w = {.mb = mb, .s = slot_at(mb, t.slot), .gen = t.gen};

	return !ticket_ok(mb, t) || answer_ready(&w);
}

uint32_t mbox_client_announce(struct mbox *mb, struct mbox_ticket t, _Atomic uint32_t **word)
{
	struct shm_wake *w = &slot_at(mb, ticket_ok(mb, t) ? t.slot : 0)->wake;

	atomic_store_explicit(&w->sleepers, 1, memory_order_seq_cst);
	*word = &w->seq;
	return atomic_load_explicit(&w->seq, memory_order_seq_cst);
}

int mbox_response(struct mbox *mb, struct mbox_ticket t, const void **buf, uint32_t *len)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;

	struct mbox_slot *s = slot_at(mb, t.slot);
	uint64_t c = load_ctl(s);
	if (c != MBOX_CTL(t.gen, self_pid24(), MBOX_DONE))
		return -ESTALE;
	uint32_t status = atomic_load_explicit(&s->status, memory_order_relaxed);
	uint32_t n = atomic_load_explicit(&s->resp_len, memory_order_relaxed);
	if (status != 0) /* an errno of the mailbox layer; anything else is corrupt */
		return status < 4096 ? -(int)status : -EPROTO;
	if (n > mb->resp_cap)
		return -EPROTO;
	*buf = mbox_resp_buf(mb, t);
	*len = n;
	return 0;
}

int mbox_release(struct mbox *mb, struct mbox_ticket t)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;
	if (!free_slot(slot_at(mb, t.slot), MBOX_CTL(t.gen, self_pid24(), MBOX_DONE)))
		return -ESTALE;
	/* The next claim starts here: the slot's lines are in this CPU's cache, and a
	 * pipelining client does not scan past its own requests in flight. */
	atomic_store_explicit(&mb->claim_cursor, t.slot, memory_order_relaxed);
	return 0;
}

/* mbox_give_up; with @keep_done, an answer that came meanwhile is kept instead
 * (returns 2, the slot DONE still: read it and release it), so that a server that
 * answered is never taken for one that did not. */
static int give_up(struct mbox *mb, struct mbox_ticket t, bool keep_done)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;

	struct mbox_slot *s = slot_at(mb, t.slot);
	uint32_t pid = self_pid24();
	for (;;) {
		uint64_t c = load_ctl(s);

		if (MBOX_CTL_GEN(c) != t.gen || (uint32_t)MBOX_CTL_PID(c) != pid)
			return -ESTALE;
		switch (MBOX_CTL_STATE(c)) {
		case MBOX_DONE: /* the answer came just too late: kept, or dropped */
			if (keep_done)
				return 2;
			/* fall through */
		case MBOX_CLAIMED:
		case MBOX_POSTED: /* the server never saw it: its take CAS will fail */
			if (free_slot(s, c))
				return 0;
			break;
		case MBOX_TAKEN:
			if (!server_alive(mb)) {
				if (free_slot(s, c))
					return 0;
				break;
			}
			if (cas_ctl(s, &c, MBOX_CTL(t.gen, pid, MBOX_RESET))) {
				raise_attention(mb, t.slot);
				return 1;
			}
			break;
		case MBOX_RESET:
			return 1;
		default:
			return -ESTALE;
		}
	}
}

int mbox_give_up(struct mbox *mb, struct mbox_ticket t)
{
	return give_up(mb, t, false);
}

int mbox_call(struct mbox *mb, const void *req, uint32_t len, void *resp, uint32_t resp_cap,
	      uint32_t *resp_len, uint64_t deadline_ns)
{
	struct mbox_ticket t;
	const void *answer;
	uint32_t n;
	int rc;

	if (len > mb->req_cap)
		return -EMSGSIZE;
	rc = mbox_claim(mb, &t);
	if (rc)
		return rc;
	memcpy(mbox_req_buf(mb, t), req, len);
	rc = mbox_post(mb, t, len);
	if (rc)
		goto err_give_up;
	rc = mbox_wait(mb, t, deadline_ns);
	if (rc == -ECONNRESET)
		return rc;
	if (rc == -ETIMEDOUT) {
		/* the answer may land between the wait's last look and the give-up: then
		 * it is the call's (the server learnt it was answered) */
		if (give_up(mb, t, true) != 2)
			return rc;
		rc = 0;
	}
	if (rc)
		goto err_give_up;
	rc = mbox_response(mb, t, &answer, &n);
	if (rc == 0 && n > resp_cap)
		rc = -ENOBUFS;
	if (rc == 0) {
		memcpy(resp, answer, n);
		*resp_len = n;
	}
	mbox_release(mb, t);
	return rc;

err_give_up:
	mbox_give_up(mb, t);
	return rc;
}

/* ---- server side ---- */

int mbox_server_attach(struct mbox *mb)
{
	struct mbox_hdr *h = mb->hdr;
	pid_t me = shm_proc_self();
	pid_t old = (pid_t)atomic_load_explicit(&h->server_pid, memory_order_acquire);

	if (old != 0 && old != me && server_alive(mb))
		return -EBUSY;
	/* the server knows itself: its own liveness checks (the reaper's) never read
	 * the header's words, which any client can write */
	mb->server_pid = me;
	mb->server_start = shm_proc_self_start_time();
	atomic_store_explicit(&h->server_start, mb->server_start, memory_order_relaxed);
	atomic_store_explicit(&h->server_pid, (uint32_t)me, memory_order_release);
	atomic_fetch_add_explicit(&h->server_epoch, 1, memory_order_seq_cst);

	/* Whatever the old server held, it will never answer. */
	int recovered = 0;
	for (uint32_t i = 0; i < mb->nslots; i++) {
		struct mbox_slot *s = slot_at(mb, i);
		uint64_t c = load_ctl(s);
		enum mbox_state st = MBOX_CTL_STATE(c);

		if ((st == MBOX_TAKEN || st == MBOX_RESET) && free_slot(s, c))
			recovered++;
	}
	return recovered;
}

void mbox_server_detach(struct mbox *mb)
{
	mb->server_pid = 0;
	mb->server_start = 0;
	atomic_store_explicit(&mb->hdr->server_pid, 0, memory_order_seq_cst);
	/* Wake clients sleeping on taken slots so they notice at once. */
	for (uint32_t i = 0; i < mb->nslots; i++)
		shm_wake_all(&slot_at(mb, i)->wake);
}

/* The bits of attention word @w that stand for slots: a client may set any bit of the
 * shared bitmap, and a bit past the last slot names no slot. */
static uint64_t word_mask(const struct mbox *mb, uint32_t w)
{
	uint32_t left = mb->nslots - w * 64;

	return left >= 64 ? ~0ull : (1ull << left) - 1;
}

bool mbox_server_ready(const struct mbox *mb)
{
	for (uint32_t w = 0; w < mb->words; w++)
		if (atomic_load_explicit(&mb->attention[w], memory_order_seq_cst) &
		    word_mask(mb, w))
			return true;
	return false;
}

static bool work_ready(void *arg)
{
	struct mbox *mb = arg;

	/* seq_cst, like the attention loads: pairs with the store in
	 * mbox_server_interrupt against shm_wait's sleepers announcement */
	if (atomic_load_explicit(&mb->interrupted, memory_order_seq_cst))
		return true;
	return mbox_server_ready(mb);
}

uint32_t mbox_server_announce(struct mbox *mb, _Atomic uint32_t **word)
{
	struct shm_wake *w = &mb->hdr->doorbell;

	atomic_store_explicit(&w->sleepers, 1, memory_order_seq_cst);
	*word = &w->seq;
	return atomic_load_explicit(&w->seq, memory_order_seq_cst);
}

/* Looks at slot @i after its attention bit was cleared. Returns true with @ev
 * filled when there is something for the caller. */
static bool examine(struct mbox *mb, uint32_t i, struct mbox_event *ev)
{
	struct mbox_slot *s = slot_at(mb, i);
	uint64_t c = load_ctl(s);
	uint32_t gen = MBOX_CTL_GEN(c);
	pid_t client = MBOX_CTL_PID(c);

	switch (MBOX_CTL_STATE(c)) {
	case MBOX_POSTED:
		if (!cas_ctl(s, &c, MBOX_CTL(gen, client, MBOX_TAKEN)))
			return false; /* the client gave up meanwhile */
		uint32_t len = atomic_load_explicit(&s->req_len, memory_order_relaxed);
		if (len > mb->req_cap && !mb->take_oversize) {
			/* Only a client that bypassed mbox_post can get here. */
			atomic_store_explicit(&s->resp_len, 0, memory_order_relaxed);
			atomic_store_explicit(&s->status, EMSGSIZE, memory_order_relaxed);
			uint64_t taken = MBOX_CTL(gen, client, MBOX_TAKEN);
			if (cas_ctl(s, &taken, MBOX_CTL(gen, client, MBOX_DONE)))
				shm_wake_all(&s->wake);
			else
				free_slot(s, taken); /* reset meanwhile: acknowledge it */
			return false;
		}
		atomic_store_explicit(&s->status, 0, memory_order_relaxed);
		ev->kind = MBOX_EV_REQUEST;
		/* an oversized request here was asked for: its bytes are not all there */
		ev->req = len > mb->req_cap ? NULL : (char *)s + sizeof(*s);
		ev->len = len;
		break;
	case MBOX_RESET:
		ev->kind = MBOX_EV_RESET;
		ev->req = NULL;
		ev->len = 0;
		break;
	default:
		return false; /* a spurious or outdated bit */
	}
	ev->t.slot = i;
	ev->t.gen = gen;
	ev->client = client;
	return true;
}

/* Starts fetching the control line (for writing) and the first request line of the
 * slots flagged in word @w while the exchange below waits for the bitmap line: the
 * transfers overlap instead of following each other. A hint only. */
static void prefetch_flagged(struct mbox *mb, uint32_t w, uint64_t bits)
{
	for (int n = 0; bits && n < 4; n++, bits &= bits - 1) {
		struct mbox_slot *s = slot_at(mb, w * 64 + (uint32_t)__builtin_ctzll(bits));

		__builtin_prefetch(s, 1);
		__builtin_prefetch((char *)s + sizeof(*s), 0);
	}
}

/* Takes the next slot that needs a look: from the bits already taken, else, unless
 * *@refilled says the caller's pass did so already, by emptying the shared bitmap
 * words with one exchange each. A bit is cleared before its slot is examined, so a
 * post that lands afterwards sets it again and no request is missed. Returns false
 * when no bit is set anywhere, or when the taken bits are used up after the one
 * refill: a client that raises its bits as fast as they are cleared must not keep
 * the caller in one pass (the router would serve no other mailbox). */
static bool next_flagged(struct mbox *mb, uint32_t *slot, bool *refilled)
{
	uint32_t words = mb->words;

	for (int round = 0; round < 2; round++) {
		for (uint32_t k = 0; k < words; k++) {
			uint32_t w = (mb->scan_cursor / 64 + k) % words;

			if (mb->pending[w]) {
				uint32_t b = (uint32_t)__builtin_ctzll(mb->pending[w]);

				mb->pending[w] &= mb->pending[w] - 1;
				*slot = w * 64 + b;
				mb->scan_cursor = *slot;
				return true;
			}
		}
		if (*refilled)
			return false; /* what rose since: the next pass's (work_ready sees it) */
		*refilled = true;
		bool any = false;
		for (uint32_t w = 0; w < words; w++) {
			uint64_t mask = word_mask(mb, w);
			uint64_t seen =
			    atomic_load_explicit(&mb->attention[w], memory_order_relaxed);

			if (seen == 0)
				continue;
			prefetch_flagged(mb, w, seen & mask);
			/* bits past the last slot are dropped here: only slot indices below
			 * nslots ever reach pending */
			mb->pending[w] |=
			    atomic_exchange_explicit(&mb->attention[w], 0, memory_order_seq_cst) &
			    mask;
			any = true;
		}
		if (!any)
			return false;
	}
	return false;
}

/* Examines flagged slots until one yields an event: those taken before, then at most
 * one bitmap's worth taken now, so a pass is bounded by twice the slots. */
static bool scan(struct mbox *mb, struct mbox_event *ev)
{
	bool refilled = false;
	uint32_t slot;

	while (next_flagged(mb, &slot, &refilled))
		if (examine(mb, slot, ev))
			return true;
	return false;
}

bool mbox_server_poll(struct mbox *mb, struct mbox_event *ev)
{
	return scan(mb, ev);
}

int mbox_server_next(struct mbox *mb, struct mbox_event *ev, uint64_t deadline_ns)
{
	struct shm_waiter how = {
	    .ready = work_ready, .arg = mb, .spin_ns = mb->spin_ns, .adapt = &mb->server_spin};

	for (;;) {
		if (atomic_load_explicit(&mb->interrupted, memory_order_acquire))
			return -EINTR;
		if (scan(mb, ev))
			return 0;
		int rc = shm_wait(&mb->hdr->doorbell, &how, deadline_ns);
		if (rc)
			return rc;
	}
}

void mbox_server_take_oversize(struct mbox *mb)
{
	mb->take_oversize = true;
}

void mbox_server_interrupt(struct mbox *mb)
{
	atomic_store_explicit(&mb->interrupted, true, memory_order_seq_cst);
	/* the waiter re-evaluates work_ready after any wake of the doorbell */
	shm_wake_all(&mb->hdr->doorbell);
}

int mbox_answer(struct mbox *mb, struct mbox_ticket t, uint32_t len)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;
	if (len > mb->resp_cap)
		return -EMSGSIZE;

	struct mbox_slot *s = slot_at(mb, t.slot);
	for (;;) {
		uint64_t c = load_ctl(s);

		if (MBOX_CTL_GEN(c) != t.gen)
			return -ESTALE;
		if (MBOX_CTL_STATE(c) == MBOX_RESET)
			return free_slot(s, c) ? -ECANCELED : -ESTALE;
		if (MBOX_CTL_STATE(c) != MBOX_TAKEN)
			return -ESTALE;
		atomic_store_explicit(&s->resp_len, len, memory_order_relaxed);
		if (cas_ctl(s, &c, MBOX_CTL(t.gen, MBOX_CTL_PID(c), MBOX_DONE))) {
			shm_wake_all(&s->wake);
			return 0;
		}
	}
}

int mbox_answer_copy(struct mbox *mb, struct mbox_ticket t, const void *resp, uint32_t len)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;
	if (len > mb->resp_cap)
		return -EMSGSIZE;
	memcpy(mbox_resp_buf(mb, t), resp, len);
	return mbox_answer(mb, t, len);
}

int mbox_ack_reset(struct mbox *mb, struct mbox_ticket t)
{
	if (!ticket_ok(mb, t))
		return -ESTALE;

	struct mbox_slot *s = slot_at(mb, t.slot);
	uint64_t c = load_ctl(s);
	if (MBOX_CTL_GEN(c) != t.gen || MBOX_CTL_STATE(c) != MBOX_RESET)
		return -ESTALE;
	return free_slot(s, c) ? 0 : -ESTALE;
}
