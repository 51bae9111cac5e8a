/* ring.c - SPSC token rings (contract in ring.h). */
#include "ring.h"

#include "proc.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define RING_LINE 64u

#ifdef CHIPD_RING_TEST_SEAM
void (*ring_test_before_tail_store)(const struct ring *r);
#define BEFORE_TAIL_STORE(r)                                                                       \
	do {                                                                                       \
		if (ring_test_before_tail_store)                                                   \
			ring_test_before_tail_store(r);                                            \
	} while (0)
#else
#define BEFORE_TAIL_STORE(r) ((void)0)
#endif

static bool capacity_ok(uint32_t capacity)
{
	return capacity >= RING_MIN_CAPACITY && capacity <= RING_MAX_CAPACITY &&
	       (capacity & (capacity - 1)) == 0;
}

size_t ring_size(uint32_t capacity)
{
	if (!capacity_ok(capacity))
		return 0;
	return sizeof(struct ring_hdr) + (size_t)capacity * sizeof(struct ring_rec);
}

/* Binds @r to the ring at @h with @capacity records: the capacity, and so every index
 * mask and the extent of the records, is the caller's from here on. Of the shared
 * header only the tail word is read: the producer's first cached position (a hint), and
 * the word a consumer's first pop compares with (a rewrite since is a reset's). */
static void bind(struct ring *r, struct ring_hdr *h, uint32_t capacity, struct ring_cons *c)
{
	memset(r, 0, sizeof(*r));
	r->hdr = h;
	r->cons = c;
	r->recs = (struct ring_rec *)((char *)h + sizeof(*h));
	r->capacity = capacity;
	r->mask = capacity - 1;
	r->spin_ns = SHM_SPIN_NS_DEFAULT;
	r->read_word = atomic_load_explicit(&c->tail, memory_order_acquire);
	r->read_pos = RING_TAIL_POS(r->read_word);
	r->cached_tail = r->read_pos;
}

/* One read of a plain header word a peer may write at any time. */
static uint32_t peek32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

int ring_init(struct ring *r, void *mem, size_t avail, uint32_t capacity, struct ring_cons *cons)
{
	size_t need = ring_size(capacity);

	if (need == 0 || ((uintptr_t)mem & (RING_LINE - 1)) || !cons ||
	    ((uintptr_t)cons & (RING_LINE - 1)))
		return -EINVAL;
	if (need > avail)
		return -EMSGSIZE;
	/* The header only: a record is written before head publishes it and never read
	 * otherwise, so untouched records of a fresh region cost no memory until used. */
	memset(mem, 0, sizeof(struct ring_hdr));
	memset(cons, 0, sizeof(*cons));

	struct ring_hdr *h = mem;
	h->magic = RING_MAGIC;
	h->version = RING_VERSION;
	h->capacity = capacity;
	h->rec_size = sizeof(struct ring_rec);
	atomic_init(&h->generation, 1);
	atomic_init(&cons->tail, RING_TAIL(1, 0));
	shm_wake_init(&cons->wake);
	bind(r, h, capacity, cons);
	return 0;
}

int ring_bind(struct ring *r, void *mem, uint32_t capacity, struct ring_cons *cons)
{
	memset(r, 0, sizeof(*r));
	if (!capacity_ok(capacity) || ((uintptr_t)mem & (RING_LINE - 1)) || !cons ||
	    ((uintptr_t)cons & (RING_LINE - 1)))
		return -EINVAL;
	bind(r, mem, capacity, cons);
	return 0;
}

int ring_attach(struct ring *r, void *mem, size_t avail, struct ring_cons *cons)
{
	struct ring_hdr *h = mem;

	memset(r, 0, sizeof(*r));
	if (avail < sizeof(*h) || ((uintptr_t)mem & (RING_LINE - 1)) || !cons ||
	    ((uintptr_t)cons & (RING_LINE - 1)))
		return -EMSGSIZE;
	if (peek32(&h->magic) != RING_MAGIC)
		return -EBADMSG;
	if (peek32(&h->version) != RING_VERSION)
		return -EPROTONOSUPPORT;
	/* read once: the value checked is the value bound */
	uint32_t capacity = peek32(&h->capacity);
	size_t need = ring_size(capacity);
	if (need == 0 || need > avail || peek32(&h->rec_size) != sizeof(struct ring_rec))
		return -EMSGSIZE;
	bind(r, h, capacity, cons);
	return 0;
}

int ring_check(const struct ring *r)
{
	const struct ring_hdr *h = r->hdr;

	if (peek32(&h->magic) != RING_MAGIC)
		return -EBADMSG;
	if (peek32(&h->version) != RING_VERSION)
		return -EPROTONOSUPPORT;
	if (peek32(&h->capacity) != r->capacity || peek32(&h->rec_size) != sizeof(struct ring_rec))
		return -EMSGSIZE;
	return 0;
}

uint32_t ring_reset(struct ring *r, uint64_t request_id, pid_t producer, pid_t consumer)
{
	return ring_reset_started(r, request_id, producer,
				  producer ? shm_proc_start_time(producer) : 0, consumer);
}

uint32_t ring_reset_started(struct ring *r, uint64_t request_id, pid_t producer,
			    uint64_t producer_start, pid_t consumer)
{
	struct ring_hdr *h = r->hdr;
	/* The generation first, and the indices after it with release: a reader of the
	 * old stream (bound to its generation) that sees any index of the reset sees the
	 * new generation with it (ring_try_pop's acquire loads and fence) and answers
	 * -ESTALE. Bumped last, a look between the stores read the old tail against the
	 * new head as broken indices. The new stream's parties learn its generation from
	 * its submit answer and its assign, sent after the whole reset. The tail word
	 * takes the new generation: an old reader's CAS of its own word fails from here
	 * on, whenever it comes. */
	uint32_t gen = atomic_fetch_add_explicit(&h->generation, 1, memory_order_seq_cst) + 1;

	atomic_store_explicit(&h->head, 0, memory_order_release);
	atomic_store_explicit(&r->cons->tail, RING_TAIL(gen, 0), memory_order_release);
	atomic_store_explicit(&h->terminal, 0, memory_order_release);
	atomic_store_explicit(&h->request_id, request_id, memory_order_relaxed);
	atomic_store_explicit(&h->producer_start, producer_start, memory_order_relaxed);
	atomic_store_explicit(&h->producer_pid, (uint32_t)producer, memory_order_relaxed);
	atomic_store_explicit(&h->consumer_pid, (uint32_t)consumer, memory_order_relaxed);
	atomic_store_explicit(&r->cons->closed, 0, memory_order_relaxed);
	r->cached_tail = 0;
	return gen;
}

void ring_set_spin(struct ring *r, uint64_t spin_ns)
{
	r->spin_ns = spin_ns;
}

void ring_set_adapt(struct ring *r, struct shm_spin *adapt)
{
	r->adapt = adapt;
}

void ring_set_reader_gen(struct ring *r, uint32_t gen)
{
	r->reader_gen = gen;
}

/* Whether the ring left the stream its reader is bound to (ring_set_reader_gen): the
 * owner reset it. Acquire: a head or a record of the next stream, published after the
 * reset's seq_cst bump, is only seen together with the new generation. */
static bool reader_gen_moved(const struct ring *r)
{
	return r->reader_gen &&
	       atomic_load_explicit(&r->hdr->generation, memory_order_acquire) != r->reader_gen;
}

/* Free records as the producer sees them, refreshing the cached tail if needed: 0
 * also when the indices are impossible (a tail past head, or more than capacity
 * records in use), see indices_broken. */
static uint32_t free_records(struct ring *r, uint64_t head, uint32_t want)
{
	uint32_t used = (uint32_t)head - r->cached_tail;

	if (used > r->capacity || r->capacity - used < want) {
		r->cached_tail =
		    RING_TAIL_POS(atomic_load_explicit(&r->cons->tail, memory_order_acquire));
		used = (uint32_t)head - r->cached_tail;
	}
	return used > r->capacity ? 0 : r->capacity - used;
}

/* Whether head and the tail position last read cannot belong to one stream: the
 * consumer's tail ran past head, or more records are in use than the ring holds (mod
 * 2^32, the tail word's position: a tail past head counts as more than the ring holds).
 * Only a peer that wrote into its line gets here; the stream can never move again. */
static bool indices_broken(const struct ring *r, uint64_t head)
{
	return (uint32_t)head - r->cached_tail > r->capacity;
}

int ring_publish(struct ring *r, const struct ring_rec *rec)
{
	struct ring_hdr *h = r->hdr;
	bool terminal = (rec->flags & RING_F_TERMINAL) != 0;
	uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);

	if (atomic_load_explicit(&h->terminal, memory_order_acquire))
		return -EALREADY;
	/* One record stays reserved for the terminal one. */
	if (free_records(r, head, terminal ? 1 : 2) < (terminal ? 1u : 2u))
		return indices_broken(r, head) ? -EBADMSG : -EAGAIN;
	if (terminal) {
		uint32_t zero = 0;

		if (!atomic_compare_exchange_strong_explicit(
			&h->terminal, &zero, 1, memory_order_acq_rel, memory_order_acquire))
			return -EALREADY;
	}
	struct ring_rec *slot = &r->recs[head & r->mask];
	*slot = *rec;
	slot->ts_ns = shm_now_ns();
	/* seq_cst: publishes the record and orders against the consumer's sleepers
	 * announcement (wait.h). */
	atomic_store_explicit(&h->head, head + 1, memory_order_seq_cst);
	return 0;
}

void ring_wake_reader(struct ring *r)
{
	shm_wake_all(&r->cons->wake);
}

int ring_push(struct ring *r, const struct ring_rec *rec)
{
	int rc = ring_publish(r, rec);

	if (rc == 0)
		ring_wake_reader(r);
	return rc;
}

uint32_t ring_space(struct ring *r)
{
	uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
	uint32_t free = free_records(r, head, r->capacity);

	if (atomic_load_explicit(&r->hdr->terminal, memory_order_acquire))
		return 0;
	return free > 0 ? free - 1 : 0;
}

/* Records a reader may take before it stores its tail: a batch costs one CAS. */
static uint32_t tail_batch(const struct ring *r)
{
	return r->capacity >= 64 ? 16 : (r->capacity >= 8 ? r->capacity / 4 : 1);
}

/* Stores the reader's position into its tail word, with a CAS from the word it last
 * stored or found: it fails when anyone else wrote the word since, the owner's reset
 * above all (the generation bits moved), and then nothing is stored. Release on
 * success: the records consumed are the producer's again only after their copies. */
static int store_tail(struct ring *r)
{
	uint64_t seen = r->read_word;
	uint64_t want = RING_TAIL(RING_TAIL_GEN(seen), r->read_pos);

	if (seen == want)
		return 0;
	BEFORE_TAIL_STORE(r);
	if (atomic_compare_exchange_strong_explicit(&r->cons->tail, &seen, want,
						    memory_order_release, memory_order_relaxed)) {
		r->read_word = want;
		return 0;
	}
	r->read_word = seen;
	r->read_pos = RING_TAIL_POS(seen);
	return -ESTALE;
}

int ring_try_pop(struct ring *r, struct ring_rec *out)
{
	struct ring_hdr *h = r->hdr;
	/* relaxed: the reader is the word's writer; another value is a reset's (or a
	 * peer's), and the generation checks below order what follows it */
	uint64_t word = atomic_load_explicit(&r->cons->tail, memory_order_relaxed);

	if (word != r->read_word) { /* rewritten (a reset): take it as it is */
		r->read_word = word;
		r->read_pos = RING_TAIL_POS(word);
	}
	if (r->reader_gen && RING_TAIL_GEN(word) != r->reader_gen)
		return -ESTALE;

	uint32_t tail = r->read_pos;
	/* The terminal flag is read before head: once it is seen set, the producer
	 * writes only the terminal record's own slot (at head), never the slot at
	 * tail - 1 read below. Read after head, the flag could belong to a terminal
	 * record pushed meanwhile into slot tail - 1 after a full lap (capacity - 1
	 * tokens, then the terminal), and those unread records would be reported as
	 * the end of the stream. */
	uint32_t terminal = atomic_load_explicit(&h->terminal, memory_order_acquire);
	uint64_t head = atomic_load_explicit(&h->head, memory_order_seq_cst);
	/* positions mod 2^32, as the tail word keeps them: a ring holds far fewer */
	uint32_t avail = (uint32_t)head - tail;

	if (avail == 0) {
		if (reader_gen_moved(r))
			return -ESTALE;
		/* every record taken is stored before the reader says empty (and waits) */
		if (store_tail(r))
			return -ESTALE;
		/* Terminal claimed and everything consumed: the stream is over. The
		 * terminal flag is set before its record is published, so also check
		 * that the last consumed record was the terminal one. */
		if (head > 0 && terminal && (r->recs[(tail - 1) & r->mask].flags & RING_F_TERMINAL))
			return -ENODATA;
		return -EAGAIN;
	}
	if (avail > r->capacity) /* indices corrupted by a peer, or reset */
		return reader_gen_moved(r) ? -ESTALE : -EBADMSG;
	*out = r->recs[tail & r->mask];
	/* The copy is the reader's stream's only while the generation did not move: a
	 * reset ring given to another stream fills its records with that stream's. Looked
	 * at after the copy (the fence keeps the record's loads before the generation's)
	 * and before the tail store, so a record of another stream is neither returned nor
	 * consumed; the store itself is a CAS of the word of the reader's generation, so
	 * a reset after this look keeps it out of the next stream (store_tail). */
	atomic_thread_fence(memory_order_acquire);
	if (reader_gen_moved(r))
		return -ESTALE;
	r->read_pos = tail + 1;
	if (avail == 1 || terminal || r->read_pos - RING_TAIL_POS(r->read_word) >= tail_batch(r))
		return store_tail(r);
	return 0;
}

int ring_store_tail(struct ring *r)
{
	uint64_t word = atomic_load_explicit(&r->cons->tail, memory_order_relaxed);

	/* rewritten since this reader's last look: nothing is stored, and nothing was
	 * lost when the reader had taken nothing since its last store */
	if (word != r->read_word)
		return r->read_pos == RING_TAIL_POS(r->read_word) ? 0 : -ESTALE;
	return store_tail(r);
}

/* Ready also once the generation moved: ring_try_pop then answers -ESTALE. */
static bool has_record(void *arg)
{
	const struct ring *r = arg;

	return (uint32_t)atomic_load_explicit(&r->hdr->head, memory_order_seq_cst) != r->read_pos ||
	       atomic_load_explicit(&r->cons->tail, memory_order_relaxed) != r->read_word ||
	       reader_gen_moved(r);
}

static bool hdr_producer_lost(const struct ring_hdr *h)
{
	pid_t pid = (pid_t)atomic_load_explicit(&h->producer_pid, memory_order_acquire);

	return pid != 0 &&
	       !shm_proc_alive(pid, atomic_load_explicit(&h->producer_start, memory_order_relaxed));
}

static bool producer_lost(void *arg)
{
	const struct ring *r = arg;

	return hdr_producer_lost(r->hdr);
}

int ring_pop(struct ring *r, struct ring_rec *out, uint64_t deadline_ns)
{
	struct shm_waiter how = {
	    .ready = has_record,
	    .peer_lost = producer_lost,
	    .arg = r,
	    .spin_ns = r->spin_ns,
	    .adapt = r->adapt,
	};

	for (;;) {
		int rc = ring_try_pop(r, out);
		if (rc != -EAGAIN)
			return rc;
		rc = shm_wait(&r->cons->wake, &how, deadline_ns);
		if (rc == -EPIPE)
			return -EOWNERDEAD;
		if (rc)
			return rc;
	}
}

int ring_take_over(struct ring *r)
{
	struct ring_hdr *h = r->hdr;
	pid_t pid = (pid_t)atomic_load_explicit(&h->producer_pid, memory_order_acquire);

	if (pid != 0 && pid != shm_proc_self() && !hdr_producer_lost(h))
		return -EBUSY;
	/* A producer killed between claiming the terminal record (ring_push's CAS) and
	 * publishing it leaves the claim set with no terminal record in the ring: the
	 * new producer's terminal push would fail with -EALREADY and the stream could
	 * never end. The dead producer writes nothing more, so release a claim whose
	 * record was never published. */
	uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
	if (pid != 0 && pid != shm_proc_self() &&
	    atomic_load_explicit(&h->terminal, memory_order_acquire) &&
	    (head == 0 || !(r->recs[(head - 1) & r->mask].flags & RING_F_TERMINAL)))
		atomic_store_explicit(&h->terminal, 0, memory_order_release);
	atomic_store_explicit(&h->producer_start, shm_proc_self_start_time(), memory_order_relaxed);
	atomic_store_explicit(&h->producer_pid, (uint32_t)shm_proc_self(), memory_order_release);
	r->cached_tail = RING_TAIL_POS(atomic_load_explicit(&r->cons->tail, memory_order_acquire));
	return 0;
}

void ring_close_stream(struct ring *r, uint32_t gen)
{
	/* release, paired with ring_reader_closed's acquire: whoever sees the close
	 * also sees every tail the reader stored before it. The generation, not a flag:
	 * a reset before this store bumps the generation, so the stale value closes
	 * nothing. 0 is no generation (and no close). */
	if (gen != 0)
		atomic_store_explicit(&r->cons->closed, gen, memory_order_release);
}

int ring_close_reader(struct ring *r)
{
	/* A reader closes its own stream's generation, never the one it finds: after a
	 * reset it would be the next stream's. One that knows none closes nothing. */
	if (r->reader_gen == 0)
		return -EINVAL;
	ring_close_stream(r, r->reader_gen);
	return 0;
}

bool ring_reader_closed(const struct ring *r)
{
	const struct ring_hdr *h = r->hdr;
	uint32_t closed = atomic_load_explicit(&r->cons->closed, memory_order_acquire);

	/* the generation may be relaxed: the reader stored the value it read from it */
	return closed != 0 &&
	       closed == atomic_load_explicit(&h->generation, memory_order_relaxed);
}

int ring_hand_over(struct ring *r, pid_t producer)
{
	struct ring_hdr *h = r->hdr;
	uint64_t start = shm_proc_start_time(producer);

	if ((pid_t)atomic_load_explicit(&h->producer_pid, memory_order_acquire) != shm_proc_self())
		return -EPERM;
	if (start == 0)
		return -ESRCH;
	/* start before pid: a reader that sees the new pid (acquire) sees its start */
	atomic_store_explicit(&h->producer_start, start, memory_order_relaxed);
	atomic_store_explicit(&h->producer_pid, (uint32_t)producer, memory_order_release);
	return 0;
}

bool ring_end_record(const struct ring *r, struct ring_rec *out)
{
	struct ring_rec rec;
	uint64_t head;

	/* Only a claimed terminal can be the last record; checking the claim first also
	 * keeps this read off records a live stream may still overwrite. */
	if (!atomic_load_explicit(&r->hdr->terminal, memory_order_acquire))
		return false;
	/* acquire: the record below head is complete when head is seen */
	head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
	if (head == 0)
		return false;
	rec = r->recs[(head - 1) & r->mask];
	if (!(rec.flags & RING_F_TERMINAL))
		return false;
	*out = rec;
	return true;
}

uint32_t ring_end_flags(const struct ring *r)
{
	struct ring_rec rec;

	return ring_end_record(r, &rec) ? rec.flags : 0;
}

bool ring_finished(const struct ring *r)
{
	return ring_end_flags(r) != 0;
}

bool ring_drained(const struct ring *r)
{
	uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);

	return ring_finished(r) &&
	       RING_TAIL_POS(atomic_load_explicit(&r->cons->tail, memory_order_acquire)) ==
		   (uint32_t)head;
}
