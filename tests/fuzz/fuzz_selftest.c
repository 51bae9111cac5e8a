/* fuzz_selftest.c - a libFuzzer target that aborts on any input beginning "crash"
 * (its seed corpus holds one): run_check.sh runs it through run.sh, which must report
 * the crash as a finding (exit 1), never as "skipped" (77, libFuzzer's own exit
 * status for a crash, which ctest reads as a skip). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 5 && memcmp(data, "crash", 5) == 0)
		abort();
	return 0;
}
