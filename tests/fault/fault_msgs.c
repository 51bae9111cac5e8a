/* fault_msgs.c - rows of the fault matrix about what arrives: malformed, truncated,
 * oversized, wrong-version and unknown-op messages written straight into a slot;
 * node regions with a wrong magic, size, owner or mode; and admission limits (the
 * router's and a worker's queue, the KV pool, a reader that never reads). */
#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const one_chip[] = {"--chips", "1", NULL};

struct bad_msg {
	const char *what;
	const unsigned char *bytes;
	uint32_t len;
	enum chipd_code code;
	const char *names; /* a word the message must contain */
};

/* {"v":1,"op":"ping"} and variants, by hand (docs/protocol.md §8.2). */
static const unsigned char m_ping[] = {0x82, 0xa1, 'v', 0x01, 0xa2, 'o',
				       'p',  0xa4, 'p', 'i',  'n',  'g'};
static const unsigned char m_v2[] = {0x82, 0xa1, 'v', 0x02, 0xa2, 'o',
				     'p',  0xa4, 'p', 'i',  'n',  'g'};
static const unsigned char m_v_str[] = {0x82, 0xa1, 'v', 0xa1, '1', 0xa2, 'o',
					'p',  0xa4, 'p', 'i',  'n', 'g'};
static const unsigned char m_no_v[] = {0x81, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'};
static const unsigned char m_unknown_op[] = {0x82, 0xa1, 'v', 0x01, 0xa2, 'o',
					     'p',  0xa4, 'f', 'r',  'o',  'b'};
static const unsigned char m_worker_op[] = {0x83, 0xa1, 'v', 0x01, 0xa2, 'o', 'p', 0xa9,
					    'h',  'e',	'a', 'r',  't',	 'b', 'e', 'a',
					    't',  0xa3, 's', 'e',  'q',	 0x00};
static const unsigned char m_unknown_key[] = {0x83, 0xa1, 'v', 0x01, 0xa2, 'o', 'p', 0xa4, 'p',
					      'i',  'n',  'g', 0xa3, 'z',  'z', 'z', 0x01};
static const unsigned char m_truncated[] = {0x83, 0xa1, 'v', 0x01, 0xa2, 'o', 'p'};
static const unsigned char m_trailing[] = {0x82, 0xa1, 'v', 0x01, 0xa2, 'o', 'p',
					   0xa4, 'p',  'i', 'n',  'g',	0xc0};
static const unsigned char m_c1[] = {0x82, 0xa1, 'v', 0x01, 0xc1, 0xa2, 'o', 'p'};
static const unsigned char m_not_map[] = {0x92, 0x01, 0x02};
static const unsigned char m_huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
static const unsigned char m_huge_str[] = {0x81, 0xdb, 0xff, 0xff, 0xff, 0xf0, 'v'};
static const unsigned char m_deep[] = {0x82, 0xa1, 'v',	 0x01, 0xa1, 'x',  0x81, 0xa1, 'a', 0x81,
				       0xa1, 'b',  0x81, 0xa1, 'c',  0x81, 0xa1, 'd',  0x01};
static const unsigned char m_bad_wl[] = {0x83, 0xa1, 'v', 0x01, 0xa2, 'o', 'p', 0xa6, 's', 'u',
					 'b',  'm',  'i', 't',	0xa2, 'w', 'l', 0xa2, 'A', '!'};
static const unsigned char m_empty[] = {0x00};
/* {"v":1,"op":"submit","wl":"echo","input":"ab"}: input is bin, never str */
static const unsigned char m_input_str[] = {
    0x84, 0xa1, 'v', 0x01, 0xa2, 'o', 'p', 0xa6, 's', 'u', 'b', 'm', 'i', 't', 0xa2, 'w',
    'l',  0xa4, 'e', 'c',  'h',	 'o', 0xa5, 'i', 'n', 'p', 'u', 't', 0xa2, 'a', 'b'};
/* the same with a bin8 of 16 bytes of which 2 are there */
static const unsigned char m_input_short[] = {
    0x84, 0xa1, 'v', 0x01, 0xa2, 'o', 'p', 0xa6, 's', 'u', 'b', 'm', 'i', 't', 0xa2, 'w', 'l',
    0xa4, 'e',	'c', 'h',  'o',	 0xa5, 'i', 'n', 'p', 'u', 't', 0xc4, 0x10, 'a', 'b'};
/* {"v":1,"op":"trace","act":"collect","path":"rel.json"}: a path the supervisor would
 * resolve against its own working directory */
static const unsigned char m_rel_trace[] = {0x84, 0xa1, 'v', 0x01, 0xa2, 'o',  'p', 0xa5, 't', 'r',
					    'a',  'c',	'e', 0xa3, 'a',	 'c',  't', 0xa7, 'c', 'o',
					    'l',  'l',	'e', 'c',  't',	 0xa4, 'p', 'a',  't', 'h',
					    0xa8, 'r',	'e', 'l',  '.',	 'j',  's', 'o',  'n'};

START_TEST(malformed_messages_answered_and_server_keeps_serving)
{
	static const struct bad_msg cases[] = {
	    {"wrong version", m_v2, sizeof(m_v2), CHIPD_E_UNSUPPORTED_VERSION, "v"},
	    {"version not an int", m_v_str, sizeof(m_v_str), CHIPD_E_BAD_REQUEST, "v"},
	    {"no version", m_no_v, sizeof(m_no_v), CHIPD_E_BAD_REQUEST, "v"},
	    {"unknown op", m_unknown_op, sizeof(m_unknown_op), CHIPD_E_BAD_REQUEST, "op"},
	    {"worker op at the router", m_worker_op, sizeof(m_worker_op), CHIPD_E_BAD_REQUEST,
	     "heartbeat"},
	    {"unknown key", m_unknown_key, sizeof(m_unknown_key), CHIPD_E_BAD_REQUEST, "zzz"},
	    {"truncated", m_truncated, sizeof(m_truncated), CHIPD_E_BAD_REQUEST, "truncated"},
	    {"trailing bytes", m_trailing, sizeof(m_trailing), CHIPD_E_BAD_REQUEST, "trailing"},
	    {"byte 0xc1", m_c1, sizeof(m_c1), CHIPD_E_BAD_REQUEST, ""},
	    {"not a map", m_not_map, sizeof(m_not_map), CHIPD_E_BAD_REQUEST, "map"},
	    {"map of 2^32-1 pairs", m_huge_map, sizeof(m_huge_map), CHIPD_E_BAD_REQUEST, ""},
	    {"str of 4 GiB", m_huge_str, sizeof(m_huge_str), CHIPD_E_BAD_REQUEST, ""},
	    {"nested too deep", m_deep, sizeof(m_deep), CHIPD_E_BAD_REQUEST, ""},
	    {"bad workload name", m_bad_wl, sizeof(m_bad_wl), CHIPD_E_BAD_REQUEST, "wl"},
	    {"empty", m_empty, 0, CHIPD_E_BAD_REQUEST, ""},
	    {"input a str", m_input_str, sizeof(m_input_str), CHIPD_E_BAD_REQUEST,
	     "\"input\": expected bin, got str"},
	    {"input bin truncated", m_input_short, sizeof(m_input_short), CHIPD_E_BAD_REQUEST,
	     "\"input\": truncated"},
	};
	struct proto_msg *m = calloc(1, sizeof(*m));
	unsigned char *big = calloc(1, PROTO_REQ_MAX + 64);
	const size_t ncases = sizeof(cases) / sizeof(cases[0]);
	uint64_t want[CHIPD_NCODES] = {0};
	struct ft_ledger l = {0};
	struct proto_node n;
	struct ft_stats st0, st;
	struct cd d;
	int rc;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(big);
	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	ft_stats(&d, &st0);
	for (size_t i = 0; i < ncases; i++) {
		const struct bad_msg *c = &cases[i];

		rc = ft_raw_call(&n, c->bytes, c->len, PROTO_OP_PING, m, CD_CALL_MS);
		ck_assert_msg(rc == 0, "%s: mailbox status %d", c->what, rc);
		ck_assert_msg(!m->ok, "%s: accepted", c->what);
		ck_assert_msg(m->err.code == c->code, "%s: %s (%s), expected %s", c->what,
			      chipd_code_name((enum chipd_code)m->err.code), m->err.message,
			      chipd_code_name(c->code));
		ck_assert_msg(strstr(m->err.message, c->names), "%s: message \"%s\" lacks \"%s\"",
			      c->what, m->err.message, c->names);
		ck_assert(!m->err.retryable);
		want[c->code]++;
	}
	/* the whole buffer of junk: a framing error, not a crash */
	memset(big, 0xc1, PROTO_REQ_MAX);
	rc = ft_raw_call(&n, big, PROTO_REQ_MAX, PROTO_OP_PING, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(m->err.code, CHIPD_E_BAD_REQUEST);
	/* a valid ping padded to the limit: trailing bytes */
	memset(big, 0, PROTO_REQ_MAX);
	memcpy(big, m_ping, sizeof(m_ping));
	rc = ft_raw_call(&n, big, PROTO_REQ_MAX, PROTO_OP_PING, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(m->err.code, CHIPD_E_BAD_REQUEST);
	/* longer than the slot's buffer (req_len written by hand): the router takes such
	 * requests from the mailbox layer (mbox_server_take_oversize) and answers them
	 * too_large, unread, like any other refusal */
	rc = ft_raw_call(&n, big, PROTO_REQ_MAX + 1, PROTO_OP_PING, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert(!m->ok);
	ck_assert_int_eq(m->err.code, CHIPD_E_TOO_LARGE);
	ck_assert_msg(strstr(m->err.message, "4097 bytes"), "%s", m->err.message);
	rc = ft_raw_call(&n, big, UINT32_MAX, PROTO_OP_PING, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(m->err.code, CHIPD_E_TOO_LARGE);
	/* still serving, through the library and raw */
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0);
	rc = ft_raw_call(&n, m_ping, sizeof(m_ping), PROTO_OP_PING, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert(m->ok);
	ck_assert_int_eq(m->pid, d.pid);
	proto_node_detach(&n);
	ft_check_accounting(&d, &l, 0);
	/* every message above is one request, answered, and each refusal is counted
	 * once under its code, whichever step refused it: length, framing, version, op,
	 * field */
	ft_stats(&d, &st);
	want[CHIPD_E_BAD_REQUEST] += 2;
	want[CHIPD_E_TOO_LARGE] += 2;
	ck_assert_uint_eq(st.sup[PROTO_SUP_requests] - st0.sup[PROTO_SUP_requests], ncases + 6);
	ck_assert_uint_eq(st.sup[PROTO_SUP_answered] - st0.sup[PROTO_SUP_answered], ncases + 6);
	for (int c = 1; c < CHIPD_NCODES; c++)
		ck_assert_msg(st.sup[PROTO_SUP_err_bad_request + c - 1] -
				      st0.sup[PROTO_SUP_err_bad_request + c - 1] ==
				  want[c],
			      "err_%s: %llu, expected %llu", chipd_code_name(c),
			      (unsigned long long)(st.sup[PROTO_SUP_err_bad_request + c - 1] -
						   st0.sup[PROTO_SUP_err_bad_request + c - 1]),
			      (unsigned long long)want[c]);
	free(big);
	free(m);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- regions ---- */

/* The part of a region the mutations below write: its header and the node
 * descriptor. */
#define MUTATED_PREFIX (PROTO_NODE_DESC_OFFSET + sizeof(struct proto_node_desc))

/* A copy of a live node region under another instance name, mutated by @mutate. The
 * kernel copies the bytes (sendfile) and only the prefix is mapped here: a
 * 16 MiB memcpy through two fresh mappings took most of a minute under TSan on a
 * loaded machine. */
static void copy_region(const struct cd *d, const char *inst, void (*mutate)(int fd, void *p),
			mode_t mode)
{
	size_t prefix = ((MUTATED_PREFIX + 4095) / 4096) * 4096;
	char path[160];
	struct stat sb;
	off_t done = 0;
	void *dst;
	int in, out;

	snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
	in = open(d->region, O_RDONLY);
	ck_assert_int_ge(in, 0);
	ck_assert_int_eq(fstat(in, &sb), 0);
	ck_assert_uint_ge((uint64_t)sb.st_size, prefix);
	unlink(path);
	out = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(out, 0);
	while (done < sb.st_size) {
		ssize_t n = sendfile(out, in, &done, (size_t)(sb.st_size - done));

		ck_assert_msg(n > 0, "sendfile: %zd (%s)", n, strerror(errno));
	}
	dst = mmap(NULL, prefix, PROT_READ | PROT_WRITE, MAP_SHARED, out, 0);
	ck_assert(dst != MAP_FAILED);
	if (mutate)
		mutate(out, dst);
	munmap(dst, prefix);
	ck_assert_int_eq(fchmod(out, mode), 0);
	close(in);
	close(out);
}

static void bad_magic(int fd, void *p)
{
	(void)fd;
	((struct shm_header *)p)->magic = 0x1122334455667788ull;
}

static void bad_version(int fd, void *p)
{
	(void)fd;
	((struct shm_header *)p)->layout_version = 99;
}

static void bad_kind(int fd, void *p)
{
	(void)fd;
	((struct shm_header *)p)->kind = SHM_KIND_TEST;
}

static void bad_size_field(int fd, void *p)
{
	(void)fd;
	((struct shm_header *)p)->size += 64;
}

static void truncated_file(int fd, void *p)
{
	(void)p;
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
}

static void tiny_file(int fd, void *p)
{
	(void)p;
	ck_assert_int_eq(ftruncate(fd, 16), 0);
}

static void bad_node_magic(int fd, void *p)
{
	(void)fd;
	((struct proto_node_desc *)((char *)p + PROTO_NODE_DESC_OFFSET))->magic ^= 1;
}

static void bad_wire_version(int fd, void *p)
{
	(void)fd;
	((struct proto_node_desc *)((char *)p + PROTO_NODE_DESC_OFFSET))->wire_version = 2;
}

static void mbox_out_of_bounds(int fd, void *p)
{
	(void)fd;
	((struct proto_node_desc *)((char *)p + PROTO_NODE_DESC_OFFSET))->mbox_offset = 0xffffffc0u;
}

static void stale_creator(int fd, void *p)
{
	(void)fd;
	((struct shm_header *)p)->creator_pid = 0x3ffffe; /* above any pid in use here */
}

static void stopped_state(int fd, void *p)
{
	(void)fd;
	atomic_store(&((struct shm_header *)p)->state, SHM_STATE_STOPPED);
}

static void creating_state(int fd, void *p)
{
	(void)fd;
	atomic_store(&((struct shm_header *)p)->state, SHM_STATE_CREATING);
}

START_TEST(bad_regions_refused_by_connect)
{
	static const struct {
		const char *what;
		void (*mutate)(int, void *);
		mode_t mode;
		int rc;
	} cases[] = {
	    {"wrong magic", bad_magic, 0600, -EBADMSG},
	    {"other layout version", bad_version, 0600, -EPROTONOSUPPORT},
	    {"other kind", bad_kind, 0600, -EPROTOTYPE},
	    {"header size != file size", bad_size_field, 0600, -EMSGSIZE},
	    {"file shorter than the layout", truncated_file, 0600, -EMSGSIZE},
	    {"file shorter than a header", tiny_file, 0600, -EMSGSIZE},
	    {"node descriptor magic", bad_node_magic, 0600, -EBADMSG},
	    {"wire version 2", bad_wire_version, 0600, -EPROTONOSUPPORT},
	    {"mailbox beyond the region", mbox_out_of_bounds, 0600, -EMSGSIZE},
	    {"creator dead", stale_creator, 0600, -ESTALE},
	    {"state stopped", stopped_state, 0600, -ESHUTDOWN},
	    {"state creating", creating_state, 0600, -EAGAIN},
	    {"mode 0644", NULL, 0644, -EACCES},
	    {"mode 0660", NULL, 0660, -EACCES},
	};
	struct chipd_error err;
	char inst[CHIPD_INSTANCE_MAX + 16], path[160];
	chipd_conn *c;
	struct cd d;
	int rc;

	ft_start(&d, one_chip);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(inst, sizeof(inst), "%s-bad%zu", d.instance, i);
		copy_region(&d, inst, cases[i].mutate, cases[i].mode);
		c = NULL;
		rc = chipd_connect(inst, &c, &err);
		ck_assert_msg(rc == cases[i].rc, "%s: connect %d (%s), expected %d", cases[i].what,
			      rc, err.message, cases[i].rc);
		ck_assert_ptr_null(c);
		ck_assert_int_eq(err.errnum, rc);
		ck_assert_msg(err.message[0], "%s: no message", cases[i].what);
		snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
		unlink(path);
	}
	/* owner: only root can make a file of another uid; elsewhere this part is
	 * covered by check_region's unit test */
	if (geteuid() == 0) {
		snprintf(inst, sizeof(inst), "%s-owner", d.instance);
		copy_region(&d, inst, NULL, 0600);
		snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		rc = chipd_connect(inst, &c, &err);
		ck_assert_msg(rc == -EPERM, "owner 65534: connect %d (%s)", rc, err.message);
		unlink(path);
	}
	/* a symlink planted under the name, and a missing instance */
	snprintf(inst, sizeof(inst), "%s-link", d.instance);
	snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
	ck_assert_int_eq(symlink(d.region, path), 0);
	rc = chipd_connect(inst, &c, &err);
	unlink(path);
	ck_assert_msg(rc == -ELOOP, "symlink: connect %d (%s)", rc, err.message);
	ck_assert_int_eq(chipd_connect("no-such-instance-here", &c, &err), -ENOENT);
	ck_assert_int_eq(chipd_connect("bad/name", &c, &err), -EINVAL);
	/* the real one is unharmed */
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- admission ---- */

static void expect_refused(int rc, const struct chipd_error *err, enum chipd_code code)
{
	ck_assert_msg(rc == -EREMOTEIO, "submit: %d, expected a refusal", rc);
	ck_assert_msg(err->code == code, "refused with %s (%s), expected %s",
		      chipd_code_name(err->code), err->message, chipd_code_name(code));
	ck_assert_int_eq(err->retryable, chipd_code_retryable(code));
}

START_TEST(router_bound_answers_queue_full)
{
	const char *const args[] = {"--chips", "1", "--max-pending", "2", NULL};
	struct ft_ledger l = {0};
	struct chipd_error err;
	struct ft_stats st;
	chipd_stream *s[3];
	struct cd d;

	ft_start(&d, args);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ft_submit(&d, 200, 0, 1000, -1, 0, &s[i], &err), 0);
		l.submitted++;
	}
	expect_refused(ft_submit(&d, 5, 0, 0, -1, 0, &s[2], &err), &err, CHIPD_E_QUEUE_FULL);
	ck_assert(err.retryable);
	ck_assert_str_eq(err.message, "2 requests in flight (the node's bound max-pending=2)");
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ft_drain(s[i], &l, CD_CALL_MS), CHIPD_OK);
		chipd_stream_close(s[i], CD_CALL_MS);
	}
	/* retried later, it runs */
	ck_assert_int_eq(ft_submit(&d, 5, 0, 0, -1, 0, &s[2], &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s[2], &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s[2], CD_CALL_MS);
	ft_check_accounting(&d, &l, 0);
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_queue_full], 1);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* The longest build the synthetic workload allows: the two submits that follow must
 * reach the worker within it, which takes milliseconds even on a loaded machine. */
#define QF_BUILD_US 1000000u

/* --queue 1: the worker's admission queue holds one request that O has not taken.
 * O is kept busy in a 1 s build (host_us, QF_BUILD_US), so the second request waits
 * in the queue and the third is refused by the worker; the router passes queue_full
 * on. */
START_TEST(worker_queue_answers_queue_full)
{
	const char *const args[] = {"--chips", "1", "--queue", "1", NULL};
	struct ft_ledger l = {0};
	struct chipd_error err;
	struct ft_stats st;
	chipd_stream *a, *b, *c;
	struct cd d;

	ft_start(&d, args);
	ck_assert_int_eq(ft_submit(&d, 1, QF_BUILD_US, 0, -1, 0, &a, &err), 0);
	l.submitted++;
	/* O took it (its active gauge, set before the build) and burns its build */
	for (uint64_t end = ft_now_ms() + 10000; ft_now_ms() < end; usleep(1000)) {
		ft_stats(&d, &st);
		if (st.chip[0][PROTO_WRK_active] == 1)
			break;
	}
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_active], 1);
	ck_assert_int_eq(ft_submit(&d, 2, 0, 0, -1, 0, &b, &err), 0);
	l.submitted++;
	expect_refused(ft_submit(&d, 2, 0, 0, -1, 0, &c, &err), &err, CHIPD_E_QUEUE_FULL);
	ck_assert_int_eq(ft_drain(a, &l, CD_CALL_MS), CHIPD_OK);
	ck_assert_int_eq(ft_drain(b, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(a, CD_CALL_MS);
	chipd_stream_close(b, CD_CALL_MS);
	ft_check_accounting(&d, &l, 0);
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_rejected], 1);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_queue_full], 1);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

START_TEST(kv_pool_exhausted_answers_no_capacity)
{
	const char *const args[] = {"--chips", "1", "--kv-blocks", "48", NULL};
	/* 2 * 4096 / 256 = 32 of the 48 blocks, held while its 4096 tokens wait to be read
	 * (a ring holds 1024) */
	struct chipd_param hold[] = {{"layers", 1},	 {"heads", 1},	  {"kv_heads", 1},
				     {"head_dim", 16},	 {"block_size", 256}, {"context", 0},
				     {"tokens", 4096}};
	struct chipd_param never[] = {{"layers", 8}, {"context", 1000}, {"tokens", 4}};
	struct chipd_param small[] = {{"layers", 1}, {"context", 8}, {"tokens", 2}};
	struct chipd_request req = {.workload = "paged_attention", .chip = -1};
	struct ft_ledger l = {0};
	struct chipd_error err;
	struct ft_stats st;
	chipd_stream *s, *held;
	uint64_t id;
	struct cd d;

	ft_start(&d, args);
	/* more blocks than the chip's whole cache: never, so not retryable */
	req.params = never;
	req.nparams = 3;
	expect_refused(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), &err,
		       CHIPD_E_BAD_REQUEST);
	ck_assert(!err.retryable);
	ck_assert_msg(strstr(err.message, "more than the chip's KV cache holds (kv-blocks=48)"),
		      "message: %s", err.message);
	req.params = hold;
	req.nparams = 7;
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &held, &err), 0);
	l.submitted++;
	/* a second one does not fit now: retryable */
	expect_refused(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), &err,
		       CHIPD_E_NO_CAPACITY);
	ck_assert(err.retryable);
	ck_assert_msg(strstr(err.message, "32 KV blocks needed, 16 free"), "message: %s",
		      err.message);
	/* one that fits still runs */
	req.params = small;
	req.nparams = 3;
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(ft_drain(held, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(held, CD_CALL_MS);
	ft_check_accounting(&d, &l, 0);
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_no_capacity], 1);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_bad_request], 1);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_kv_blocks_used], 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A submit that names no chip, refused no_capacity by the chip the router chose, is
 * offered to the other ready chips before the refusal is answered: chip 0's KV cache
 * is held (32 of 48 blocks by a stream nobody reads yet), chip 1 runs an endless stream
 * (so the two tie and the router picks chip 0); a request of 32 blocks runs on chip 1.
 * One more finds both full: no_capacity, each chip having refused it once. */
START_TEST(no_capacity_tries_the_other_chips)
{
	const char *const args[] = {"--chips", "2", "--kv-blocks", "48", NULL};
	struct chipd_param hold[] = {{"layers", 1},	 {"heads", 1},	  {"kv_heads", 1},
				     {"head_dim", 16},	 {"block_size", 256}, {"context", 0},
				     {"tokens", 4096}};
	struct chipd_param endless[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	struct chipd_request req = {.workload = "paged_attention", .chip = 0};
	struct chipd_request busy = {.workload = "synthetic", .params = endless, .nparams = 2, .chip = 1};
	struct ft_ledger l = {0};
	struct chipd_error err;
	struct ft_stats st;
	chipd_stream *s, *held, *spin;
	uint64_t id;
	struct cd d;

	ft_start(&d, args);
	req.params = hold;
	req.nparams = 7;
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &held, &err), 0);
	ck_assert_int_eq(chipd_submit(d.conn, &busy, CD_CALL_MS, &id, &spin, &err), 0);
	l.submitted += 2;
	req.chip = -1;
	ck_assert_msg(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err) == 0,
		      "a node with room on chip 1 refused it: %s", err.message);
	l.submitted++;
	expect_refused(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), &err,
		       CHIPD_E_NO_CAPACITY);
	ck_assert(err.retryable);
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(ft_drain(held, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(held, CD_CALL_MS);
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.chip[1][PROTO_WRK_completed], 1); /* the moved one */
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_rejected], 2);
	ck_assert_uint_eq(st.chip[1][PROTO_WRK_rejected], 1);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_no_capacity], 1);
	chipd_stream_close(spin, CD_CALL_MS); /* cancels it */
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A reader that never reads: its request pauses when its ring is full, the others
 * proceed; it then reads everything, in order. */
START_TEST(unread_stream_pauses_only_itself)
{
	struct ft_ledger l = {0};
	struct chipd_error err;
	struct ft_stats st;
	chipd_stream *idle, *s;
	struct cd d;

	ft_start(&d, one_chip);
	ck_assert_int_eq(ft_submit(&d, 5000, 0, 0, -1, 0, &idle, &err), 0);
	l.submitted++;
	tu_sleep_ms(200);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(ft_submit(&d, 100, 0, 0, -1, 0, &s, &err), 0);
		l.submitted++;
		ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
		chipd_stream_close(s, CD_CALL_MS);
	}
	/* O retires an ended request at its next round: the gauge follows shortly */
	for (uint64_t end = ft_now_ms() + 2000; ft_now_ms() < end; usleep(5000)) {
		ft_stats(&d, &st);
		if (st.chip[0][PROTO_WRK_active] == 1)
			break;
	}
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_active], 1);
	ck_assert_uint_le(st.chip[0][PROTO_WRK_tokens], 5 * 100 + 1023);
	ck_assert_int_eq(ft_drain(idle, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(idle, CD_CALL_MS);
	ck_assert_uint_eq(l.tokens, 5000 + 5 * 100);
	/* a paused request still ends at its deadline: the reader finds the tokens
	 * pushed before the pause, then timeout */
	ck_assert_int_eq(ft_submit(&d, 5000, 0, 0, -1, 300, &idle, &err), 0);
	l.submitted++;
	tu_sleep_ms(600);
	{
		uint64_t before = l.tokens;

		ck_assert_int_eq(ft_drain(idle, &l, CD_CALL_MS), CHIPD_E_TIMEOUT);
		ck_assert_uint_le(l.tokens - before, 1023);
	}
	chipd_stream_close(idle, CD_CALL_MS);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A trace collect whose path is relative is refused bad_request, naming "path", and
 * nothing is written (the fixture's chipd works in this working directory). */
START_TEST(relative_trace_path_refused)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	struct proto_node n;
	struct cd d;
	int rc;

	ck_assert_ptr_nonnull(m);
	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	rc = ft_raw_call(&n, m_rel_trace, sizeof(m_rel_trace), PROTO_OP_TRACE, m, CD_CALL_MS);
	ck_assert_int_eq(rc, 0);
	ck_assert(!m->ok);
	ck_assert_msg(m->err.code == CHIPD_E_BAD_REQUEST, "%s (%s)",
		      chipd_code_name((enum chipd_code)m->err.code), m->err.message);
	ck_assert_msg(strstr(m->err.message, "path"), "message: %s", m->err.message);
	ck_assert_int_eq(access("rel.json", F_OK), -1);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0);
	proto_node_detach(&n);
	free(m);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

void ft_add_message_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"malformed_messages", malformed_messages_answered_and_server_keeps_serving},
	    {"bad_regions_refused_by_connect", bad_regions_refused_by_connect},
	    {"router_bound_answers_queue_full", router_bound_answers_queue_full},
	    {"worker_queue_answers_queue_full", worker_queue_answers_queue_full},
	    {"kv_pool_exhausted_answers_no_capacity", kv_pool_exhausted_answers_no_capacity},
	    {"no_capacity_tries_the_other_chips", no_capacity_tries_the_other_chips},
	    {"unread_stream_pauses_only_itself", unread_stream_pauses_only_itself},
	    {"relative_trace_path_refused", relative_trace_path_refused},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
