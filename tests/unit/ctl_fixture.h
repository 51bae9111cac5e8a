/* ctl_fixture.h - what check_ctl's suites share: a formatter run into a string, two
 * sample workloads and a sample trace, and a server thread on a real node region that
 * answers chipd_trace and chipd_workloads with them. */
#ifndef CHIPD_CTL_FIXTURE_H
#define CHIPD_CTL_FIXTURE_H

#include "client_fixture.h"
#include "proto.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define T_MS 2000u /* a libchipd call's bound */

/* Runs @fn(f, @arg) into a memory stream and returns what it wrote (free() it). */
char *format(void (*fn)(FILE *, const void *), const void *arg);

/* How many times @needle occurs in @hay, overlapping occurrences included. */
int count_of(const char *hay, const char *needle);

/* Two workloads: alpha (two parameters, a doc with quotes, INT64_MIN) and beta (one,
 * INT64_MAX). */
extern const struct chipd_workload wl_sample[2];

/* Formatters for format(): wl_sample as ctl_workloads_table prints it, and as
 * ctl_workloads_json prints it for the instance named by @arg. */
void wl_table(FILE *f, const void *arg);
void wl_json(FILE *f, const void *arg);

/* A Chrome trace of chip 0: O builds epochs 1, 2 at [0,10) and [10,20) us; S runs
 * epoch 1 at [12,22), publishes it ending at 25, and epoch 2 ending at 40. Overlap
 * 8 us of 10 us of S; step latencies 15 and 20 us. An S run on O's thread and an
 * instant event are there for the summary to ignore. */
extern const char trace_json[];

/* A server of PROTO_OP_TRACE and PROTO_OP_WORKLOADS only. */
struct tsrv {
	struct cx x; /* the region: x.instance is what clients connect to */
	struct hx hello; /* its handshake socket */
	pthread_t thread;
	_Atomic int stop;
	/* set: a workloads list that never ends, as from a supervisor whose registry keeps
	 * growing: page "from" lists one workload and says more follow, each answered after
	 * 2 ms (a busy router) */
	_Atomic int endless;
	/* the first 8 trace requests, in order: read them after tsrv_stop */
	int n;
	int64_t acts[8];
	char paths[8][PROTO_PATH_MAX];
};

/* Creates a node region with a fresh instance name (cx_region) and starts @t's
 * server thread. A trace request is recorded; a collect writes trace_json to its path
 * (internal error if it cannot) and answers 7 events, 2 dropped; any other act
 * answers nothing more. A workloads
 * request answers wl_sample as the wire's flat rows, in a mixed order. */
void tsrv_start(struct tsrv *t);

/* Stops and joins the thread, then removes the region. */
void tsrv_stop(struct tsrv *t);

/* Adds the tcases that run the chipctl binary (ctl_cli.c). */
void ctl_add_cli_tcases(Suite *s);

#endif
