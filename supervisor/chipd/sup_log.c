/* sup_log.c - one line per event on stderr, in one write(2). See sup_log.h. */
#include "sup_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The program name of every line: "chipd", or a worker's own. */
#define SUP_LOG_PROG_MAX 32
#define ELLIPSIS	 "..."

/* The one piece of process-wide state of the log, set by sup_log_init before threads
 * start. The level is atomic anyway so that a late change is not a data race; relaxed:
 * it orders nothing. */
static _Atomic int log_level = SUP_LOG_INFO;
static char log_prog[SUP_LOG_PROG_MAX] = "chipd";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

const char *sup_log_level_name(enum sup_log_level lvl)
{
	return (unsigned)lvl < sizeof(level_names) / sizeof(level_names[0]) ? level_names[lvl]
									    : "?";
}

int sup_log_level_parse(const char *name, enum sup_log_level *out)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (name && strcasecmp(name, level_names[i]) == 0) {
			*out = (enum sup_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void sup_log_init(enum sup_log_level level, const char *prog)
{
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
	if (prog && *prog)
		strlcpy(log_prog, prog, sizeof(log_prog));
}

/* Writes "<time> <prog>[<pid>] <level>[ chip=N][ request=ID]: " into @buf (@cap bytes,
 * far more than the prefix needs). Returns its length. */
static size_t put_prefix(char *buf, size_t cap, enum sup_log_level lvl, int chip, uint64_t request)
{
	struct timespec ts;
	struct tm tm;
	size_t n;
	int m;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	/* getpid, not a cached pid: a forked worker logs with its own */
	m = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%ld] %s", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000L, log_prog, (long)getpid(), sup_log_level_name(lvl));
	n = m > 0 ? (size_t)m : 0;
	if (chip >= 0)
		n += (size_t)snprintf(buf + n, cap - n, " chip=%d", chip);
	if (request != 0)
		n += (size_t)snprintf(buf + n, cap - n, " request=%llu",
				      (unsigned long long)request);
	n += (size_t)snprintf(buf + n, cap - n, ": ");
	return n;
}

void sup_log(enum sup_log_level lvl, int chip, uint64_t request, const char *fmt, ...)
{
	char line[SUP_LOG_LINE_MAX];
	int saved = errno;
	size_t n, room, len;
	va_list ap;
	int m;

	if ((int)lvl > atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	n = put_prefix(line, sizeof(line), lvl, chip, request);
	/* the message's room: all but the prefix and the newline, which takes the place
	 * of vsnprintf's NUL */
	room = sizeof(line) - n - 1;
	va_start(ap, fmt);
	m = vsnprintf(line + n, room + 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0; /* an encoding error: the prefix alone still says something happened */
	len = n + ((size_t)m < room ? (size_t)m : room);
	if ((size_t)m > room)
		memcpy(line + len - strlen(ELLIPSIS), ELLIPSIS, strlen(ELLIPSIS));
	for (size_t i = n; i < len; i++) {
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	}
	line[len++] = '\n';
	/* one write: a short write to a pipe cannot happen below PIPE_BUF, and a log line
	 * that a full disk cuts is not worth a second syscall that could interleave */
	while (write(STDERR_FILENO, line, len) < 0 && errno == EINTR)
		;
	errno = saved;
}
