/* chipbench - chipd's benchmarks. Every mode prints medians and ratios against a
 * baseline measured in the same run; nothing here asserts absolute times. */
#include "modes.h"

#include <stdio.h>
#include <string.h>

struct mode {
	const char *name;
	const char *what;
	int (*run)(int argc, char **argv);
};

static const struct mode modes[] = {
    {"mailbox", "mailbox round trip vs raw spin, futex, unix socket, pipes, iceoryx, chipd",
     mode_mailbox},
    {"overlap", "worker tokens/s with O/S overlap vs --no-overlap (synthetic)", mode_overlap},
    {"dispatch", "empty tasks through the step executor: ns/task, vs StarPU if installed",
     mode_dispatch},
    {"e2e", "a real chipd under 1..64 concurrent clients: req/s, tok/s, latencies", mode_e2e},
    {"startup", "chipd exec -> ready by chip count; killed worker -> serving again", mode_startup},
    {"idle", "an idle chipd's CPU and resident memory against its budgets", mode_idle},
    {"hol", "fast requests' tokens/s beside a slow one on the same chip vs alone", mode_hol},
};

static void usage(FILE *f)
{
	fputs("usage: chipbench MODE [options]   (chipbench MODE --help for a mode's options)\n"
	      "modes:\n",
	      f);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		fprintf(f, "  %-10s %s\n", modes[i].name, modes[i].what);
	fputs("exit status: 0 ok, 1 a chipd measurement failed, 64 usage\n", f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 64;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(argv[1], modes[i].name) == 0)
			return modes[i].run(argc - 1, argv + 1);
	fprintf(stderr, "chipbench: unknown mode '%s'\n", argv[1]);
	usage(stderr);
	return 64;
}
