/* proto_fixture.h - shared steps of the check_proto suites: raw msgpack built with
 * msgpack-c (so malformed messages are written by an independent encoder), and the
 * assertion that a message is refused with a given code and field. */
#ifndef CHIPD_PROTO_FIXTURE_H
#define CHIPD_PROTO_FIXTURE_H

#include "proto.h"

#include <check.h>
#include <msgpack.h>

/* A message being built: an sbuffer and its packer. */
struct raw {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

void raw_init(struct raw *r);
void raw_free(struct raw *r);
void raw_str(struct raw *r, const char *s);
/* Opens a request map of @npairs pairs whose first two are "v": 1 and "op": @op. */
void raw_request(struct raw *r, const char *op, uint32_t npairs);

/* Asserts that decoding @len bytes as a request fails with @code and a message that
 * contains @needle. */
void expect_bad_request(const void *buf, size_t len, enum chipd_code code, const char *needle);
void expect_bad_raw(struct raw *r, enum chipd_code code, const char *needle);

/* The same for the answer to an @op request. */
void expect_bad_answer(enum proto_op op, struct raw *r, const char *needle);

/* Adds the tcases about malformed messages (proto_malformed.c). */
void proto_add_bad_tcases(Suite *s);

/* The largest workloads answer in @m (check_proto's round trips and size bound). */
void proto_fill_workloads(struct proto_msg *m);

/* A message of @op, initialised (proto_msg_init); free() it. */
struct proto_msg *new_msg(enum proto_op op);
/* Four parameters in @m, at the int64 bounds among them. */
void fill_params(struct proto_msg *m);
/* Every field of @m's request (its op's) set to a value other than its default. */
void fill_request(struct proto_msg *m);

/* Adds the tcase of the handler table (proto_dispatch_cases.c). */
void proto_add_dispatch_tcases(Suite *s);

#endif
