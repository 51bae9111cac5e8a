/* proto_malformed.c - malformed messages: each class is refused with the right code
 * and a message naming the field; no prefix, corruption or huge declared count makes
 * the decoder read outside its buffer (the suite also runs under ASan). */
#include "proto_fixture.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

START_TEST(unknown_key_named)
{
	struct raw r;

	raw_request(&r, "ping", 3);
	raw_str(&r, "colour");
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"colour\": unknown key in a request");
}
END_TEST

START_TEST(missing_required_key_named)
{
	struct raw r;

	raw_request(&r, "cancel", 2);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": missing");
	raw_request(&r, "trace", 3);
	raw_str(&r, "act");
	raw_str(&r, "collect");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"path\": required with");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "op");
	raw_str(&r, "ping");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"v\": missing");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"op\": missing");
}
END_TEST

START_TEST(wrong_type_named)
{
	struct raw r;

	raw_request(&r, "cancel", 3);
	raw_str(&r, "id");
	raw_str(&r, "7");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": expected int, got str");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "gemm");
	raw_str(&r, "params");
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "m");
	msgpack_pack_double(&r.pk, 1.5);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"params.m\": expected int, got float");
	raw_request(&r, "submit", 3);
	raw_str(&r, "wl");
	msgpack_pack_nil(&r.pk);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"wl\": expected str, got nil");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 2);
	raw_str(&r, "v");
	raw_str(&r, "1");
	raw_str(&r, "op");
	raw_str(&r, "ping");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"v\": expected uint, got str");
	raw_init(&r);
	msgpack_pack_array(&r.pk, 0);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"message\": expected map, got array");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 1);
	msgpack_pack_int(&r.pk, 1);
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "key #0 is not a string");
}
END_TEST

START_TEST(out_of_range_named)
{
	struct raw r;

	raw_request(&r, "cancel", 3);
	raw_str(&r, "id");
	msgpack_pack_int(&r.pk, 0);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": 0 out of range 1..");
	raw_request(&r, "cancel", 3);
	raw_str(&r, "id");
	msgpack_pack_uint64(&r.pk, UINT64_MAX);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": 18446744073709551615 out of range");
	raw_request(&r, "stats", 3);
	raw_str(&r, "chip");
	msgpack_pack_int(&r.pk, -1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"chip\": -1 out of range 0..63");
	raw_request(&r, "submit", 3);
	raw_str(&r, "wl");
	raw_str(&r, "a_workload_name_of_32_characters");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"wl\": length 32 out of range 1..31");
	raw_request(&r, "submit", 3);
	raw_str(&r, "wl");
	raw_str(&r, "Gemm");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"wl\": byte 0x47 not allowed");
	raw_request(&r, "trace", 3);
	raw_str(&r, "act");
	raw_str(&r, "rewind");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"act\": unknown value \"rewind\"");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "gemm");
	raw_str(&r, "params");
	msgpack_pack_map(&r.pk, CHIPD_MAX_PARAMS + 1);
	for (int i = 0; i <= CHIPD_MAX_PARAMS; i++) {
		char k[8] = {'k', (char)('a' + i), 0};

		raw_str(&r, k);
		msgpack_pack_int(&r.pk, i);
	}
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"params\": 17 entries, at most 16");
}
END_TEST

START_TEST(duplicate_keys_refused)
{
	struct raw r;

	raw_request(&r, "cancel", 4);
	raw_str(&r, "id");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "id");
	msgpack_pack_int(&r.pk, 2);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": duplicate key");
	raw_request(&r, "ping", 3);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"v\": duplicate key");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "gemm");
	raw_str(&r, "params");
	msgpack_pack_map(&r.pk, 2);
	raw_str(&r, "n");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "n");
	msgpack_pack_int(&r.pk, 2);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"params\": duplicate key \"n\"");
}
END_TEST

START_TEST(version_and_op_checked_first)
{
	struct raw r;

	/* A newer version is refused as such, not for keys this peer does not know. */
	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "future_key");
	msgpack_pack_true(&r.pk);
	raw_str(&r, "op");
	raw_str(&r, "hyperdrive");
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 2);
	expect_bad_raw(&r, CHIPD_E_UNSUPPORTED_VERSION, "\"v\": version 2 not supported");
	raw_request(&r, "hyperdrive", 2);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"op\": unknown op \"hyperdrive\"");
	raw_request(&r, "ping", 3);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"ok\": unknown key in a request");
}
END_TEST

/* A negative "v" is no version at all: bad_request, and the message says what is wrong
 * with it (both integer kinds once printed as "int": "expected int, got int"). The
 * same for an unsigned field of an answer. */
START_TEST(negative_integer_named_by_value)
{
	struct raw r;

	raw_init(&r);
	msgpack_pack_map(&r.pk, 2);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, -1);
	raw_str(&r, "op");
	raw_str(&r, "ping");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"v\": -1 is negative, not a version");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 2);
	raw_str(&r, "v");
	msgpack_pack_int64(&r.pk, INT64_MIN);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	expect_bad_answer(PROTO_OP_PING, &r, "\"v\": -9223372036854775808 is negative");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	raw_str(&r, "ctr");
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "tokens");
	msgpack_pack_int(&r.pk, -5);
	expect_bad_answer(PROTO_OP_STATS, &r, "\"ctr.tokens\": -5 is negative, not a counter");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	raw_str(&r, "ctr");
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "tokens");
	msgpack_pack_double(&r.pk, 1.5);
	expect_bad_answer(PROTO_OP_STATS, &r, "\"ctr.tokens\": expected uint, got float");
}
END_TEST

START_TEST(every_truncation_refused)
{
	unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;
	size_t len;

	proto_msg_init(m, PROTO_OP_SUBMIT);
	strcpy(m->wl, "paged_attention");
	m->nparams = 2;
	strcpy(m->params[0].key, "layers");
	m->params[0].value = -70000;
	strcpy(m->params[1].key, "heads");
	m->params[1].value = INT64_MAX;
	m->id = 1ll << 40;
	m->chip = 2;
	ck_assert_int_eq(proto_encode_request(m, buf, sizeof(buf), &len, &err), 0);
	for (size_t cut = 0; cut < len; cut++) {
		/* A fresh heap copy of exactly @cut bytes: ASan sees any read past it. */
		unsigned char *p = malloc(cut ? cut : 1);

		memcpy(p, buf, cut);
		ck_assert_int_eq(proto_decode_request(p, cut, m, &err), -EBADMSG);
		ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
		ck_assert_msg(strstr(err.message, "truncated"), "cut %zu: %s", cut, err.message);
		free(p);
	}
	free(m);
}
END_TEST

START_TEST(trailing_bytes_refused)
{
	struct raw r;

	raw_request(&r, "ping", 2);
	msgpack_pack_int(&r.pk, 0);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "1 trailing bytes after the map");
}
END_TEST

START_TEST(nesting_too_deep_refused)
{
	struct raw r;

	raw_request(&r, "ping", 3);
	raw_str(&r, "x");
	for (int i = 0; i < 4; i++)
		msgpack_pack_array(&r.pk, 1);
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"x\": nested deeper than 4 levels");
	/* Three levels below the top are structurally fine (then the key is unknown). */
	raw_request(&r, "ping", 3);
	raw_str(&r, "x");
	for (int i = 0; i < 3; i++)
		msgpack_pack_array(&r.pk, 1);
	msgpack_pack_int(&r.pk, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"x\": unknown key");
}
END_TEST

START_TEST(larger_than_slot_is_too_large)
{
	unsigned char *big = calloc(1, PROTO_REQ_MAX + 1);

	expect_bad_request(big, PROTO_REQ_MAX + 1, CHIPD_E_TOO_LARGE, "4097 bytes, the limit is");
	free(big);
}
END_TEST

START_TEST(huge_declared_counts_fail_fast)
{
	/* Each declares ~2^32 elements in a few bytes: msgpack-c's unpacker would reserve
	 * gigabytes; ours checks the count against the bytes left. */
	static const struct {
		const char *bytes;
		size_t len;
		const char *needle;
	} cases[] = {
#define BYTES(s) s, sizeof(s) - 1
	    {BYTES("\xdd\xff\xff\xff\xff"), "\"message\": truncated"},
	    {BYTES("\xdf\xff\xff\xff\xff"), "\"message\": truncated"},
	    {BYTES("\x83\xa1v\x01\xa2op\xa4ping\xa1x\xdd\xff\xff\xff\xff"), "\"x\": truncated"},
	    {BYTES("\x83\xa1v\x01\xa2op\xa4ping\xa1x\xdb\xff\xff\xff\xff"), "\"x\": truncated"},
	    {BYTES("\x83\xa1v\x01\xa2op\xa4ping\xa1x\xc9\xff\xff\xff\xff\x01"), "\"x\": truncated"},
	    {BYTES("\x83\xa1v\x01\xa2op\xa4ping\xa1x\xc1"), "\"x\": invalid msgpack byte 0xc1"},
	    {BYTES(""), "\"message\": truncated"},
#undef BYTES
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *p = malloc(cases[i].len + 1);

		memcpy(p, cases[i].bytes, cases[i].len);
		expect_bad_request(p, cases[i].len, CHIPD_E_BAD_REQUEST, cases[i].needle);
		free(p);
	}
}
END_TEST

/* Asserts that an @op answer whose list @list holds one record {@key: @value} is
 * refused naming @needle: a value out of range is judged before any key is missing. */
static void expect_bad_field(enum proto_op op, const char *list, const char *key, int64_t value,
			     const char *needle)
{
	struct raw r;

	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	raw_str(&r, list);
	msgpack_pack_array(&r.pk, 1);
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, key);
	msgpack_pack_int64(&r.pk, value);
	expect_bad_answer(op, &r, needle);
}

START_TEST(bad_answers_refused)
{
	struct raw r;

	raw_init(&r);
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	expect_bad_answer(PROTO_OP_PING, &r, "\"ok\": missing");
	raw_init(&r);
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "ok");
	msgpack_pack_false(&r.pk);
	raw_str(&r, "error");
	msgpack_pack_map(&r.pk, 3);
	raw_str(&r, "code");
	raw_str(&r, "on_fire");
	raw_str(&r, "message");
	raw_str(&r, "");
	raw_str(&r, "retryable");
	msgpack_pack_false(&r.pk);
	expect_bad_answer(PROTO_OP_PING, &r, "\"error.code\": unknown value \"on_fire\"");
	expect_bad_field(PROTO_OP_STATUS, "chips", "chip", 99,
			 "\"chips[0].chip\": 99 out of range");
	/* a callable's count is never negative */
	expect_bad_field(PROTO_OP_WORKLOADS, "workloads", "tokens", -1,
			 "\"workloads[0].tokens\": -1 out of range");
}
END_TEST

/* "input" is msgpack bin of 1..1024 bytes, in a submit or an assign only; bin is no
 * value of any other field. */
START_TEST(input_bin_checked)
{
	static const char bytes[1025] = {1, 2, 3};
	struct raw r;

	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input");
	raw_str(&r, "abc");
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": expected bin, got str");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input");
	msgpack_pack_array(&r.pk, 0);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": expected bin, got array");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input");
	msgpack_pack_bin(&r.pk, 0);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": 0 bytes out of range 1..1024");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input");
	msgpack_pack_bin(&r.pk, sizeof(bytes));
	msgpack_pack_bin_body(&r.pk, bytes, sizeof(bytes));
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": 1025 bytes out of range 1..1024");
	/* a bin16 header declaring more bytes than the message holds */
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input");
	msgpack_pack_bin(&r.pk, 1000);
	msgpack_pack_bin_body(&r.pk, bytes, 10);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": truncated");
	/* bin anywhere else */
	raw_request(&r, "submit", 3);
	raw_str(&r, "wl");
	msgpack_pack_bin(&r.pk, 4);
	msgpack_pack_bin_body(&r.pk, "echo", 4);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"wl\": expected str, got bin");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "params");
	msgpack_pack_map(&r.pk, 1);
	raw_str(&r, "tokens");
	msgpack_pack_bin(&r.pk, 1);
	msgpack_pack_bin_body(&r.pk, bytes, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"params.tokens\": expected int, got bin");
	raw_request(&r, "cancel", 3);
	raw_str(&r, "id");
	msgpack_pack_bin(&r.pk, 1);
	msgpack_pack_bin_body(&r.pk, bytes, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"id\": expected int, got bin");
	raw_request(&r, "cancel", 4);
	raw_str(&r, "id");
	msgpack_pack_int(&r.pk, 5);
	raw_str(&r, "input");
	msgpack_pack_bin(&r.pk, 1);
	msgpack_pack_bin_body(&r.pk, bytes, 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": unknown key in a cancel request");
}
END_TEST

/* The data-area ranges: in range, in pairs, and input one way only. */
START_TEST(data_ranges_checked)
{
	struct raw r;

	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input_off");
	msgpack_pack_int(&r.pk, 10);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input_len\": required with \"input_off\"");
	raw_request(&r, "submit", 4);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "output_off");
	msgpack_pack_int(&r.pk, 8);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"output_cap\": required with \"output_off\"");
	raw_request(&r, "submit", 5);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input_off");
	msgpack_pack_int(&r.pk, 0);
	raw_str(&r, "input_len");
	msgpack_pack_int(&r.pk, (1 << 20) + 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input_len\": 1048577 out of range 1..1048576");
	raw_request(&r, "submit", 5);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "output_off");
	msgpack_pack_int(&r.pk, -1);
	raw_str(&r, "output_cap");
	msgpack_pack_int(&r.pk, 8);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"output_off\": -1 out of range 0..4294967295");
	raw_request(&r, "submit", 6);
	raw_str(&r, "wl");
	raw_str(&r, "echo");
	raw_str(&r, "input_off");
	msgpack_pack_int(&r.pk, 0);
	raw_str(&r, "input_len");
	msgpack_pack_int(&r.pk, 4);
	raw_str(&r, "input");
	msgpack_pack_bin(&r.pk, 1);
	msgpack_pack_bin_body(&r.pk, "x", 1);
	expect_bad_raw(&r, CHIPD_E_BAD_REQUEST, "\"input\": not with \"input_off\"");
}
END_TEST

void proto_add_bad_tcases(Suite *s)
{
	TCase *tc = tcase_create("malformed");

	tcase_add_test(tc, unknown_key_named);
	tcase_add_test(tc, missing_required_key_named);
	tcase_add_test(tc, wrong_type_named);
	tcase_add_test(tc, out_of_range_named);
	tcase_add_test(tc, duplicate_keys_refused);
	tcase_add_test(tc, version_and_op_checked_first);
	tcase_add_test(tc, negative_integer_named_by_value);
	tcase_add_test(tc, every_truncation_refused);
	tcase_add_test(tc, trailing_bytes_refused);
	tcase_add_test(tc, nesting_too_deep_refused);
	tcase_add_test(tc, larger_than_slot_is_too_large);
	tcase_add_test(tc, huge_declared_counts_fail_fast);
	tcase_add_test(tc, bad_answers_refused);
	tcase_add_test(tc, input_bin_checked);
	tcase_add_test(tc, data_ranges_checked);
	suite_add_tcase(s, tc);
}
