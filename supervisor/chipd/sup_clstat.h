/* sup_clstat.h - the counts of each callable (sup_clstat.c; docs/callables.md,
 * "Counters"): the requests of a callable name that a worker admitted, and how their
 * streams ended, since the name was loaded. In the supervisor's own memory (not the
 * node region: no client reads or writes them), one entry per name at most
 * --max-callables, every function under sup.lock. The workloads answer carries them. */
#ifndef CHIPD_SUP_CLSTAT_H
#define CHIPD_SUP_CLSTAT_H

#include <stdint.h>

struct sup;
struct sup_req;

/* What a callable's requests did: every request counted in @requests is counted
 * once more, when its stream ended, in one of @completed (FINAL), @failed (an ERROR
 * record of any code but cancelled) or @cancelled; @tokens are the token records of
 * its ended streams. */
struct sup_clstat_vals {
	uint64_t requests, completed, failed, cancelled, tokens;
};

/* Allocates cfg.max_callables entries, all free. Returns 0 or -ENOMEM. */
int sup_clstat_init(struct sup *s);
void sup_clstat_free(struct sup *s);

/* @e's worker admitted it and its client is answered ok: counts a request of
 * @e->wl, and ties @e to that name's counts so that its end is counted there
 * (sup_clstat_end). Once per request: a re-queue is not a new admission. */
void sup_clstat_admitted(struct sup *s, struct sup_req *e);

/* @e's stream ended with terminal @flags (RING_F_FINAL, or RING_F_ERROR and a code)
 * after @tokens tokens: counted in the counts @e is tied to, unless the name was
 * unloaded since (or @e was never admitted). The caller sees each end once
 * (sup_table.c, count_end). */
void sup_clstat_end(struct sup *s, const struct sup_req *e, uint32_t flags, uint64_t tokens);

/* Workload @name was unloaded (an unregister, a quarantine, a registration rolled
 * back): its counts go, and a later load of the name starts at 0. */
void sup_clstat_drop(struct sup *s, const char *name);

/* The counts of workload @name into *@out: zeros when none of its requests was
 * admitted since it was loaded. */
void sup_clstat_get(const struct sup *s, const char *name, struct sup_clstat_vals *out);

#endif
