/* sup_probe.h - a callable's file tried in a short-lived process before the
 * supervisor loads it (sup_probe.c; docs/callables.md, "Registration").
 *
 * A registration runs the library's own code (constructors, entry, init). The probe
 * runs it first in a child: chipd itself, executed again in a hidden mode
 * (SUP_PROBE_ARG), which loads the file with every check of the loader and writes its
 * verdict on a pipe. A probe that exits or dies by a signal before it answered, or
 * has not ended within SUP_PROBE_MS (it is then killed, with its process group),
 * refuses the file naming what happened; the supervisor loads only a file its probe
 * loaded, and only that file (its identity, wl_file_id). */
#ifndef CHIPD_SUP_PROBE_H
#define CHIPD_SUP_PROBE_H

#include "mbox.h"
#include "wl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* chipd's argv[1] in the probe's mode: chipd SUP_PROBE_ARG PATH NAME ("" for the
 * table's), the verdict written on descriptor SUP_PROBE_FD. Not an option of
 * chipd(8): only the supervisor runs it. */
#define SUP_PROBE_ARG "--probe-callable"
#define SUP_PROBE_FD  3
/* How long a probe may take, from its start to its verdict: a process start and a
 * library's load, which a healthy callable does in milliseconds. */
#define SUP_PROBE_MS 3000u

/* One probe, run for the register op in one client's slot (router thread only). */
struct sup_probe {
	pid_t pid;   /* running, not reaped yet; 0: none */
	pid_t stray; /* one killed whose reaping is still due (0: none) */
	int fd;	     /* the read end of its verdict pipe; -1 */
	uint64_t deadline_ns;
	uint32_t region; /* the register it is for: its client's slot */
	struct mbox_ticket t;
	bool passed;		/* its file loaded: the registration goes on */
	struct wl_file_id file; /* what it loaded, when passed */
	char path[256];		/* for its messages (a protocol path: 1..255 bytes) */
};

/* The probe's mode: loads PATH as NAME (argv[2], argv[3]) and writes the verdict.
 * Returns chipd's exit status. */
int sup_probe_main(int argc, char **argv);

void sup_probe_clear(struct sup_probe *p);

/* Starts a probe of @path as @name ("" or NULL: its table's) for the register in slot
 * @t of region @region. Returns 0, or -errno with why in @msg (the probe could not be
 * started: chipd's failure, not the file's). */
int sup_probe_start(struct sup_probe *p, const char *path, const char *name, uint32_t region,
		    struct mbox_ticket t, char *msg, size_t cap);

/* Whether @p is running or has passed for the register in slot @t of region @region. */
bool sup_probe_owns(const struct sup_probe *p, uint32_t region, struct mbox_ticket t);
/* Whether @p is running or has passed (for any register). */
bool sup_probe_busy(const struct sup_probe *p);

/* Looks at the running probe without waiting: -EINPROGRESS while it runs within its
 * bound; 0 when it passed (p->passed, p->file); -EREMOTEIO when the file is refused,
 * the reason in @msg (the loader's refusal, an exit, a signal, or its bound passed:
 * it is then killed); another -errno when the probe itself failed (@msg). */
int sup_probe_poll(struct sup_probe *p, uint64_t now_ns, char *msg, size_t cap);
/* sup_probe_poll until it ended: bounded by SUP_PROBE_MS from its start. */
int sup_probe_wait(struct sup_probe *p, char *msg, size_t cap);

/* Ends @p: a running probe is killed (its process group) and reaped, a verdict
 * forgotten. */
void sup_probe_end(struct sup_probe *p);

#endif
