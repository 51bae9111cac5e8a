/* peer_starpu.h - StarPU as the baseline of `chipbench dispatch`: the same number of
 * empty tasks (a CPU codelet that does nothing), independent or chained with explicit
 * dependencies, submitted in steps and waited for at the end of each step, as
 * wl_exec_run does. Built only when pkg-config finds starpu-1.3 (CHIPD_HAVE_STARPU). */
#ifndef CHIPD_PEER_STARPU_H
#define CHIPD_PEER_STARPU_H

#include <stdbool.h>
#include <stddef.h>

struct peer_starpu;

/* Starts StarPU with @ncpus CPU workers and no accelerators (the configuration wins
 * over STARPU_* environment variables, so the run says what it measured) and makes
 * room for steps of @step tasks. Returns 0, or -errno with a one-line reason in @why.
 * StarPU is process-wide: one peer at a time. */
int peer_starpu_open(struct peer_starpu **out, unsigned ncpus, unsigned step, char *why,
		     size_t cap);

/* One run: @tasks empty tasks in steps of the @step given to open; @chain: every task
 * of a step depends on the one before it. Returns ns per task, or a negative errno. */
double peer_starpu_run(struct peer_starpu *p, unsigned tasks, bool chain);

/* Writes "StarPU <version>, policy <name>" (what runs, for the report) into @buf. */
void peer_starpu_describe(const struct peer_starpu *p, char *buf, size_t cap);

/* Shuts StarPU down and frees @p. NULL is a no-op. */
void peer_starpu_close(struct peer_starpu *p);

#endif
