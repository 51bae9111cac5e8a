/* peer_raw.h - the baselines chipbench measures the mailbox against, in the same run:
 * raw shared-memory spin ping-pong (the floor), raw futex ping-pong, a unix
 * SOCK_SEQPACKET socket pair and a pair of pipes. Each moves a 64-byte request and a 64-byte
 * answer. */
#ifndef CHIPD_PEER_RAW_H
#define CHIPD_PEER_RAW_H

#include "bench.h"

/* Each returns 0 with @out filled, or -errno with @out marked skipped. */
int peer_spin_pingpong(const struct bench_opts *opts, struct bench_result *out);
int peer_futex_pingpong(const struct bench_opts *opts, unsigned iters, struct bench_result *out);
int peer_seqpacket_pingpong(const struct bench_opts *opts, unsigned iters,
			    struct bench_result *out);
int peer_pipe_pingpong(const struct bench_opts *opts, unsigned iters, struct bench_result *out);

#endif
