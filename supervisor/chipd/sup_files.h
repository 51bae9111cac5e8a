/* sup_files.h - the files chipd makes and the processes it signals, without races
 * another user (or pid reuse) could win.
 *
 * The runtime directory holds the pid file, the detached log and the trace parts. Its
 * names are predictable, so the directory itself must be private: owned by chipd's
 * user and closed to everyone else (no group or other permission bits). One that
 * exists but is not ours, or is open to others, was made by someone else (or by
 * mistake) and is refused, never used or "fixed". Files in it are created with
 * O_EXCL | O_NOFOLLOW, mode 0600. With --allow-group the directory is opened to that
 * group for reading and search only (0750): its members reach the handshake socket
 * but can neither plant a name nor read a file in it.
 *
 * Workers are signalled through pidfds: a pid can be reused once its process was
 * reaped (by the spawner, a process the supervisor does not control), a pidfd names
 * one process for good.
 */
#ifndef CHIPD_SUP_FILES_H
#define CHIPD_SUP_FILES_H

#include <stddef.h>
#include <sys/types.h>

/* The fallback runtime directory when neither CHIPD_RUNTIME_DIR nor XDG_RUNTIME_DIR
 * is set and /run/user/UID does not exist: one per user in /tmp. */
#define SUP_RUNDIR_FALLBACK_FMT "/tmp/chipd-%u"

/* Makes sure @dir is a private directory of the effective user: creates it (the last
 * component only, mode 0700) when it is missing, then checks that it is a directory
 * (not a symbolic link), owned by the effective uid, with no group or other
 * permission bit. Returns 0; or -EPERM (another owner), -EACCES (open to others),
 * -ENOTDIR (not a directory, or a link), or the -errno of mkdir/open, with a one-line
 * reason in @msg (@cap bytes) that names the directory and what to do. */
int sup_rundir_check(const char *dir, char *msg, size_t cap);

/* As sup_rundir_check, for chipd --allow-group (@gid; (gid_t)-1: none, the same as
 * sup_rundir_check): the directory, ours, may also be 0750 already (of any group).
 * Still refused: a directory of another owner, or with group write or any bit for
 * others (-EACCES). Changes nothing but the mkdir: a chipd that goes on to find its
 * instance served (exit 73) must leave the running one's directory as it is. */
int sup_rundir_check_group(const char *dir, gid_t gid, char *msg, size_t cap);

/* Gives @dir (as sup_rundir_check_group accepts it) to group @gid, mode 0750, so that
 * the group's members reach the handshake socket in it (nothing else in it is theirs
 * to read: its files stay 0600). chipd calls it once the instance is its own (its pid
 * file taken). Returns 0, the refusals of sup_rundir_check_group, or the -errno of a
 * chgrp that fails (chipd's user is not a member of @gid) or of the chmod. */
int sup_rundir_share(const char *dir, gid_t gid, char *msg, size_t cap);

/* Creates the new file @path for writing: O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
 * mode 0600, plus @flags (for example O_APPEND). An existing file or link at @path
 * is refused (-EEXIST, -ELOOP), never opened. Returns the descriptor or -errno. */
int sup_file_create(const char *path, int flags);

/* Opens @path for appending, creating it 0600 if missing: O_NOFOLLOW, and an existing
 * file must be a regular file of the effective user without group or other bits.
 * Returns the descriptor (close-on-exec), or -errno (-EPERM: not ours or open to
 * others; -ELOOP: a link). */
int sup_file_append(const char *path);

/* Opens /dev/null onto each of descriptors 0, 1 and 2 that is closed, so that none
 * of chipd's own (the pid file, a client region's memfd) takes one of those numbers and
 * gets the log lines, or the caller's input, written into it. First thing in main. */
void sup_std_fds_hold(void);

/* A pidfd for @pid (pidfd_open). Returns it (close-on-exec) or -errno. */
int sup_pidfd_open(pid_t pid);

/* Sends @sig to the process @pidfd refers to (pidfd_send_signal), never to a later
 * process given the same pid: once that process was reaped, -ESRCH (before, it is a
 * zombie and the signal does nothing). A negative @pidfd: -EBADF, nothing sent.
 * Returns 0 or -errno. */
int sup_pidfd_signal(int pidfd, int sig);

#endif
