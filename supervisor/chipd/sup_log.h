/* sup_log.h - the supervisor's log: one line per event on stderr.
 *
 *   2025-01-31T12:00:00.123Z chipd[4242] warn chip=1 request=17: worker pid 77 killed
 *
 * Time is UTC with milliseconds; "chip=N" appears when the event concerns a chip
 * (chip >= 0), "request=ID" when it concerns a request (id != 0). Each line goes out in
 * one write(2) of at most SUP_LOG_LINE_MAX bytes (below PIPE_BUF), so lines of several
 * threads or processes sharing the stream never interleave. Long messages are cut
 * and end in "..."; a newline inside a message becomes a space (one event, one line).
 */
#ifndef CHIPD_SUP_LOG_H
#define CHIPD_SUP_LOG_H

#include <stdint.h>

/* A line at most this long, newline included; PIPE_BUF (4096 on Linux, 512 by POSIX)
 * makes a pipe write of this size atomic. */
#define SUP_LOG_LINE_MAX 512

enum sup_log_level { SUP_LOG_ERROR = 0, SUP_LOG_WARN, SUP_LOG_INFO, SUP_LOG_DEBUG };

/* Sets the most verbose level written and the program name of every line (copied, at
 * most 31 bytes). Call once before other threads log; until then the level is info
 * and the name "chipd". A NULL @prog keeps the name. */
void sup_log_init(enum sup_log_level level, const char *prog);

/* Writes one line at @lvl when @lvl is not more verbose than the configured level.
 * @chip < 0 and @request == 0 are left out of the line. Thread-safe, allocates
 * nothing, keeps errno. */
void sup_log(enum sup_log_level lvl, int chip, uint64_t request, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The level's name ("error", "warn", "info", "debug"); "?" for another value. */
const char *sup_log_level_name(enum sup_log_level lvl);

/* The inverse of sup_log_level_name. Returns 0, or -EINVAL for an unknown name. */
int sup_log_level_parse(const char *name, enum sup_log_level *out);

/* The format is the first of the variable arguments so that a message without
 * arguments needs no GNU ", ##" extension. */
#define SUP_ERR(chip, req, ...)	  sup_log(SUP_LOG_ERROR, (chip), (req), __VA_ARGS__)
#define SUP_WARN(chip, req, ...)  sup_log(SUP_LOG_WARN, (chip), (req), __VA_ARGS__)
#define SUP_INFO(chip, req, ...)  sup_log(SUP_LOG_INFO, (chip), (req), __VA_ARGS__)
#define SUP_DEBUG(chip, req, ...) sup_log(SUP_LOG_DEBUG, (chip), (req), __VA_ARGS__)

#endif
