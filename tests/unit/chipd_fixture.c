/* chipd_fixture.c - see chipd_fixture.h. */
#include "chipd_fixture.h"
#include "testutil.h"

#include "client_internal.h"
#include "hello.h"
#include "ring.h"
#include "node.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned g_seq;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

pid_t cd_spawn_as(struct cd *d, const char *instance, const char *const *args,
		  const char *const *env, int *notify_fd)
{
	const char *argv[48];
	int p[2], n = 0;
	pid_t parent = getpid(), pid;

	memset(d, 0, sizeof(*d));
	if (instance)
		snprintf(d->instance, sizeof(d->instance), "%s", instance);
	else
		snprintf(d->instance, sizeof(d->instance), "t%d-%u", (int)getpid(), ++g_seq);
	snprintf(d->pidfile, sizeof(d->pidfile), "/tmp/chipd-test.%s.pid", d->instance);
	snprintf(d->region, sizeof(d->region), "/dev/shm/chipd.%u.%s", (unsigned)getuid(),
		 d->instance);
	ck_assert_int_eq(pipe(p), 0);
	argv[n++] = CHIPD_BIN;
	argv[n++] = "--foreground";
	argv[n++] = "--instance";
	argv[n++] = d->instance;
	argv[n++] = "--pidfile";
	argv[n++] = d->pidfile;
	argv[n++] = "--notify-fd";
	argv[n++] = "3";
	for (; args && *args && n < 46; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (getppid() != parent)
			_exit(127);
		close(p[0]);
		if (p[1] != 3) {
			dup2(p[1], 3);
			close(p[1]);
		}
		for (; env && *env; env++)
			putenv((char *)*env);
		execv(CHIPD_BIN, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	d->pid = pid;
	if (notify_fd)
		*notify_fd = p[0];
	else
		close(p[0]);
	return pid;
}

pid_t cd_spawn(struct cd *d, const char *const *args, const char *const *env, int *notify_fd)
{
	return cd_spawn_as(d, NULL, args, env, notify_fd);
}

void cd_start_as(struct cd *d, const char *instance, const char *const *args,
		 const char *const *env)
{
	struct chipd_error err;
	struct pollfd pfd;
	char c;
	int fd, rc;

	cd_spawn_as(d, instance, args, env, &fd);
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	rc = poll(&pfd, 1, CD_READY_MS);
	ck_assert_msg(rc == 1 && read(fd, &c, 1) == 1 && c == '\n',
		      "chipd %s did not become ready within %u ms", d->instance, CD_READY_MS);
	close(fd);
	/* the hello is start-up too: a sanitizer build on a loaded machine may take its
	 * answer past the library's default wait */
	rc = chipd_connect_timeout(d->instance, CD_READY_MS, &d->conn, &err);
	ck_assert_msg(rc == 0, "connect %s: %s", d->instance, err.message);
}

void cd_start(struct cd *d, const char *const *args, const char *const *env)
{
	cd_start_as(d, NULL, args, env);
}

int cd_stop(struct cd *d, int sig, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	int status;

	chipd_close(d->conn);
	d->conn = NULL;
	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	while (now_ms() < end) {
		pid_t r = waitpid(d->pid, &status, WNOHANG);

		if (r == d->pid) {
			d->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(2000);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &status, 0);
	d->pid = 0;
	return -1;
}

pid_t cd_worker_pid(struct cd *d, uint32_t chip)
{
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	pid_t pid;

	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(chipd_status(d->conn, CD_CALL_MS, st, &err), 0);
	ck_assert_uint_lt(chip, st->nchips);
	pid = (pid_t)st->chips[chip].pid;
	free(st);
	return pid;
}

bool cd_wait_chip(struct cd *d, uint32_t chip, enum chipd_chip_state state, pid_t not_pid,
		  unsigned ms)
{
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	uint64_t end = now_ms() + ms;
	bool ok = false;

	ck_assert_ptr_nonnull(st);
	while (!ok && now_ms() < end) {
		if (chipd_status(d->conn, CD_CALL_MS, st, &err) == 0 && chip < st->nchips)
			ok = st->chips[chip].state == state &&
			     (not_pid == 0 ||
			      ((pid_t)st->chips[chip].pid != not_pid && st->chips[chip].pid != 0));
		if (!ok)
			usleep(5000);
	}
	free(st);
	return ok;
}

chipd_stream *cd_submit(struct cd *d, uint32_t tokens, uint32_t device_us)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"device_us", device_us}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint64_t id;
	int rc = chipd_submit(d->conn, &req, CD_CALL_MS, &id, &s, &err);

	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	return s;
}

uint32_t cd_drain_stream(chipd_stream *s, enum chipd_code *code, unsigned ms)
{
	return cd_drain_stream_from(s, 0, code, ms);
}

uint32_t cd_drain_stream_from(chipd_stream *s, uint32_t from, enum chipd_code *code,
			      unsigned ms)
{
	struct chipd_token tok;
	struct chipd_error err;
	uint32_t n = 0;
	int rc;

	*code = CHIPD_E_INTERNAL;
	for (;;) {
		rc = chipd_stream_next(s, &tok, ms, &err);
		if (rc == -EREMOTEIO) {
			*code = err.code;
			return n;
		}
		ck_assert_msg(rc == 0, "stream_next: %d (%s)", rc, strerror(-rc));
		ck_assert_uint_eq(tok.seq, from + n);
		n++;
		if (tok.final) {
			*code = CHIPD_OK;
			return n;
		}
	}
}

int cd_submit_to(struct cd *d, const char *wl, int32_t chip, const struct chipd_param *p,
		 uint32_t np, chipd_stream **s, struct chipd_error *err)
{
	struct chipd_request req = {.workload = wl, .params = p, .nparams = np, .chip = chip};
	uint64_t id;

	return chipd_submit(d->conn, &req, CD_CALL_MS, &id, s, err);
}

void cd_expect_stream(chipd_stream *s, uint32_t tokens, enum chipd_code code, unsigned ms)
{
	enum chipd_code got;

	ck_assert_uint_eq(cd_drain_stream(s, &got, ms), tokens);
	ck_assert_msg(got == code, "stream ended %s, not %s", chipd_code_name(got),
		      chipd_code_name(code));
	chipd_stream_close(s, CD_CALL_MS);
}

uint64_t cd_stat(struct cd *d, const char *block, const char *name)
{
	struct chipd_stat *st = calloc(512, sizeof(*st));
	struct chipd_error err;
	uint64_t v = UINT64_MAX;
	uint32_t n = 0;

	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(chipd_stats(d->conn, st, 512, &n, &err), 0);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(st[i].block, block) == 0 && strcmp(st[i].name, name) == 0)
			v = st[i].value;
	free(st);
	ck_assert_msg(v != UINT64_MAX, "no counter %s.%s", block, name);
	return v;
}

uint64_t cd_stat_reaches(struct cd *d, const char *block, const char *name, uint64_t want,
			 unsigned ms)
{
	uint64_t end = now_ms() + ms, v;

	while ((v = cd_stat(d, block, name)) < want && now_ms() < end)
		usleep(2000);
	return v;
}

bool cd_listed(struct cd *d, const char *name, struct chipd_workload *out)
{
	struct chipd_workload *wl = calloc(64, sizeof(*wl));
	struct chipd_error err;
	uint32_t n = 0;
	bool found = false;

	ck_assert_ptr_nonnull(wl);
	ck_assert_msg(chipd_workloads(d->conn, CD_CALL_MS, wl, 64, &n, &err) == 0, "%s",
		      err.message);
	for (uint32_t i = 0; i < n && !found; i++)
		if (strcmp(wl[i].name, name) == 0) {
			found = true;
			if (out)
				*out = wl[i];
		}
	free(wl);
	return found;
}

void cd_expect_counts(struct cd *d, const char *name, uint64_t requests, uint64_t completed,
		      uint64_t failed, uint64_t cancelled, uint64_t tokens)
{
	struct chipd_workload w;

	ck_assert_msg(cd_listed(d, name, &w), "%s is not listed", name);
	ck_assert_msg(w.requests == requests && w.completed == completed && w.failed == failed &&
			  w.cancelled == cancelled && w.tokens == tokens,
		      "%s: requests %llu completed %llu failed %llu cancelled %llu tokens %llu, "
		      "expected %llu %llu %llu %llu %llu",
		      name, (unsigned long long)w.requests, (unsigned long long)w.completed,
		      (unsigned long long)w.failed, (unsigned long long)w.cancelled,
		      (unsigned long long)w.tokens, (unsigned long long)requests,
		      (unsigned long long)completed, (unsigned long long)failed,
		      (unsigned long long)cancelled, (unsigned long long)tokens);
}

void cd_callables_dir(char *dir, size_t cap, const char *tag, const char *from,
		      const char *pattern)
{
	const char *t = getenv("TMPDIR");
	char cmd[768];

	snprintf(dir, cap, "%s/chipd-%s.XXXXXX", t && *t ? t : "/tmp", tag);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp %s/%s '%s'/ && chmod 0755 '%s'/*.so", from, pattern, dir,
		 dir);
	ck_assert_int_eq(system(cmd), 0);
}

void cd_remove_dir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

bool cd_answers_new_connections(struct cd *d, uint32_t ms, uint64_t for_ms)
{
	uint64_t until = now_ms() + for_ms;

	do {
		struct chipd_error err;
		chipd_conn *c;
		bool ok;

		if (chipd_connect_timeout(d->instance, ms, &c, &err) != 0)
			return false;
		ok = chipd_ping(c, ms, NULL, &err) == 0;
		chipd_close(c);
		if (!ok)
			return false;
		usleep(20 * 1000);
	} while (now_ms() < until);
	return true;
}

bool cd_region_exists(const struct cd *d)
{
	struct stat st;

	return stat(d->region, &st) == 0;
}

void cd_node_attach(struct cd *d, struct proto_node *n)
{
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX], why[CHIPD_MSG_MAX];
	struct proto_hello h;

	ck_assert_int_eq(shm_region_name(name, sizeof(name), (unsigned)geteuid(), d->instance), 0);
	ck_assert_msg(proto_node_attach(n, name, &diag) == 0, "%s", diag.msg);
	ck_assert_msg(proto_hello(n, CD_CALL_MS, &h, why, sizeof(why)) == 0, "hello: %s", why);
}

void cd_op_raw(struct cd *d, struct proto_msg *m)
{
	unsigned char *buf = malloc(PROTO_RESP_MAX);
	enum proto_op op = m->op;
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX], why[CHIPD_MSG_MAX];
	struct proto_error perr;
	struct proto_hello h;
	struct proto_node n;
	uint32_t alen;
	size_t len;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(shm_region_name(name, sizeof(name), (unsigned)geteuid(), d->instance), 0);
	ck_assert_msg(proto_node_attach(&n, name, &diag) == 0, "%s", diag.msg);
	/* the supervisor serves connected processes only (docs/protocol.md §9) */
	ck_assert_msg(proto_hello(&n, CD_CALL_MS, &h, why, sizeof(why)) == 0, "hello: %s", why);
	ck_assert_int_eq(proto_encode_request(m, buf, PROTO_REQ_MAX, &len, &perr), 0);
	ck_assert_int_eq(mbox_call(&n.mbox, buf, (uint32_t)len, buf, PROTO_RESP_MAX, &alen,
				   shm_deadline_in(CD_CALL_MS * SHM_NS_PER_MS)),
			 0);
	ck_assert_int_eq(proto_decode_answer(op, buf, alen, m, &perr), 0);
	close(h.fd);
	proto_node_detach(&n);
	free(buf);
}

bool cd_node_make_writable(struct proto_node *n)
{
	char path[SHM_NAME_MAX + 16];
	void *p;
	int fd;

	if (geteuid() != 0)
		return false;
	snprintf(path, sizeof(path), "/dev/shm%s", n->region.name);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	p = mmap(n->region.hdr, n->region.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 0);
	ck_assert_ptr_eq(p, n->region.hdr);
	close(fd);
	return true;
}

static void *reopener_main(void *arg)
{
	struct cd_reopener *o = arg;
	struct ring_hdr *h = o->s->ring.hdr;
	struct ring_cons *c = o->s->ring.cons;

	while (!atomic_load_explicit(&o->stop, memory_order_relaxed) &&
	       atomic_load_explicit(&h->generation, memory_order_acquire) == o->s->gen) {
		atomic_store_explicit(&c->closed, 0, memory_order_relaxed);
		atomic_store_explicit(&c->tail, atomic_load_explicit(&h->head, memory_order_acquire),
				      memory_order_release);
		usleep(20);
	}
	return NULL;
}

void cd_reopener_start(struct cd_reopener *o, chipd_stream *s)
{
	o->s = s;
	atomic_init(&o->stop, false);
	ck_assert_int_eq(pthread_create(&o->th, NULL, reopener_main, o), 0);
}

void cd_reopener_stop(struct cd_reopener *o)
{
	atomic_store_explicit(&o->stop, true, memory_order_relaxed);
	ck_assert_int_eq(pthread_join(o->th, NULL), 0);
}
