/* check_sup_files.c - pins how chipd keeps its files and signals out of other users'
 * reach: the runtime directory must be private (made 0700, refused when it is open to
 * others, a link, or another user's), files in it are created O_EXCL | O_NOFOLLOW
 * 0600, and a signal through a pidfd never reaches another process once its own was
 * reaped. */
#include "sup_files.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A fresh private scratch directory under /tmp, in @dir (PATH_MAX bytes). */
static void scratch(char *dir)
{
	snprintf(dir, PATH_MAX, "/tmp/check_sup_files.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void join(char *out, const char *dir, const char *name)
{
	ck_assert_int_lt(snprintf(out, PATH_MAX, "%s/%s", dir, name), PATH_MAX);
}

/* A fresh scratch directory @top with the paths of @na, @nb and @nc in it in @a, @b
 * and @c (PATH_MAX bytes each; nothing made there), and a umask of 0: the modes a test
 * then sees are the ones chipd asked for. */
static void scratch3(char *top, char *a, const char *na, char *b, const char *nb, char *c,
		     const char *nc)
{
	scratch(top);
	join(a, top, na);
	join(b, top, nb);
	join(c, top, nc);
	umask(0);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

START_TEST(rundir_missing_is_created_0700)
{
	char top[PATH_MAX], dir[PATH_MAX], msg[256] = "";

	scratch(top);
	join(dir, top, "run");
	umask(0); /* the mode is chipd's, not the umask's */
	ck_assert_int_eq(sup_rundir_check(dir, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(mode_of(dir), 0700);
	/* and accepted as it is the next time */
	ck_assert_int_eq(sup_rundir_check(dir, msg, sizeof(msg)), 0);
	rmdir(dir);
	rmdir(top);
}
END_TEST

/* --allow-group: chipd's own directory is given to the group, 0750; one with group
 * write or any bit for others is still refused as it is. */
START_TEST(rundir_shared_with_a_group_is_0750)
{
	static const mode_t refused[] = {0770, 0755, 0751, 0705};
	char top[PATH_MAX], dir[PATH_MAX], msg[256] = "";
	gid_t gid = getegid(); /* a group we are a member of: chgrp needs no privilege */
	struct stat st;

	scratch(top);
	join(dir, top, "run");
	umask(0);
	/* the check makes it private and changes nothing else; the share opens it */
	ck_assert_int_eq(sup_rundir_check_group(dir, gid, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(mode_of(dir), 0700);
	ck_assert_int_eq(sup_rundir_share(dir, gid, msg, sizeof(msg)), 0);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0750);
	ck_assert_uint_eq(st.st_gid, gid);
	/* accepted as it is the next time, and made 0750 again from 0700 */
	ck_assert_int_eq(sup_rundir_check_group(dir, gid, msg, sizeof(msg)), 0);
	ck_assert_int_eq(sup_rundir_share(dir, gid, msg, sizeof(msg)), 0);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(sup_rundir_share(dir, gid, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(mode_of(dir), 0750);
	/* a check for another group leaves a shared directory as it is (a chipd that then
	 * finds its instance served must not take the running one's group away) */
	ck_assert_int_eq(sup_rundir_check_group(dir, gid + 1, msg, sizeof(msg)), 0);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0750);
	ck_assert_uint_eq(st.st_gid, gid);
	/* without --allow-group a 0750 directory is open to others */
	ck_assert_int_eq(sup_rundir_check(dir, msg, sizeof(msg)), -EACCES);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		ck_assert_int_eq(chmod(dir, refused[i]), 0);
		msg[0] = '\0';
		ck_assert_int_eq(sup_rundir_check_group(dir, gid, msg, sizeof(msg)), -EACCES);
		ck_assert_msg(strstr(msg, dir) && strstr(msg, "--allow-group"), "message: %s", msg);
		ck_assert_int_eq(sup_rundir_share(dir, gid, msg, sizeof(msg)), -EACCES);
		ck_assert_uint_eq(mode_of(dir), refused[i]);
	}
	rmdir(dir);
	rmdir(top);
}
END_TEST

START_TEST(rundir_open_to_others_is_refused)
{
	static const mode_t modes[] = {0755, 0770, 0701, 01777};
	char top[PATH_MAX], dir[PATH_MAX], msg[256];

	scratch(top);
	join(dir, top, "run");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char want[16];

		ck_assert_int_eq(chmod(dir, modes[i]), 0);
		msg[0] = '\0';
		ck_assert_int_eq(sup_rundir_check(dir, msg, sizeof(msg)), -EACCES);
		snprintf(want, sizeof(want), "mode %04o", (unsigned)modes[i]);
		ck_assert_msg(strstr(msg, dir) && strstr(msg, want), "message: %s", msg);
		/* refused, never "fixed": someone else may be using it */
		ck_assert_uint_eq(mode_of(dir), modes[i]);
	}
	rmdir(dir);
	rmdir(top);
}
END_TEST

START_TEST(rundir_link_or_file_is_refused)
{
	char top[PATH_MAX], real[PATH_MAX], link[PATH_MAX], file[PATH_MAX], msg[256];
	int fd;

	scratch(top);
	join(real, top, "real");
	join(link, top, "link");
	join(file, top, "file");
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	/* a private directory behind the link does not make the link safe: whoever made
	 * it can point it elsewhere later */
	ck_assert_int_eq(sup_rundir_check(link, msg, sizeof(msg)), -ENOTDIR);
	ck_assert_msg(strstr(msg, link) && strstr(msg, "symbolic link"), "message: %s", msg);
	/* spelt so that the kernel follows the link (found by the operations chaos round:
	 * these passed), or naming the link's target's parent */
	for (size_t i = 0; i < 4; i++) {
		static const char *const tails[] = {"/", "/.", "//./", "/.."};
		char spelt[PATH_MAX + 8];

		snprintf(spelt, sizeof(spelt), "%s%s", link, tails[i]);
		ck_assert_msg(sup_rundir_check(spelt, msg, sizeof(msg)) == -ENOTDIR, "%s: %s",
			      spelt, msg);
	}
	/* the same spellings of the directory itself are that directory */
	ck_assert_int_eq(sup_rundir_check(strcat(strcpy(msg, real), "/./"), msg + 128, 128), 0);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(sup_rundir_check(file, msg, sizeof(msg)), -ENOTDIR);
	unlink(file);
	unlink(link);
	rmdir(real);
	rmdir(top);
}
END_TEST

START_TEST(rundir_of_another_user_is_refused)
{
	char top[PATH_MAX], dir[PATH_MAX], msg[256];

	if (geteuid() != 0) {
		/* "/" belongs to root: a squatted name as an ordinary user sees it */
		ck_assert_int_eq(sup_rundir_check("/", msg, sizeof(msg)), -EPERM);
		ck_assert_msg(strstr(msg, "belongs to uid 0"), "message: %s", msg);
		return;
	}
	scratch(top);
	join(dir, top, "run");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	ck_assert_int_eq(sup_rundir_check(dir, msg, sizeof(msg)), -EPERM);
	ck_assert_msg(strstr(msg, dir) && strstr(msg, "belongs to uid 65534") &&
			  strstr(msg, "CHIPD_RUNTIME_DIR"),
		      "message: %s", msg);
	rmdir(dir);
	rmdir(top);
}
END_TEST

START_TEST(file_create_is_exclusive_0600_and_never_follows)
{
	char top[PATH_MAX], path[PATH_MAX], link[PATH_MAX], target[PATH_MAX];
	int fd;

	scratch3(top, path, "part", link, "planted", target, "target");
	fd = sup_file_create(path, 0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_uint_eq(mode_of(path), 0600);
	ck_assert_int_eq(sup_file_create(path, 0), -EEXIST);
	/* a link planted at the name, even a dangling one, is not followed */
	ck_assert_int_eq(symlink(target, link), 0);
	ck_assert_int_eq(sup_file_create(link, 0), -EEXIST);
	ck_assert_int_eq(access(target, F_OK), -1);
	unlink(link);
	unlink(path);
	rmdir(top);
}
END_TEST

START_TEST(file_append_refuses_what_is_not_ours_alone)
{
	char top[PATH_MAX], log[PATH_MAX], open_log[PATH_MAX], link[PATH_MAX];
	int fd;

	scratch3(top, log, "a.log", open_log, "b.log", link, "c.log");
	fd = sup_file_append(log);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x\n", 2), 2);
	close(fd);
	ck_assert_uint_eq(mode_of(log), 0600);
	fd = sup_file_append(log); /* ours, 0600: appended to */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "y\n", 2), 2);
	close(fd);
	{
		struct stat st;

		ck_assert_int_eq(stat(log, &st), 0);
		ck_assert_int_eq(st.st_size, 4);
	}
	fd = open(open_log, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(sup_file_append(open_log), -EPERM);
	ck_assert_int_eq(symlink(log, link), 0);
	ck_assert_int_eq(sup_file_append(link), -ELOOP);
	unlink(link);
	unlink(open_log);
	unlink(log);
	rmdir(top);
}
END_TEST

static int sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

START_TEST(pidfd_signal_after_reap_is_esrch)
{
	pid_t pid = tu_fork(sleeper, NULL), other;
	int status, fd;

	ck_assert_int_gt(pid, 0);
	fd = sup_pidfd_open(pid);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sup_pidfd_signal(fd, 0), 0); /* alive */
	ck_assert_int_eq(sup_pidfd_signal(fd, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* reaped: its pid may belong to anyone now; the pidfd still names the dead one */
	other = tu_fork(sleeper, NULL);
	ck_assert_int_gt(other, 0);
	ck_assert_int_eq(sup_pidfd_signal(fd, SIGKILL), -ESRCH);
	ck_assert_int_eq(sup_pidfd_signal(fd, SIGTERM), -ESRCH);
	ck_assert_int_eq(kill(other, 0), 0); /* untouched */
	ck_assert_int_eq(waitpid(other, &status, WNOHANG), 0);
	close(fd);
	ck_assert_int_eq(sup_pidfd_signal(-1, SIGKILL), -EBADF);
	tu_kill(other);
}
END_TEST

static Suite *sup_files_suite(void)
{
	Suite *s = suite_create("sup_files");
	const struct tu_case cases[] = {
	    {"rundir_missing_is_created_0700", rundir_missing_is_created_0700},
	    {"rundir_open_to_others_is_refused", rundir_open_to_others_is_refused},
	    {"rundir_shared_with_a_group_is_0750", rundir_shared_with_a_group_is_0750},
	    {"rundir_link_or_file_is_refused", rundir_link_or_file_is_refused},
	    {"rundir_of_another_user_is_refused", rundir_of_another_user_is_refused},
	    {"file_create_is_exclusive_0600_and_never_follows",
	     file_create_is_exclusive_0600_and_never_follows},
	    {"file_append_refuses_what_is_not_ours_alone",
	     file_append_refuses_what_is_not_ours_alone},
	    {"pidfd_signal_after_reap_is_esrch", pidfd_signal_after_reap_is_esrch},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(sup_files_suite());
}
