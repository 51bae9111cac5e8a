/* e2e.h - `chipbench e2e`'s parts: the options, a row (clients submitting requests
 * back to back through libchipd for a fixed time), the small-request section (one-token
 * zero-work requests against chipd_ping of the same run) and their printing. */
#ifndef CHIPD_BENCH_E2E_H
#define CHIPD_BENCH_E2E_H

#include "bench_chipd.h"

#include <stdbool.h>
#include <stdint.h>

#define E2E_MAX_ROWS	8
#define E2E_MAX_CLIENTS 256
#define E2E_CALL_MS	5000u
#define E2E_TARGET_NS	10000.0 /* token delivery p50 with a spinning reader */
/* Small requests (issue targets, same run): a one-token zero-work request at 1 client
 * completes within this many chipd_ping p50s, and 16 clients make this many req/s. */
#define E2E_SMALL_TARGET_PINGS 10.0
#define E2E_SMALL_TARGET_RPS   20000.0
#define E2E_SMALL_TARGET_AT    16u /* clients of the req/s target */
#define E2E_PING_ITERS	       2000u
/* Pings, and laps of the floor's ring, before either is timed: long enough for the
 * scheduler to place the threads (its load balancer moves a thread within tens of ms) */
#define E2E_WARM_NS (200ull * 1000u * 1000u)
/* A one-token request's critical path (e2e_floor.c): this many hand-offs in a row
 * among this many threads. */
#define E2E_PATH_HANDOFFS 7u
#define E2E_PATH_THREADS  6u

struct e2e_opts {
	const char *chipd;
	unsigned clients[E2E_MAX_ROWS];
	unsigned nrows;
	double seconds; /* per row */
	unsigned tokens, device_us;
	unsigned dl_tokens, dl_device_us; /* the delivery rows' requests */
	bool delivery;			  /* run the delivery rows */
	unsigned small_clients[E2E_MAX_ROWS];
	unsigned nsmall;
	unsigned small_repeats; /* windows per small row; the median's is reported */
	bool small; /* run the small-request section */
	bool json;
};

struct e2e_row {
	/* the load: clients submitting requests of @req_tokens tokens, @device_us per
	 * step, read with a spin of @spin_us (0: the library's default) */
	unsigned clients, req_tokens, device_us, spin_us;
	int rc;
	uint64_t requests, tokens, refused;
	double elapsed_s;
	double rps, tps;
	/* ns: token delivery (publish -> client), admission (the chipd_submit call),
	 * request (chipd_submit called -> final token read) */
	double tok_p50, tok_p99, adm_p50, adm_p99, req_p50, req_p99;
	/* e2e_row_median: the windows run (0: one, by e2e_row), the fewest and the most
	 * req/s among them; the row is the window of the median req/s */
	unsigned repeats;
	double rps_min, rps_max;
};

/* One-token zero-work requests next to chipd_ping, on the same chipd. */
struct e2e_small {
	int ping_rc;
	double ping_p50, ping_p99; /* ns */
	/* the floor (e2e_floor): one hand-off's p50 among E2E_PATH_THREADS threads that
	 * wait as chipd's do; the path costs E2E_PATH_HANDOFFS of them at best */
	int floor_rc;
	double handoff_p50; /* ns */
	struct e2e_row rows[E2E_MAX_ROWS];
	unsigned nrows;
};

/* Runs one row with @r->clients clients against the chipd @d. Returns 0 or -errno
 * (also in @r->rc). */
int e2e_row(const struct e2e_opts *o, const struct bench_chipd *d, struct e2e_row *r);

/* Runs the row @r @repeats times (windows of o->seconds each, one after the other) and
 * keeps the window of the median req/s (the lower middle one of an even count), with
 * the range of req/s in rps_min and rps_max: one window on a shared machine is one
 * draw of its noise. Returns 0 or the first failure's -errno (also in @r->rc). */
int e2e_row_median(const struct e2e_opts *o, const struct bench_chipd *d, struct e2e_row *r,
		   unsigned repeats);

/* Times E2E_PING_ITERS chipd_ping round trips on @d's connection (after E2E_WARM_NS
 * of unmeasured ones) into @s. Returns 0 or -errno (also in @s->ping_rc). */
int e2e_ping(const struct bench_chipd *d, struct e2e_small *s);

/* Times a hand-off among E2E_PATH_THREADS threads passing a word round a ring, each
 * waiting with shm_spin, into @s->handoff_p50. Returns 0 or -errno (also in
 * @s->floor_rc). */
int e2e_floor(struct e2e_small *s);

double e2e_ratio(double x, double base);
bool e2e_delivery_met(const struct e2e_row *dl);
/* The small-request targets; false when not measured. */
bool e2e_small_latency_met(const struct e2e_small *s);
bool e2e_small_rps_met(const struct e2e_small *s);

void e2e_print_table(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
		     const struct e2e_row *dl, const struct e2e_small *small);
void e2e_print_json(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
		    const struct e2e_row *dl, const struct e2e_small *small);

#endif
