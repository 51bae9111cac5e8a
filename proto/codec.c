/* codec.c - the table-driven msgpack codec: decoding with the bounded reader of
 * mpread.h, encoding with msgpack-c's packer into the caller's buffer, and the one
 * error envelope. The tables are in schema.c. */
#include "mpread.h"
#include "schema.h"

#include <errno.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#define PATH_LEN 80 /* "chips[63].restarts" and user keys shown up to 24 bytes */
#define SHOW_LEN 24 /* bytes of a peer's key quoted in a message */

/* ---- checks shared by the encoder and the decoder ---- */

__attribute__((format(printf, 3, 4))) static int fail_at(struct proto_error *err, const char *path,
							 const char *fmt, ...)
{
	char detail[CHIPD_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	proto_fail(err, CHIPD_E_BAD_REQUEST, "\"%s\": %s", path, detail);
	return -EBADMSG;
}

static bool char_ok(enum field_charset cs, unsigned char c)
{
	bool ident = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';

	switch (cs) {
	case CS_IDENT:
		return ident;
	case CS_STAT:
		return ident || c == '.';
	default:
		return c >= 0x20 && c != 0x7f;
	}
}

/* A peer's bytes made printable and short enough to quote in a message. */
static void show(char *out, size_t cap, const void *s, size_t len)
{
	const unsigned char *p = s;
	size_t n = len < cap - 1 ? len : cap - 1;

	for (size_t i = 0; i < n; i++)
		out[i] = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' ? (char)p[i] : '?';
	out[n] = 0;
}

static int check_int(const struct field *f, int64_t v, const char *path, struct proto_error *err)
{
	if (v < f->min || v > f->max)
		return fail_at(err, path, "%" PRId64 " out of range %" PRId64 "..%" PRId64, v,
			       f->min, f->max);
	return 0;
}

static int check_str(enum field_charset cs, int64_t min, int64_t max, const char *s, size_t len,
		     const char *path, struct proto_error *err)
{
	if ((int64_t)len < min || (int64_t)len > max)
		return fail_at(err, path, "length %zu out of range %" PRId64 "..%" PRId64, len, min,
			       max);
	for (size_t i = 0; i < len; i++)
		if (!char_ok(cs, (unsigned char)s[i]))
			return fail_at(err, path, "byte 0x%02x not allowed%s", (unsigned char)s[i],
				       cs == CS_IDENT  ? " (use [a-z0-9_])"
				       : cs == CS_STAT ? " (use [a-z0-9_.])"
						       : "");
	return 0;
}

static int check_count(const struct field *f, uint32_t n, const char *path, struct proto_error *err)
{
	if ((int64_t)n > f->max)
		return fail_at(err, path, "%" PRIu32 " entries, at most %" PRId64, n, f->max);
	return 0;
}

static int check_bin(const struct field *f, uint32_t n, const char *path, struct proto_error *err)
{
	if ((int64_t)n < f->min || (int64_t)n > f->max)
		return fail_at(err, path, "%" PRIu32 " bytes out of range %" PRId64 "..%" PRId64, n,
			       f->min, f->max);
	return 0;
}

/* Formats a field path; a path cut short by the buffer is still a fine message. */
__attribute__((format(printf, 2, 3))) static void pathf(char *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, PATH_LEN, fmt, ap);
	va_end(ap);
}

static void sub_path(char *out, const char *prefix, const char *key)
{
	if (prefix)
		pathf(out, "%s.%s", prefix, key);
	else
		pathf(out, "%s", key);
}

/* ---- decoding ---- */

static const char *kind_name(enum mp_kind k)
{
	static const char *const names[] = {"nil", "bool", "int", "int",   "float",
					    "str", "bin",  "ext", "array", "map"};

	return names[k];
}

static int wrong_type(const char *path, const char *want, const struct mp_item *it,
		      struct proto_error *err)
{
	return fail_at(err, path, "expected %s, got %s", want, kind_name(it->kind));
}

/* An unsigned integer is expected at @path: a negative one is named by its value
 * (both kinds are "int" to kind_name, so "expected uint, got int" would say nothing),
 * anything else by its type. @what says what the value is ("a version"). */
static int not_unsigned(const char *path, const char *what, const struct mp_item *it,
			struct proto_error *err)
{
	if (it->kind == MP_INT)
		return fail_at(err, path, "%" PRId64 " is negative, not %s", it->v.i, what);
	return wrong_type(path, "uint", it, err);
}

/* A reader failure, as a message at @path. */
static int malformed(int rc, const char *path, struct proto_error *err)
{
	if (rc == -ELOOP)
		return fail_at(err, path, "nested deeper than %d levels", PROTO_MAX_DEPTH);
	if (rc == -EBADMSG)
		return fail_at(err, path, "invalid msgpack byte 0xc1");
	return fail_at(err, path, "truncated");
}

static int next(struct mp_reader *r, struct mp_item *it, const char *path, struct proto_error *err)
{
	int rc = mpr_next(r, it);

	return rc ? malformed(rc, path, err) : 0;
}

static int get_int(const struct mp_item *it, int64_t *v, const char *path, struct proto_error *err)
{
	if (it->kind == MP_INT) {
		*v = it->v.i;
		return 0;
	}
	if (it->kind != MP_UINT)
		return wrong_type(path, "int", it, err);
	if (it->v.u > INT64_MAX)
		return fail_at(err, path, "%" PRIu64 " out of range", it->v.u);
	*v = (int64_t)it->v.u;
	return 0;
}

static int get_str(const struct mp_item *it, enum field_charset cs, int64_t min, int64_t max,
		   char *out, const char *path, struct proto_error *err)
{
	if (it->kind != MP_STR)
		return wrong_type(path, "str", it, err);
	if (check_str(cs, min, max, (const char *)it->ptr, it->len, path, err))
		return -EBADMSG;
	memcpy(out, it->ptr, it->len);
	out[it->len] = 0;
	return 0;
}

static int decode_map(struct mp_reader *r, const struct schema *s, void *obj, uint32_t npairs,
		      const char *prefix, struct proto_error *err);

/* A map of string keys to integers: "params" (int64) or "ctr" (uint64). */
static int decode_pairs(struct mp_reader *r, const struct field *f, const struct mp_item *it,
			void *obj, const char *path, struct proto_error *err)
{
	bool stats = f->type == FT_STATS;
	size_t esize = stats ? sizeof(struct proto_stat) : sizeof(struct proto_param);
	size_t kcap = stats ? PROTO_STAT_KEY : CHIPD_KEY_MAX;
	char *base = AT(obj, f->off, char);
	char kpath[PATH_LEN];
	struct mp_item k, v;

	if (it->kind != MP_MAP)
		return wrong_type(path, "map", it, err);
	if (check_count(f, it->len, path, err))
		return -EBADMSG;
	for (uint32_t i = 0; i < it->len; i++) {
		char *key = base + i * esize;

		if (next(r, &k, path, err))
			return -EBADMSG;
		if (get_str(&k, stats ? CS_STAT : CS_IDENT, 1, (int64_t)kcap - 1, key, path, err))
			return -EBADMSG;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(base + j * esize, key) == 0)
				return fail_at(err, path, "duplicate key \"%s\"", key);
		sub_path(kpath, path, key);
		if (next(r, &v, kpath, err))
			return -EBADMSG;
		if (stats) {
			if (v.kind != MP_UINT)
				return not_unsigned(kpath, "a counter value", &v, err);
			((struct proto_stat *)(void *)key)->value = v.v.u;
		} else if (get_int(&v, &((struct proto_param *)(void *)key)->value, kpath, err)) {
			return -EBADMSG;
		}
	}
	*AT(obj, f->count_off, uint32_t) = it->len;
	return 0;
}

static int decode_value(struct mp_reader *r, const struct field *f, const struct mp_item *it,
			void *obj, const char *path, struct proto_error *err)
{
	char epath[PATH_LEN];
	struct mp_item e;
	int64_t v = 0; /* set by get_int; gcc -O3 cannot see it */

	switch (f->type) {
	case FT_INT:
		if (get_int(it, &v, path, err) || check_int(f, v, path, err))
			return -EBADMSG;
		*AT(obj, f->off, int64_t) = v;
		return 0;
	case FT_BOOL:
		if (it->kind != MP_BOOL)
			return wrong_type(path, "bool", it, err);
		*AT(obj, f->off, bool) = it->v.b;
		return 0;
	case FT_STR:
		return get_str(it, f->charset, f->min, f->max, AT(obj, f->off, char), path, err);
	case FT_ENUM:
		if (it->kind != MP_STR)
			return wrong_type(path, "str", it, err);
		for (int64_t i = f->min; i <= f->max; i++)
			if (strlen(f->names[i]) == it->len &&
			    memcmp(f->names[i], it->ptr, it->len) == 0) {
				*AT(obj, f->off, int64_t) = i;
				return 0;
			}
		show(epath, SHOW_LEN, it->ptr, it->len);
		return fail_at(err, path, "unknown value \"%s\"", epath);
	case FT_PARAMS:
	case FT_STATS:
		return decode_pairs(r, f, it, obj, path, err);
	case FT_RECS:
		if (it->kind != MP_ARRAY)
			return wrong_type(path, "array", it, err);
		if (check_count(f, it->len, path, err))
			return -EBADMSG;
		for (uint32_t i = 0; i < it->len; i++) {
			pathf(epath, "%s[%" PRIu32 "]", path, i);
			if (next(r, &e, epath, err))
				return -EBADMSG;
			if (e.kind != MP_MAP)
				return wrong_type(epath, "map", &e, err);
			if (decode_map(r, f->sub, AT(obj, f->off + i * f->sub->rec_size, char),
				       e.len, epath, err))
				return -EBADMSG;
		}
		*AT(obj, f->count_off, uint32_t) = it->len;
		return 0;
	case FT_MAP:
		if (it->kind != MP_MAP)
			return wrong_type(path, "map", it, err);
		return decode_map(r, f->sub, AT(obj, f->off, char), it->len, path, err);
	case FT_BIN:
		if (it->kind != MP_BIN)
			return wrong_type(path, "bin", it, err);
		if (check_bin(f, it->len, path, err))
			return -EBADMSG;
		memcpy(AT(obj, f->off, uint8_t), it->ptr, it->len);
		*AT(obj, f->count_off, uint32_t) = it->len;
		return 0;
	}
	return fail_at(err, path, "no such field type");
}

static bool key_is(const struct mp_item *k, const char *name)
{
	return k->kind == MP_STR && strlen(name) == k->len && memcmp(name, k->ptr, k->len) == 0;
}

/* The keys every top-level map carries; scan() has checked them. */
static bool header_key(const struct mp_item *k)
{
	return key_is(k, "v") || key_is(k, "op") || key_is(k, "ok");
}

/* Decodes @npairs pairs of a map against @s into @obj. @prefix is the map's path
 * (NULL for the top level, whose header keys are skipped here). */
static int decode_map(struct mp_reader *r, const struct schema *s, void *obj, uint32_t npairs,
		      const char *prefix, struct proto_error *err)
{
	const char *where = prefix ? prefix : "message";
	char path[PATH_LEN], shown[SHOW_LEN];
	uint64_t seen = 0;
	struct mp_item k, v;
	uint32_t fi;

	for (uint32_t i = 0; i < npairs; i++) {
		if (next(r, &k, where, err))
			return -EBADMSG;
		if (k.kind != MP_STR)
			return fail_at(err, where, "key #%" PRIu32 " is not a string", i);
		if (!prefix && header_key(&k)) {
			int rc = mpr_next(r, &v);

			if (rc == 0)
				rc = mpr_skip_rest(r, &v, PROTO_MAX_DEPTH - 1);
			if (rc)
				return malformed(rc, where, err);
			continue;
		}
		for (fi = 0; fi < s->nfields; fi++)
			if (key_is(&k, s->fields[fi].key))
				break;
		show(shown, sizeof(shown), k.ptr, k.len);
		sub_path(path, prefix, shown);
		if (fi == s->nfields)
			return fail_at(err, path, "unknown key in a %s", s->what);
		if (seen & (1ull << fi))
			return fail_at(err, path, "duplicate key");
		seen |= 1ull << fi;
		if (next(r, &v, path, err) || decode_value(r, &s->fields[fi], &v, obj, path, err))
			return -EBADMSG;
	}
	for (fi = 0; fi < s->nfields; fi++)
		if (s->fields[fi].required && !(seen & (1ull << fi))) {
			sub_path(path, prefix, s->fields[fi].key);
			return fail_at(err, path, "missing (required in a %s)", s->what);
		}
	if (s->check && s->check(obj, err) != CHIPD_OK)
		return -EBADMSG;
	return 0;
}

struct header {
	bool has_v, has_op, has_ok;
	struct mp_item v, op, ok;
};

/* Pass 1: the message is one map, complete, not too deep, with nothing after it;
 * remembers "v", "op" and "ok". Reports framing errors before anything else, so a
 * message of a newer version is refused as such and not for its unknown keys. */
static int scan(struct mp_reader *r, struct header *h, uint32_t *npairs, struct proto_error *err)
{
	char path[PATH_LEN];
	struct mp_item m, k, v;
	int rc;

	memset(h, 0, sizeof(*h));
	if (next(r, &m, "message", err))
		return -EBADMSG;
	if (m.kind != MP_MAP)
		return wrong_type("message", "map", &m, err);
	for (uint32_t i = 0; i < m.len; i++) {
		if (next(r, &k, "message", err))
			return -EBADMSG;
		if (k.kind != MP_STR)
			return fail_at(err, "message", "key #%" PRIu32 " is not a string", i);
		show(path, SHOW_LEN, k.ptr, k.len);
		rc = mpr_next(r, &v);
		if (rc == 0)
			rc = mpr_skip_rest(r, &v, PROTO_MAX_DEPTH - 1);
		if (rc)
			return malformed(rc, path, err);
		bool *has = key_is(&k, "v")    ? &h->has_v
			    : key_is(&k, "op") ? &h->has_op
			    : key_is(&k, "ok") ? &h->has_ok
					       : NULL;
		if (!has)
			continue;
		if (*has)
			return fail_at(err, path, "duplicate key");
		*has = true;
		*(has == &h->has_v ? &h->v : has == &h->has_op ? &h->op : &h->ok) = v;
	}
	if (mpr_left(r))
		return fail_at(err, "message", "%zu trailing bytes after the map", mpr_left(r));
	*npairs = m.len;
	return 0;
}

static int check_version(const struct header *h, struct proto_error *err)
{
	if (!h->has_v)
		return fail_at(err, "v", "missing (every message carries \"v\": %d)",
			       PROTO_VERSION);
	if (h->v.kind != MP_UINT) /* not a version at all: malformed, not unsupported */
		return not_unsigned("v", "a version", &h->v, err);
	if (h->v.v.u != PROTO_VERSION) {
		proto_fail(err, CHIPD_E_UNSUPPORTED_VERSION,
			   "\"v\": version %" PRIu64 " not supported (this peer speaks %d)",
			   h->v.v.u, PROTO_VERSION);
		return -EBADMSG;
	}
	return 0;
}

/* Decodes a request (@op == PROTO_OP_NONE: the op comes from the message) or the
 * answer to an @op request. */
static int decode(enum proto_op op, const void *buf, size_t len, size_t limit, struct proto_msg *m,
		  struct proto_error *err)
{
	const struct schema *s;
	struct mp_reader r;
	struct header h;
	struct mp_item top;
	uint32_t npairs = 0;

	proto_msg_init(m, op);
	proto_fail(err, CHIPD_OK, "ok");
	if (len > limit) {
		proto_fail(err, CHIPD_E_TOO_LARGE, "message: %zu bytes, the limit is %zu", len,
			   limit);
		return -EBADMSG;
	}
	mpr_init(&r, buf, len);
	if (scan(&r, &h, &npairs, err) || check_version(&h, err))
		return -EBADMSG;
	if (op == PROTO_OP_NONE) {
		char shown[SHOW_LEN];

		if (!h.has_op)
			return fail_at(err, "op", "missing (required in a request)");
		if (h.op.kind != MP_STR)
			return wrong_type("op", "str", &h.op, err);
		for (int i = 1; i < PROTO_NOPS && m->op == PROTO_OP_NONE; i++)
			if (key_is(&h.op, proto_op_table[i].name))
				m->op = (enum proto_op)i;
		show(shown, sizeof(shown), h.op.ptr, h.op.len);
		if (m->op == PROTO_OP_NONE)
			return fail_at(err, "op", "unknown op \"%s\"", shown);
		proto_msg_init_lists(m); /* proto_msg_init(NONE) left them */
		if (h.has_ok)
			return fail_at(err, "ok", "unknown key in a request");
		s = proto_op_table[m->op].req;
	} else {
		if (!h.has_ok)
			return fail_at(err, "ok", "missing (required in an answer)");
		if (h.ok.kind != MP_BOOL)
			return wrong_type("ok", "bool", &h.ok, err);
		if (h.has_op)
			return fail_at(err, "op", "unknown key in an answer");
		m->ok = h.ok.v.b;
		s = m->ok ? proto_op_table[op].ans : &proto_envelope_schema;
	}
	/* Pass 2: the fields. */
	mpr_init(&r, buf, len);
	if (mpr_next(&r, &top))
		return malformed(-ENODATA, "message", err);
	return decode_map(&r, s, m, npairs, NULL, err);
}

int proto_decode_request(const void *buf, size_t len, struct proto_msg *m, struct proto_error *err)
{
	return decode(PROTO_OP_NONE, buf, len, PROTO_REQ_MAX, m, err);
}

int proto_decode_answer(enum proto_op op, const void *buf, size_t len, struct proto_msg *m,
			struct proto_error *err)
{
	if (op <= PROTO_OP_NONE || op >= PROTO_NOPS) {
		proto_fail(err, CHIPD_E_INTERNAL, "no such op %d", (int)op);
		return -EINVAL;
	}
	return decode(op, buf, len, PROTO_RESP_MAX, m, err);
}

/* ---- encoding ---- */

/* The caller's buffer as a msgpack-c write target; overflow is sticky. */
struct wbuf {
	char *p;
	size_t cap, len;
	bool overflow;
};

static int wbuf_write(void *data, const char *buf, size_t len)
{
	struct wbuf *w = data;

	if (w->overflow || w->cap - w->len < len) {
		w->overflow = true;
		return -1;
	}
	memcpy(w->p + w->len, buf, len);
	w->len += len;
	return 0;
}

static void pack_str(msgpack_packer *pk, const char *s, size_t len)
{
	msgpack_pack_str(pk, len);
	msgpack_pack_str_body(pk, s, len);
}

static bool present(const struct field *f, const void *obj)
{
	if (f->required)
		return true;
	switch (f->type) {
	case FT_INT:
	case FT_ENUM:
		return *AT(obj, f->off, int64_t) != f->def;
	case FT_STR:
		return *AT(obj, f->off, char) != 0;
	case FT_PARAMS:
	case FT_STATS:
	case FT_RECS:
	case FT_BIN:
		return *AT(obj, f->count_off, uint32_t) != 0;
	default:
		return true;
	}
}

static uint32_t count_present(const struct schema *s, const void *obj)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nfields; i++)
		n += present(&s->fields[i], obj);
	return n;
}

static int encode_fields(msgpack_packer *pk, const struct schema *s, const void *obj,
			 const char *prefix, struct proto_error *err);

static int encode_pairs(msgpack_packer *pk, const struct field *f, const void *obj,
			const char *path, struct proto_error *err)
{
	bool stats = f->type == FT_STATS;
	size_t esize = stats ? sizeof(struct proto_stat) : sizeof(struct proto_param);
	size_t kcap = stats ? PROTO_STAT_KEY : CHIPD_KEY_MAX;
	uint32_t n = *AT(obj, f->count_off, uint32_t);
	const char *base = AT(obj, f->off, char);

	if (check_count(f, n, path, err))
		return -EINVAL;
	msgpack_pack_map(pk, n);
	for (uint32_t i = 0; i < n; i++) {
		const char *key = base + i * esize;
		size_t klen = strnlen(key, kcap);

		if (check_str(stats ? CS_STAT : CS_IDENT, 1, (int64_t)kcap - 1, key, klen, path,
			      err))
			return -EINVAL;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(base + j * esize, key) == 0)
				return fail_at(err, path, "duplicate key \"%s\"", key), -EINVAL;
		pack_str(pk, key, klen);
		if (stats)
			msgpack_pack_uint64(pk,
					    ((const struct proto_stat *)(const void *)key)->value);
		else
			msgpack_pack_int64(pk,
					   ((const struct proto_param *)(const void *)key)->value);
	}
	return 0;
}

static int encode_value(msgpack_packer *pk, const struct field *f, const void *obj,
			const char *path, struct proto_error *err)
{
	char epath[PATH_LEN];
	int64_t v = 0;
	size_t len;

	switch (f->type) {
	case FT_INT:
	case FT_ENUM:
		v = *AT(obj, f->off, int64_t);
		if (check_int(f, v, path, err))
			return -EINVAL;
		if (f->type == FT_ENUM)
			pack_str(pk, f->names[v], strlen(f->names[v]));
		else
			msgpack_pack_int64(pk, v);
		return 0;
	case FT_BOOL:
		if (*AT(obj, f->off, bool))
			msgpack_pack_true(pk);
		else
			msgpack_pack_false(pk);
		return 0;
	case FT_STR:
		len = strnlen(AT(obj, f->off, char), (size_t)f->max + 1);
		if (check_str(f->charset, f->min, f->max, AT(obj, f->off, char), len, path, err))
			return -EINVAL;
		pack_str(pk, AT(obj, f->off, char), len);
		return 0;
	case FT_PARAMS:
	case FT_STATS:
		return encode_pairs(pk, f, obj, path, err);
	case FT_RECS: {
		uint32_t n = *AT(obj, f->count_off, uint32_t);

		if (check_count(f, n, path, err))
			return -EINVAL;
		msgpack_pack_array(pk, n);
		for (uint32_t i = 0; i < n; i++) {
			const void *rec = AT(obj, f->off + i * f->sub->rec_size, char);

			pathf(epath, "%s[%" PRIu32 "]", path, i);
			msgpack_pack_map(pk, count_present(f->sub, rec));
			if (encode_fields(pk, f->sub, rec, epath, err))
				return -EINVAL;
		}
		return 0;
	}
	case FT_MAP:
		msgpack_pack_map(pk, count_present(f->sub, AT(obj, f->off, char)));
		return encode_fields(pk, f->sub, AT(obj, f->off, char), path, err);
	case FT_BIN: {
		uint32_t n = *AT(obj, f->count_off, uint32_t);

		if (check_bin(f, n, path, err))
			return -EINVAL;
		msgpack_pack_bin(pk, n);
		msgpack_pack_bin_body(pk, AT(obj, f->off, char), n);
		return 0;
	}
	}
	return -EINVAL;
}

static int encode_fields(msgpack_packer *pk, const struct schema *s, const void *obj,
			 const char *prefix, struct proto_error *err)
{
	char path[PATH_LEN];

	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];

		if (!present(f, obj))
			continue;
		sub_path(path, prefix, f->key);
		pack_str(pk, f->key, strlen(f->key));
		if (encode_value(pk, f, obj, path, err))
			return -EINVAL;
	}
	if (s->check && s->check(obj, err) != CHIPD_OK)
		return -EINVAL;
	return 0;
}

/* Encodes {"v":1, <@head>: <@op name or @ok>, fields of @s in @obj}. */
static int encode(const char *head, enum proto_op op, bool ok, const struct schema *s,
		  const void *obj, const char *prefix, void *buf, size_t cap, size_t *len,
		  struct proto_error *err)
{
	struct wbuf w = {.p = buf, .cap = cap};
	msgpack_packer pk;

	msgpack_packer_init(&pk, &w, wbuf_write);
	/* With @prefix the fields sit in a one-key map under it (the error envelope). */
	msgpack_pack_map(&pk, 2 + (prefix ? 1 : count_present(s, obj)));
	pack_str(&pk, "v", 1);
	msgpack_pack_uint8(&pk, PROTO_VERSION);
	pack_str(&pk, head, strlen(head));
	if (op != PROTO_OP_NONE)
		pack_str(&pk, proto_op_name(op), strlen(proto_op_name(op)));
	else if (ok)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	if (prefix) {
		pack_str(&pk, prefix, strlen(prefix));
		msgpack_pack_map(&pk, count_present(s, obj));
	}
	if (encode_fields(&pk, s, obj, prefix, err))
		return -EINVAL;
	if (w.overflow) {
		proto_fail(err, CHIPD_E_TOO_LARGE, "message: does not fit in %zu bytes", cap);
		return -EMSGSIZE;
	}
	*len = w.len;
	return 0;
}

static bool op_valid(enum proto_op op, struct proto_error *err)
{
	if (op > PROTO_OP_NONE && op < PROTO_NOPS)
		return true;
	proto_fail(err, CHIPD_E_BAD_REQUEST, "\"op\": no such op %d", (int)op);
	return false;
}

int proto_encode_request(const struct proto_msg *m, void *buf, size_t cap, size_t *len,
			 struct proto_error *err)
{
	if (!op_valid(m->op, err))
		return -EINVAL;
	return encode("op", m->op, false, proto_op_table[m->op].req, m, NULL, buf, cap, len, err);
}

int proto_encode_answer(const struct proto_msg *m, void *buf, size_t cap, size_t *len,
			struct proto_error *err)
{
	if (!op_valid(m->op, err))
		return -EINVAL;
	return encode("ok", PROTO_OP_NONE, true, proto_op_table[m->op].ans, m, NULL, buf, cap, len,
		      err);
}

int proto_encode_error(const struct proto_error *e, void *buf, size_t cap, size_t *len)
{
	struct proto_error copy = *e, scratch;
	char message[CHIPD_MSG_MAX];
	size_t mlen, base;
	int rc;

	if (e->code <= CHIPD_OK || e->code >= CHIPD_NCODES)
		return -EINVAL;
	copy.retryable = chipd_code_retryable((enum chipd_code)e->code);
	/* Whatever a handler wrote, the envelope itself must be valid. */
	mlen = strnlen(e->message, sizeof(e->message) - 1);
	for (size_t i = 0; i < mlen; i++)
		message[i] = char_ok(CS_ANY, (unsigned char)e->message[i]) ? e->message[i] : '?';
	message[mlen] = 0;
	memcpy(copy.message, message, mlen + 1);
	if (copy.request < 1)
		copy.request = 0;
	if (copy.chip < 0 || copy.chip >= CHIPD_MAX_CHIPS)
		copy.chip = -1;
	rc = encode("ok", PROTO_OP_NONE, false, &proto_error_schema, &copy, "error", buf, cap, len,
		    &scratch);
	if (rc != -EMSGSIZE)
		return rc;
	/* Too long for @cap: measure the envelope without its message and keep what fits
	 * (a message under 256 bytes has a 2-byte header at most). */
	copy.message[0] = 0;
	rc = encode("ok", PROTO_OP_NONE, false, &proto_error_schema, &copy, "error", buf, cap,
		    &base, &scratch);
	if (rc)
		return rc;
	mlen = cap - base >= 2 && cap - base - 2 < mlen ? cap - base - 2 : mlen;
	memcpy(copy.message, message, mlen);
	copy.message[mlen] = 0;
	return encode("ok", PROTO_OP_NONE, false, &proto_error_schema, &copy, "error", buf, cap,
		      len, &scratch);
}
