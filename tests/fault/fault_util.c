/* fault_util.c - see fault.h. */
#include "fault.h"
#include "fdpass.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FT_NSTATS 512u

#define FT_NAME(name, kind) #name,
static const char *const sup_names[] = {PROTO_SUP_COUNTERS(FT_NAME)};
static const char *const wrk_names[] = {PROTO_WRK_COUNTERS(FT_NAME)};

/* The test program's pid, set before the tcases fork: every instance of a run is
 * named after it, so the run can remove what a failed tcase left. */
static pid_t g_owner;
static unsigned g_seq;

void ft_set_owner(void)
{
	g_owner = getpid();
}

void ft_start(struct cd *d, const char *const *args)
{
	char inst[CHIPD_INSTANCE_MAX];

	snprintf(inst, sizeof(inst), "f%d-%d-%u", (int)g_owner, (int)getpid(), ++g_seq);
	cd_start_as(d, inst, args, NULL);
}

void ft_cleanup(void)
{
	char pre[64], path[512];
	struct dirent *e;
	size_t n, uidlen;
	DIR *dir;

	snprintf(pre, sizeof(pre), "chipd.%u.", (unsigned)geteuid());
	uidlen = strlen(pre);
	snprintf(pre + uidlen, sizeof(pre) - uidlen, "f%d-", (int)g_owner);
	n = strlen(pre);
	dir = opendir("/dev/shm");
	while (dir && (e = readdir(dir))) {
		if (strncmp(e->d_name, pre, n) != 0)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%.256s", e->d_name);
		unlink(path);
		snprintf(path, sizeof(path), "/tmp/chipd-test.%.256s.pid", e->d_name + uidlen);
		unlink(path);
	}
	if (dir)
		closedir(dir);
}

uint64_t ft_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int name_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

void ft_stats(struct cd *d, struct ft_stats *st)
{
	struct chipd_stat *v = calloc(FT_NSTATS, sizeof(*v));
	struct chipd_error err;
	uint32_t n = 0;
	int rc;

	ck_assert_ptr_nonnull(v);
	memset(st, 0, sizeof(*st));
	rc = chipd_stats(d->conn, v, FT_NSTATS, &n, &err);
	ck_assert_msg(rc == 0, "chipd_stats: %d %s", rc, err.message);
	for (uint32_t i = 0; i < n; i++) {
		unsigned chip;
		int k;

		if (strcmp(v[i].block, "supervisor") == 0) {
			k = name_index(sup_names, PROTO_NSUP_CTRS, v[i].name);
			if (k >= 0)
				st->sup[k] = v[i].value;
		} else if (sscanf(v[i].block, "chip%u", &chip) == 1 && chip < FT_MAX_CHIPS) {
			k = name_index(wrk_names, PROTO_NWRK_CTRS, v[i].name);
			if (k >= 0)
				st->chip[chip][k] = v[i].value;
			if (chip + 1 > st->nchips)
				st->nchips = chip + 1;
		}
	}
	free(v);
}

uint64_t ft_chip_sum(const struct ft_stats *st, enum proto_wrk_ctr c)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < st->nchips; i++)
		sum += st->chip[i][c];
	return sum;
}

static bool quiet(const struct ft_stats *st)
{
	if (st->sup[PROTO_SUP_queue_depth] || st->sup[PROTO_SUP_rings_in_use])
		return false;
	for (uint32_t i = 0; i < st->nchips; i++)
		if (st->chip[i][PROTO_WRK_queue_depth] || st->chip[i][PROTO_WRK_active] ||
		    st->chip[i][PROTO_WRK_kv_blocks_used])
			return false;
	/* each worker block balances once its streams have ended */
	return ft_chip_sum(st, PROTO_WRK_admitted) >= ft_chip_sum(st, PROTO_WRK_completed) +
							  ft_chip_sum(st, PROTO_WRK_failed) +
							  ft_chip_sum(st, PROTO_WRK_cancelled);
}

void ft_quiesce(struct cd *d, struct ft_stats *st, unsigned ms)
{
	uint64_t end = ft_now_ms() + ms;

	for (;;) {
		ft_stats(d, st);
		if (quiet(st))
			return;
		if (ft_now_ms() >= end)
			break;
		usleep(10000);
	}
	for (uint32_t i = 0; i < st->nchips; i++)
		fprintf(stderr, "chip%u: queue_depth %llu active %llu kv_blocks_used %llu\n", i,
			(unsigned long long)st->chip[i][PROTO_WRK_queue_depth],
			(unsigned long long)st->chip[i][PROTO_WRK_active],
			(unsigned long long)st->chip[i][PROTO_WRK_kv_blocks_used]);
	ck_abort_msg("node not quiet after %u ms: router queue_depth %llu rings_in_use %llu", ms,
		     (unsigned long long)st->sup[PROTO_SUP_queue_depth],
		     (unsigned long long)st->sup[PROTO_SUP_rings_in_use]);
}

/* Whether the supervisor's err_<code> counted at least what the clients of @l saw
 * end with each code. */
static bool errs_cover(const struct ft_stats *st, const struct ft_ledger *l)
{
	for (int c = 1; c < CHIPD_NCODES; c++)
		if (st->sup[PROTO_SUP_err_bad_request + c - 1] < l->ended[c] + l->refused_by[c])
			return false;
	return true;
}

void ft_check_accounting(struct cd *d, const struct ft_ledger *l, uint64_t lost_by_death)
{
	struct ft_stats st;
	uint64_t adm, end, end_client = 0, errs = 0;

	/* a worker counts a request just after its terminal record is out, the supervisor
	 * counts a stream's end at its next sweep: the clients can be a moment ahead of
	 * the counters, so give them a bounded while */
	for (uint64_t t = ft_now_ms() + 3000;; usleep(10000)) {
		ft_quiesce(d, &st, 10000);
		adm = ft_chip_sum(&st, PROTO_WRK_admitted);
		end = ft_chip_sum(&st, PROTO_WRK_completed) + ft_chip_sum(&st, PROTO_WRK_failed) +
		      ft_chip_sum(&st, PROTO_WRK_cancelled);
		/* the router counts an answer just after the client can read it */
		if ((adm == end + lost_by_death &&
		     ft_chip_sum(&st, PROTO_WRK_completed) == l->completed &&
		     st.sup[PROTO_SUP_requests] - st.sup[PROTO_SUP_answered] <=
			 st.sup[PROTO_SUP_mbox_resets] &&
		     errs_cover(&st, l)) ||
		    ft_now_ms() > t)
			break;
	}
	for (int c = 0; c < CHIPD_NCODES; c++)
		end_client += l->ended[c];
	ck_assert_msg(adm == end + lost_by_death,
		      "workers admitted %llu, ended %llu (completed %llu failed %llu cancelled "
		      "%llu), lost with dead workers %llu",
		      (unsigned long long)adm, (unsigned long long)end,
		      (unsigned long long)ft_chip_sum(&st, PROTO_WRK_completed),
		      (unsigned long long)ft_chip_sum(&st, PROTO_WRK_failed),
		      (unsigned long long)ft_chip_sum(&st, PROTO_WRK_cancelled),
		      (unsigned long long)lost_by_death);
	ck_assert_msg(l->submitted == l->completed + end_client,
		      "client ledger: submitted %llu != completed %llu + ended with error %llu",
		      (unsigned long long)l->submitted, (unsigned long long)l->completed,
		      (unsigned long long)end_client);
	ck_assert_uint_eq(ft_chip_sum(&st, PROTO_WRK_completed), l->completed);
	ck_assert_uint_le(st.sup[PROTO_SUP_answered], st.sup[PROTO_SUP_requests]);
	ck_assert_msg(st.sup[PROTO_SUP_requests] - st.sup[PROTO_SUP_answered] <=
			  st.sup[PROTO_SUP_mbox_resets],
		      "router took %llu requests, answered %llu, resets %llu",
		      (unsigned long long)st.sup[PROTO_SUP_requests],
		      (unsigned long long)st.sup[PROTO_SUP_answered],
		      (unsigned long long)st.sup[PROTO_SUP_mbox_resets]);
	/* err_<code> counts each request once, by how it ended: at least what the
	 * clients saw (all of it when the ledger is complete), never more requests than
	 * the router took */
	for (int c = 1; c < CHIPD_NCODES; c++) {
		uint64_t got = st.sup[PROTO_SUP_err_bad_request + c - 1];
		uint64_t saw = l->ended[c] + l->refused_by[c];

		errs += got;
		ck_assert_msg(l->complete ? got == saw : got >= saw,
			      "err_%s %llu, the clients saw %llu (%llu stream ends, %llu refusals)",
			      chipd_code_name((enum chipd_code)c), (unsigned long long)got,
			      (unsigned long long)saw, (unsigned long long)l->ended[c],
			      (unsigned long long)l->refused_by[c]);
	}
	ck_assert_uint_le(errs, st.sup[PROTO_SUP_requests]);
}

bool ft_pid_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	bool gone = true;

	if (pid <= 0)
		return true;
	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		gone = p[2] == 'Z' || p[2] == 'X';
	fclose(f);
	return gone;
}

bool ft_all_threads_stopped(pid_t pid, unsigned ms)
{
	return tu_all_threads_stopped(pid, ms);
}

void ft_sigstop(pid_t pid)
{
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	ck_assert_msg(ft_all_threads_stopped(pid, 3000), "pid %d did not stop", (int)pid);
}

void ft_stop_clean(struct cd *d, const pid_t *pids, unsigned npids)
{
	int rc = cd_stop(d, SIGTERM, 15000);

	ck_assert_msg(rc == 0, "chipd exit status %d", rc);
	ck_assert_msg(!cd_region_exists(d), "region %s left behind", d->region);
	ck_assert_msg(access(d->pidfile, F_OK) != 0, "pid file %s left behind", d->pidfile);
	for (unsigned i = 0; i < npids; i++) {
		uint64_t end = ft_now_ms() + 3000; /* PDEATHSIG reaches them at once */

		while (!ft_pid_gone(pids[i]) && ft_now_ms() < end)
			usleep(5000);
		ck_assert_msg(ft_pid_gone(pids[i]), "worker %d still running", (int)pids[i]);
	}
}

int ft_submit(struct cd *d, uint32_t tokens, uint32_t host_us, uint32_t device_us, int chip,
	      uint32_t deadline_ms, chipd_stream **s, struct chipd_error *err)
{
	struct chipd_param p[] = {
	    {"tokens", tokens}, {"host_us", host_us}, {"device_us", device_us}};
	struct chipd_request req = {.workload = "synthetic",
				    .params = p,
				    .nparams = 3,
				    .chip = chip,
				    .deadline_ms = deadline_ms};
	uint64_t id;

	return chipd_submit(d->conn, &req, CD_CALL_MS, &id, s, err);
}

enum chipd_code ft_drain(chipd_stream *s, struct ft_ledger *l, unsigned ms)
{
	struct chipd_token tok;
	struct chipd_error err;
	uint32_t n = 0;

	for (;;) {
		int rc = chipd_stream_next(s, &tok, ms, &err);

		if (rc == -EREMOTEIO) {
			enum chipd_code code = err.code;

			ck_assert_int_gt(code, 0);
			ck_assert_int_lt(code, CHIPD_NCODES);
			l->ended[code]++;
			/* exactly once: nothing after the terminal record */
			ck_assert_int_eq(chipd_stream_next(s, &tok, 0, &err), -ENODATA);
			return code;
		}
		ck_assert_msg(rc == 0, "stream %llu: stream_next %d (%s) after %u tokens",
			      (unsigned long long)chipd_stream_id(s), rc, strerror(-rc), n);
		ck_assert_uint_eq(tok.seq, n);
		ck_assert_uint_eq(tok.request, chipd_stream_id(s));
		n++;
		l->tokens++;
		if (tok.final) {
			l->completed++;
			ck_assert_int_eq(chipd_stream_next(s, &tok, 0, &err), -ENODATA);
			return CHIPD_OK;
		}
	}
}

/* ---- raw mailbox ---- */

void ft_node_attach_bare(struct cd *d, struct proto_node *n)
{
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX];
	int rc;

	memset(n, 0, sizeof(*n));
	ck_assert_int_eq(shm_region_name(name, sizeof(name), (unsigned)geteuid(), d->instance), 0);
	rc = proto_node_attach(n, name, &diag);
	ck_assert_msg(rc == 0, "proto_node_attach: %d %s", rc, diag.msg);
}

void ft_node_attach(struct cd *d, struct proto_node *n)
{
	ft_node_attach_bare(d, n);
	(void)ft_node_hello(n);
}

int ft_node_hello(struct proto_node *n)
{
	struct proto_hello h;
	char why[CHIPD_MSG_MAX];
	int rc = proto_hello(n, 5000, &h, why, sizeof(why));

	ck_assert_msg(rc == 0, "hello: %d %s", rc, why);
	return h.fd;
}

enum mbox_state ft_slot_state(struct proto_node *n, uint32_t slot)
{
	return MBOX_CTL_STATE(mbox_ctl(&n->mbox, slot));
}

bool ft_slot_wait(struct proto_node *n, uint32_t slot, enum mbox_state state, uint32_t gen,
		  unsigned ms)
{
	uint64_t end = ft_now_ms() + ms;

	for (;;) {
		uint64_t ctl = mbox_ctl(&n->mbox, slot);

		/* FREE in a later generation, or scrubbed for the region's next client
		 * (FREE in generation 1 again, docs/protocol.md §8.7) */
		if (MBOX_CTL_STATE(ctl) == state &&
		    (state != MBOX_FREE || MBOX_CTL_GEN(ctl) != gen ||
		     ctl == MBOX_CTL(1, 0, MBOX_FREE)))
			return true;
		if (ft_now_ms() >= end)
			return false;
		usleep(1000);
	}
}

struct raw_arg {
	struct cd *d;
	enum ft_raw_stop stop;
	const void *msg;
	uint32_t len;
	int wfd;
	bool stop_sup; /* SIGSTOP the supervisor once connected, before claiming */
};

static int raw_child(void *arg)
{
	struct raw_arg *a = arg;
	struct proto_node n;
	struct mbox_ticket t;
	uint32_t report[2];
	int rc;

	ft_node_attach(a->d, &n); /* with the hello: the router serves connected pids */
	if (a->stop_sup) {
		if (kill(a->d->pid, SIGSTOP) || !ft_all_threads_stopped(a->d->pid, 3000))
			return 6;
	}
	if (mbox_claim(&n.mbox, &t))
		return 2;
	memcpy(mbox_req_buf(&n.mbox, t), a->msg, a->len);
	if (a->stop != FT_RAW_CLAIMED && mbox_post(&n.mbox, t, a->len))
		return 3;
	if (a->stop == FT_RAW_DONE) {
		rc = mbox_wait(&n.mbox, t, shm_now_ns() + 5000ull * 1000000u);
		if (rc)
			return 4;
	}
	report[0] = t.slot;
	report[1] = t.gen;
	/* with its region's memfd: the test watches the slot through it */
	if (fdpass_send(a->wfd, report, sizeof(report), n.xchg.fd, 0) != (ssize_t)sizeof(report))
		return 5;
	for (;;)
		pause(); /* until the test kills it */
}

static void raw_start(struct ft_raw *r, struct cd *d, enum ft_raw_stop stop, const void *msg,
		      uint32_t len, unsigned ms, bool stop_sup)
{
	struct raw_arg a = {d, stop, msg, len, -1, stop_sup};
	uint32_t report[2];
	struct pollfd pfd;
	struct shm_diag diag = {""};
	int p[2], xfd = -1;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p), 0);
	a.wfd = p[1];
	r->pid = tu_fork(raw_child, &a);
	close(p[1]);
	r->fd = p[0];
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	ck_assert_msg(poll(&pfd, 1, (int)ms) == 1 &&
			  fdpass_recv(p[0], report, sizeof(report), &xfd, 0) ==
			      (ssize_t)sizeof(report) &&
			  xfd >= 0,
		      "raw client did not reach its state within %u ms", ms);
	r->slot = report[0];
	r->gen = report[1];
	close(p[0]);
	r->view = malloc(sizeof(*r->view));
	ck_assert_ptr_nonnull(r->view);
	ft_node_attach_bare(d, r->view);
	ck_assert_msg(proto_node_attach_xchg(r->view, xfd, &diag) == 0, "%s", diag.msg);
}

void ft_raw_end(struct ft_raw *r)
{
	if (r->view)
		proto_node_detach(r->view);
	free(r->view);
	r->view = NULL;
}

void ft_raw_start(struct ft_raw *r, struct cd *d, enum ft_raw_stop stop, const void *msg,
		  uint32_t len, unsigned ms)
{
	raw_start(r, d, stop, msg, len, ms, false);
}

void ft_raw_start_sup_stopped(struct ft_raw *r, struct cd *d, enum ft_raw_stop stop,
			      const void *msg, uint32_t len, unsigned ms)
{
	raw_start(r, d, stop, msg, len, ms, true);
}

int ft_raw_call(struct proto_node *n, const void *msg, uint32_t len, enum proto_op op,
		struct proto_msg *m, unsigned ms)
{
	struct mbox *mb = &n->mbox;
	struct mbox_slot *slot;
	struct mbox_ticket t;
	struct proto_error perr;
	const void *ans;
	uint32_t alen;
	uint64_t ctl;
	int rc;

	ck_assert_int_eq(mbox_claim(mb, &t), 0);
	memcpy(mbox_req_buf(mb, t), msg, len < mbox_req_cap(mb) ? len : mbox_req_cap(mb));
	if (len <= mbox_req_cap(mb)) {
		ck_assert_int_eq(mbox_post(mb, t, len), 0);
	} else {
		/* a hostile client: a length beyond the buffer, posted by hand (4.4) */
		slot = (struct mbox_slot *)(mb->slots + (size_t)t.slot * mb->stride);
		atomic_store_explicit(&slot->req_len, len, memory_order_relaxed);
		ctl = MBOX_CTL(t.gen, getpid(), MBOX_CLAIMED);
		ck_assert(atomic_compare_exchange_strong(&slot->ctl, &ctl,
							 MBOX_CTL(t.gen, getpid(), MBOX_POSTED)));
		atomic_fetch_or(&mb->attention[t.slot / 64], 1ull << (t.slot % 64));
		shm_wake_all(&mb->hdr->doorbell);
	}
	rc = mbox_wait(mb, t, shm_now_ns() + (uint64_t)ms * 1000000u);
	ck_assert_msg(rc == 0, "raw call: mbox_wait %d (%s)", rc, strerror(-rc));
	rc = mbox_response(mb, t, &ans, &alen);
	if (rc == 0) {
		int d = proto_decode_answer(op, ans, alen, m, &perr);

		ck_assert_msg(d == 0, "answer does not decode: %s", perr.message);
	}
	ck_assert_int_eq(mbox_release(mb, t), 0);
	return rc;
}

size_t ft_encode(const struct proto_msg *m, void *buf, size_t cap)
{
	struct proto_error err;
	size_t len = 0;

	ck_assert_msg(proto_encode_request(m, buf, cap, &len, &err) == 0, "encode: %s",
		      err.message);
	return len;
}
