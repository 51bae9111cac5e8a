/* peer_iceoryx.h - iceoryx (v2, C binding) as a chipbench mailbox peer: busy-poll
 * publish/subscribe ping-pong between two processes, through a RouDi daemon.
 * Only built when CMake finds iceoryx_binding_c (see iceoryx.cmake), which then also
 * defines CHIPD_HAVE_ICEORYX=1; callers guard their call with that macro. */
#ifndef CHIPD_PEER_ICEORYX_H
#define CHIPD_PEER_ICEORYX_H

#include "bench.h"

/* Measures iceoryx busy-poll ping-pong round trips of 64-byte messages between two
 * processes (pinned to opts->cpu_client / opts->cpu_server), opts->warmup unmeasured then
 * opts->iters measured. Starts its own iox-roudi (looked up on $PATH only, so that
 * PATH=/nonexistent forces a skip) with a private config if none is running, and stops
 * it. On any missing piece (no roudi binary, roudi fails to start within 5 s, runtime
 * init fails) marks *out skipped with a one-line reason via bench_skip and returns 0.
 * Never hangs: every wait is bounded (abort the measurement after 60 s total).
 * Returns 0 with *out filled (or skipped as above), or -errno with *out marked skipped
 * when the measurement itself failed (timeout, lost or wrong reply, child crash). */
int peer_iceoryx_pingpong(const struct bench_opts *opts, struct bench_result *out);

#endif
