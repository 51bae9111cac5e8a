/* data_callable.c - "echo", a callable for tests/unit/check_data.c that uses the data
 * paths of the ABI (docs/callables.md, "Data in and out"): the request's input bytes,
 * its token payloads and its output.
 *
 *   tokens   steps of one spin kernel each, token = sum(input bytes) + step (the
 *            input's bytes as unsigned; step alone without input)
 *   payload  24 bytes per step: byte i = input[(step + i) % input_len] + step + i
 *            (mod 256), or step + i without input
 *   output   the input reversed (output_max 65536): -EMSGSIZE when it does not fit;
 *            output_us makes the hook sleep first (a slow output hook: the worker's
 *            write into the client's data area comes that much later)
 *
 * Built three times (tests/kernels.cmake): dc_echo (input_max 65536), dc_small
 * (input_max 16), and dc_big_payload, whose table declares 25 payload bytes (one over
 * CHIPD_CL_PAYLOAD_MAX) and is refused.
 */
#include "chipd_callable.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ECHO_PAYLOAD 24
/* the payload_bytes its table declares: 25 in the variant chipd must refuse
 * (dc_big_payload, tests/kernels.cmake) */
#ifndef DC_PAYLOAD_BYTES
#define DC_PAYLOAD_BYTES ECHO_PAYLOAD
#endif
/* the input_max its table declares: 16 in dc_small */
#ifndef DC_INPUT_MAX
#define DC_INPUT_MAX 65536
#endif

enum { P_TOKENS, P_STEP_US, P_OUT_US };

static const struct chipd_cl_param params[] = {
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 4, 1, 64, "steps, one token each"},
    [P_STEP_US] = {"step_us", CHIPD_CL_INT64, 0, 0, 1000000, "device time of each step"},
    [P_OUT_US] = {"output_us", CHIPD_CL_INT64, 0, 0, 5000000, "sleep of the output hook"},
};

static int spin = -1; /* the spin kernel's handle, found at init */

struct echo {
	int32_t *tok;	/* device */
	uint32_t sum;	/* of the input's bytes */
};

static int echo_init(const struct chipd_cl_host *host, char *msg, size_t cap)
{
	spin = host->kernel("spin");
	if (spin < 0) {
		snprintf(msg, cap, "no spin kernel");
		return -ENOENT;
	}
	return 0;
}

static uint32_t echo_steps(const int64_t *cfg)
{
	return (uint32_t)cfg[P_TOKENS];
}

static void echo_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	(void)cfg;
	out->host_bytes = sizeof(struct echo);
	out->dev_bytes = sizeof(int32_t);
}

static int echo_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct echo *e = r->host->host_alloc(r, sizeof(struct echo));
	const uint8_t *in = r->input;

	if (!e) {
		snprintf(msg, cap, "echo: no host memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->input_len; i++)
		e->sum += in[i];
	r->state = e;
	return 0;
}

static int echo_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct echo *e = r->state;
	int err = r->host->dev_alloc(r, sizeof(int32_t), (void **)&e->tok);

	if (err)
		snprintf(msg, cap, "echo: no device memory");
	return err;
}

static void echo_release(struct chipd_cl_req *r)
{
	struct echo *e = r->state;

	r->host->dev_free(r, e->tok);
	r->host->host_free(r, e, sizeof(*e));
}

static int echo_build(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		      uint32_t step, void *token)
{
	const struct echo *e = r->state;
	const uint8_t *in = r->input;
	uint8_t *payload = (uint8_t *)token + sizeof(int32_t); /* right after the token */
	struct dev_k_spin a = {e->tok, (uint64_t)r->cfg[P_STEP_US] * 1000u,
			       (int32_t)(e->sum + step)};
	int task;

	for (uint32_t i = 0; i < ECHO_PAYLOAD; i++)
		payload[i] = (uint8_t)((r->input_len ? in[(step + i) % r->input_len] : 0) + step + i);
	task = r->host->launch(st, lane, spin, &a, sizeof(a), -1);
	if (task >= 0)
		task = r->host->copy_task(st, lane, token, e->tok, sizeof(int32_t), CHIPD_CL_D2H,
					  task);
	return task < 0 ? task : 0;
}

/* The output: the input reversed, all of it or nothing. */
static int echo_output(struct chipd_cl_req *r, void *buf, uint32_t cap, uint32_t *len, char *msg,
		       size_t msgcap)
{
	const uint8_t *in = r->input;
	uint8_t *out = buf;
	int64_t us = r->cfg[P_OUT_US];
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

	while (us && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	if (r->input_len > cap) {
		snprintf(msg, msgcap, "echo: output of %u bytes does not fit in %u", r->input_len,
			 cap);
		return -EMSGSIZE;
	}
	for (uint32_t i = 0; i < r->input_len; i++)
		out[i] = in[r->input_len - 1 - i];
	*len = r->input_len;
	return 0;
}

static const struct chipd_callable callable = {
    .abi = CHIPD_CALLABLE_ABI,
    .version = 1,
    .name = "echo",
    .doc = "tokens and payloads from the input",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .token_bytes = sizeof(int32_t),
    .payload_bytes = DC_PAYLOAD_BYTES,
    .input_max = DC_INPUT_MAX,
    .output_max = 65536,
    .init = echo_init,
    .steps = echo_steps,
    .cost = echo_cost,
    .reserve = echo_reserve,
    .fill = echo_fill,
    .build = echo_build,
    .release = echo_release,
    .output = echo_output,
};

CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
{
	return &callable;
}
