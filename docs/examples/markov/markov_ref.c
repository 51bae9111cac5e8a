/* markov_ref.c - markov-ref VOCAB TOKENS SEED: prints the tokens the markov callable
 * streams for these parameters, one per line, computed on the CPU. */
#include "markov.h"

#include <stdio.h>
#include <stdlib.h>

static int arg(const char *s, long lo, long hi, long *out)
{
	char *end;

	*out = strtol(s, &end, 10);
	return *s && !*end && *out >= lo && *out <= hi;
}

int main(int argc, char **argv)
{
	static int32_t tokens[1024];
	long vocab, n, seed;

	if (argc != 4 || !arg(argv[1], 2, MARKOV_VOCAB_MAX, &vocab) ||
	    !arg(argv[2], 1, 1024, &n) || !arg(argv[3], 0, INT32_MAX, &seed)) {
		fprintf(stderr, "usage: markov-ref VOCAB(2..%d) TOKENS(1..1024) SEED\n",
			MARKOV_VOCAB_MAX);
		return 64;
	}
	markov_walk((uint32_t)vocab, (uint32_t)seed, (uint32_t)n, tokens);
	for (long i = 0; i < n; i++)
		printf("%d\n", tokens[i]);
	return 0;
}
