/* fault.h - helpers of the fault matrix (tests/fault): counter snapshots and the
 * accounting every row checks, a raw mailbox client in a forked child that stops in
 * a chosen slot state, hand-made messages, and the "nothing left behind" check.
 *
 * Every wait here is bounded; a helper that cannot reach its condition fails the
 * tcase (Check's fork mode turns that into a report, never a hang). */
#ifndef CHIPD_FAULT_H
#define CHIPD_FAULT_H

#include "chipd_fixture.h"
#include "mbox.h"
#include "hello.h"
#include "node.h"
#include "proto.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FT_MAX_CHIPS 4

/* The counters a row looks at, read through chipd_stats (shared memory, no round
 * trip). */
struct ft_stats {
	uint64_t sup[PROTO_NSUP_CTRS];
	uint64_t chip[FT_MAX_CHIPS][PROTO_NWRK_CTRS];
	uint32_t nchips;
};

/* What a row's clients saw, by outcome. */
struct ft_ledger {
	uint64_t submitted, completed, refused;
	uint64_t ended[CHIPD_NCODES];	   /* streams that ended with each error code */
	uint64_t refused_by[CHIPD_NCODES]; /* requests answered with each error code */
	uint64_t tokens;
	/* every request of the row that ended with an error is in ended or refused_by
	 * (none ended unseen, as a call whose client gave up does) */
	bool complete;
};

uint64_t ft_now_ms(void);

/* Call in main() before the tcases run: names this run's instances after it. */
void ft_set_owner(void);
/* cd_start with an instance "f<owner>-<pid>-<n>", no extra environment. */
void ft_start(struct cd *d, const char *const *args);
/* Removes the regions and pid files of this run's instances that failed tcases
 * left (their chipd died with them, through PDEATHSIG). Call after tu_run. */
void ft_cleanup(void);

/* Reads every counter of @d into @st. */
void ft_stats(struct cd *d, struct ft_stats *st);

/* Sum of worker counter @c over every chip. */
uint64_t ft_chip_sum(const struct ft_stats *st, enum proto_wrk_ctr c);

/* Waits up to @ms until the node is quiet: no live request at the router
 * (queue_depth 0, rings_in_use 0) and every chip's queue, active set and KV pool
 * empty. Returns the last snapshot in @st; fails the tcase on timeout. */
void ft_quiesce(struct cd *d, struct ft_stats *st, unsigned ms);

/* The accounting every row ends with, on a quiet node (after ft_quiesce):
 * - each worker block balances: admitted = completed + failed + cancelled (+ the
 *   requests its dead incarnations took with them, @lost_by_death in total);
 * - the workers' completed and tokens equal what the clients saw (@l);
 * - the router answered every request it took, except those whose client gave up
 *   (requests - answered <= mbox_resets);
 * - err_<code> counted every error the clients saw (exactly, when @l is complete),
 *   and no more errors than requests;
 * - the gauges are zero.
 * @lost_by_death: requests admitted by a worker that died before ending them. */
void ft_check_accounting(struct cd *d, const struct ft_ledger *l, uint64_t lost_by_death);

/* Stops @d with SIGTERM and checks that nothing is left: exit status 0, no region,
 * no pid file, no process of @pids (worker pids seen during the row; 0 entries
 * ignored) still running. */
void ft_stop_clean(struct cd *d, const pid_t *pids, unsigned npids);

/* Whether @pid is gone (no such process, or a zombie). */
bool ft_pid_gone(pid_t pid);

/* Submits a synthetic request through @d's connection: @tokens tokens, @host_us of
 * orchestrator cost and @device_us of device cost per step, on @chip (-1: any),
 * with @deadline_ms (0: none). Returns the libchipd result; *@s on success. */
int ft_submit(struct cd *d, uint32_t tokens, uint32_t host_us, uint32_t device_us, int chip,
	      uint32_t deadline_ms, chipd_stream **s, struct chipd_error *err);

/* Reads @s to its end, with each step bounded by @ms: counts tokens (asserting
 * seq order, no duplicate) into @l and the terminal outcome; returns the terminal
 * code (CHIPD_OK after final). */
enum chipd_code ft_drain(chipd_stream *s, struct ft_ledger *l, unsigned ms);

/* ---- the raw mailbox client (a forked child that stops in a slot state) ---- */

enum ft_raw_stop {
	FT_RAW_CLAIMED, /* claimed, nothing posted */
	FT_RAW_POSTED,	/* posted (the caller keeps the router from taking it) */
	FT_RAW_TAKEN,	/* posted; returns once the router took it */
	FT_RAW_DONE,	/* answered, not released */
};

struct ft_raw {
	pid_t pid;
	uint32_t slot, gen;
	int fd; /* read end: the child writes its ticket, then sleeps */
	/* the test's view of the child's own client region (the child passed its memfd
	 * along with its ticket: no other client could map it): read slots through it */
	struct proto_node *view;
};

/* Forks a child that attaches @d's node region with proto_node_attach, claims a
 * slot, writes @msg (@len bytes) and goes as far as @stop, then reports its ticket
 * and sleeps until killed. For FT_RAW_TAKEN the child reports after posting; wait
 * for TAKEN with ft_slot_wait. Fails the tcase if the child does not report within
 * @ms. */
void ft_raw_start(struct ft_raw *r, struct cd *d, enum ft_raw_stop stop, const void *msg,
		  uint32_t len, unsigned ms);
/* The same, with the supervisor SIGSTOPped by the child once it said hello and before
 * it claims (the router cannot take what it posts); the caller sends SIGCONT. */
void ft_raw_start_sup_stopped(struct ft_raw *r, struct cd *d, enum ft_raw_stop stop,
			      const void *msg, uint32_t len, unsigned ms);

/* Unmaps @r's view of the child's region (after the child is gone). */
void ft_raw_end(struct ft_raw *r);

/* The state of slot @slot of @d's client mailbox, read through @n. */
enum mbox_state ft_slot_state(struct proto_node *n, uint32_t slot);

/* Waits up to @ms until slot @slot is in @state (and, for FREE, past generation
 * @gen). Returns whether it happened. */
bool ft_slot_wait(struct proto_node *n, uint32_t slot, enum mbox_state state, uint32_t gen,
		  unsigned ms);

/* Attaches @n to @d's node region, read-only, without a hello (no client region). */
void ft_node_attach_bare(struct cd *d, struct proto_node *n);
/* Attaches @n to @d's node region and says hello on its handshake socket (the
 * connection stays open until the calling process exits: the supervisor serves the
 * mailbox requests of connected processes only). */
void ft_node_attach(struct cd *d, struct proto_node *n);
/* Says hello for this process on @n's handshake socket; returns the connection. */
int ft_node_hello(struct proto_node *n);

/* One raw round trip on @d's mailbox from this process: claims a slot, copies @msg,
 * sets req_len to @len (which may exceed the buffer: written directly, as a hostile
 * client would), posts, waits up to @ms, copies the answer into @ans (decoded as the
 * answer to @op). Returns mbox_response's result (0, or -EMSGSIZE when the mailbox
 * layer refused the length) and the decoded answer in @m when 0. */
int ft_raw_call(struct proto_node *n, const void *msg, uint32_t len, enum proto_op op,
		struct proto_msg *m, unsigned ms);

/* Builds a valid request of @op into @buf (encoded by the library's encoder). */
size_t ft_encode(const struct proto_msg *m, void *buf, size_t cap);

/* Every tcase of the suite, by file. */
void ft_add_worker_cases(Suite *s);
void ft_add_client_cases(Suite *s);
void ft_add_message_cases(Suite *s);

#endif
