/* check_slots.c - each client's mailbox is its own (node layout 4, docs/protocol.md
 * §8.7, §9.3): a real chipd (one sim chip) and
 * - a connected client that claims every slot of its mailbox and holds them: exactly
 *   --max-client-slots of them, its next claim fails, another client's ping and submit
 *   go through at once, and nothing is taken back from it (its slots are its own);
 * - one connection whose calls fill its mailbox: libchipd's next call is a local
 *   queue_full, retryable, naming max-client-slots, and succeeds once a slot is back;
 *   8 threads of one connection with 2 slots: only successes and that queue_full;
 * - a slot a client writes RESET by hand, without raising attention: acknowledged
 *   (FREE, next generation, one mbox_resets);
 * - a client that writes every byte of its region and exits: the next client gets
 *   that region (the same memfd) scrubbed: every slot FREE in generation 1, every
 *   byte of the slots, the bitmap and the consumer lines zero;
 * - two clients: two regions (other memfds, no name anywhere in /dev/shm), so neither
 *   can map the other's; and when not root, chipd's and its workers' descriptors
 *   cannot be opened through /proc (chipd is not dumpable).
 */
#include "fault.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The supervisor's tick when the node is idle (SUP_IDLE_TICK_MS): its sweep runs at
 * least this often. */
#define IDLE_TICK_MS 250u

/* Reads exactly @len bytes of @fd within @ms; false on end of file or timeout. */
static bool read_all(int fd, void *buf, size_t len, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, ms) != 1)
			return false;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

static _Atomic uint64_t *ctl_word(struct proto_node *n, uint32_t i)
{
	return &((struct mbox_slot *)(void *)(n->mbox.slots + (size_t)i * n->mbox.stride))->ctl;
}

/* Connects, claims every slot of its own mailbox, reports how many (and its ticket of
 * the first) on @wfd, waits for a byte on @rfd, then posts a ping in its first slot and
 * reports the answer's code (0 ok, else the error code or -errno); sleeps until killed. */
struct hog {
	struct cd *d;
	int wfd, rfd;
};

static int hog_main(void *arg)
{
	struct hog *h = arg;
	struct proto_msg *m = malloc(sizeof(*m));
	struct mbox_ticket t[PROTO_NODE_SLOTS + 1], extra;
	struct proto_error pe;
	struct proto_node n;
	int32_t report[3];
	const void *ans;
	uint32_t alen, count = 0;
	size_t len;
	char go;

	if (!m)
		return 2;
	ft_node_attach(h->d, &n);
	while (count < PROTO_NODE_SLOTS && mbox_claim(&n.mbox, &t[count]) == 0)
		count++;
	report[0] = (int32_t)count;
	report[1] = mbox_claim(&n.mbox, &extra); /* one more: -EAGAIN */
	report[2] = 0;
	if (write(h->wfd, report, sizeof(report)) != (ssize_t)sizeof(report))
		return 3;
	if (read(h->rfd, &go, 1) != 1)
		return 4;
	proto_msg_init(m, PROTO_OP_PING);
	report[2] = -1;
	len = ft_encode(m, mbox_req_buf(&n.mbox, t[0]), mbox_req_cap(&n.mbox));
	if (mbox_post(&n.mbox, t[0], (uint32_t)len) == 0 &&
	    (report[2] = mbox_wait(&n.mbox, t[0], shm_deadline_in(5000ull * SHM_NS_PER_MS))) == 0 &&
	    mbox_response(&n.mbox, t[0], &ans, &alen) == 0 &&
	    proto_decode_answer(PROTO_OP_PING, ans, alen, m, &pe) == 0)
		report[2] = m->ok ? 0 : (int32_t)m->err.code;
	free(m);
	if (write(h->wfd, report, sizeof(report)) != (ssize_t)sizeof(report))
		return 5;
	for (;;)
		pause();
}

START_TEST(hog_claiming_its_mailbox_starves_nobody)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "4", NULL};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	struct hog h;
	struct cd d;
	uint64_t resets0;
	int32_t report[3];
	int up[2], down[2];
	char go = 1;
	pid_t pid;

	ft_start(&d, args);
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	h = (struct hog){&d, up[1], down[0]};
	pid = tu_fork(hog_main, &h);
	close(up[1]);
	close(down[0]);
	ck_assert_msg(read_all(up[0], report, sizeof(report), 10000), "the hog did not report");
	ck_assert_int_eq(report[0], 4); /* its own mailbox: --max-client-slots slots */
	ck_assert_int_eq(report[1], -EAGAIN);
	/* the others are served at once: the hog's slots are in its region alone */
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, &err), 0);
	ck_assert_msg(ft_submit(&d, 2, 0, 0, -1, 0, &s, &err) == 0, "submit: %s", err.message);
	ck_assert_uint_eq(cd_drain_stream(s, &code, 5000), 2);
	ck_assert_int_eq(code, CHIPD_OK);
	chipd_stream_close(s, 1000);
	/* held for several sweeps: nothing is taken back from it */
	tu_sleep_ms(3 * IDLE_TICK_MS);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0);
	ck_assert_int_eq(write(down[1], &go, 1), 1);
	ck_assert_msg(read_all(up[0], report, sizeof(report), 10000), "the hog did not report");
	ck_assert_int_eq(report[2], 0); /* its own first slot is served */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 0);
	tu_kill(pid);
	close(up[0]);
	close(down[1]);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- a connection whose calls fill its own mailbox ---- */

struct caller {
	chipd_conn *c;
	int rc;
};

static void *ping_long(void *arg)
{
	struct caller *k = arg;

	/* until it has a slot: the test's own probe may hold one for a moment */
	while ((k->rc = chipd_ping(k->c, 10000, NULL, NULL)) == -EAGAIN)
		usleep(200);
	return NULL;
}

START_TEST(full_mailbox_is_a_retryable_queue_full)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "2", NULL};
	struct caller k[2];
	pthread_t th[2];
	struct chipd_error err;
	chipd_conn *c;
	struct cd d;
	uint64_t t0;
	int rc;

	ft_start(&d, args);
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), 0);
	/* the router stopped: the two calls hold both slots of the connection, posted */
	tu_sigstop(d.pid);
	for (int i = 0; i < 2; i++) {
		k[i] = (struct caller){c, 1};
		ck_assert_int_eq(pthread_create(&th[i], NULL, ping_long, &k[i]), 0);
	}
	/* until both posted, a third call may still get a slot (and time out, giving it
	 * back); then it is refused at once, by libchipd, without a round trip */
	for (t0 = ft_now_ms();; usleep(1000)) {
		rc = chipd_ping(c, 20, NULL, &err);
		if (rc == -EAGAIN)
			break;
		usleep(2000); /* room for the two callers to claim */
		ck_assert_msg(rc == -ETIMEDOUT, "third ping: %d %s", rc, err.message);
		ck_assert_msg(ft_now_ms() - t0 < 5000, "the mailbox never filled");
	}
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "max-client-slots=2"), "%s", err.message);
	/* another connection is not affected, even now: its own mailbox is empty (it
	 * times out only because the router is stopped) */
	ck_assert_int_eq(chipd_ping(d.conn, 20, NULL, &err), -ETIMEDOUT);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(k[i].rc, 0);
	}
	ck_assert_int_eq(chipd_ping(c, 5000, NULL, &err), 0); /* the retry succeeds */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 0); /* local */
	chipd_close(c);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

#define PINGERS	   8
#define PINGS_EACH 50u

struct pinger {
	struct cd *d;
	_Atomic uint32_t ok, local; /* successes; all slots busy (libchipd's own) */
	char fail[200];
};

/* Pings until PINGS_EACH succeeded; any answer but success or the local queue_full
 * fails the thread; bounded by 30 s. */
static void *pinger_main(void *arg)
{
	struct pinger *p = arg;
	struct chipd_error err;
	uint64_t t0 = ft_now_ms();

	while (p->ok < PINGS_EACH) {
		int rc = chipd_ping(p->d->conn, 5000, NULL, &err);

		if (rc == 0) {
			p->ok++;
			continue;
		}
		if (ft_now_ms() - t0 > 30000) {
			snprintf(p->fail, sizeof(p->fail), "not done after 30 s");
			break;
		}
		if (rc == -EAGAIN && err.code == CHIPD_E_QUEUE_FULL && err.retryable &&
		    strstr(err.message, "max-client-slots=2")) {
			p->local++;
		} else {
			snprintf(p->fail, sizeof(p->fail), "ping: %d %s (code %d)", rc, err.message,
				 (int)err.code);
			break;
		}
		usleep(500);
	}
	return NULL;
}

START_TEST(threads_past_the_bound_get_queue_full_then_succeed)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "2", NULL};
	struct pinger p[PINGERS];
	pthread_t th[PINGERS];
	struct cd d;
	uint64_t resets0;

	ft_start(&d, args);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	for (int i = 0; i < PINGERS; i++) {
		p[i] = (struct pinger){.d = &d};
		ck_assert_int_eq(pthread_create(&th[i], NULL, pinger_main, &p[i]), 0);
	}
	for (int i = 0; i < PINGERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(!p[i].fail[0], "thread %d: %s", i, p[i].fail);
		ck_assert_uint_eq(p[i].ok, PINGS_EACH);
	}
	/* every refusal was libchipd's own, with no round trip; nothing taken back */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

START_TEST(forged_reset_is_acknowledged)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct mbox_ticket t;
	struct proto_node n;
	struct cd d;
	uint64_t resets0, c;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	ck_assert_int_eq(mbox_claim(&n.mbox, &t), 0);
	/* RESET written by hand, no attention raised: only the reaper can see it */
	c = mbox_ctl(&n.mbox, t.slot);
	atomic_store(ctl_word(&n, t.slot), MBOX_CTL(t.gen, MBOX_CTL_PID(c), MBOX_RESET));
	ck_assert_msg(ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 3000),
		      "the forged RESET of slot %u stuck", t.slot);
	/* counted just after the acknowledgement freed the slot */
	ck_assert_uint_eq(cd_stat_reaches(&d, "supervisor", "mbox_resets", resets0 + 1, 3000),
			  resets0 + 1);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- a region's next client finds it scrubbed ---- */

struct scribe {
	struct cd *d;
	int wfd;
};

/* The inode of the region @n maps. */
static uint64_t region_ino(const struct proto_node *n)
{
	struct stat st;

	return fstat(n->xchg.fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Connects, claims and posts nothing, writes 0xa5 over every byte of its region and
 * reports the region's inode; exits. */
static int scribble_main(void *arg)
{
	struct scribe *s = arg;
	struct proto_node n;
	uint64_t ino;

	ft_node_attach(s->d, &n);
	ino = region_ino(&n);
	memset(n.xchg.base, 0xa5, n.xchg.size);
	return write(s->wfd, &ino, sizeof(ino)) == (ssize_t)sizeof(ino) ? 0 : 2;
}

/* Whether [@p, @p + @len) is all zero. */
static bool zero(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/* Connects (retrying while every region is still being reclaimed), and checks that its
 * region is the scribbler's (@arg: its inode) and fresh. Returns 0 or the failed step. */
static int fresh_main(void *arg)
{
	struct scribe *s = arg;
	struct proto_node n;
	struct proto_hello h;
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX], why[CHIPD_MSG_MAX];
	uint64_t ino, t0 = ft_now_ms();
	static struct proto_msg msg; /* about 41 KiB: not for the stack */
	unsigned char buf[256];
	const struct mbox *mb;
	size_t len;
	int rc;

	if (read(s->wfd, &ino, sizeof(ino)) != (ssize_t)sizeof(ino))
		return 2;
	if (shm_region_name(name, sizeof(name), (unsigned)geteuid(), s->d->instance) ||
	    proto_node_attach(&n, name, &diag))
		return 3;
	while ((rc = proto_hello(&n, 5000, &h, why, sizeof(why))) != 0) {
		/* the gone client's region comes back once scrubbed: a refusal meanwhile
		 * is queue_full, retryable */
		if (rc != -EREMOTEIO || h.err.code != CHIPD_E_QUEUE_FULL ||
		    ft_now_ms() - t0 > 5000)
			return 4;
		usleep(2000);
	}
	mb = &n.mbox;
	if (region_ino(&n) != ino)
		return 5; /* not the same region: the test proves nothing */
	for (uint32_t i = 0; i < mb->nslots; i++) {
		const char *slot = mb->slots + (size_t)i * mb->stride;

		if (mbox_ctl(mb, i) != MBOX_CTL(1, 0, MBOX_FREE) ||
		    !zero(slot + sizeof(uint64_t), mb->stride - sizeof(uint64_t)))
			return 6;
	}
	for (uint32_t w = 0; w < mb->words; w++)
		if (atomic_load(&mb->attention[w]))
			return 7;
	if (!zero(n.xchg.base + n.geom.xchg.cons_offset,
		  (size_t)n.geom.xchg.nrings * n.geom.xchg.cons_stride))
		return 8;
	/* and it is served */
	proto_msg_init(&msg, PROTO_OP_PING);
	len = ft_encode(&msg, buf, sizeof(buf));
	if (ft_raw_call(&n, buf, (uint32_t)len, PROTO_OP_PING, &msg, 5000) != 0 || !msg.ok)
		return 9;
	return 0;
}

START_TEST(region_scrubbed_before_its_next_client)
{
	/* two regions: the test's own connection holds one, the scribbler gets the other
	 * and its successor the same */
	static const char *const args[] = {"--chips", "1", "--max-clients", "2", NULL};
	struct scribe s;
	struct cd d;
	int p[2];

	ft_start(&d, args);
	ck_assert_int_eq(pipe(p), 0);
	s = (struct scribe){&d, p[1]};
	ck_assert_int_eq(tu_wait(tu_fork(scribble_main, &s), 10000), 0);
	s.wfd = p[0];
	ck_assert_int_eq(tu_wait(tu_fork(fresh_main, &s), 15000), 0);
	close(p[0]);
	close(p[1]);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- no client reaches another's region ---- */

/* Whether the descriptors of process @pid can be opened through /proc. */
static bool proc_fds_open(pid_t pid)
{
	char path[64];
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return false;
	closedir(dir);
	return true;
}

static int outsider_main(void *arg)
{
	struct cd *d = arg;

	/* a process of chipd's uid that is not root: chipd is not dumpable, so /proc
	 * keeps its descriptors (every client region's memfd) from it */
	return proc_fds_open(d->pid) ? 1 : 0;
}

START_TEST(no_client_reaches_another_region)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct proto_node a, b;
	struct stat sa, sb;
	char link[256], path[64];
	struct dirent *e;
	struct cd d;
	DIR *dir;
	ssize_t n;

	ft_start(&d, args);
	ft_node_attach(&d, &a);
	ft_node_attach(&d, &b); /* a second connection: a second region */
	ck_assert_int_eq(fstat(a.xchg.fd, &sa), 0);
	ck_assert_int_eq(fstat(b.xchg.fd, &sb), 0);
	ck_assert(sa.st_ino != sb.st_ino);
	ck_assert_ptr_ne(a.xchg.base, b.xchg.base);
	/* a write into one is not in the other */
	memset(a.xchg.base + a.geom.xchg.cons_offset, 0x77, a.geom.xchg.cons_stride);
	ck_assert(*(unsigned char *)(b.xchg.base + b.geom.xchg.cons_offset) != 0x77);
	/* anonymous memfds: no name to open, in /dev/shm or anywhere */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a.xchg.fd);
	n = readlink(path, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_msg(strncmp(link, "/memfd:", 7) == 0, "%s", link);
	dir = opendir("/dev/shm");
	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)))
		ck_assert_msg(!strstr(e->d_name, "memfd") && !strstr(e->d_name, "chipd-client"),
			      "%s", e->d_name);
	closedir(dir);
	if (geteuid() == 0)
		fprintf(stderr, "no_client_reaches_another_region: root reads any /proc: the "
				"descriptor check needs a non-root run\n");
	else
		ck_assert_int_eq(tu_wait(tu_fork(outsider_main, &d), 5000), 0);
	proto_node_detach(&a);
	proto_node_detach(&b);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"hog_claiming_its_mailbox_starves_nobody", hog_claiming_its_mailbox_starves_nobody},
	    {"full_mailbox_is_a_retryable_queue_full", full_mailbox_is_a_retryable_queue_full},
	    {"threads_past_the_bound_get_queue_full_then_succeed",
	     threads_past_the_bound_get_queue_full_then_succeed},
	    {"forged_reset_is_acknowledged", forged_reset_is_acknowledged},
	    {"region_scrubbed_before_its_next_client", region_scrubbed_before_its_next_client},
	    {"no_client_reaches_another_region", no_client_reaches_another_region},
	};
	Suite *s = suite_create("slots");
	int rc;

	ft_set_owner();
	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 60);
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
