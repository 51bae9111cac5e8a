/* hostile_util.c - see hostile.h. */
#include "hostile.h"
#include "ring.h"
#include "wl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A good client's shared page: what the test tells it and what it saw. */
struct hs_shared {
	_Atomic int stop;
	_Atomic int ready; /* 1 connected, -1 could not connect */
	int chip;
	uint32_t index;
	char instance[CHIPD_INSTANCE_MAX];
	struct hs_ledger l;
};

/* How one stream ended, as read_to_end saw it. */
enum hs_end { HS_FINAL, HS_ERROR, HS_LOST, HS_GARBLED, HS_UNENDED };

struct hs_outcome {
	enum hs_end end;
	int code; /* HS_ERROR: the chipd code; HS_LOST: the negative errno */
	uint64_t late, after_end;
	char why[256];
};

/* The first @n tokens of a synthetic request with @seed (docs/protocol.md 8.6: they
 * depend on the seed and the step only). */
static int ref_tokens(uint64_t seed, uint32_t n, uint64_t *out, char *msg, size_t cap)
{
	struct wl_params p;

	wl_params_init(&p);
	if (wl_params_set(&p, "tokens", n) || wl_params_set(&p, "seed", (int64_t)seed))
		return -EINVAL;
	return wl_ref_tokens("synthetic", &p, out, n, msg, cap);
}

int hs_submit(chipd_conn *conn, uint32_t tokens, uint32_t device_us, uint64_t seed, uint64_t id,
	      int chip, uint32_t timeout_ms, chipd_stream **s, struct chipd_error *err)
{
	struct chipd_param p[] = {
	    {"tokens", tokens}, {"device_us", device_us}, {"seed", (int64_t)seed}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 3, .id = id, .chip = chip};
	uint64_t got;

	return chipd_submit(conn, &req, timeout_ms, &got, s, err);
}

/* After an end, the stream gives nothing more: -ENODATA, or -ESTALE once its ring went
 * to another stream. */
static void check_after_end(chipd_stream *s, struct hs_outcome *o)
{
	struct chipd_token tok;
	struct chipd_error err;
	int rc = chipd_stream_next(s, &tok, 0, &err);

	if (rc != -ENODATA && rc != -ESTALE)
		o->after_end++;
}

/* Reads @s until it ends, each read bounded by @ms (a read that returns later than
 * @ms + HS_SLACK_MS counts as late) and the whole by @total_ms, checking each token
 * against @ref (@tokens of them). */
static void read_to_end(chipd_stream *s, uint32_t tokens, const uint64_t *ref, unsigned ms,
			unsigned total_ms, struct hs_outcome *o)
{
	uint64_t start = ft_now_ms(), id = chipd_stream_id(s);
	struct chipd_token tok;
	struct chipd_error err;
	uint32_t n = 0;

	memset(o, 0, sizeof(*o));
	for (;;) {
		uint64_t t0 = ft_now_ms();
		int rc = chipd_stream_next(s, &tok, ms, &err);

		if (ft_now_ms() - t0 > ms + HS_SLACK_MS)
			o->late++;
		if (rc == 0) {
			if (tok.request != id || tok.seq != n || n >= tokens ||
			    tok.value != ref[n]) {
				o->end = HS_GARBLED;
				snprintf(o->why, sizeof(o->why),
					 "request %llu token %u: request %llu seq %u value %llu",
					 (unsigned long long)id, n, (unsigned long long)tok.request,
					 tok.seq, (unsigned long long)tok.value);
				return;
			}
			if (++n == tokens || tok.final) {
				o->end = tok.final && n == tokens ? HS_FINAL : HS_GARBLED;
				snprintf(o->why, sizeof(o->why),
					 "request %llu: %u tokens, final %d",
					 (unsigned long long)id, n, tok.final);
				if (o->end == HS_FINAL)
					check_after_end(s, o);
				return;
			}
		} else if (rc == -EREMOTEIO) {
			o->end = HS_ERROR;
			o->code = err.code > 0 && err.code < CHIPD_NCODES ? (int)err.code
									  : CHIPD_E_INTERNAL;
			snprintf(o->why, sizeof(o->why), "request %llu after %u tokens: %s (%s)",
				 (unsigned long long)id, n, chipd_code_name(err.code), err.message);
			check_after_end(s, o);
			return;
		} else if (rc != -ETIMEDOUT) {
			o->end = HS_LOST;
			o->code = rc;
			snprintf(o->why, sizeof(o->why), "request %llu after %u tokens: %s (%s)",
				 (unsigned long long)id, n, strerror(-rc), err.message);
			return;
		} else if (ft_now_ms() - start > total_ms) {
			o->end = HS_UNENDED;
			snprintf(o->why, sizeof(o->why),
				 "request %llu: not ended after %u ms (%u tokens)",
				 (unsigned long long)id, total_ms, n);
			return;
		}
	}
}

int hs_read_stream(chipd_stream *s, uint32_t tokens, uint64_t seed, unsigned ms, unsigned total_ms)
{
	uint64_t *ref = calloc(tokens, sizeof(*ref));
	char msg[CHIPD_MSG_MAX];
	struct hs_outcome o;

	ck_assert_ptr_nonnull(ref);
	ck_assert_msg(ref_tokens(seed, tokens, ref, msg, sizeof(msg)) == 0, "%s", msg);
	read_to_end(s, tokens, ref, ms, total_ms, &o);
	free(ref);
	ck_assert_msg(o.end != HS_GARBLED && o.end != HS_UNENDED, "%s", o.why);
	ck_assert_msg(o.late == 0 && o.after_end == 0, "%s: %llu late reads, %llu after its end",
		      o.why, (unsigned long long)o.late, (unsigned long long)o.after_end);
	return o.end == HS_FINAL ? 0 : o.code;
}

/* ---- a good client ---- */

/* Keeps @what (after @prefix) as @l's first outcome other than a completion. */
static void note(struct hs_ledger *l, const char *prefix, const char *what)
{
	if (l->first[0] == '\0')
		snprintf(l->first, sizeof(l->first), "%s%s", prefix, what);
}

/* One request of a good client: submit, read to the end, count. */
static void client_request(struct hs_shared *sh, chipd_conn *conn, uint64_t i, uint64_t *ref)
{
	struct hs_ledger *l = &sh->l;
	uint64_t seed = ((uint64_t)(sh->index + 1) << 32) | i, t0;
	int chip = sh->chip >= 0 ? sh->chip : (int)(i % 2);
	char msg[CHIPD_MSG_MAX];
	struct chipd_error err;
	struct hs_outcome o;
	chipd_stream *s;
	int rc;

	if (ref_tokens(seed, HS_TOKENS, ref, msg, sizeof(msg))) {
		note(l, "reference: ", msg);
		return;
	}
	l->submits++;
	t0 = ft_now_ms();
	rc = hs_submit(conn, HS_TOKENS, 100, seed, 0, chip, HS_CALL_MS, &s, &err);
	if (ft_now_ms() - t0 > HS_CALL_MS + HS_SLACK_MS)
		l->late++;
	if (rc == -EREMOTEIO) {
		l->refused[err.code > 0 && err.code < CHIPD_NCODES ? err.code : CHIPD_E_INTERNAL]++;
		note(l, "submit refused: ", err.message);
		usleep(1000); /* a refusal is immediate: do not spin on it */
		return;
	}
	if (rc) {
		char why[256];

		l->call_errors++;
		snprintf(why, sizeof(why), "%s (%s)", strerror(-rc), err.message);
		note(l, "submit failed: ", why);
		usleep(1000);
		return;
	}
	l->opened++;
	read_to_end(s, HS_TOKENS, ref, HS_STEP_MS, HS_STREAM_MS, &o);
	l->late += o.late;
	l->after_end += o.after_end;
	switch (o.end) {
	case HS_FINAL:
		atomic_fetch_add_explicit(&l->completed, 1, memory_order_relaxed);
		break;
	case HS_ERROR:
		l->ended[o.code]++;
		break;
	case HS_LOST:
		l->lost++;
		break;
	case HS_GARBLED:
		l->garbled++;
		break;
	case HS_UNENDED:
		l->unended++;
		break;
	}
	if (o.end != HS_FINAL)
		note(l, "", o.why);
	chipd_stream_close(s, 0);
}

static int client_main(void *arg)
{
	struct hs_shared *sh = arg;
	uint64_t ref[HS_TOKENS];
	struct chipd_error err;
	chipd_conn *conn;

	if (chipd_connect(sh->instance, &conn, &err)) {
		atomic_store(&sh->ready, -1);
		return 1;
	}
	atomic_store(&sh->ready, 1);
	for (uint64_t i = 0; !atomic_load_explicit(&sh->stop, memory_order_relaxed); i++)
		client_request(sh, conn, i, ref);
	chipd_close(conn);
	return 0;
}

void hs_client_start(struct hs_client *c, struct cd *d, int chip, uint32_t index)
{
	uint64_t end = ft_now_ms() + 10000;

	c->sh = tu_shared(sizeof(*c->sh));
	c->sh->chip = chip;
	c->sh->index = index;
	snprintf(c->sh->instance, sizeof(c->sh->instance), "%s", d->instance);
	c->pid = tu_fork(client_main, c->sh);
	while (atomic_load(&c->sh->ready) == 0 && ft_now_ms() < end)
		usleep(1000);
	ck_assert_msg(atomic_load(&c->sh->ready) == 1, "good client %u did not connect", index);
}

void hs_client_progress(struct hs_client *c, const struct hs_node *node, uint64_t n, unsigned ms,
			const char *why)
{
	uint64_t from = atomic_load(&c->sh->l.completed), end = ft_now_ms() + ms;

	while (atomic_load(&c->sh->l.completed) < from + n) {
		hs_node_alive(node, why);
		ck_assert_msg(ft_now_ms() < end,
			      "%s: good client %u completed %llu of %llu requests in %u ms (%s)",
			      why, c->sh->index,
			      (unsigned long long)(atomic_load(&c->sh->l.completed) - from),
			      (unsigned long long)n, ms,
			      c->sh->l.first[0] ? c->sh->l.first : "no other outcome");
		usleep(2000);
	}
}

const struct hs_ledger *hs_client_stop(struct hs_client *c)
{
	int rc;

	atomic_store(&c->sh->stop, 1);
	/* its current stream ends within HS_STREAM_MS, a submit within HS_CALL_MS */
	rc = tu_wait(c->pid, HS_STREAM_MS + HS_CALL_MS + 5000);
	ck_assert_msg(rc == 0, "good client %u: exit status %d (%s%s)", c->sh->index, rc,
		      rc > 128 ? "killed by "
		      : rc < 0 ? "did not stop"
			       : "could not run",
		      rc > 128 ? strsignal(rc - 128) : "");
	return &c->sh->l;
}

void hs_client_free(struct hs_client *c)
{
	tu_unmap(c->sh, sizeof(*c->sh));
	c->sh = NULL;
}

static uint64_t sum(const uint64_t *v)
{
	uint64_t s = 0;

	for (int i = 0; i < CHIPD_NCODES; i++)
		s += v[i];
	return s;
}

void hs_ledger_print(const struct hs_ledger *l, const char *what)
{
	fprintf(stderr,
		"%s: %llu submits (%llu refused, %llu failed), %llu streams: %llu completed, %llu "
		"error ends, %llu lost, %llu garbled, %llu unended; %llu late calls%s%s\n",
		what, (unsigned long long)l->submits, (unsigned long long)sum(l->refused),
		(unsigned long long)l->call_errors, (unsigned long long)l->opened,
		(unsigned long long)atomic_load(&l->completed), (unsigned long long)sum(l->ended),
		(unsigned long long)l->lost, (unsigned long long)l->garbled,
		(unsigned long long)l->unended, (unsigned long long)l->late,
		l->first[0] ? "; first: " : "", l->first);
}

void hs_ledger_check_bounded(const struct hs_ledger *l, const char *what)
{
	uint64_t ends = atomic_load(&l->completed) + sum(l->ended) + l->lost + l->garbled;

	ck_assert_msg(l->late == 0, "%s: %llu calls returned past their timeout (first: %s)", what,
		      (unsigned long long)l->late, l->first);
	ck_assert_msg(l->unended == 0, "%s: %llu streams never ended (first: %s)", what,
		      (unsigned long long)l->unended, l->first);
	ck_assert_msg(l->after_end == 0, "%s: %llu streams gave more after their end", what,
		      (unsigned long long)l->after_end);
	ck_assert_msg(ends == l->opened, "%s: %llu streams opened, %llu ended", what,
		      (unsigned long long)l->opened, (unsigned long long)ends);
	ck_assert_msg(l->opened + sum(l->refused) + l->call_errors == l->submits,
		      "%s: %llu submits, %llu streams + %llu refusals + %llu failed calls", what,
		      (unsigned long long)l->submits, (unsigned long long)l->opened,
		      (unsigned long long)sum(l->refused), (unsigned long long)l->call_errors);
}

void hs_ledger_check_clean(const struct hs_ledger *l, const char *what)
{
	hs_ledger_check_bounded(l, what);
	ck_assert_msg(atomic_load(&l->completed) == l->submits && l->submits > 0,
		      "%s: %llu of %llu requests completed; first other outcome: %s", what,
		      (unsigned long long)atomic_load(&l->completed),
		      (unsigned long long)l->submits, l->first);
}

/* ---- the node ---- */

void hs_node_record(struct cd *d, struct hs_node *n, uint32_t nchips)
{
	memset(n, 0, sizeof(*n));
	ck_assert_uint_le(nchips, FT_MAX_CHIPS);
	n->sup = d->pid;
	n->nchips = nchips;
	for (uint32_t i = 0; i < nchips; i++) {
		n->worker[i] = cd_worker_pid(d, i);
		ck_assert_int_gt(n->worker[i], 0);
	}
}

void hs_node_alive(const struct hs_node *n, const char *why)
{
	int status = 0;

	if (!n)
		return;
	if (waitpid(n->sup, &status, WNOHANG) == n->sup)
		ck_abort_msg("%s: chipd (pid %d) %s %d (%s)", why, (int)n->sup,
			     WIFSIGNALED(status) ? "died of signal" : "exited with",
			     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
			     WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "status");
	for (uint32_t i = 0; i < n->nchips; i++)
		ck_assert_msg(!ft_pid_gone(n->worker[i]), "%s: chip %u's worker (pid %d) is gone",
			      why, i, (int)n->worker[i]);
}

void hs_node_check(struct cd *d, const struct hs_node *n, bool counters, const char *why)
{
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	int rc;

	hs_node_alive(n, why);
	ck_assert_ptr_nonnull(st);
	rc = chipd_status(d->conn, CD_CALL_MS, st, &err);
	ck_assert_msg(rc == 0, "%s: status: %d %s (%s)", why, rc, chipd_code_name(err.code),
		      err.message);
	ck_assert_uint_eq(st->nchips, n->nchips);
	for (uint32_t i = 0; i < n->nchips; i++) {
		ck_assert_msg((pid_t)st->chips[i].pid == n->worker[i],
			      "%s: chip %u runs worker pid %u (%s), was %d", why, i,
			      st->chips[i].pid, chipd_chip_state_name(st->chips[i].state),
			      (int)n->worker[i]);
	}
	free(st);
	rc = chipd_ping(d->conn, CD_CALL_MS, NULL, &err);
	ck_assert_msg(rc == 0, "%s: ping: %d (%s)", why, rc, err.message);
	if (counters) {
		ck_assert_uint_eq(cd_stat(d, "supervisor", "worker_deaths"), 0);
		ck_assert_uint_eq(cd_stat(d, "supervisor", "worker_starts"), n->nchips);
	}
}

void hs_serve(chipd_conn *conn, uint32_t nchips, uint64_t seed, const char *who)
{
	struct chipd_error err;
	chipd_stream *s;
	int rc;

	for (uint32_t chip = 0; chip < nchips; chip++) {
		rc = hs_submit(conn, HS_TOKENS, 100, seed + chip, 0, (int)chip, CD_CALL_MS, &s,
			       &err);
		ck_assert_msg(rc == 0, "%s: submit to chip %u: %d %s (%s)", who, chip, rc,
			      chipd_code_name(err.code), err.message);
		rc = hs_read_stream(s, HS_TOKENS, seed + chip, CD_CALL_MS, HS_STREAM_MS);
		ck_assert_msg(rc == 0, "%s: the stream on chip %u ended %d (%s)", who, chip, rc,
			      rc > 0 ? chipd_code_name((enum chipd_code)rc) : strerror(-rc));
		chipd_stream_close(s, CD_CALL_MS);
	}
}

void hs_fresh_client(struct cd *d, uint32_t nchips)
{
	struct chipd_error err;
	chipd_conn *conn;
	int rc = chipd_connect(d->instance, &conn, &err);

	ck_assert_msg(rc == 0, "a new client cannot connect: %d %s", rc, err.message);
	hs_serve(conn, nchips, 0x5eed, "a new client");
	chipd_close(conn);
}

/* ---- the region ---- */

void hs_view_attach_client(struct cd *d, struct hs_view *v)
{
	struct proto_node n;

	ft_node_attach(d, &n);
	hs_view_of(v, &n);
}

void hs_view_of(struct hs_view *v, const struct proto_node *n)
{
	memset(v, 0, sizeof(*v));
	v->n = *n;
	v->base = (char *)v->n.region.hdr;
	v->xbase = v->n.xchg.base;
	ck_assert_ptr_nonnull(v->xbase);
	v->xg = v->n.geom.xchg;
	memcpy(&v->desc, v->base + PROTO_NODE_DESC_OFFSET, sizeof(v->desc));
}

void hs_view_attach(struct cd *d, struct hs_view *v)
{
	hs_view_attach_client(d, v);
	v->node_writable = cd_node_make_writable(&v->n);
}

void hs_view_detach(struct hs_view *v)
{
	proto_node_detach(&v->n);
	v->base = NULL;
}

struct ring_hdr *hs_view_ring(struct hs_view *v, uint32_t i)
{
	ck_assert_uint_lt(i, v->desc.nrings);
	return (struct ring_hdr *)(v->base + v->desc.rings_offset +
				   (size_t)i * v->desc.ring_stride);
}

uint32_t hs_view_ring_of(struct hs_view *v, uint64_t id, unsigned ms)
{
	uint64_t end = ft_now_ms() + ms;

	for (;;) {
		for (uint32_t i = 0; i < v->desc.nrings; i++)
			if (atomic_load_explicit(&hs_view_ring(v, i)->request_id,
						 memory_order_relaxed) == id)
				return i;
		ck_assert_msg(ft_now_ms() < end, "no ring carries request %llu after %u ms",
			      (unsigned long long)id, ms);
		usleep(1000);
	}
}

void hs_put32(void *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)p, v, __ATOMIC_RELAXED);
}

void hs_put64(void *p, uint64_t v)
{
	__atomic_store_n((uint64_t *)p, v, __ATOMIC_RELAXED);
}
