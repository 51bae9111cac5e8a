/* layout.c - prints the size, alignment and field offsets of every struct of chipd.h
 * that the Python package mirrors with ctypes (proto/python/chipd/_lib.py), one line
 * each: "STRUCT size N align A" then "STRUCT.FIELD OFFSET". test_layout.py compares
 * them with ctypes' view. A field added to chipd.h goes here and in _lib.py; were it
 * forgotten in both, the sizes would still differ (unless it fits in padding). */
#include <stddef.h>
#include <stdio.h>

#include "chipd.h"

#define STRUCT(s)   printf(#s " size %zu align %zu\n", sizeof(struct s), _Alignof(struct s))
#define FIELD(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))

int main(void)
{
	STRUCT(chipd_error);
	FIELD(chipd_error, errnum);
	FIELD(chipd_error, code);
	FIELD(chipd_error, retryable);
	FIELD(chipd_error, has_request);
	FIELD(chipd_error, has_chip);
	FIELD(chipd_error, request);
	FIELD(chipd_error, chip);
	FIELD(chipd_error, message);

	STRUCT(chipd_param);
	FIELD(chipd_param, key);
	FIELD(chipd_param, value);

	STRUCT(chipd_request);
	FIELD(chipd_request, workload);
	FIELD(chipd_request, params);
	FIELD(chipd_request, nparams);
	FIELD(chipd_request, id);
	FIELD(chipd_request, chip);
	FIELD(chipd_request, max_tokens);
	FIELD(chipd_request, deadline_ms);
	FIELD(chipd_request, input);
	FIELD(chipd_request, input_len);
	FIELD(chipd_request, output_cap);

	STRUCT(chipd_token);
	FIELD(chipd_token, request);
	FIELD(chipd_token, seq);
	FIELD(chipd_token, final);
	FIELD(chipd_token, value);
	FIELD(chipd_token, ts_ns);
	FIELD(chipd_token, payload_len);
	FIELD(chipd_token, payload);
	FIELD(chipd_token, out_len);

	STRUCT(chipd_chip_status);
	FIELD(chipd_chip_status, chip);
	FIELD(chipd_chip_status, state);
	FIELD(chipd_chip_status, pid);
	FIELD(chipd_chip_status, gpu);
	FIELD(chipd_chip_status, restarts);
	FIELD(chipd_chip_status, queued);
	FIELD(chipd_chip_status, active);

	STRUCT(chipd_status);
	FIELD(chipd_status, state);
	FIELD(chipd_status, pid);
	FIELD(chipd_status, uptime_ms);
	FIELD(chipd_status, nchips);
	FIELD(chipd_status, chips);

	STRUCT(chipd_stat);
	FIELD(chipd_stat, block);
	FIELD(chipd_stat, name);
	FIELD(chipd_stat, gauge);
	FIELD(chipd_stat, value);

	STRUCT(chipd_wl_param);
	FIELD(chipd_wl_param, key);
	FIELD(chipd_wl_param, def);
	FIELD(chipd_wl_param, min);
	FIELD(chipd_wl_param, max);
	FIELD(chipd_wl_param, doc);

	STRUCT(chipd_workload);
	FIELD(chipd_workload, name);
	FIELD(chipd_workload, doc);
	FIELD(chipd_workload, nparams);
	FIELD(chipd_workload, params);
	FIELD(chipd_workload, version);
	FIELD(chipd_workload, chips);
	FIELD(chipd_workload, active);
	FIELD(chipd_workload, requests);
	FIELD(chipd_workload, completed);
	FIELD(chipd_workload, failed);
	FIELD(chipd_workload, cancelled);
	FIELD(chipd_workload, tokens);

	/* Constants the Python side hard-codes. */
	printf("const MSG_MAX %d\nconst NAME_MAX %d\nconst KEY_MAX %d\nconst MAX_PARAMS %d\n",
	       CHIPD_MSG_MAX, CHIPD_NAME_MAX, CHIPD_KEY_MAX, CHIPD_MAX_PARAMS);
	printf("const MAX_CHIPS %d\nconst NCODES %d\nconst enum_size %zu\n", CHIPD_MAX_CHIPS,
	       CHIPD_NCODES, sizeof(enum chipd_code));
	printf("const MAX_WORKLOADS %d\nconst DOC_MAX %d\n", CHIPD_MAX_WORKLOADS, CHIPD_DOC_MAX);
	printf("const PAYLOAD_MAX %d\nconst INPUT_INLINE_MAX %d\n", CHIPD_PAYLOAD_MAX,
	       CHIPD_INPUT_INLINE_MAX);
	printf("const INPUT_MAX %u\nconst OUTPUT_MAX %u\n", CHIPD_INPUT_MAX, CHIPD_OUTPUT_MAX);
	return 0;
}
