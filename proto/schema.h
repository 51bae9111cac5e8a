/* schema.h - the message tables behind proto.h: per op, per key, the msgpack type,
 * whether it is required, its range, its default and where it is stored. Internal to
 * proto/; codec.c walks them, schema.c holds them. */
#ifndef CHIPD_PROTO_SCHEMA_H
#define CHIPD_PROTO_SCHEMA_H

#include "proto.h"

#include <stdint.h>

enum field_type {
	FT_INT,	   /* msgpack int/uint -> int64_t, range [min, max] */
	FT_BOOL,   /* msgpack bool -> bool */
	FT_STR,	   /* msgpack str -> char[max + 1], length [min, max], charset */
	FT_ENUM,   /* msgpack str, one of names[min..max] -> int64_t index */
	FT_PARAMS, /* msgpack map ident -> int, [min, max] pairs -> struct proto_param[] */
	FT_STATS,  /* msgpack map key -> uint, [min, max] pairs -> struct proto_stat[] */
	FT_RECS,   /* msgpack array of maps (sub schema), [min, max] elements */
	FT_MAP,	   /* msgpack map (sub schema) */
	FT_BIN,	   /* msgpack bin -> uint8_t[max], length [min, max] in a uint32_t at count_off */
};

enum field_charset {
	CS_ANY,	  /* bytes 0x20..0x7e and >= 0x80 (UTF-8 is not re-validated) */
	CS_IDENT, /* [a-z0-9_] */
	CS_STAT,  /* [a-z0-9_.] */
};

struct schema;

struct field {
	const char *key;
	enum field_type type;
	bool required;
	enum field_charset charset;
	int64_t min, max;	  /* value range, string length or element count */
	int64_t def;		  /* FT_INT, FT_ENUM: the value meaning "absent" */
	uint32_t off;		  /* where the value lives in the target struct */
	uint32_t count_off;	  /* FT_PARAMS, FT_STATS, FT_RECS, FT_BIN: where the uint32_t
				   * count (FT_BIN: the byte length) lives */
	const char *const *names; /* FT_ENUM */
	const struct schema *sub; /* FT_RECS, FT_MAP */
};

struct schema {
	const char *what; /* "submit request", for messages */
	const struct field *fields;
	uint32_t nfields;
	uint32_t rec_size; /* FT_RECS: the element struct's size */
	/* Rules that span fields; NULL when there are none. */
	enum chipd_code (*check)(const void *obj, struct proto_error *err);
};

struct op_desc {
	const char *name;
	const struct schema *req, *ans;
};

/* The field at byte @off of the struct at @obj, as a @type. */
#define AT(obj, off, type) ((type *)((char *)(obj) + (off)))

/* Indexed by enum proto_op; entry 0 is empty. */
extern const struct op_desc proto_op_table[PROTO_NOPS];
/* The answer {"v":1,"ok":false,"error":{...}}: one field "error", whose map is
 * proto_error_schema (over struct proto_error). */
extern const struct schema proto_envelope_schema;
extern const struct schema proto_error_schema;
extern const char *const proto_code_names[CHIPD_NCODES + 1];
/* Indexed by enum chipd_sup_state / enum chipd_chip_state, NULL-terminated. */
extern const char *const proto_sup_state_names[];
extern const char *const proto_chip_state_names[];

/* Clears @m's answers' lists when @m->op has them (msg_init.c): for a message reset
 * with no op, once the decoder knows it. */
void proto_msg_init_lists(struct proto_msg *m);

#endif
