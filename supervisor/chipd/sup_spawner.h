/* sup_spawner.h - the spawner (sup_spawner.c): a single-threaded process forked before
 * any thread starts, which forks the workers for the threaded supervisor and reaps
 * them. A start is asked of it and its reply read later, so that the event loop never
 * waits for it. */
#ifndef CHIPD_SUP_SPAWNER_H
#define CHIPD_SUP_SPAWNER_H

#include "sup.h"

/* Forks the spawner; call before any thread starts. Returns 0 or -errno. */
int sup_spawner_start(struct sup *s);
/* Asks the spawner to fork chip @chip's worker (recording spans from its start when
 * @trace), without waiting for its reply (read by sup_spawner_reply, within 5 s).
 * Returns 0, or -errno: -EINPROGRESS while an earlier start is unanswered (see
 * sup_spawner_idle), -EPIPE. Event loop thread (or main, before it runs). */
int sup_spawner_ask(struct sup *s, uint32_t chip, bool trace);
/* The reply to the start asked last: its worker's pid, with *@pidfd a pidfd the
 * spawner opened before it could reap the worker (so it names that process, never a
 * later one with its pid); -EINPROGRESS when it has not come and its 5 s are not over
 * (only when not @wait: @wait waits for it up to then); -ETIMEDOUT when they are over
 * (the start is given up on and stays unanswered: see sup_spawner_idle); another
 * -errno when the spawner failed it or the socket failed (-EMFILE: the supervisor
 * had no descriptor for the pidfd; the worker is killed, a later start may follow).
 * Every return but -EINPROGRESS ends the start. Event loop thread (or main). */
pid_t sup_spawner_reply(struct sup *s, int *pidfd, bool wait);
/* Whether the spawner can take a start: 0, or -EINPROGRESS while the reply to a start
 * given up on has not come (a spawner that does not run), or -EPIPE. A late reply's
 * worker is killed, and its end awaited (bounded), here. Event loop thread. */
int sup_spawner_idle(struct sup *s);
/* The spawner died (its pidfd became readable): no worker can be started or reaped
 * any more, and one cannot be forked safely from this threaded process. Logs it once
 * and asks the stop with the configured grace. Returns the exit status chipd must
 * end with (SUP_EXIT_SPAWNER_LOST). Event loop. */
int sup_spawner_lost(struct sup *s);
/* The exit status after the spawner died: chipd stopped, restart it. */
#define SUP_EXIT_SPAWNER_LOST 70
/* Closes the spawner's socket and waits for it to leave (SIGKILL after 3 s when it
 * does not: one that does not run never reads the close). */
void sup_spawner_stop(struct sup *s);

#endif
