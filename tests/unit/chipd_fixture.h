/* chipd_fixture.h - a real chipd process for the process-level suites: started with
 * a unique instance and --notify-fd (so the test waits for readiness, not a sleep),
 * connected through libchipd, stopped and checked for leftovers. */
#ifndef CHIPD_CHIPD_FIXTURE_H
#define CHIPD_CHIPD_FIXTURE_H

#include "chipd.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CD_READY_MS 15000u /* start-up bound (sanitizer builds are slow) */
#define CD_CALL_MS  5000u

struct cd {
	char instance[CHIPD_INSTANCE_MAX];
	char pidfile[128];
	char region[96]; /* its /dev/shm path */
	pid_t pid;
	chipd_conn *conn;
};

struct proto_node;
struct proto_msg;

/* Attaches @d's node region into @n the way a client does (read-only) and says hello,
 * which maps the exchange region (mailbox, ring consumer lines); the connection stays
 * open until the process ends, so the router serves this process's slots. */
void cd_node_attach(struct cd *d, struct proto_node *n);

/* Sends @m (a request made with proto_msg_init) to @d's supervisor as a client written
 * from docs/protocol.md alone does: its own attach and hello, the message encoded into
 * a mailbox slot; decodes the answer (ok or the envelope) into @m. */
void cd_op_raw(struct cd *d, struct proto_msg *m);

/* For tests that play a client writing where no client can: remaps @n's read-only node
 * region read-write in place (the same addresses) through its /dev/shm path, which only
 * root may open for writing (mode 0400). Returns false when not root: the caller skips
 * that part. */
bool cd_node_make_writable(struct proto_node *n);

/* Starts chipd --foreground with @args (NULL-terminated extra arguments, may be
 * NULL) and @env ("NAME=value" entries added to the environment, NULL-terminated,
 * may be NULL); waits until it is ready and connects. */
void cd_start(struct cd *d, const char *const *args, const char *const *env);
/* The same with instance @instance (NULL: a new unique one). */
void cd_start_as(struct cd *d, const char *instance, const char *const *args,
		 const char *const *env);
/* Like cd_start without waiting or connecting; returns the pid. @notify_fd receives
 * the read end of the readiness pipe (or -1 if NULL). */
pid_t cd_spawn(struct cd *d, const char *const *args, const char *const *env, int *notify_fd);
pid_t cd_spawn_as(struct cd *d, const char *instance, const char *const *args,
		  const char *const *env, int *notify_fd);
/* Sends @sig and waits up to @ms for chipd to exit; returns its exit status, or -1
 * when it did not exit (it is then killed). Closes the connection first. */
int cd_stop(struct cd *d, int sig, unsigned ms);
/* The pid of chip @chip's worker (0 if none), from the node directory. */
pid_t cd_worker_pid(struct cd *d, uint32_t chip);
/* Waits until chip @chip is in @state (and, when @not_pid != 0, runs a pid, other
 * than it). Returns whether it happened within @ms. */
bool cd_wait_chip(struct cd *d, uint32_t chip, enum chipd_chip_state state, pid_t not_pid,
		  unsigned ms);
/* Submits a synthetic request (@tokens tokens, @device_us per step) and returns its
 * stream. */
chipd_stream *cd_submit(struct cd *d, uint32_t tokens, uint32_t device_us);
/* Reads @s to its end; returns the number of tokens, with *@code the terminal error
 * code (CHIPD_OK after final). Asserts the tokens come in order. */
uint32_t cd_drain_stream(chipd_stream *s, enum chipd_code *code, unsigned ms);
/* The same for a stream whose first @from tokens were read already: the next has seq
 * @from. Returns the number of tokens read here. */
uint32_t cd_drain_stream_from(chipd_stream *s, uint32_t from, enum chipd_code *code,
			      unsigned ms);
/* Submits @wl with @np parameters @p to chip @chip (-1: the router's choice), waiting
 * up to CD_CALL_MS. Returns chipd_submit's result: 0 with *@s the stream, or -errno
 * with *@err the envelope. Asserts nothing, so a test can expect a refusal. */
int cd_submit_to(struct cd *d, const char *wl, int32_t chip, const struct chipd_param *p,
		 uint32_t np, chipd_stream **s, struct chipd_error *err);
/* Reads @s to its end (each read bounded by @ms), asserts it gave @tokens tokens in
 * order and ended with @code (CHIPD_OK: final), and closes it. */
void cd_expect_stream(chipd_stream *s, uint32_t tokens, enum chipd_code code, unsigned ms);
/* Counter @name of block @block ("supervisor", "chip0"), read from shared memory
 * (chipd_stats: no request). Asserts the counter exists. */
uint64_t cd_stat(struct cd *d, const char *block, const char *name);
/* cd_stat, read again every 2 ms until it is @want or more or @ms passed: a counter
 * its writer bumps just after what the test waited for. Returns the last value. */
uint64_t cd_stat_reaches(struct cd *d, const char *block, const char *name, uint64_t want,
			 unsigned ms);
/* Whether the workloads answer lists @name; when it does and @out is not NULL,
 * *@out is its entry. */
bool cd_listed(struct cd *d, const char *name, struct chipd_workload *out);
/* Asserts that @name is listed with these counts (docs/callables.md, "Counters"). */
void cd_expect_counts(struct cd *d, const char *name, uint64_t requests, uint64_t completed,
		      uint64_t failed, uint64_t cancelled, uint64_t tokens);

/* Makes a private directory "$TMPDIR/chipd-@tag.XXXXXX" into @dir (@cap bytes) and
 * copies the callables @pattern ("tc_*.so") of @from into it, mode 0755: a directory a
 * registration accepts whatever the build directory's modes. */
void cd_callables_dir(char *dir, size_t cap, const char *tag, const char *from,
		      const char *pattern);
/* Removes @dir and everything in it. */
void cd_remove_dir(const char *dir);

/* Whether new connections, tried one after the other for @for_ms, are each answered
 * and pinged within @ms (the event loop answers the hellos). */
bool cd_answers_new_connections(struct cd *d, uint32_t ms, uint64_t for_ms);

/* Whether the node region is still in /dev/shm. */
bool cd_region_exists(const struct cd *d);

/* Adds the tcases about what each counter means (chipd_counters.c, check_chipd). */
void cd_add_counter_cases(Suite *s);
/* Adds the tcases about abandoned streams (chipd_abandon.c, check_chipd). */
void cd_add_abandon_cases(Suite *s);
/* Adds the tcases about the counts of each callable (chipd_clstat.c, check_chipd). */
void cd_add_clstat_cases(Suite *s);
/* Adds the tcases about cancels between owners, and re-queue ends (chipd_cancel.c,
 * check_chipd). */
void cd_add_cancel_cases(Suite *s);

/* A reader that keeps its stream's reader open after its client hung up: a thread of
 * the test stores `closed` = 0 in the stream's consumer line (undoing the supervisor's
 * close) and `tail` = `head` (reading every token) every 20 us, until the ring goes to
 * another stream (its generation moved) or cd_reopener_stop. */
struct cd_reopener {
	chipd_stream *s;
	_Atomic bool stop;
	pthread_t th;
};
/* Starts @o's thread on @s (a stream of the caller's, left to the caller to close). */
void cd_reopener_start(struct cd_reopener *o, chipd_stream *s);
/* Stops @o's thread and joins it. */
void cd_reopener_stop(struct cd_reopener *o);

#endif
