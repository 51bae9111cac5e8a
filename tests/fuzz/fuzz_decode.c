/* fuzz_decode.c - libFuzzer target for the message decoder.
 *
 * Each input is decoded as a request and as the answer to every op. Besides "never
 * crash, never read outside the input, never allocate" (ASan and libFuzzer's malloc
 * limit watch those), it checks one property: whatever decodes must encode again
 * and decode to the same struct, so the decoder accepts nothing the encoder cannot
 * produce. Any finding becomes a test in tests/unit/proto_malformed.c.
 *
 * A decode clears the answers' lists (the message's 36 KiB tail) only for the ops
 * that have them (proto/msg_init.c), and leaves an earlier input's there for the
 * others: the second decode starts from a copy of the first's result, so the tails
 * compared are the same bytes unless this input's op wrote them. */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct proto_msg m, again;
static unsigned char out[PROTO_RESP_MAX];

static void round_trip(enum proto_op answer_of)
{
	struct proto_error err;
	size_t len;
	int rc;

	again = m; /* only for the round trips: a copy per decoded input, not per input */
	if (answer_of == PROTO_OP_NONE) {
		if (proto_encode_request(&m, out, PROTO_REQ_MAX, &len, &err))
			abort();
		rc = proto_decode_request(out, len, &again, &err);
	} else {
		rc = m.ok ? proto_encode_answer(&m, out, sizeof(out), &len, &err)
			  : proto_encode_error(&m.err, out, sizeof(out), &len);
		if (rc)
			abort();
		rc = proto_decode_answer(answer_of, out, len, &again, &err);
	}
	if (rc || memcmp(&m, &again, sizeof(m)) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_error err;

	if (proto_decode_request(data, size, &m, &err) == 0)
		round_trip(PROTO_OP_NONE);
	for (int op = 1; op < PROTO_NOPS; op++)
		if (proto_decode_answer((enum proto_op)op, data, size, &m, &err) == 0 &&
		    (m.ok || m.err.retryable == chipd_code_retryable((enum chipd_code)m.err.code)))
			round_trip((enum proto_op)op);
	return 0;
}
