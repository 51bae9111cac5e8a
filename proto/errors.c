/* errors.c - the error codes' names and retryability, proto_fail, and the names of
 * ops and states. The envelope itself is built by proto_encode_error (codec.c). */
#include "schema.h"

#include <stdio.h>
#include <string.h>

/* Retryable: sending the same request again, later or elsewhere, may succeed.
 * queue_full and no_capacity clear as work finishes; worker_lost means the worker
 * died under the request and a restarted one can run it; timeout means the answer
 * did not come in time; node_lost means the supervisor died, and a restarted node
 * can run it. draining is not: this node is going away. */
static const bool code_retryable[CHIPD_NCODES] = {
    [CHIPD_E_QUEUE_FULL] = true, [CHIPD_E_NO_CAPACITY] = true, [CHIPD_E_WORKER_LOST] = true,
    [CHIPD_E_TIMEOUT] = true,	 [CHIPD_E_NODE_LOST] = true,
};

const char *chipd_code_name(enum chipd_code code)
{
	return (unsigned)code < CHIPD_NCODES ? proto_code_names[code] : "unknown";
}

bool chipd_code_retryable(enum chipd_code code)
{
	return (unsigned)code < CHIPD_NCODES && code_retryable[code];
}

int proto_code_parse(const char *name, size_t len)
{
	for (int i = 0; i < CHIPD_NCODES; i++)
		if (strlen(proto_code_names[i]) == len &&
		    memcmp(proto_code_names[i], name, len) == 0)
			return i;
	return -1;
}

enum chipd_code proto_fail(struct proto_error *e, enum chipd_code code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->retryable = chipd_code_retryable(code);
	e->request = 0;
	e->chip = -1;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return code;
}

const char *proto_op_name(enum proto_op op)
{
	return (unsigned)op < PROTO_NOPS ? proto_op_table[op].name : NULL;
}

/* The name at @i of a NULL-terminated table, or "unknown". */
static const char *name_at(const char *const *names, unsigned i)
{
	for (unsigned k = 0; names[k]; k++)
		if (k == i)
			return names[k][0] ? names[k] : "unknown";
	return "unknown";
}

const char *chipd_sup_state_name(enum chipd_sup_state s)
{
	return name_at(proto_sup_state_names, (unsigned)s);
}

const char *chipd_chip_state_name(enum chipd_chip_state s)
{
	return name_at(proto_chip_state_names, (unsigned)s);
}
