/* bench_chipd.h - a real chipd for the chipbench modes that measure the whole node
 * (e2e, startup, idle; the chipd rows of mailbox and overlap): started --foreground
 * with a unique instance and --notify-fd, waited for with a bound, connected through
 * libchipd, and always stopped (SIGTERM, then SIGKILL after a bound) with its region
 * and pidfile gone. */
#ifndef CHIPD_BENCH_CHIPD_H
#define CHIPD_BENCH_CHIPD_H

#include "chipd.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_CHIPD_READY_MS 15000u /* start-up bound: 8 chips on a loaded 2-vCPU VM */
#define BENCH_CHIPD_STOP_MS  15000u /* SIGTERM -> exit bound before SIGKILL */
#define BENCH_CHIPD_CALL_MS  5000u  /* one libchipd call */

struct bench_chipd {
	char instance[CHIPD_INSTANCE_MAX];
	char pidfile[128];
	pid_t pid;	   /* the supervisor; 0 when not running */
	chipd_conn *conn;  /* NULL until connected */
	uint64_t ready_ns; /* fork+exec -> readiness newline */
};

/* CLOCK_MONOTONIC in ns. */
uint64_t bench_chipd_now_ns(void);

/* Waits up to @ms (polling every 100 us) until @n client threads have counted
 * themselves in @ready (connected, or failed to; each adds 1 with a release), then
 * returns bench_chipd_now_ns(): the moment the caller lets them go. */
uint64_t bench_chipd_clients_ready(atomic_uint *ready, unsigned n, unsigned ms);

/* The chipd binary: @path when not NULL, else the one built next to chipbench. */
const char *bench_chipd_bin(const char *path);

/* Starts @bin --foreground --chips @chips --log-level warn --instance
 * "bench-<pid>-<tag>" with @extra (NULL-terminated, may be NULL), waits up to
 * BENCH_CHIPD_READY_MS for its readiness newline and connects. Returns 0, or -errno
 * with a one-line reason on stderr and nothing left running. */
int bench_chipd_start(struct bench_chipd *d, const char *bin, const char *tag, unsigned chips,
		      const char *const *extra);

/* Closes the connection, sends SIGTERM and waits up to BENCH_CHIPD_STOP_MS; kills it
 * if it overstays and removes what a killed chipd leaves (region, pidfile). Returns
 * its exit status, -ETIMEDOUT when it had to be killed, 0 when it was not running.
 * *@stop_ns (may be NULL) receives SIGTERM -> exit. Safe to call twice. */
int bench_chipd_stop(struct bench_chipd *d, uint64_t *stop_ns);

/* Waits up to @ms for chip @chip to be READY with a pid other than @not_pid (0: any).
 * Returns its pid, or 0 on timeout. *@left_ready_ns (may be NULL) receives the first
 * time the chip was seen not READY with @not_pid (0 if never seen). */
pid_t bench_chipd_wait_chip(struct bench_chipd *d, uint32_t chip, pid_t not_pid, unsigned ms,
			    uint64_t *left_ready_ns);

/* Submits a synthetic request (kernels/wl_synthetic.c: @tokens tokens, @host_us of
 * host and @device_us of device cost per step) to @chip (-1: any) and reads its
 * stream to the end, waiting up to @timeout_ms for each call. Returns 0, or the
 * failing call's -errno. */
int bench_chipd_synthetic(chipd_conn *c, int32_t chip, uint32_t tokens, uint32_t host_us,
			  uint32_t device_us, uint32_t timeout_ms);

/* Parses "1,4,16" (at most @cap numbers, each 1..@max) into @out; *@n receives the
 * count. Returns 0 or -EINVAL. */
int bench_chipd_parse_list(const char *arg, unsigned *out, unsigned cap, unsigned max, unsigned *n);

#endif
