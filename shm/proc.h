/* proc.h - process identity and liveness, as seen from another process.
 *
 * A pid alone is not an identity: pids are reused. chipd pairs a pid with the
 * process's start time (field 22 of /proc/<pid>/stat, clock ticks since boot),
 * which is fixed for the life of the process. Every "is my peer alive?" question
 * in the shm layer is answered here.
 */
#ifndef CHIPD_SHM_PROC_H
#define CHIPD_SHM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The start time of process @pid in clock ticks since boot, or 0 if the process
 * does not exist or /proc cannot be read. Never fails otherwise. */
uint64_t shm_proc_start_time(pid_t pid);

/* The calling process's pid, cached (glibc's getpid() is a system call; the mailbox
 * asks on every transition). The cache is reset in a child by a pthread_atfork
 * handler, so it stays right after fork. */
pid_t shm_proc_self(void);

/* The calling process's own start time, cached like shm_proc_self(). */
uint64_t shm_proc_self_start_time(void);

/* True while process @pid exists and, when @start is non-zero, is the same
 * process that had start time @start (not a later process given the same pid).
 * A pid of 0 or below is never alive. */
bool shm_proc_alive(pid_t pid, uint64_t start);

#endif
