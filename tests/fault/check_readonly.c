/* check_readonly.c - the kernel enforces what a client may write (node layout 3 on,
 * docs/protocol.md §2, §8.7; docs/reliability.md rows 63-66):
 *
 * - node_region_read_only: a client (user nobody, as root bypasses mode bits) cannot
 *   get a writable mapping of the node region: a read-write open fails EACCES (with a
 *   message naming the newer layout), mprotect(PROT_WRITE) of its read-only mapping
 *   fails EACCES, and a write through that mapping faults;
 * - exchange_region_sealed: the client region a client receives with its hello is a
 *   memfd with F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL of the size the descriptor
 *   says; truncating it fails EPERM, truncating the node region through a client's
 *   descriptor fails too, and the node keeps serving another client (no SIGBUS);
 * - unsealed_exchange_refused: libchipd refuses a client region without its seals
 *   or of another size, with a message that says why;
 * - old_layout_client_refused: a node of another layout is refused with the message
 *   "node layout N, wire version W (this libchipd: 4, 1): use the libchipd and chipctl
 *   of the running chipd".
 *
 * Runs as root (it becomes nobody for the client's part); 77 otherwise. */
#include "fault.h"
#include "hello_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534u

/* A small node region created by this process as @name (instance from @tag). */
static void small_node(struct proto_node *n, char *name, size_t cap, const char *tag)
{
	struct proto_node_config cfg;
	struct shm_diag diag = {""};
	char inst[CHIPD_INSTANCE_MAX];

	snprintf(inst, sizeof(inst), "ro-%s-%d", tag, (int)getpid());
	ck_assert_int_eq(shm_region_name(name, cap, (unsigned)geteuid(), inst), 0);
	proto_node_config_default(&cfg, 1);
	cfg.nrings = 4;
	cfg.ring_capacity = 16;
	cfg.mbox_slots = 4;
	cfg.nclients = 2;
	ck_assert_msg(proto_node_create(n, name, &cfg, SHM_CREATE_RECLAIM_STALE, &diag) == 0,
		      "%s", diag.msg);
	/* the first client region, as chipd lays it out for the client it hands it to */
	ck_assert_int_eq(proto_node_client_open(n, 0), 0);
	shm_region_ready(&n->region);
}

#define FAULTED 99

static void on_segv(int sig)
{
	(void)sig;
	_exit(FAULTED);
}

/* Writes one byte at @arg; exits FAULTED from the fault (a handler of its own, so
 * that a sanitizer's SEGV report does not stand in for the signal). */
static int write_one_byte(void *arg)
{
	struct sigaction sa = {.sa_handler = on_segv};

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL))
		return 1;
	*(volatile char *)arg = 1;
	return 0; /* reached only if the write went through */
}

/* The client's part, as nobody: creates its own node (so that it owns the file, as
 * chipd's clients own theirs) and then tries, as a client, every way to write it.
 * Returns 0, or the number of the step that failed. */
static int as_nobody(void *arg)
{
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];
	struct shm_diag diag = {""};
	struct proto_node owner, client;
	struct shm_region rw;
	struct stat st;
	int fd, rc;

	(void)arg;
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY) || geteuid() != NOBODY)
		return 1;
	small_node(&owner, name, sizeof(name), "nobody");
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	if (stat(path, &st) || (st.st_mode & 07777) != 0400)
		return 2;
	/* the creator's own mapping stays writable: it is the supervisor */
	owner.dir[0].gpu = 7;
	fd = shm_open(name, O_RDWR, 0);
	if (fd >= 0 || errno != EACCES)
		return 3;
	/* a client of the old layout opened it read-write: refused, saying why */
	rc = shm_region_attach(&rw, name, SHM_KIND_NODE, 0, &diag);
	if (rc != -EACCES || !strstr(diag.msg, "newer layout") ||
	    !strstr(diag.msg, "use the libchipd and chipctl of the running chipd"))
		return 4;
	if (proto_node_attach(&client, name, &diag))
		return 5;
	if (mprotect(client.region.hdr, client.region.size, PROT_READ | PROT_WRITE) == 0 ||
	    errno != EACCES)
		return 6;
	if (client.dir[0].gpu != 7) /* it reads what the supervisor writes */
		return 7;
	rc = tu_wait(tu_fork(write_one_byte, &client.dir[0].gpu), 5000);
	if (rc != FAULTED || client.dir[0].gpu != 7)
		return 8;
	proto_node_detach(&client);
	shm_region_unlink(name);
	proto_node_detach(&owner);
	return 0;
}

START_TEST(node_region_read_only)
{
	ck_assert_int_eq(tu_wait(tu_fork(as_nobody, NULL), 10000), 0);
}
END_TEST

START_TEST(exchange_region_sealed)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	char name[SHM_NAME_MAX];
	struct proto_node n;
	chipd_stream *s;
	struct stat st;
	struct cd d;
	int seals, fd;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	ck_assert_int_ge(n.xchg.fd, 0);
	seals = fcntl(n.xchg.fd, F_GET_SEALS);
	ck_assert_int_eq(seals & PROTO_XCHG_SEALS, PROTO_XCHG_SEALS);
	ck_assert_int_eq(fstat(n.xchg.fd, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, n.desc->xchg_size);
	/* the hostile client: shrink, grow, unseal; all refused */
	ck_assert_int_eq(ftruncate(n.xchg.fd, 0), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(n.xchg.fd, st.st_size + 4096), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(fcntl(n.xchg.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	ck_assert_int_eq(errno, EPERM);
	/* the node region: a client opens it read-only, which cannot truncate */
	ck_assert_int_eq(shm_region_name(name, sizeof(name), (unsigned)geteuid(), d.instance), 0);
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 0), -1);
	close(fd);
	/* everything mapped stays mapped: this client reads both regions, another is
	 * served */
	ck_assert_uint_eq(n.desc->version, PROTO_NODE_VERSION);
	ck_assert_uint_gt(n.mbox.nslots, 0);
	(void)mbox_ctl(&n.mbox, n.mbox.nslots - 1);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0);
	s = cd_submit(&d, 4, 0);
	cd_expect_stream(s, 4, CHIPD_OK, CD_CALL_MS);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A sealed memfd of @size bytes holding a copy of @n's first client region; with @seal
 * false, an unsealed one. */
static int fake_exchange(const struct proto_node *n, size_t size, bool seal)
{
	int fd = memfd_create("fake-exchange", MFD_ALLOW_SEALING | MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	ck_assert_int_eq(pwrite(fd, n->pool[0].base, n->pool[0].size, 0), (ssize_t)n->pool[0].size);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, PROTO_XCHG_SEALS), 0);
	return fd;
}

START_TEST(unsealed_exchange_refused)
{
	struct {
		bool seal;
		size_t extra;
		int rc;
		const char *says;
	} cases[] = {
	    {false, 0, -EPERM, "seals"},
	    {true, 4096, -EMSGSIZE, "the node descriptor says"},
	    {true, 0, 0, ""},
	};
	char name[SHM_NAME_MAX], why[CHIPD_MSG_MAX];
	struct proto_node owner, client;
	struct shm_diag diag = {""};
	struct proto_hello hello;
	struct hx h;

	small_node(&owner, name, sizeof(name), "seal");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int real = owner.pool[0].fd, fake, rc;

		fake = fake_exchange(&owner, owner.geom.xchg.total_size + cases[i].extra,
				     cases[i].seal);
		owner.pool[0].fd = fake; /* what the fixture's server sends */
		hx_start(&h, &owner);
		owner.pool[0].fd = real;
		ck_assert_msg(proto_node_attach(&client, name, &diag) == 0, "%s", diag.msg);
		rc = proto_hello(&client, 5000, &hello, why, sizeof(why));
		ck_assert_msg(rc == cases[i].rc && strstr(why, cases[i].says), "case %zu: %d %s",
			      i, rc, why);
		if (rc == 0) {
			ck_assert_ptr_nonnull(client.mbox.hdr);
			close(hello.fd);
		} else {
			ck_assert_ptr_null(client.xchg.base); /* nothing mapped */
			ck_assert_ptr_null(client.mbox.hdr);
		}
		proto_node_detach(&client);
		hx_stop(&h);
		close(fake);
	}
	shm_region_unlink(name);
	proto_node_detach(&owner);
}
END_TEST

START_TEST(old_layout_client_refused)
{
	char name[SHM_NAME_MAX], inst[CHIPD_INSTANCE_MAX];
	struct proto_node owner, client;
	struct shm_diag diag = {""};
	struct chipd_error err;
	chipd_conn *c = NULL;

	small_node(&owner, name, sizeof(name), "old");
	ck_assert_uint_eq(owner.desc->version, 6);
	/* a node of layout 5 (rings whose tail word is a plain count) */
	owner.desc->version = 5;
	ck_assert_int_eq(proto_node_attach(&client, name, &diag), -EPROTONOSUPPORT);
	ck_assert_msg(strstr(diag.msg, "node layout 5, wire version 1 (this libchipd: 6, 1): use "
				       "the libchipd and chipctl of the running chipd"),
		      "%s", diag.msg);
	/* a node of layout 4 (rings of 32-byte records, no data area) */
	owner.desc->version = 4;
	ck_assert_int_eq(proto_node_attach(&client, name, &diag), -EPROTONOSUPPORT);
	/* and of layout 3 (one exchange region shared by every client) */
	owner.desc->version = 3;
	ck_assert_int_eq(proto_node_attach(&client, name, &diag), -EPROTONOSUPPORT);
	snprintf(inst, sizeof(inst), "ro-old-%d", (int)getpid());
	ck_assert_int_eq(chipd_connect_monitor(inst, &c, &err), -EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.message, "node layout 3") &&
			  strstr(err.message, "use the libchipd and chipctl of the running chipd"),
		      "%s", err.message);
	owner.desc->version = PROTO_NODE_VERSION;
	shm_region_unlink(name);
	proto_node_detach(&owner);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readonly");
	const struct tu_case cases[] = {
	    {"node_region_read_only", node_region_read_only},
	    {"exchange_region_sealed", exchange_region_sealed},
	    {"unsealed_exchange_refused", unsealed_exchange_refused},
	    {"old_layout_client_refused", old_layout_client_refused},
	};
	int rc;

	if (geteuid() != 0) {
		fprintf(stderr, "check_readonly: skipped: needs root (its client runs as nobody)\n");
		return TU_SKIP;
	}
	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	ft_set_owner();
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
