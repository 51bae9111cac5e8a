/* sup_config_fixture.c - what the configuration suites share: a clean environment,
 * a load from a flag list, and the lines print-config writes. */
#include "sup_config_fixture.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS 32

/* The variables sup_config_load reads, besides CHIPD_* and SLURM_*. */
static const char *const other_vars[] = {
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "XDG_RUNTIME_DIR",
    "NOTIFY_SOCKET",	   "WATCHDOG_USEC",	   "WATCHDOG_PID",
};

/* The runtime directory without CHIPD_RUNTIME_DIR and XDG_RUNTIME_DIR: pam_systemd's
 * /run/user/UID where this machine has it, else chipd's own in /tmp. */
const char *default_rundir(void)
{
	static char dir[64];
	struct stat st;

	snprintf(dir, sizeof(dir), "/run/user/%u", (unsigned)geteuid());
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		snprintf(dir, sizeof(dir), "/tmp/chipd-%u", (unsigned)geteuid());
	return dir;
}

/* Removes whatever the test's own environment (a Slurm job, a systemd unit, a GPU
 * box) would feed into the configuration. */
void clean_env(void)
{
	extern char **environ;
	char name[256];

	for (size_t i = 0; environ[i];) {
		size_t len = strcspn(environ[i], "=");

		if ((strncmp(environ[i], "CHIPD_", 6) == 0 ||
		     strncmp(environ[i], "SLURM_", 6) == 0) &&
		    len < sizeof(name)) {
			memcpy(name, environ[i], len);
			name[len] = '\0';
			unsetenv(name); /* environ shrinks: look at index i again */
			continue;
		}
		i++;
	}
	for (size_t i = 0; i < sizeof(other_vars) / sizeof(other_vars[0]); i++)
		unsetenv(other_vars[i]);
}

/* Loads from the flags given after @msg (NULL-terminated); "chipd" is argv[0]. */
int load(struct sup_config *c, struct sup_sources *s, char *msg, size_t cap, ...)
{
	char *argv[MAX_ARGS] = {"chipd"};
	int argc = 1;
	va_list ap;

	va_start(ap, cap);
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < MAX_ARGS - 1;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return sup_config_load(c, s, argc, argv, msg, cap);
}


/* What sup_config_print writes for @c. Free the result. */
char *printed(const struct sup_config *c, const struct sup_sources *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	sup_config_print(c, s, f);
	fclose(f);
	return buf;
}

/* The line of @out that describes @name, without its newline, in @line. */
void line_of(const char *out, const char *name, char *line, size_t cap)
{
	size_t n = strlen(name);

	for (const char *p = out; *p; p = strchr(p, '\n') + 1) {
		size_t len = strcspn(p, "\n");

		if (strncmp(p, name, n) == 0 && p[n] == ' ') {
			ck_assert_uint_lt(len, cap);
			memcpy(line, p, len);
			line[len] = '\0';
			return;
		}
		if (!p[len])
			break;
	}
	ck_abort_msg("no line for %s in:\n%s", name, out);
}
