/* client_errors.c - libchipd's failures: every connect error distinct and
 * explained, instance discovery order, a server that never answers (timeout, then
 * the acknowledged reset frees the slot for the next call), a hello never answered
 * (the connect's own timeout), a handshake socket whose backlog is full (the same
 * timeout), a full mailbox, requests refused before they are sent. */
#include "client_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define T_MS	    2000u
#define FOREIGN_UID 12345

/* Asserts that connecting to @instance fails with @rc and a message holding @needle. */
static void expect_connect_fails(const char *instance, int rc, const char *needle)
{
	struct chipd_error err;
	chipd_conn *c = NULL;

	ck_assert_int_eq(chipd_connect(instance, &c, &err), rc);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(err.errnum, rc);
	ck_assert_msg(strstr(err.message, needle), "\"%s\" lacks \"%s\"", err.message, needle);
}

static void shm_file(char *out, size_t cap, const struct cx *x)
{
	snprintf(out, cap, "/dev/shm%s", x->name);
}

START_TEST(connect_missing_instance_is_enoent)
{
	expect_connect_fails("chipd-test-nobody-here", -ENOENT, "no chipd instance");
	expect_connect_fails("bad/name", -EINVAL, "bad instance name");
}
END_TEST

/* In a child as uid FOREIGN_UID naming root as chipd's user (CHIPD_USER=0): connecting
 * to root's private region fails -EACCES with the whole explanation, its last words
 * included (the message is CHIPD_MSG_MAX bytes). Root only. */
static void expect_private_refusal_whole(const char *instance)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct chipd_error err;
		chipd_conn *c = NULL;
		int rc;

		if (setenv("CHIPD_USER", "0", 1) ||
		    setresgid(FOREIGN_UID, FOREIGN_UID, FOREIGN_UID) ||
		    setresuid(FOREIGN_UID, FOREIGN_UID, FOREIGN_UID))
			_exit(2);
		rc = chipd_connect(instance, &c, &err);
		if (rc != -EACCES || !strstr(err.message, instance)) {
			fprintf(stderr, "rc %d: %s\n", rc, err.message);
			_exit(3);
		}
		if (!strstr(err.message, "may not use it (no chipd --allow-group)")) {
			fprintf(stderr, "cut short: %s\n", err.message);
			_exit(4);
		}
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

START_TEST(connect_wrong_mode_or_owner_refused)
{
	char path[96];
	struct cx x;

	cx_region(&x);
	shm_file(path, sizeof(path), &x);
	ck_assert_int_eq(chmod(path, 0640), 0);
	expect_connect_fails(x.instance, -EACCES, "wrong owner or mode");
	ck_assert_int_eq(chmod(path, 0600), 0);
	if (geteuid() == 0) { /* only root can give a file away */
		expect_private_refusal_whole(x.instance);
		ck_assert_int_eq(chown(path, FOREIGN_UID, FOREIGN_UID), 0);
		expect_connect_fails(x.instance, -EPERM, "wrong owner or mode");
	}
	cx_region_remove(&x);
}
END_TEST

START_TEST(connect_version_mismatch_refused)
{
	struct cx x;

	cx_region(&x);
	x.node.desc->version = PROTO_NODE_VERSION + 1;
	expect_connect_fails(x.instance, -EPROTONOSUPPORT, "version mismatch");
	x.node.desc->version = PROTO_NODE_VERSION;
	x.node.desc->wire_version = 2;
	expect_connect_fails(x.instance, -EPROTONOSUPPORT, "wire version 2");
	x.node.desc->wire_version = 1;
	x.node.region.hdr->layout_version = SHM_LAYOUT_VERSION + 1;
	expect_connect_fails(x.instance, -EPROTONOSUPPORT, "version mismatch");
	cx_region_remove(&x);
}
END_TEST

START_TEST(connect_corrupt_descriptor_refused)
{
	struct cx x;
	uint32_t saved;

	cx_region(&x);
	x.node.desc->magic ^= 1;
	expect_connect_fails(x.instance, -EBADMSG, "bad descriptor magic");
	x.node.desc->magic ^= 1;
	saved = x.node.desc->mbox_offset;
	/* the mailbox is in the exchange region, checked against its size and parts */
	x.node.desc->mbox_offset = (uint32_t)x.node.desc->xchg_size; /* past the end */
	expect_connect_fails(x.instance, -EMSGSIZE, "client mailbox");
	x.node.desc->mbox_offset = x.node.desc->cons_offset; /* overlaps the lines after it */
	expect_connect_fails(x.instance, -EMSGSIZE, "overlaps");
	x.node.desc->mbox_offset = saved + 8; /* misaligned */
	expect_connect_fails(x.instance, -EMSGSIZE, "misaligned");
	x.node.desc->mbox_offset = saved;
	x.node.desc->nrings = 100000;
	expect_connect_fails(x.instance, -EMSGSIZE, "shape out of range");
	cx_region_remove(&x);
}
END_TEST

struct child_arg {
	struct cx *x;
};

static int create_and_exit(void *arg)
{
	struct cx *x = arg;
	struct proto_node n;
	struct proto_node_config cfg;

	proto_node_config_default(&cfg, 1);
	cfg.nrings = 1;
	if (proto_node_create(&n, x->name, &cfg, 0, NULL))
		return 1;
	shm_region_ready(&n.region);
	return 0; /* dies without unlinking: the region is stale */
}

START_TEST(connect_stale_region_is_not_running)
{
	struct cx x;

	memset(&x, 0, sizeof(x));
	snprintf(x.instance, sizeof(x.instance), "chipd-test-stale-%d", (int)getpid());
	ck_assert_int_eq(shm_region_name(x.name, sizeof(x.name), (unsigned)geteuid(), x.instance),
			 0);
	ck_assert_int_eq(tu_wait(tu_fork(create_and_exit, &x), 5000), 0);
	expect_connect_fails(x.instance, -ESTALE, "is not running");
	shm_region_unlink(x.name);
}
END_TEST

START_TEST(instance_discovery_order)
{
	struct chipd_error err;
	struct cx x;
	chipd_conn *c = NULL;
	char out[CHIPD_INSTANCE_MAX];

	cx_region(&x);
	unsetenv("CHIPD_INSTANCE");
	unsetenv("SLURM_JOB_ID");
	ck_assert_int_eq(proto_node_instance(NULL, out, sizeof(out), NULL, 0), 0);
	ck_assert_str_eq(out, "default");
	setenv("SLURM_JOB_ID", x.instance, 1);
	/* attach only: the region has no supervisor to say hello to */
	ck_assert_int_eq(chipd_connect_monitor(NULL, &c, &err), 0);
	ck_assert_str_eq(chipd_instance(c), x.instance);
	chipd_close(c);
	setenv("CHIPD_INSTANCE", "chipd-test-nobody-here", 1);
	expect_connect_fails(NULL, -ENOENT, "chipd-test-nobody-here");
	setenv("CHIPD_INSTANCE", x.instance, 1);
	setenv("SLURM_JOB_ID", "chipd-test-nobody-here", 1);
	ck_assert_int_eq(chipd_connect_monitor(NULL, &c, &err), 0);
	chipd_close(c);
	/* An explicit name beats both. */
	expect_connect_fails("chipd-test-explicit", -ENOENT, "chipd-test-explicit");
	cx_region_remove(&x);
}
END_TEST

static bool one_reset_acked(void *arg)
{
	return atomic_load(&((struct cx *)arg)->resets_acked) == 1;
}

START_TEST(silent_server_times_out_then_slot_is_reused)
{
	struct chipd_error err;
	struct cx x;
	chipd_conn *c = NULL;
	uint64_t before;

	cx_start(&x, 1); /* one slot: the next call must get the same one back */
	atomic_store(&x.mode, CX_SILENT);
	ck_assert_int_eq(chipd_connect(x.instance, &c, &err), 0);
	before = mbox_ctl(&x.node.mbox, 0);
	uint64_t t0 = shm_now_ns();

	ck_assert_int_eq(chipd_ping(c, 50, NULL, &err), -ETIMEDOUT);
	ck_assert_uint_lt(shm_now_ns() - t0, 1000ull * 1000 * 1000);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert(err.retryable);
	ck_assert_ptr_nonnull(strstr(err.message, "no answer within 50 ms"));
	/* The server held the slot: the client reset it and walked away; the server
	 * acknowledges, and the slot is FREE in the next generation. */
	ck_assert(tu_eventually(one_reset_acked, &x, 2000));
	ck_assert_int_eq(MBOX_CTL_STATE(mbox_ctl(&x.node.mbox, 0)), MBOX_FREE);
	ck_assert_uint_eq(MBOX_CTL_GEN(mbox_ctl(&x.node.mbox, 0)), MBOX_CTL_GEN(before) + 1);
	atomic_store(&x.mode, CX_ANSWER);
	ck_assert_int_eq(chipd_ping(c, T_MS, NULL, &err), 0);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* A supervisor that takes the connection and never answers the hello (stopped, or
 * hung): chipd_connect_timeout gives up after its own timeout, not CHIPD_TIMEOUT_MS,
 * with timeout (retryable), and connects once the hello is answered again. */
START_TEST(unanswered_hello_gives_up_at_the_timeout)
{
	struct chipd_error err;
	struct cx x;
	chipd_conn *c = NULL;
	uint64_t t0;

	cx_start(&x, 4);
	atomic_store(&x.hello.mute, 1);
	t0 = shm_now_ns();
	ck_assert_int_eq(chipd_connect_timeout(x.instance, 100, &c, &err), -ETIMEDOUT);
	/* well under CHIPD_TIMEOUT_MS, with room for a loaded machine */
	ck_assert_uint_lt(shm_now_ns() - t0, 3000ull * SHM_NS_PER_MS);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "no answer to hello within 100 ms"), "%s", err.message);
	atomic_store(&x.hello.mute, 0);
	ck_assert_int_eq(chipd_connect_timeout(x.instance, T_MS, &c, &err), 0);
	ck_assert_int_eq(chipd_ping(c, T_MS, NULL, &err), 0);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

/* The descriptors this process has open. */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* A hello answer carrying two descriptors where one is due (a broken or foreign
 * server): the connect is refused -EBADMSG, saying so, and keeps none of them. */
START_TEST(hello_answer_with_two_descriptors_is_refused)
{
	struct chipd_error err;
	struct cx x;
	chipd_conn *c = NULL;
	int before;

	cx_start(&x, 4);
	atomic_store(&x.hello.nfds, 2);
	before = open_fds();
	ck_assert_int_eq(chipd_connect_timeout(x.instance, T_MS, &c, &err), -EBADMSG);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err.message, "descriptors"), "%s", err.message);
	/* one more: the in-process server's end of the connection, which it keeps */
	ck_assert_int_eq(open_fds(), before + 1);
	atomic_store(&x.hello.nfds, 1);
	ck_assert_int_eq(chipd_connect_timeout(x.instance, T_MS, &c, &err), 0);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(busy_mailbox_is_queue_full)
{
	struct chipd_error err;
	struct mbox_ticket t;
	struct cx x;
	chipd_conn *c = NULL;

	cx_start(&x, 1);
	ck_assert_int_eq(chipd_connect(x.instance, &c, &err), 0);
	ck_assert_int_eq(mbox_claim(&x.node.mbox, &t), 0); /* someone else's call */
	ck_assert_int_eq(chipd_ping(c, T_MS, NULL, &err), -EAGAIN);
	ck_assert_int_eq(err.code, CHIPD_E_QUEUE_FULL);
	ck_assert(err.retryable);
	ck_assert_int_eq(mbox_give_up(&x.node.mbox, t), 0);
	ck_assert_int_eq(chipd_ping(c, T_MS, NULL, &err), 0);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

START_TEST(bad_request_refused_before_sending)
{
	struct chipd_param bad_key = {"Layers", 1};
	struct chipd_request req = {.workload = "a_workload_name_far_longer_than_31", .chip = -1};
	struct chipd_error err;
	chipd_stream *s = NULL;
	chipd_conn *c = NULL;
	struct cx x;
	uint64_t id;

	cx_start(&x, 1);
	atomic_store(&x.mode, CX_SILENT); /* anything sent would time out instead */
	ck_assert_int_eq(chipd_connect(x.instance, &c, &err), 0);
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &id, &s, &err), -EINVAL);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.message, "\"wl\""));
	req.workload = "gemm";
	req.params = &bad_key;
	req.nparams = 1;
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &id, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "\"params\": byte 0x4c"));
	bad_key.key = "a_key_of_twenty_four_byt"; /* the message names it */
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &id, &s, &err), -EINVAL);
	ck_assert_str_eq(err.message,
			 "\"params\": key 'a_key_of_twenty_four_byt' longer than 23 bytes");
	bad_key.key = NULL;
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &id, &s, &err), -EINVAL);
	ck_assert_str_eq(err.message, "\"params\": parameter 0 has no key");
	req.nparams = 0;
	req.chip = CHIPD_MAX_CHIPS;
	ck_assert_int_eq(chipd_submit(c, &req, T_MS, &id, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "\"chip\": 64 out of range"));
	ck_assert_ptr_null(s);
	/* Nothing was posted: the only slot is free. */
	ck_assert_int_eq(MBOX_CTL_STATE(mbox_ctl(&x.node.mbox, 0)), MBOX_FREE);
	chipd_close(c);
	cx_stop(&x);
}
END_TEST

struct connect_arg {
	const char *instance;
	uint32_t timeout_ms;
	int rc;
	struct chipd_error err;
	_Atomic int done;
};

static void *connect_thread(void *arg)
{
	struct connect_arg *a = arg;
	chipd_conn *c = NULL;

	a->rc = chipd_connect_timeout(a->instance, a->timeout_ms, &c, &a->err);
	if (a->rc == 0)
		chipd_close(c);
	atomic_store(&a->done, 1);
	return NULL;
}

static bool connect_returned(void *arg)
{
	return atomic_load(&((struct connect_arg *)arg)->done) != 0;
}

/* A supervisor that stopped accepting (stopped, or hung in its loop) while clients
 * kept connecting: its socket's backlog is full, and a connect() on it waits for an
 * accept that never comes. chipd_connect_timeout still gives up at its timeout, with
 * timeout (retryable), instead of hanging in connect() for good. */
START_TEST(full_handshake_backlog_gives_up_at_the_timeout)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct connect_arg a = {.timeout_ms = 200};
	int lfd, fill[8], nfill = 0;
	pthread_t th;
	struct cx x;

	cx_region(&x);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/chipd-test-hx.%d.backlog.sock",
		 (int)getpid());
	unlink(sa.sun_path);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 0), 0); /* nobody accepts */
	memcpy(x.node.desc->sock_path, sa.sun_path, strlen(sa.sun_path) + 1);
	/* the backlog filled by connects that are never accepted */
	while (nfill < 8) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		ck_assert_int_ge(fd, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			ck_assert_int_eq(errno, EAGAIN); /* full */
			close(fd);
			break;
		}
		fill[nfill++] = fd;
	}
	ck_assert_int_lt(nfill, 8);
	a.instance = x.instance;
	ck_assert_int_eq(pthread_create(&th, NULL, connect_thread, &a), 0);
	ck_assert_msg(tu_eventually(connect_returned, &a, 1500),
		      "chipd_connect_timeout(200 ms) still blocked after 1.5 s (in connect())");
	pthread_join(th, NULL);
	ck_assert_int_eq(a.rc, -ETIMEDOUT);
	ck_assert_int_eq(a.err.code, CHIPD_E_TIMEOUT);
	ck_assert(a.err.retryable);
	ck_assert_msg(strstr(a.err.message, "within 200 ms"), "%s", a.err.message);
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	close(lfd);
	unlink(sa.sun_path);
	cx_region_remove(&x);
}
END_TEST

void client_add_error_tcases(Suite *s)
{
	TCase *tc = tcase_create("connect_errors");

	tcase_add_test(tc, connect_missing_instance_is_enoent);
	tcase_add_test(tc, connect_wrong_mode_or_owner_refused);
	tcase_add_test(tc, connect_version_mismatch_refused);
	tcase_add_test(tc, connect_corrupt_descriptor_refused);
	tcase_add_test(tc, connect_stale_region_is_not_running);
	tcase_add_test(tc, instance_discovery_order);
	tcase_add_test(tc, hello_answer_with_two_descriptors_is_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("giving_up");
	tcase_add_test(tc, silent_server_times_out_then_slot_is_reused);
	tcase_add_test(tc, unanswered_hello_gives_up_at_the_timeout);
	tcase_add_test(tc, full_handshake_backlog_gives_up_at_the_timeout);
	tcase_add_test(tc, busy_mailbox_is_queue_full);
	tcase_add_test(tc, bad_request_refused_before_sending);
	suite_add_tcase(s, tc);
}
