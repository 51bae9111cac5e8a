/* markov_kernels.h - the argument of markov's own kernel, markov_step, shared by the
 * callable (markov.c), the sim kernel (markov_kernels_sim.c) and the GPU kernel
 * (markov_kernels.hip). Plain C: one struct passed by value. */
#ifndef MARKOV_KERNELS_H
#define MARKOV_KERNELS_H

#include <stdint.h>

/* One step of the walk: *tok = argmax(table[*tok][0..vocab-1]), the first of equal
 * maxima. One block; its threads share the row. */
struct markov_step_args {
	const float *table; /* device: [vocab][vocab] */
	int32_t *tok;	    /* device: the current token, read and written */
	uint32_t vocab;
	uint32_t pad;
};

/* Threads in markov_step's block (the GPU kernel's reduction is sized for it). */
#define MARKOV_BLOCK 256

#endif
