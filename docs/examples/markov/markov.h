/* markov.h - the walk of markov.c on the CPU, for its ref hook and markov-ref. */
#ifndef MARKOV_H
#define MARKOV_H

#include <stdint.h>

#define MARKOV_VOCAB_MAX 1024

/* T[from][to] of the table seeded with @seed: a float in [0, 1). */
float markov_weight(uint32_t seed, uint32_t from, uint32_t to);

/* The first @n tokens of the walk (vocab 2..MARKOV_VOCAB_MAX) into @out. */
void markov_walk(uint32_t vocab, uint32_t seed, uint32_t n, int32_t *out);

#endif
