/* msg_init.c - a message's defaults: every field's, and the answers' lists cleared
 * only for the ops that have them. */
#include "schema.h"

#include <stddef.h>
#include <string.h>

static void set_defaults(struct proto_msg *m, const struct schema *s)
{
	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];

		if (!f->required && (f->type == FT_INT || f->type == FT_ENUM))
			*AT(m, f->off, int64_t) = f->def;
	}
}

/* Where the answers' lists begin (the union of stats and workloads, the message's
 * last member): 36 of a message's 42 KiB, which every other op leaves alone. */
#define LISTS_OFF offsetof(struct proto_msg, stats)

static bool schema_has_lists(const struct schema *s)
{
	for (uint32_t i = 0; s && i < s->nfields; i++)
		if (s->fields[i].off >= LISTS_OFF)
			return true;
	return false;
}

/* Whether @op's request or answer has fields in the lists. */
static bool op_has_lists(enum proto_op op)
{
	return op > PROTO_OP_NONE && op < PROTO_NOPS &&
	       (schema_has_lists(proto_op_table[op].req) ||
		schema_has_lists(proto_op_table[op].ans));
}

void proto_msg_init(struct proto_msg *m, enum proto_op op)
{
	_Static_assert(LISTS_OFF + sizeof(m->stats) == sizeof(struct proto_msg) &&
			   offsetof(struct proto_msg, wls) == LISTS_OFF,
		       "the lists are the message's tail");
	/* the lists only for the ops that have them: a submit's message is cleared in
	 * a few KiB, not 42 (each request clears several on both sides) */
	memset(m, 0, op_has_lists(op) ? sizeof(*m) : LISTS_OFF);
	m->op = op;
	/* An absent optional field holds its table default. */
	for (int i = 1; i < PROTO_NOPS; i++) {
		set_defaults(m, proto_op_table[i].req);
		set_defaults(m, proto_op_table[i].ans);
	}
	m->err.chip = -1;
}

void proto_msg_init_lists(struct proto_msg *m)
{
	if (op_has_lists(m->op))
		memset((char *)m + LISTS_OFF, 0, sizeof(*m) - LISTS_OFF);
}
