/* check_hostile_fuzz.c - a corruption fuzzer of the node's shared memory: while 3 good
 * clients stream synthetic requests (hostile.h: every token checked), a hostile process
 * maps it as a client does and writes into one part of it,
 * about 20 000 times a second: random bytes and runs of bytes, and chosen values (0, 1, 0xff..,
 * sizes and counts at and past their bounds, 2^32 + 5, 2^63, its own pid, the pids of
 * the supervisor, the workers, the good clients and the test, a dead pid, 1). One
 * tcase per part, so a failure names it. What a client can write, its own client region
 * (node layout 4), every byte of it: fuzz_exchange_header (its header, the mailbox
 * header and the attention bitmap), fuzz_slots (the slots' control lines and buffers),
 * fuzz_consumer_lines (every consumer line, those of the rings the good clients read
 * included: their lines lie in the good clients' own regions, which the hostile client
 * cannot map). For these three the hostile client connects through libchipd and opens
 * OWN_REQUESTS endless streams before its first write, so its own slots and consumer
 * lines are live while it writes them. What a client cannot write:
 * fuzz_read_only tries every kind of write at random offsets of the node region
 * through a client's read-only mapping and asserts that each one faults and changes
 * nothing (and that the mapping cannot be made writable). The node region's parts, as
 * root through a read-write remapping (a writer no client can be; skipped when not
 * root): fuzz_descriptor (the region header and the node descriptor), fuzz_directory,
 * fuzz_counters (every counter block: headers, names, values), fuzz_rings (the
 * producer parts: headers and records).
 *
 * What is asserted:
 * - no process of the node exits: chipd and both workers keep their pids
 *   (worker_deaths 0, except after fuzz_counters, whose values the hostile wrote);
 * - every call of a good client returns within its timeout (+ HS_SLACK_MS), and every
 *   stream it opened ends exactly once (FINAL, an ERROR record, or a local error such
 *   as -ESTALE; a wrong token ends its reading), within HS_STREAM_MS;
 * - the directory and the counters are read by nobody on the request path, and a
 *   client region is its client's alone: for those parts every good request completes
 *   exactly once with the right tokens (the node region's other parts, written as
 *   root, may end some of them with an error);
 * - the hostile client's own streams end with an error (the workers' cancelled +
 *   failed grow by OWN_REQUESTS at least: none of them can complete) and their rings
 *   come back;
 * - once the hostile process stopped and the region header, the descriptor, the
 *   counter blocks' headers and names and the mailbox header are restored from a
 *   snapshot taken before (what an attach validates), status and ping answer, every
 *   ring and request comes back to the supervisor (rings_in_use and queue_depth 0)
 *   within HS_STREAM_MS, and a fresh client is served on both chips; chipd stops
 *   cleanly.
 * The hostile process leaves HS_SPARE_SLOTS slots alone, those where the test's own
 * claims start: a slot whose control word names a live owner stays that owner's (issue
 * 16's pid forging), and the test's calls and its fresh client need one.
 *
 * The run prints its seed; a failure reruns with it. Time per part: --seconds S
 * (decimal; default 1.5) or HOSTILE_FUZZ_SECONDS; seed: --seed N or HOSTILE_FUZZ_SEED
 * (default 16). The long run of docs/reliability.md (10 minutes, 100 s per part):
 *   build/tests/check_hostile_fuzz --seconds 100
 * one part: CK_RUN_CASE=fuzz_rings build/tests/check_hostile_fuzz --seconds 600 */
#include "client_internal.h"
#include "hostile.h"
#include "ring.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCHIPS	       2
#define NCLIENTS       3
#define HS_SPARE_SLOTS 4u
#define MAX_PIDS       16
/* the hostile client's own requests (its own region's parts): endless, so only an
 * error can end them */
#define OWN_REQUESTS 4u

enum area {
	A_DESCRIPTOR,
	A_DIRECTORY,
	A_COUNTERS,
	A_XHEADER,
	A_SLOTS,
	A_RINGS,
	A_CONS,
	A_READ_ONLY,
	NAREAS
};

static const char *const area_names[NAREAS] = {
    "descriptor", "directory", "counters",	 "exchange_header",
    "slots",	  "rings",     "consumer_lines", "read_only"};

/* The parts in the exchange region, which a client maps read-write. */
static bool in_xchg(enum area a)
{
	return a == A_XHEADER || a == A_SLOTS || a == A_CONS;
}

/* The parts of the node region written through a root-only remapping. */
static bool node_write(enum area a)
{
	return !in_xchg(a) && a != A_READ_ONLY;
}

/* Set in main before the tcases fork. */
static unsigned g_ms = 1500;
static uint64_t g_seed = 16;

/* The hostile process's shared page. */
/* Where the hostile process is, for the report of one that does not stop in time. */
enum hostile_phase { H_STARTING, H_CONNECTING, H_SUBMITTING, H_WRITING, H_RETURNING };

static const char *const phase_names[] = {"starting", "connecting", "submitting its own requests",
					  "writing", "returning"};

struct hostile {
	_Atomic int stop;
	_Atomic int phase; /* enum hostile_phase */
	_Atomic uint64_t writes;
	enum area area;
	uint64_t seed;
	uint32_t pids[MAX_PIDS], npids;
	uint32_t clients[NCLIENTS]; /* the good clients' pids */
	pid_t test;		    /* the test process, whose calls start at slot test % nslots */
	struct cd *d;
	uint32_t nown; /* its own requests submitted before its first write */
};

/* Whether slot @i is one of the HS_SPARE_SLOTS the hostile process leaves alone: those
 * from the one where the test's own claims start (mbox.c: pid % nslots), so the test's
 * calls and its fresh client always find a free slot. */
static bool spared(const struct hostile *h, const struct hs_view *v, size_t i)
{
	uint32_t n = v->n.mbox.nslots;

	return (i + n - (uint32_t)h->test % n) % n < HS_SPARE_SLOTS;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* Sizes, counts and offsets at and past their bounds (protocol.md's ranges), and the
 * values every field must survive. */
static const uint32_t extreme32[] = {0,		  1,	       2,	   63,	       64,
				     192,	  4095,	       4096,	   4097,       65536,
				     65537,	  1000000,     1u << 30,   0x7fffffff, 0x80000000u,
				     0xffffffc0u, 0xfffffffeu, 0xffffffffu};
static const uint64_t extreme64[] = {0,
				     1,
				     (1ull << 32) - 1,
				     1ull << 32,
				     (1ull << 32) + 5,
				     1ull << 40,
				     1000000000000ull,
				     (1ull << 63) - 1,
				     1ull << 63,
				     UINT64_MAX - 1,
				     UINT64_MAX};

/* The part @a covers in @v, from its region's base (in_xchg: the exchange region's):
 * [*lo, *hi). */
static void area_bounds(struct hs_view *v, enum area a, size_t *lo, size_t *hi)
{
	const struct proto_node_desc *d = &v->desc;
	size_t slots = (size_t)(v->n.mbox.slots - v->xbase);

	switch (a) {
	case A_DESCRIPTOR:
		*lo = 0;
		*hi = PROTO_NODE_DESC_OFFSET + sizeof(struct proto_node_desc);
		break;
	case A_DIRECTORY:
		*lo = d->dir_offset;
		*hi = d->dir_offset + (size_t)d->nworkers * d->dir_stride;
		break;
	case A_COUNTERS:
		*lo = d->sup_ctr_offset;
		*hi = d->wrk_ctr_offset + (size_t)d->nworkers * d->wrk_ctr_stride;
		break;
	case A_XHEADER:
		*lo = 0;
		*hi = slots;
		break;
	case A_SLOTS:
		*lo = slots;
		*hi = slots + (size_t)v->n.mbox.nslots * v->n.mbox.stride;
		break;
	case A_CONS:
		*lo = v->xg.cons_offset;
		*hi = v->xg.cons_offset + (size_t)v->xg.nrings * v->xg.cons_stride;
		break;
	case A_READ_ONLY:
		*lo = 0;
		*hi = v->n.region.size;
		break;
	default:
		*lo = d->rings_offset;
		*hi = d->rings_offset + (size_t)d->nrings * d->ring_stride;
		break;
	}
}

/* Whether @pid is one of the good clients of @h. */
static bool is_client(const struct hostile *h, uint32_t pid)
{
	for (uint32_t i = 0; i < NCLIENTS; i++)
		if (pid != 0 && (h->clients[i] & 0xffffffu) == pid)
			return true;
	return false;
}

/* The slots or rings of @v's part @a that the good clients of @h use, at most @cap of
 * them, into @live: a ring one of them reads whose stream has not ended; a slot one of
 * them owns now or was seen to own before (@seen: a call holds a slot for a moment,
 * and a client's claims keep coming back to the same few slots). */
static uint32_t find_live(const struct hostile *h, struct hs_view *v, enum area a, size_t lo,
			  size_t hi, bool *seen, uint32_t *live, uint32_t cap)
{
	size_t unit = a == A_SLOTS ? v->n.mbox.stride
				   : a == A_CONS ? v->xg.cons_stride
						 : v->desc.ring_stride;
	uint32_t n = 0;

	for (size_t i = 0; i < (hi - lo) / unit && n < cap; i++) {
		char *p = (a == A_SLOTS ? v->xbase + lo : v->base + v->desc.rings_offset) +
			  i * (a == A_SLOTS ? unit : v->desc.ring_stride);
		bool used;

		if (a == A_SLOTS && spared(h, v, i))
			continue;
		if (a == A_SLOTS) {
			uint64_t c = atomic_load_explicit(&((struct mbox_slot *)p)->ctl,
							  memory_order_relaxed);

			seen[i] |= MBOX_CTL_STATE(c) != MBOX_FREE &&
				   is_client(h, (uint32_t)MBOX_CTL_PID(c));
			used = seen[i];
		} else {
			struct ring_hdr *r = (struct ring_hdr *)p;

			used = is_client(h, atomic_load_explicit(&r->consumer_pid,
								 memory_order_relaxed)) &&
			       !atomic_load_explicit(&r->terminal, memory_order_relaxed);
		}
		if (used)
			live[n++] = (uint32_t)i;
	}
	return n;
}

/* Where the next write lands in [lo, hi): anywhere for the small parts. In the slots
 * and rings, 3 in 4 writes go to one in use (@live, @nlive of them: those the good
 * clients' requests go through), and most into its control line or header, where
 * the words that steer the others lie. */
static size_t pick(const struct hostile *h, struct hs_view *v, enum area a, size_t lo, size_t hi,
		   const uint32_t *live, uint32_t nlive, uint64_t *s)
{
	size_t unit, line, i;

	if (a != A_SLOTS && a != A_RINGS && a != A_CONS)
		return lo + rnd(s) % (hi - lo);
	unit = a == A_SLOTS ? v->n.mbox.stride
	       : a == A_CONS ? v->xg.cons_stride
			     : v->desc.ring_stride;
	line = a == A_SLOTS ? sizeof(struct mbox_slot)
	       : a == A_CONS ? sizeof(struct ring_cons)
			     : sizeof(struct ring_hdr);
	do
		i = nlive && rnd(s) % 4 ? live[rnd(s) % nlive] : rnd(s) % ((hi - lo) / unit);
	while (a == A_SLOTS && spared(h, v, i));
	return lo + i * unit + (rnd(s) % 10 < 6 ? rnd(s) % line : rnd(s) % unit);
}

/* One hostile write at @off (inside [lo, hi)). Aligned words land on the fields'
 * own boundaries; runs are cut at @hi. */
static void hostile_write(struct hostile *h, char *base, size_t off, size_t hi, uint64_t *s)
{
	size_t len;

	switch (rnd(s) % 8) {
	case 0:
		base[off] = (char)rnd(s);
		break;
	case 1:
		hs_put32(base + (off & ~(size_t)3),
			 extreme32[rnd(s) % (sizeof(extreme32) / sizeof(extreme32[0]))]);
		break;
	case 2:
		hs_put64(base + (off & ~(size_t)7),
			 extreme64[rnd(s) % (sizeof(extreme64) / sizeof(extreme64[0]))]);
		break;
	case 3:
		hs_put32(base + (off & ~(size_t)3), h->pids[rnd(s) % h->npids]);
		break;
	case 4:
		len = 1 + rnd(s) % 64;
		for (size_t i = 0; i < len && off + i < hi; i++)
			base[off + i] = (char)rnd(s);
		break;
	case 5:
		hs_put32(base + (off & ~(size_t)3), (uint32_t)rnd(s));
		break;
	case 6:
		hs_put64(base + (off & ~(size_t)7), rnd(s));
		break;
	default:
		len = 8 + rnd(s) % 57;
		memset(base + off, rnd(s) % 2 ? 0xff : 0, off + len <= hi ? len : hi - off);
		break;
	}
}

static sigjmp_buf g_fault;

static void on_fault(int sig)
{
	(void)sig;
	siglongjmp(g_fault, 1);
}

/* Whether one hostile write at @off of the read-only @base faults (SIGSEGV). */
static bool write_faults(struct hostile *h, char *base, size_t off, size_t hi, uint64_t *s)
{
	if (sigsetjmp(g_fault, 1) != 0)
		return true;
	hostile_write(h, base, off, hi, s);
	return false;
}

/* fuzz_read_only: the hostile process tries hostile writes at random offsets of the
 * node region through its read-only mapping. Each must fault (SIGSEGV) and leave the
 * bytes as they were; making the mapping writable must fail. Returns 0, or 20 + what
 * went wrong. */
static int read_only_main(struct hostile *h, struct hs_view *v, size_t hi, uint64_t *s)
{
	struct sigaction sa = {.sa_handler = on_fault}, old;
	char before[72];

	if (mprotect(v->base, v->n.region.size, PROT_READ | PROT_WRITE) == 0 || errno != EACCES)
		return 20;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old) != 0)
		return 21;
	while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
		for (int i = 0; i < 8; i++) {
			size_t off = rnd(s) % (hi - 64) & ~(size_t)7;

			memcpy(before, v->base + off, sizeof(before));
			if (!write_faults(h, v->base, off, hi, s))
				return 22; /* the write went through */
			/* live words may move between the copy and here (the supervisor's
			 * gauges, a ring's head): a region header byte does not */
			if (off < 8 && memcmp(before, v->base + off, 8 - off) != 0)
				return 23;
		}
		atomic_fetch_add_explicit(&h->writes, 8, memory_order_relaxed);
		usleep(200);
	}
	sigaction(SIGSEGV, &old, NULL);
	return 0;
}

/* The parts of its own client region: the hostile client connects through libchipd,
 * opens OWN_REQUESTS endless streams (1 ms steps; it never reads them) and then writes
 * into that connection's region, its own streams' slots and consumer lines included.
 * Returns 0, or 40 + what failed. */
static int own_requests(struct hostile *h, struct hs_view *v)
{
	struct chipd_param p[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_error err;
	chipd_conn *conn;

	atomic_store(&h->phase, H_CONNECTING);
	if (chipd_connect(h->d->instance, &conn, &err))
		return 40;
	atomic_store(&h->phase, H_SUBMITTING);
	for (uint32_t i = 0; i < OWN_REQUESTS; i++) {
		chipd_stream *st;
		uint64_t id;

		if (chipd_submit(conn, &req, HS_CALL_MS, &id, &st, &err))
			return 41;
		h->nown++;
	}
	hs_view_of(v, &conn->node); /* the process's exit closes the connection */
	return 0;
}

/* The hostile process: its own mapping of the region, then writes into its part
 * until told to stop (8 at a time, then a short sleep: it must not starve the node of
 * the two cores the test has, only corrupt it), looking every 64 writes for the slots
 * or rings in use. */
static int hostile_main(void *arg)
{
	struct hostile *h = arg;
	uint64_t s = h->seed * 0x9e3779b97f4a7c15ull + (uint64_t)h->area + 1;
	uint32_t live[PROTO_NODE_MAX_RINGS], nlive = 0;
	bool seen[MBOX_MAX_SLOTS] = {false};
	struct hs_view v;
	size_t lo, hi;
	char *base;
	int rc;

	if (in_xchg(h->area)) {
		rc = own_requests(h, &v);
		if (rc)
			return rc;
	} else if (node_write(h->area)) {
		hs_view_attach(h->d, &v);
	} else {
		hs_view_attach_client(h->d, &v); /* as every client: the node read-only */
	}
	if (node_write(h->area) && !v.node_writable)
		return 30;
	area_bounds(&v, h->area, &lo, &hi);
	h->pids[h->npids++] = (uint32_t)getpid();
	atomic_store(&h->phase, H_WRITING);
	if (h->area == A_READ_ONLY) {
		rc = read_only_main(h, &v, hi, &s);
		hs_view_detach(&v);
		return rc;
	}
	base = in_xchg(h->area) ? v.xbase : v.base;
	for (uint64_t round = 0; !atomic_load_explicit(&h->stop, memory_order_relaxed); round++) {
		if ((h->area == A_SLOTS || h->area == A_RINGS || h->area == A_CONS) &&
		    round % 8 == 0)
			nlive = find_live(h, &v, h->area, lo, hi, seen, live, PROTO_NODE_MAX_RINGS);
		for (int i = 0; i < 8; i++)
			hostile_write(h, base, pick(h, &v, h->area, lo, hi, live, nlive, &s), hi,
				      &s);
		atomic_fetch_add_explicit(&h->writes, 8, memory_order_relaxed);
		usleep(200);
	}
	atomic_store(&h->phase, H_RETURNING);
	if (!in_xchg(h->area))
		hs_view_detach(&v);
	return 0;
}

static int exit_at_once(void *arg)
{
	(void)arg;
	return 0;
}

/* The first line of /proc/@pid/@file into @buf (empty when unreadable). */
static void proc_line(pid_t pid, const char *file, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* Waits up to @ms for the hostile process @hp, told to stop, to exit, and returns its
 * exit status. One still running is described on stderr (its phase and writes, the
 * kernel's state, wait channel and system call of its main thread), then killed: -1. */
static int hostile_wait(struct hostile *h, pid_t hp, unsigned ms, const char *what)
{
	uint64_t end = ft_now_ms() + ms;
	char stat[256], wchan[64], sys[128];
	const char *state;
	int status, werr = 0;

	for (;;) {
		pid_t r = waitpid(hp, &status, WNOHANG);

		if (r == hp)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0) {
			werr = errno; /* not our child any more: a bug of the test */
			break;
		}
		if (ft_now_ms() >= end)
			break;
		tu_sleep_ms(1);
	}
	proc_line(hp, "stat", stat, sizeof(stat));
	state = strrchr(stat, ')'); /* "pid (comm) S ...": the state after the name */
	proc_line(hp, "wchan", wchan, sizeof(wchan));
	proc_line(hp, "syscall", sys, sizeof(sys));
	fprintf(stderr,
		"%s: the hostile process %d did not exit %u ms after told to stop (waitpid: %s): "
		"phase %s, %llu writes; state %c, wchan '%s', syscall '%s'\n",
		what, (int)hp, ms, werr ? strerror(werr) : "still running", phase_names[atomic_load(&h->phase)],
		(unsigned long long)atomic_load(&h->writes), state && state[1] ? state[2] : '?', wchan,
		sys);
	tu_kill(hp);
	return -1;
}

/* Waits until the hostile process @hp writes, so that the part is fuzzed for the whole
 * --seconds however long its connect and its own submits took on a loaded machine (each
 * submit may take up to HS_CALL_MS). One that exits first fails the test with its exit
 * status; one that does not get there in time is described and killed. */
static void hostile_started(struct hostile *h, pid_t hp, const char *what)
{
	uint64_t end = ft_now_ms() + (OWN_REQUESTS + 1) * HS_CALL_MS + HS_SLACK_MS;
	int status;

	while (atomic_load(&h->phase) < H_WRITING) {
		pid_t r = waitpid(hp, &status, WNOHANG);

		ck_assert_msg(r == 0, "%s: the hostile process exited before its first write (%s %d)",
			      what, r < 0 ? "waitpid" : WIFEXITED(status) ? "status" : "signal",
			      r < 0 ? errno : WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		if (ft_now_ms() >= end) {
			atomic_store(&h->stop, 1);
			hostile_wait(h, hp, 0, what); /* describes it and kills it */
			ck_abort_msg("%s: the hostile process did not start writing in %u ms", what,
				     (OWN_REQUESTS + 1) * HS_CALL_MS + HS_SLACK_MS);
		}
		tu_sleep_ms(1);
	}
}

/* What an attach validates, as it was before the hostile writes (hostile.h). */
struct snapshot {
	char head[PROTO_NODE_DESC_OFFSET + sizeof(struct proto_node_desc)];
	char xhdr[PROTO_XCHG_HDR]; /* the exchange region's header */
	char mbox[64];		   /* the mailbox header's first line: geometry and server */
	struct {
		size_t off, len;
		char *bytes;
	} ctr[1 + FT_MAX_CHIPS];
	uint32_t nctr;
};

static void snapshot_block(struct hs_view *v, struct snapshot *sn, size_t off)
{
	const struct ctr_hdr *h = (const struct ctr_hdr *)(v->base + off);
	size_t len = h->values_offset; /* header and names: the values are live */

	sn->ctr[sn->nctr].off = off;
	sn->ctr[sn->nctr].len = len;
	sn->ctr[sn->nctr].bytes = malloc(len);
	ck_assert_ptr_nonnull(sn->ctr[sn->nctr].bytes);
	memcpy(sn->ctr[sn->nctr].bytes, v->base + off, len);
	sn->nctr++;
}

static void snapshot_take(struct hs_view *v, struct snapshot *sn)
{
	memset(sn, 0, sizeof(*sn));
	memcpy(sn->head, v->base, sizeof(sn->head));
	memcpy(sn->xhdr, v->xbase, sizeof(sn->xhdr));
	memcpy(sn->mbox, v->xbase + v->xg.mbox_offset, sizeof(sn->mbox));
	snapshot_block(v, sn, v->desc.sup_ctr_offset);
	for (uint32_t i = 0; i < v->desc.nworkers && i < FT_MAX_CHIPS; i++)
		snapshot_block(v, sn, v->desc.wrk_ctr_offset + (size_t)i * v->desc.wrk_ctr_stride);
}

static void snapshot_restore(struct hs_view *v, struct snapshot *sn)
{
	memcpy(v->xbase, sn->xhdr, sizeof(sn->xhdr));
	memcpy(v->xbase + v->xg.mbox_offset, sn->mbox, sizeof(sn->mbox));
	for (uint32_t i = 0; i < sn->nctr; i++) {
		/* the node region: only a root view wrote (and can restore) it */
		if (v->node_writable)
			memcpy(v->base + sn->ctr[i].off, sn->ctr[i].bytes, sn->ctr[i].len);
		free(sn->ctr[i].bytes);
	}
	if (v->node_writable)
		memcpy(v->base, sn->head, sizeof(sn->head));
}

/* Waits until the supervisor holds no ring and no request any more (a ring the hostile
 * writes broke is taken back within the longer of --stuck-ms and --progress-ms,
 * protocol.md 5.7); fails the tcase after HS_STREAM_MS. */
static void rings_back(struct cd *d, const char *what)
{
	uint64_t end = ft_now_ms() + HS_STREAM_MS, rings, live;

	for (;;) {
		rings = cd_stat(d, "supervisor", "rings_in_use");
		live = cd_stat(d, "supervisor", "queue_depth");
		if (rings == 0 && live == 0)
			return;
		ck_assert_msg(ft_now_ms() < end,
			      "%s: %llu rings and %llu requests still held %u ms after the last "
			      "client stopped",
			      what, (unsigned long long)rings, (unsigned long long)live,
			      HS_STREAM_MS);
		tu_sleep_ms(50);
	}
}

static void fuzz_area(enum area a)
{
	const char *const args[] = {"--chips", "2", NULL};
	struct hs_client c[NCLIENTS];
	struct snapshot sn;
	struct hs_node node;
	struct hostile *h;
	struct hs_view v;
	char what[96];
	struct ft_stats st;
	struct cd d;
	uint64_t end, ended0;
	pid_t hp;
	int rc;

	snprintf(what, sizeof(what), "fuzz_%s (seed %llu, %u ms)", area_names[a],
		 (unsigned long long)g_seed, g_ms);
	if (node_write(a) && geteuid() != 0) {
		fprintf(stderr, "%s: skipped: node region writes need root\n", what);
		return;
	}
	fprintf(stderr, "%s: rerun with --seed %llu\n", what, (unsigned long long)g_seed);
	ft_start(&d, args);
	hs_node_record(&d, &node, NCHIPS);
	hs_view_attach(&d, &v);
	snapshot_take(&v, &sn);
	for (uint32_t i = 0; i < NCLIENTS; i++)
		hs_client_start(&c[i], &d, -1, i);
	for (uint32_t i = 0; i < NCLIENTS; i++)
		hs_client_progress(&c[i], &node, 1, 10000, what);

	h = tu_shared(sizeof(*h));
	h->area = a;
	h->seed = g_seed;
	h->d = &d;
	h->test = getpid();
	h->pids[h->npids++] = (uint32_t)node.sup;
	for (uint32_t i = 0; i < NCHIPS; i++)
		h->pids[h->npids++] = (uint32_t)node.worker[i];
	for (uint32_t i = 0; i < NCLIENTS; i++) {
		h->clients[i] = (uint32_t)c[i].pid;
		h->pids[h->npids++] = (uint32_t)c[i].pid;
	}
	h->pids[h->npids++] = (uint32_t)getpid();
	h->pids[h->npids] = (uint32_t)tu_fork(exit_at_once, NULL);
	ck_assert_int_eq(tu_wait((pid_t)h->pids[h->npids++], 5000), 0); /* a dead pid */
	/* chipd signals no pid it reads from the region (only kill(pid, 0) probes): pid 1
	 * is as safe to name as any other */
	h->pids[h->npids++] = 1;
	ft_stats(&d, &st);
	ended0 = ft_chip_sum(&st, PROTO_WRK_cancelled) + ft_chip_sum(&st, PROTO_WRK_failed);
	hp = tu_fork(hostile_main, h);
	hostile_started(h, hp, what);

	for (end = ft_now_ms() + g_ms; ft_now_ms() < end;) {
		hs_node_alive(&node, what);
		tu_sleep_ms(50);
	}
	atomic_store(&h->stop, 1);
	rc = hostile_wait(h, hp, 5000, what);
	ck_assert_msg(rc == 0, "%s: the hostile process exit status %d", what, rc);
	fprintf(stderr, "%s: %llu hostile writes\n", what, (unsigned long long)h->writes);
	hs_node_alive(&node, what);

	for (uint32_t i = 0; i < NCLIENTS; i++) {
		const struct hs_ledger *l = hs_client_stop(&c[i]);

		hs_ledger_print(l, what);
		/* a client region is its own client's alone (node layout 4): whatever the
		 * hostile client writes into its own, every other client's request completes
		 * exactly once with the right tokens */
		if (a == A_DIRECTORY || a == A_COUNTERS || a == A_READ_ONLY || in_xchg(a))
			hs_ledger_check_clean(l, what);
		else
			hs_ledger_check_bounded(l, what);
		hs_client_free(&c[i]);
	}
	hs_node_alive(&node, what);
	snapshot_restore(&v, &sn);
	hs_node_check(&d, &node, a != A_COUNTERS, what);
	rings_back(&d, what);
	if (in_xchg(a)) {
		/* its own endless streams lived in the region it wrote, and ended with an
		 * error: cancelled when the connection hung up, or earlier by what it
		 * wrote (a consumer line's closed word, a broken ring taken back) */
		ck_assert_uint_eq(h->nown, OWN_REQUESTS);
		ft_stats(&d, &st);
		ck_assert_msg(ft_chip_sum(&st, PROTO_WRK_cancelled) +
				      ft_chip_sum(&st, PROTO_WRK_failed) - ended0 >=
				  OWN_REQUESTS,
			      "%s: %llu of the hostile client's %u requests ended on the workers",
			      what,
			      (unsigned long long)(ft_chip_sum(&st, PROTO_WRK_cancelled) +
						   ft_chip_sum(&st, PROTO_WRK_failed) - ended0),
			      OWN_REQUESTS);
	}
	hs_fresh_client(&d, NCHIPS);
	hs_view_detach(&v);
	tu_unmap(h, sizeof(*h));
	ft_stop_clean(&d, node.worker, NCHIPS);
}

START_TEST(fuzz_part)
{
	fuzz_area((enum area)_i);
}
END_TEST

/* --seconds S and --seed N, else HOSTILE_FUZZ_SECONDS and HOSTILE_FUZZ_SEED. */
static int parse_args(int argc, char **argv)
{
	const char *sec = getenv("HOSTILE_FUZZ_SECONDS"), *seed = getenv("HOSTILE_FUZZ_SEED");
	char *endp;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			sec = argv[++i];
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = argv[++i];
		else
			return -1;
	}
	if (sec) {
		double s = strtod(sec, &endp);

		if (*endp || !(s > 0 && s <= 86400))
			return -1;
		g_ms = (unsigned)(s * 1000);
	}
	if (seed) {
		g_seed = strtoull(seed, &endp, 0);
		if (*endp)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static char names[NAREAS][32]; /* Check keeps the pointer */
	Suite *s = suite_create("hostile_fuzz");
	int rc;

	if (parse_args(argc, argv)) {
		fprintf(stderr, "usage: %s [--seconds S (per part)] [--seed N]\n", argv[0]);
		return 100;
	}
	for (int a = 0; a < NAREAS; a++) {
		TCase *tc;

		snprintf(names[a], sizeof(names[a]), "fuzz_%s", area_names[a]);
		tc = tcase_create(names[a]);
		/* the writes, then each good client's last stream (HS_STREAM_MS at most), a
		 * fresh client and a stop, slow machine included */
		tcase_set_timeout(tc, g_ms / 1000.0 + 150);
		tcase_add_loop_test(tc, fuzz_part, a, a + 1);
		suite_add_tcase(s, tc);
	}
	ft_set_owner();
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
