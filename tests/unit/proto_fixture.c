/* proto_fixture.c - see proto_fixture.h. */
#include "proto_fixture.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void raw_init(struct raw *r)
{
	msgpack_sbuffer_init(&r->sb);
	msgpack_packer_init(&r->pk, &r->sb, msgpack_sbuffer_write);
}

void raw_free(struct raw *r)
{
	msgpack_sbuffer_destroy(&r->sb);
}

void raw_str(struct raw *r, const char *s)
{
	msgpack_pack_str(&r->pk, strlen(s));
	msgpack_pack_str_body(&r->pk, s, strlen(s));
}

void raw_request(struct raw *r, const char *op, uint32_t npairs)
{
	raw_init(r);
	msgpack_pack_map(&r->pk, npairs);
	raw_str(r, "v");
	msgpack_pack_int(&r->pk, 1);
	raw_str(r, "op");
	raw_str(r, op);
}

void expect_bad_request(const void *buf, size_t len, enum chipd_code code, const char *needle)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(proto_decode_request(buf, len, m, &err), -EBADMSG);
	ck_assert_msg(err.code == code, "code %s, want %s: %s",
		      chipd_code_name((enum chipd_code)err.code), chipd_code_name(code),
		      err.message);
	ck_assert_msg(strstr(err.message, needle), "message \"%s\" lacks \"%s\"", err.message,
		      needle);
	free(m);
}

void expect_bad_raw(struct raw *r, enum chipd_code code, const char *needle)
{
	expect_bad_request(r->sb.data, r->sb.size, code, needle);
	raw_free(r);
}

void expect_bad_answer(enum proto_op op, struct raw *r, const char *needle)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(proto_decode_answer(op, r->sb.data, r->sb.size, m, &err), -EBADMSG);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, needle), "message \"%s\" lacks \"%s\"", err.message,
		      needle);
	raw_free(r);
	free(m);
}
