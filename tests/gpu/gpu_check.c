/* gpu_check.c - the device contract on the GPU (threads, streams, error paths), the
 * GPU's kernels against the CPU references, and its tokens against the sim's on the
 * workload table. Exits 0 (all good), 1 (a mismatch), 77 (no GPU or
 * no GPU backend in this build: skipped). Usage: gpu_check [device-index] */
#include "device.h"
#include "device_cases.h"
#include "kernel_cases.h"
#include "wl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKIP	   77
#define MAX_TOKENS 64u

static int check_kernels(struct dev *d)
{
	int bad = 0, err;

	for (size_t i = 0; i < kc_attn_nshapes; i++) {
		struct kc_err e;

		err = kc_attention(d, &kc_attn_shapes[i], true, NULL, &e);
		if (err) {
			printf("attention %s: error %d\n", kc_attn_shapes[i].name, err);
			bad++;
			continue;
		}
		kc_print("attention", kc_attn_shapes[i].name, &e);
		bad += !(e.max_abs <= e.tol);
	}
	for (size_t i = 0; i < kc_gemm_nshapes; i++) {
		struct kc_err e;

		err = kc_gemm(d, &kc_gemm_shapes[i], &e);
		if (err) {
			printf("gemm %s: error %d\n", kc_gemm_shapes[i].name, err);
			bad++;
			continue;
		}
		kc_print("gemm", kc_gemm_shapes[i].name, &e);
		bad += !(e.max_abs <= e.tol);
	}
	for (uint32_t n = 4; n <= 65536; n *= 16) {
		err = kc_argmax_embed(d, n);
		printf("argmax+embed n=%u: %s\n", n, err ? "FAIL" : "ok (exact)");
		bad += err != 0;
	}
	return bad;
}

/* The device contract on the GPU: a second thread, several streams, error paths
 * (a token outside the vocabulary, a block id outside the pool), argmax with NaN, a
 * module's function (tc_kernels.hip's code object). */
static int check_contract(struct dev *d)
{
	int bad = 0;

	for (size_t i = 0; i < dc_ncases; i++) {
		char msg[DC_MSG_MAX] = "";
		int err = dc_cases[i].run(d, msg, sizeof(msg));

		printf("contract %-12s %s%s\n", dc_cases[i].name, err ? "FAIL: " : "ok",
		       err ? msg : "");
		bad += err != 0;
	}
	return bad;
}

static int check_tokens(struct dev *gpu, struct dev *sim)
{
	int bad = 0;

	for (size_t i = 0; i < KC_WL_NCASES; i++) {
		const struct kc_wl_case *c = &kc_wl_cases[i];
		uint64_t a[MAX_TOKENS], b[MAX_TOKENS];
		char msg[WL_MSG_MAX] = "";
		uint32_t na, nb;
		int same;

		if (kc_wl_tokens(gpu, c, a, MAX_TOKENS, &na, msg, sizeof(msg)) ||
		    kc_wl_tokens(sim, c, b, MAX_TOKENS, &nb, msg, sizeof(msg))) {
			printf("tokens %s %s: error: %s\n", c->workload, c->params, msg);
			bad++;
			continue;
		}
		same = na == nb && memcmp(a, b, na * sizeof(a[0])) == 0;
		printf("tokens %-16s %-80s %u tokens %s\n", c->workload, c->params, na,
		       same ? "identical to sim" : "DIFFER from sim");
		bad += !same;
	}
	return bad;
}

#ifndef TC_KERNELS_GPU
#error "TC_KERNELS_GPU: the tests' code object for this GPU build (tc_kernels.hip)"
#endif

int main(int argc, char **argv)
{
	int index = argc > 1 ? atoi(argv[1]) : 0, bad, err;
	struct dev *gpu, *sim;
	struct dev_info info;
	char msg[DEV_ERRMSG_MAX] = "";

	dc_module_path = TC_KERNELS_GPU;

	err = dev_open(&gpu, DEV_HIP, index, msg, sizeof(msg));
	if (err == -ENODEV || err == -ENOTSUP) {
		printf("gpu_check: skipped: %s\n", msg);
		return SKIP;
	}
	if (err) {
		printf("gpu_check: cannot open device %d: %s\n", index, msg);
		return 1;
	}
	if (dev_open(&sim, DEV_SIM, 0, NULL, 0))
		return 1;
	dev_get_info(gpu, &info);
	printf("device %d: %s, %.1f GiB\n", index, info.name, (double)info.mem_total / (1 << 30));
	bad = check_contract(gpu) + check_kernels(gpu) + check_tokens(gpu, sim);
	printf("gpu_check: %s (%d failures)\n", bad ? "FAIL" : "ok", bad);
	dev_close(sim);
	dev_close(gpu);
	return bad ? 1 : 0;
}
