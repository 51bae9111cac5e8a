/* ctl.h - chipctl, the mailbox CLI: the subcommands, their shared helpers, and the
 * pure formatters (counters in, text out) that the unit suite tests without a
 * running chipd.
 *
 * chipctl uses libchipd (chipd.h) and nothing else of chipd. Every subcommand
 * returns the process exit status (enum ctl_exit); the meaning of each is fixed and
 * documented in `chipctl --help` and chipctl(1).
 */
#ifndef CHIPD_CTL_H
#define CHIPD_CTL_H

#include "chipd.h"

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses (chipctl(1), EXIT STATUS), the sysexits.h numbers where one fits. */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_FAILED = 1,	   /* the request failed: the error envelope was printed */
	CTL_EXIT_NOT_RUNNING = 3,  /* the instance exists but is stopped, dead or starting */
	CTL_EXIT_USAGE = 64,	   /* EX_USAGE */
	CTL_EXIT_NO_INSTANCE = 69, /* EX_UNAVAILABLE */
	CTL_EXIT_IOERR = 74,	   /* EX_IOERR: standard output could not be written */
	CTL_EXIT_TIMEOUT = 75,	   /* EX_TEMPFAIL */
	CTL_EXIT_PERM = 77,	   /* EX_NOPERM: the region belongs to another user */
};

/* The version of the JSON documents chipctl prints ("v"). */
#define CTL_JSON_VERSION 1

/* Options every subcommand accepts, before or after its name. */
struct ctl {
	const char *instance; /* NULL: $CHIPD_INSTANCE, $SLURM_JOB_ID, "default" */
	uint32_t timeout_ms;  /* of each call to the supervisor */
	const char *cmd;      /* the subcommand, for messages */
	bool json;	      /* --json, where the subcommand has it */
};

/* The signal (SIGINT, SIGTERM) that asked a long-running command to stop, else 0. */
extern volatile sig_atomic_t ctl_interrupted;

/* ---- ctl_util.c: options, errors, connections, JSON ---- */

/* What ctl_args returns after printing --help: the subcommand exits 0. */
#define CTL_HELP (-1)

/* The help text's part that every subcommand shares. */
#define CTL_HELP_COMMON                                                                            \
	"Common options:\n"                                                                        \
	"  --instance NAME   the instance (default: $CHIPD_INSTANCE, else $SLURM_JOB_ID,\n"        \
	"                    else \"default\")\n"                                                  \
	"  --timeout-ms N    wait at most N ms for each answer (default 5000)\n"                   \
	"  --help            print this help and exit\n"                                           \
	"Exit status: 0 ok, 1 the request failed, 3 not running, 64 usage error,\n"                \
	"69 no such instance, 75 timed out, 77 permission denied.\n"

/* How a subcommand parses its arguments. */
struct ctl_args {
	const char *usage;	  /* the --help text */
	const struct option *own; /* its own long options, ended by a NULL name; may be NULL */
	/* Takes one of @own (getopt's code and argument); returns 0 or an exit status. */
	int (*opt)(void *ctx, struct ctl *g, int opt, const char *arg);
	void *ctx;
	bool json;	      /* it has --json */
	int min_pos, max_pos; /* how many operands it takes */
};

/* Parses @argv (argv[0] is the subcommand) with getopt_long: @a's options, then
 * --instance, --timeout-ms, --help and (when a->json) --json. Afterwards the operands
 * are argv[optind..argc). Returns 0, CTL_HELP after printing the help, or
 * CTL_EXIT_USAGE after saying what is wrong. */
int ctl_args(struct ctl *g, int argc, char **argv, const struct ctl_args *a);

/* Prints "chipctl CMD: <message>" and a hint to stderr; returns CTL_EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int ctl_usage(const struct ctl *g, const char *fmt, ...);

/* Parses a decimal integer of [@min, @max] (the whole string). Returns 0 or -EINVAL. */
int ctl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Request ids as a person reads and types them. The supervisor picks ids in the top
 * half (2^62 + N, sup_router.c) so that they never meet the small ids clients choose:
 * such an id is written "@N" (the quick start's 4611686018427387905 is "@1"), any other
 * id in decimal. --json always carries the full decimal id. */
#define CTL_ID_TOP   ((uint64_t)1 << 62)
#define CTL_ID_CHARS 24 /* "@" and 19 digits, or 19 digits, and the NUL */
/* Writes @id into @buf as above; returns @buf. */
const char *ctl_id_str(uint64_t id, char buf[CTL_ID_CHARS]);
/* Parses an id as ctl_id_str writes it, or in decimal: "@N" with N in 1..2^62-1, or
 * 1..2^63-1. Returns 0 or -EINVAL. */
int ctl_parse_id(const char *s, uint64_t *out);
/* Copies the supervisor's message @msg into @out (@cap bytes, cut to fit) with each
 * request id it names written as ctl_id_str does: "no live request @5", as typed,
 * not the full id. A number is an id only as a whole word of digits; returns @out. */
const char *ctl_ids_in_text(const char *msg, char *out, size_t cap);

/* Sets g->timeout_ms from --timeout-ms @arg (1..86400000). Returns 0, or
 * CTL_EXIT_USAGE after saying why. */
int ctl_opt_timeout(struct ctl *g, const char *arg);

/* Parses a duration in seconds ("2", "0.5"): more than 0, at most a day. Returns 0 or
 * -EINVAL. */
int ctl_parse_seconds(const char *s, double *out);

/* The exit status for a failed call: @rc its return, @connecting true for
 * chipd_connect (where -EAGAIN means "starting", not "every slot busy"). */
int ctl_exit_for(int rc, bool connecting);

/* Writes the failure @rc (a negative errno), @err as the JSON error object of
 * chipctl(1): {"code":STR|null,"errno":N,"message":STR,"retryable":BOOL} and, when it
 * concerns one request or chip, "request":N, "chip":N. */
void ctl_json_error(FILE *f, int rc, const struct chipd_error *err);

/* Reports the failure of a call (@what names it) on stderr, and with --json also as
 * the document on stdout ({"v":1,"ok":false,"exit":N,"error":{...}}, chipctl(1)),
 * except for a usage error (exit 64). Returns the exit status. */
int ctl_report(const struct ctl *g, const char *what, int rc, const struct chipd_error *err,
	       bool connecting);
/* ctl_report whose document ends with more keys: @more writes them (",\"K\":V...")
 * to its FILE, given @arg. */
int ctl_report_more(const struct ctl *g, const char *what, int rc, const struct chipd_error *err,
		    bool connecting, void (*more)(FILE *, const void *), const void *arg);

/* Connects to the instance of @g, waiting g->timeout_ms for the handshake. Returns
 * CTL_EXIT_OK with *@c, or the exit status after reporting the failure. */
int ctl_connect(const struct ctl *g, chipd_conn **c);

/* As ctl_connect, without the handshake: a handle that reads counters only
 * (chipd_connect_monitor), for stats, top and export. */
int ctl_connect_monitor(const struct ctl *g, chipd_conn **c);

/* Reads every counter of @c into a fresh array (*@out, free() it) of *@n entries.
 * Returns 0 or a negative errno with @err filled. */
int ctl_read_stats(chipd_conn *c, struct chipd_stat **out, uint32_t *n, struct chipd_error *err);

/* Connects afresh, reads every counter (as ctl_read_stats) and disconnects: for the
 * commands that keep watching, so that they follow a restart of chipd. Returns 0 or
 * the negative errno of chipd_connect or chipd_stats, with @err filled. */
int ctl_snapshot(const struct ctl *g, struct chipd_stat **st, uint32_t *n, struct chipd_error *err);

/* The counter @name of block @block, or NULL. */
const struct chipd_stat *ctl_stat_find(const struct chipd_stat *st, uint32_t n, const char *block,
				       const char *name);

/* Writes @s as a JSON string (quoted, escaped) to @f: UTF-8, each byte of @s that is
 * not part of a well-formed UTF-8 sequence written as \ufffd. */
void ctl_json_str(FILE *f, const char *s);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ctl_now_ns(void);

/* Makes SIGINT and SIGTERM set ctl_interrupted instead of killing the process (no
 * SA_RESTART, so a blocking poll or sleep returns early). */
void ctl_catch_signals(void);

/* Ends the process the way the signal in ctl_interrupted would have (so the shell
 * sees it), after the command cleaned up. */
_Noreturn void ctl_die_of_signal(void);

/* Sleeps @seconds or until interrupted. Returns false when interrupted. */
bool ctl_sleep(double seconds);

/* ---- ctl_data.c: submit's bytes (input, payloads, output) ---- */

/* Reads all of @path ("-": standard input) as a request's input into *@buf (free()
 * it) and *@len, 1..CHIPD_INPUT_MAX bytes. Returns 0, CTL_EXIT_USAGE after saying
 * what is wrong (it cannot be read, is empty, or is larger), or CTL_EXIT_FAILED when
 * memory ran out. */
int ctl_input_read(const struct ctl *g, const char *path, uint8_t **buf, uint32_t *len);

/* Writes @n bytes at @p to @f as lowercase hex, two digits a byte. */
void ctl_hex(FILE *f, const uint8_t *p, uint32_t n);

/* Opens (creates, does not truncate) the file @path for --output into *@fd, so that
 * a path that cannot be written is refused before a request runs. Returns 0, or
 * CTL_EXIT_USAGE after saying why. */
int ctl_output_open(const struct ctl *g, const char *path, int *fd);

/* Replaces the content of @fd (from ctl_output_open) with the @n bytes at @p: a
 * regular file's in place, anything else (a pipe, a FIFO, a terminal) written in
 * order. Returns 0 or a negative errno. */
int ctl_output_write(int fd, const void *p, uint32_t n);

/* ---- ctl_format.c: the stats table and JSON (pure) ---- */

/* Writes every counter of @st as a table: the supervisor block as name/value rows,
 * the worker blocks as one row per counter and one column per chip (at most 8
 * columns a table; more chips make more tables). Gauges are marked. */
void ctl_stats_table(FILE *f, const struct chipd_stat *st, uint32_t n);

/* Writes @st as one JSON document: {"v":1,"ok":true,"instance":...,"blocks":{"supervisor":
 * {"counters":{...},"gauges":{...}},"chip0":{...}}}. */
void ctl_stats_json(FILE *f, const char *instance, const struct chipd_stat *st, uint32_t n);

/* ---- ctl_prom.c: the Prometheus text format 0.0.4 (pure) ---- */

/* Writes @st in the Prometheus text format: chipd_up (1 if @up, else 0 and no other
 * metric), then one metric per counter name and block kind: the supervisor block as
 * chipd_supervisor_<name>, worker blocks as chipd_worker_<name>{chip="N"}; err_<code>
 * counters become one <prefix>_errors_total{code="<code>"} metric; a name ending in
 * _ns becomes _seconds (value / 1e9); counters end in _total. "# HELP" and "# TYPE"
 * once per metric, its samples together, a final newline. Returns 0 or -ENOMEM. */
int ctl_prom_write(FILE *f, const struct chipd_stat *st, uint32_t n, bool up);

/* ---- ctl_top.c ---- */

/* Writes one frame of `top` (no screen control): per chip the rates between @prev
 * (@nprev counters, taken @dt_s seconds earlier; NULL for the first frame: rates
 * shown as "-") and @cur, its queue depth and active requests. */
void ctl_top_frame(FILE *f, const struct chipd_stat *prev, uint32_t nprev,
		   const struct chipd_stat *cur, uint32_t n, double dt_s);

/* ---- ctl_tracesum.c: the summary of a Chrome trace JSON file (pure) ---- */

struct ctl_trace_summary {
	uint64_t spans;		       /* "O build", "S run" and "token publish" X events used */
	uint32_t pids;		       /* processes (chips) that had any */
	uint64_t o_busy_ns, s_busy_ns; /* sums of O build and S run spans */
	uint64_t overlap_ns;	       /* time inside both an O build and an S run, per pid */
	double overlap_ratio;	       /* overlap_ns / s_busy_ns; 0 when S never ran */
	uint64_t latencies;	       /* epochs with both a build and a publish */
	uint64_t latency_p50_ns, latency_p99_ns; /* publish end - build end, per epoch */
};

/* Summarizes the trace JSON text @json (@len bytes). Returns 0, -EBADMSG when it is
 * not a trace document (@why, @cap bytes, says where), or -ENOMEM. */
int ctl_trace_summarize(const char *json, size_t len, struct ctl_trace_summary *out, char *why,
			size_t cap);

/* ---- ctl_workloads.c: `workloads` as a table and as JSON (pure) ---- */

/* Writes @n workloads of @wl as one block each: "name: doc", then a row per
 * parameter (parameter, default, min, max, meaning), columns aligned across blocks. */
void ctl_workloads_table(FILE *f, const struct chipd_workload *wl, uint32_t n);

/* Writes @wl as one JSON document: {"v":1,"ok":true,"instance":...,"workloads":[{"name":
 * ...,"doc":...,"params":[{"key":...,"default":N,"min":N,"max":N,"doc":...}]}]}. */
void ctl_workloads_json(FILE *f, const char *instance, const struct chipd_workload *wl, uint32_t n);

/* Asks @c for its workloads into *@out (as many entries as it has, freed by the
 * caller) and *@n: CTL_EXIT_OK, or the failure reported as command @cmd's (*@out
 * NULL). */
int ctl_workloads_fetch(struct ctl *g, chipd_conn *c, const char *cmd,
			struct chipd_workload **out, uint32_t *n);

/* A command that prints the workloads answer: its name, its --help text, and its two
 * printers (table, and --json). */
struct ctl_workloads_view {
	const char *cmd;
	const char *usage;
	void (*table)(FILE *f, const struct chipd_workload *wl, uint32_t n);
	void (*json)(FILE *f, const char *instance, const struct chipd_workload *wl, uint32_t n);
};

/* Runs @v's command: its options, a connection, the workloads fetched and printed. */
int ctl_workloads_cmd(struct ctl *g, int argc, char **argv, const struct ctl_workloads_view *v);

/* ---- ctl_callables.c: `callables` as a table and as JSON (pure) ---- */

/* Writes one row per callable: name, its version, the chips it is loaded on (its
 * chips mask, as ranges: "0-2,5"), its requests in flight, its counts (requests,
 * completed, failed, cancelled, tokens; each column as wide as its widest value) and
 * its parameters' names. */
void ctl_callables_table(FILE *f, const struct chipd_workload *wl, uint32_t n);

/* Writes one JSON document: {"v":1,"ok":true,"instance":...,"callables":[{"name":...,
 * "version":N,"doc":...,"chips":[0,...],"active":N,"requests":N,"completed":N,
 * "failed":N,"cancelled":N,"tokens":N,"params":[{"key":...,"default":N,"min":N,
 * "max":N}]}]}. */
void ctl_callables_json(FILE *f, const char *instance, const struct chipd_workload *wl,
			uint32_t n);

/* Writes the chips of @mask (bit i: chip i) as ranges, "0-2,5", or "-" for none. */
void ctl_chips_text(char *buf, size_t cap, uint64_t mask);

/* ---- the subcommands (ctl_cmds.c, ctl_submit.c, ctl_top.c, ctl_trace.c,
 * ctl_export.c, ctl_workloads.c, ctl_callables.c). Each gets its own argv (argv[0] is its name) and
 * returns the exit status. ---- */
int ctl_cmd_ping(struct ctl *g, int argc, char **argv);
int ctl_cmd_status(struct ctl *g, int argc, char **argv);
int ctl_cmd_cancel(struct ctl *g, int argc, char **argv);
int ctl_cmd_stats(struct ctl *g, int argc, char **argv);
int ctl_cmd_drain(struct ctl *g, int argc, char **argv);
int ctl_cmd_stop(struct ctl *g, int argc, char **argv);
int ctl_cmd_submit(struct ctl *g, int argc, char **argv);
int ctl_cmd_top(struct ctl *g, int argc, char **argv);
int ctl_cmd_trace(struct ctl *g, int argc, char **argv);
int ctl_cmd_export(struct ctl *g, int argc, char **argv);
int ctl_cmd_workloads(struct ctl *g, int argc, char **argv);
int ctl_cmd_callables(struct ctl *g, int argc, char **argv);
int ctl_cmd_register(struct ctl *g, int argc, char **argv);
int ctl_cmd_unregister(struct ctl *g, int argc, char **argv);

#endif
