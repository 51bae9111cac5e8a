/* raw_call.c - one request to a running chipd through a raw mailbox call, for the
 * protocol examples of docs/protocol.md (tests/docs/examples.py):
 *
 *   docs_raw_call INSTANCE HEX [TIMEOUT_MS]
 *
 * attaches the node region of INSTANCE, posts the bytes HEX spells (pairs of hex
 * digits, spaces allowed) as they are into one client mailbox slot, waits for the
 * answer (TIMEOUT_MS, 10000 by default) and prints the answer's bytes as hex on one
 * line. Nothing is encoded or decoded here: the bytes are the document's, the judging
 * of the answer is the caller's. Exit 0 with an answer; 1 when the mailbox layer
 * answered instead of chipd (its errno is printed), the call timed out or the node
 * could not be attached; 64 for bad usage. */
#include "hello.h"
#include "mbox.h"
#include "node.h"
#include "region.h"
#include "wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RC_USAGE 64

/* Decodes the hex digits of @hex (whitespace ignored) into @out (@cap bytes). Returns
 * the byte count, or -EINVAL for another character or an odd digit count, -EMSGSIZE
 * when @out is too small. */
static long hex_decode(const char *hex, unsigned char *out, size_t cap)
{
	size_t n = 0;
	int hi = -1;

	for (const char *p = hex; *p; p++) {
		int v;

		if (*p == ' ' || *p == '\t' || *p == '\n')
			continue;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			v = *p - 'A' + 10;
		else
			return -EINVAL;
		if (hi < 0) {
			hi = v;
			continue;
		}
		if (n == cap)
			return -EMSGSIZE;
		out[n++] = (unsigned char)(hi << 4 | v);
		hi = -1;
	}
	return hi < 0 ? (long)n : -EINVAL;
}

int main(int argc, char **argv)
{
	static unsigned char req[1u << 20];
	struct proto_node node = {0};
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX];
	struct mbox_ticket t;
	struct proto_hello hello = {.fd = -1};
	char why[CHIPD_MSG_MAX];
	const unsigned char *ans;
	const void *buf;
	unsigned long ms = 10000;
	uint32_t alen;
	long len;
	int rc;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: docs_raw_call INSTANCE HEX [TIMEOUT_MS]\n");
		return RC_USAGE;
	}
	if (argc == 4)
		ms = strtoul(argv[3], NULL, 10);
	len = hex_decode(argv[2], req, sizeof(req));
	if (len < 0 || ms == 0) {
		fprintf(stderr, "docs_raw_call: bad hex or timeout\n");
		return RC_USAGE;
	}
	if (shm_region_name(name, sizeof(name), (unsigned)geteuid(), argv[1]) < 0) {
		fprintf(stderr, "docs_raw_call: bad instance name '%s'\n", argv[1]);
		return RC_USAGE;
	}
	rc = proto_node_attach(&node, name, &diag);
	if (rc < 0) {
		fprintf(stderr, "docs_raw_call: attach %s: %s (%s)\n", name, strerror(-rc),
			diag.msg);
		return 1;
	}
	/* the handshake (docs/protocol.md §9): the supervisor serves connected pids only */
	rc = proto_hello(&node, (uint32_t)ms, &hello, why, sizeof(why));
	if (rc < 0) {
		fprintf(stderr, "docs_raw_call: hello: %s\n", why);
		goto out_detach;
	}
	if ((unsigned long)len > mbox_req_cap(&node.mbox)) {
		fprintf(stderr, "docs_raw_call: %ld bytes exceed the slot's %u\n", len,
			mbox_req_cap(&node.mbox));
		rc = -EMSGSIZE;
		goto out_detach;
	}
	rc = mbox_claim(&node.mbox, &t);
	if (rc < 0) {
		fprintf(stderr, "docs_raw_call: claim: %s\n", strerror(-rc));
		goto out_detach;
	}
	memcpy(mbox_req_buf(&node.mbox, t), req, (size_t)len);
	rc = mbox_post(&node.mbox, t, (uint32_t)len);
	if (rc == 0)
		rc = mbox_wait(&node.mbox, t, shm_now_ns() + (uint64_t)ms * 1000000u);
	if (rc < 0) {
		fprintf(stderr, "docs_raw_call: no answer: %s\n", strerror(-rc));
		if (rc != -ECONNRESET)
			mbox_give_up(&node.mbox, t);
		goto out_detach;
	}
	rc = mbox_response(&node.mbox, t, &buf, &alen);
	if (rc < 0) {
		fprintf(stderr, "docs_raw_call: the mailbox answered: %s (%d)\n", strerror(-rc),
			-rc);
	} else {
		ans = buf;
		for (uint32_t i = 0; i < alen; i++)
			printf("%02x", ans[i]);
		printf("\n");
	}
	mbox_release(&node.mbox, t);
out_detach:
	if (hello.fd >= 0)
		close(hello.fd);
	proto_node_detach(&node);
	return rc < 0 ? 1 : 0;
}
