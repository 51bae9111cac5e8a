/* sup_register.h - callables registered while the node runs (sup_register.c;
 * docs/callables.md, "Registration"). */
#ifndef CHIPD_SUP_REGISTER_H
#define CHIPD_SUP_REGISTER_H

#include "mbox.h"
#include "proto.h"

#include <stdbool.h>
#include <stdint.h>

struct sup;
struct sup_worker;

/* Maps the registry (cfg.max_callables entries, shared with the workers forked
 * later): before the spawner is forked. Returns 0 or -errno. */
int sup_register_init(struct sup *s);
void sup_register_free(struct sup *s);

/* The router's register and unregister ops (docs/protocol.md §8.4). */
int sup_register_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err);
int sup_unregister_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		       struct proto_error *err);
/* The register put off in slot @t of region @region is dropped (its client gave the
 * slot up), or every one (@all: the router leaves): its probe is killed. Router thread. */
void sup_register_probe_drop(struct sup *s, uint32_t region, struct mbox_ticket t, bool all);

/* draining when workload @name is being unregistered or quarantined (new requests of
 * it are refused), else CHIPD_OK. Under sup.lock. */
int sup_register_refuses(struct sup *s, const char *name, struct proto_error *err);

/* The chips a submit of workload @name may go to (bit i: chip i): for a registered
 * callable those it is loaded on (a chip whose replay of it failed has not), for any
 * other name every chip. Under sup.lock or on the router thread. */
uint64_t sup_register_chips(struct sup *s, const char *name);

/* For the workloads answer, into @w: the chips @name is loaded on (bit i: chip i),
 * its requests in flight, and its counts (sup_clstat.h) with every end seen so far
 * counted. Takes sup.lock. */
void sup_register_wl_info(struct sup *s, const char *name, struct proto_wl *w);

/* The event loop may start a worker only between these (false: a registration is
 * under way; try on a later tick), so no worker misses one. */
bool sup_register_spawn_begin(struct sup *s);
void sup_register_spawn_end(struct sup *s);

/* Worker @w died (not a stop of ours), before its streams are handled: its chip bit
 * is cleared, and each registered callable with a request in flight on it counts a
 * crash; at --callable-crash-limit it is quarantined: refused at once, its requests
 * cancelled and it is unregistered on every chip by the router (sup_register_tick),
 * logged and counted (callables_quarantined). Event loop. */
void sup_register_worker_died(struct sup *s, struct sup_worker *w);

/* Router thread, each time round its loop: carries out the quarantines due, and every
 * 20 ms the drains (unregister --drain, --cancel) whose client's connection ended. */
void sup_register_tick(struct sup *s);

#endif
