/* iox_roudi.h - the iceoryx RouDi daemon for chipbench's iceoryx peer: find it, start
 * a private one (or reuse one that runs), stop it, and remove what a crashed one left
 * behind. */
#ifndef CHIPD_IOX_ROUDI_H
#define CHIPD_IOX_ROUDI_H

#include "bench.h"

#include <stddef.h>
#include <sys/types.h>

/* Where iceoryx 2.0 keeps RouDi's and each runtime's files (hard-coded in iceoryx). */
#define IOX_TMP_DIR  "/tmp/"
#define ROUDI_SOCKET IOX_TMP_DIR "roudi"
#define ROUDI_LOCK   IOX_TMP_DIR "iox-unique-roudi.lock"
#define ROUDI_NAME   "iox-roudi"

struct iox_roudi {
	pid_t pid;    /* 0: none of ours (another RouDi is used) */
	char dir[64]; /* private directory: config and log */
	char cfg[96];
	char log[96];
};

/* Finds @prog on $PATH (only) into @buf. Returns 0 or -ENOENT. */
int iox_find_on_path(const char *prog, char *buf, size_t len);

/* Makes sure a RouDi runs: reuses one that already answers, or starts @bin with a
 * private config (off the benchmark CPUs) and waits up to 5 s for its socket. Returns 0,
 * or -errno with a one-line reason in @why (everything it created is gone again then). */
int iox_roudi_start(struct iox_roudi *r, const char *bin, const struct bench_opts *opts, char *why,
		    size_t len);

/* Stops the RouDi that iox_roudi_start() started (nothing when it reused another one):
 * SIGTERM, up to 5 s, then SIGKILL; removes what it left behind unless it exited
 * cleanly. */
void iox_roudi_stop(struct iox_roudi *r);

/* Removes RouDi's shared memory, socket and locks (after a RouDi that crashed). */
void iox_roudi_files_clean(void);

/* unlink() that ignores a missing file. */
void iox_unlink_quiet(const char *path);

#endif
