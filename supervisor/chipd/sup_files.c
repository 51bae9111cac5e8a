/* sup_files.c - the private runtime directory, files created without following or
 * reusing what another user planted, and signals through pidfds. See sup_files.h. */
#include "sup_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424 /* the same number on every architecture */
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Whether @st is ours and closed to everyone else; else fills @msg and returns
 * -errno. @what names the object in the message. */
static int check_private(const struct stat *st, const char *path, const char *what, char *msg,
			 size_t cap)
{
	uid_t me = geteuid();

	if (st->st_uid != me) {
		snprintf(msg, cap,
			 "%s %s belongs to uid %u, not to uid %u: refusing it (someone else "
			 "made it; remove it or set CHIPD_RUNTIME_DIR to a private directory)",
			 what, path, (unsigned)st->st_uid, (unsigned)me);
		return -EPERM;
	}
	if (st->st_mode & 077) {
		snprintf(msg, cap,
			 "%s %s has mode %04o: refusing it (others can reach it; it must be "
			 "0700 for a directory, 0600 for a file)",
			 what, path, (unsigned)(st->st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

/* Whether @st, ours, may be shared with a group (--allow-group): 0700 or 0750, nothing
 * for others and no group write; else fills @msg and returns -EACCES, as in
 * check_private: someone else (or a mistake) made it so. */
static int check_shareable(const struct stat *st, const char *dir, char *msg, size_t cap)
{
	if (st->st_mode & 027) {
		snprintf(msg, cap,
			 "runtime directory %s has mode %04o: refusing it (others can reach "
			 "it; with --allow-group it must be 0700 or 0750, chipd makes it 0750)",
			 dir, (unsigned)(st->st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

/* Opens @dir (checked: ours, shareable) to the members of group @gid through @fd:
 * group @gid, mode 0750. */
static int share_dir(int fd, const struct stat *st, const char *dir, gid_t gid, char *msg,
		     size_t cap)
{
	if (st->st_gid != gid && fchown(fd, (uid_t)-1, gid) != 0) {
		int rc = -errno;

		snprintf(msg, cap,
			 "runtime directory %s: cannot give it to group %u: %s (chipd's user "
			 "must be a member of the --allow-group group; systemd: "
			 "SupplementaryGroups=)",
			 dir, (unsigned)gid, strerror(-rc));
		return rc;
	}
	if ((st->st_mode & 07777) != 0750 && fchmod(fd, 0750) != 0) {
		int rc = -errno;

		snprintf(msg, cap, "runtime directory %s: chmod 0750: %s", dir, strerror(-rc));
		return rc;
	}
	return 0;
}

/* @dir into @name (PATH_MAX bytes) without the trailing "/" and "/." that make the
 * kernel follow a link O_NOFOLLOW would refuse ("link/" and "link/." name what the
 * link points to). Returns whether what is left may be opened so: not when its last
 * component is "..", which names a directory's parent (through a link, its target's). */
static bool dir_name(const char *dir, char *name)
{
	size_t n = strnlen(dir, PATH_MAX - 1);

	memcpy(name, dir, n);
	name[n] = '\0';
	for (;;) {
		if (n > 1 && name[n - 1] == '/')
			name[--n] = '\0';
		else if (n > 2 && name[n - 1] == '.' && name[n - 2] == '/')
			name[n -= 2] = '\0';
		else
			break;
	}
	return !(n >= 2 && strcmp(name + n - 2, "..") == 0 && (n == 2 || name[n - 3] == '/'));
}

/* Opens @dir, not following a link at its last component; -ENOTDIR for a link, a
 * non-directory or a name ending in "..". Returns the descriptor or -errno, with @msg filled. */
static int open_dir(const char *dir, char *msg, size_t cap)
{
	char name[PATH_MAX];
	int fd = -1;

	errno = ENOTDIR;
	if (dir_name(dir, name))
		fd = open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (errno == ELOOP || errno == ENOTDIR) {
		snprintf(msg, cap,
			 "runtime directory %s is not a directory (or is a symbolic link, or "
			 "ends in ..): refusing it",
			 dir);
		return -ENOTDIR;
	}
	fd = -errno;
	snprintf(msg, cap, "runtime directory %s: %s", dir, strerror(-fd));
	return fd;
}

int sup_rundir_check(const char *dir, char *msg, size_t cap)
{
	return sup_rundir_check_group(dir, (gid_t)-1, msg, cap);
}

/* Opens @dir into *@fd and checks it as sup_rundir_check_group says, changing
 * nothing; its stat in *@st. Returns 0 (with *@fd open) or -errno with @msg filled. */
static int inspect_dir(const char *dir, gid_t gid, int *fd, struct stat *st, char *msg,
		       size_t cap)
{
	int rc;

	*fd = open_dir(dir, msg, cap);
	if (*fd < 0)
		return *fd;
	rc = fstat(*fd, st) != 0 ? -errno : 0;
	if (rc)
		snprintf(msg, cap, "runtime directory %s: %s", dir, strerror(-rc));
	else if (gid == (gid_t)-1 || st->st_uid != geteuid())
		rc = check_private(st, dir, "runtime directory", msg, cap);
	else
		rc = check_shareable(st, dir, msg, cap);
	if (rc)
		close(*fd);
	return rc;
}

int sup_rundir_check_group(const char *dir, gid_t gid, char *msg, size_t cap)
{
	struct stat st;
	int fd, rc;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(msg, cap, "runtime directory %s: cannot create it: %s", dir,
			 strerror(-rc));
		return rc;
	}
	rc = inspect_dir(dir, gid, &fd, &st, msg, cap);
	if (rc == 0)
		close(fd);
	return rc;
}

int sup_rundir_share(const char *dir, gid_t gid, char *msg, size_t cap)
{
	struct stat st;
	int fd, rc = inspect_dir(dir, gid, &fd, &st, msg, cap);

	if (rc == 0) {
		rc = share_dir(fd, &st, dir, gid, msg, cap);
		close(fd);
	}
	return rc;
}

int sup_file_create(const char *path, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | flags, 0600);

	return fd < 0 ? -errno : fd;
}

int sup_file_append(const char *path)
{
	struct stat st;
	/* not O_EXCL: the log of an instance is appended to across runs; O_NONBLOCK: a
	 * FIFO at the name fails (ENXIO) instead of blocking, and is no regular file */
	int fd =
	    open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	int rc;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int sup_pidfd_open(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : fd;
}

int sup_pidfd_signal(int pidfd, int sig)
{
	if (pidfd < 0)
		return -EBADF;
	return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) != 0 ? -errno : 0;
}

void sup_std_fds_hold(void)
{
	for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
		int null;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		null = open("/dev/null", O_RDWR); /* the lowest free number: fd, as a rule */
		if (null >= 0 && null != fd) {
			(void)dup2(null, fd);
			close(null);
		}
	}
}
