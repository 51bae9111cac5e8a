/* check_sup_config.c - pins chipd's configuration: the order of its sources (flag,
 * CHIPD_*, the scheduler's environment, default), validation that names the flag or
 * variable at fault, print-config and --help (the scheduler's, GPU masks' and
 * systemd's environment: check_sup_config_env.c). Each tcase runs in its own forked
 * process (tu_run), so setting the environment here touches no other tcase. */
#include "sup_config_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(defaults_when_nothing_is_given)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], want[SUP_PATH_MAX];

	clean_env();
	ck_assert_int_eq(load(&c, &s, msg, sizeof(msg), (char *)NULL), 0);
	ck_assert_str_eq(c.instance, "default");
	ck_assert_int_eq(c.backend, SUP_BACKEND_SIM);
	ck_assert_uint_eq(c.chips, 2);
	for (int i = 0; i < CHIPD_MAX_CHIPS; i++)
		ck_assert_int_eq(c.gpus[i], -1);
	ck_assert_uint_eq(c.queue, 64);
	ck_assert_uint_eq(c.max_pending, 256);
	ck_assert_uint_eq(c.max_clients, 128);
	ck_assert_uint_eq(c.max_client_pending, 128);
	ck_assert_uint_eq(c.max_client_rings, 128);
	ck_assert_uint_eq(c.max_client_slots, 16); /* each connection's own mailbox */
	ck_assert_uint_eq(c.banks, 8);
	ck_assert(!c.no_overlap && !c.foreground && !c.print_config);
	ck_assert_int_eq(c.log_level, SUP_LOG_INFO);
	ck_assert_int_eq(c.notify_fd, -1);
	ck_assert_str_eq(c.trace, "");
	ck_assert_str_eq(c.runtime_dir, default_rundir());
	snprintf(want, sizeof(want), "%s/chipd.%u.default.pid", default_rundir(),
		 (unsigned)geteuid());
	ck_assert_str_eq(c.pidfile, want);
	ck_assert_uint_eq(c.grace_ms, 10000);
	ck_assert_uint_eq(c.heartbeat_ms, 500);
	ck_assert_uint_eq(c.stuck_ms, 5000);
	ck_assert_uint_eq(c.backoff_min_ms, 100);
	ck_assert_uint_eq(c.backoff_max_ms, 5000);
	ck_assert_uint_eq(c.crash_limit, 5);
	ck_assert_uint_eq(c.crash_window_ms, 30000);
	ck_assert_uint_eq(c.kv_blocks, 4096);
	ck_assert_uint_eq(c.watchdog_usec, 0);
	ck_assert_str_eq(c.notify_socket, "");
	/* every source is the default: the struct is all SUP_SRC_DEFAULT */
	for (size_t i = 0; i < sizeof(s) / sizeof(s.instance); i++)
		ck_assert_int_eq(((enum sup_source *)&s)[i], SUP_SRC_DEFAULT);
	ck_assert_str_eq(sup_source_name(SUP_SRC_DEFAULT), "default");
	ck_assert_str_eq(sup_source_name(SUP_SRC_FLAG), "flag");
	ck_assert_str_eq(sup_source_name(SUP_SRC_ENV), "env");
	ck_assert_str_eq(sup_source_name(SUP_SRC_SCHEDULER), "scheduler");
}
END_TEST

START_TEST(flag_beats_env_beats_scheduler_beats_default)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256];

	clean_env();
	setenv("SLURM_JOB_ID", "4711", 1);
	setenv("CHIPD_INSTANCE", "fromenv", 1);
	setenv("CHIPD_QUEUE", "20", 1);
	setenv("CUDA_VISIBLE_DEVICES", "0,1,2", 1);
	setenv("CHIPD_CHIPS", "2", 1);
	ck_assert_int_eq(
	    LOAD("--instance", "fromflag", "--queue", "10", "--backend", "hip", "--chips", "1"), 0);
	ck_assert_str_eq(c.instance, "fromflag");
	ck_assert_int_eq(s.instance, SUP_SRC_FLAG);
	ck_assert_uint_eq(c.queue, 10);
	ck_assert_int_eq(s.queue, SUP_SRC_FLAG);
	ck_assert_uint_eq(c.chips, 1);
	ck_assert_int_eq(s.chips, SUP_SRC_FLAG);
	ck_assert_int_eq(s.backend, SUP_SRC_FLAG);

	/* without the flags, the variables */
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_str_eq(c.instance, "fromenv");
	ck_assert_int_eq(s.instance, SUP_SRC_ENV);
	ck_assert_uint_eq(c.queue, 20);
	ck_assert_int_eq(s.queue, SUP_SRC_ENV);
	ck_assert_uint_eq(c.chips, 2);
	ck_assert_int_eq(s.chips, SUP_SRC_ENV);

	/* without the variables, the scheduler */
	unsetenv("CHIPD_INSTANCE");
	unsetenv("CHIPD_QUEUE");
	setenv("CHIPD_CHIPS", "", 1); /* empty: as if unset */
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_str_eq(c.instance, "4711");
	ck_assert_int_eq(s.instance, SUP_SRC_SCHEDULER);
	ck_assert_uint_eq(c.chips, 3);
	ck_assert_int_eq(s.chips, SUP_SRC_SCHEDULER);
	ck_assert_uint_eq(c.queue, 64);
	ck_assert_int_eq(s.queue, SUP_SRC_DEFAULT);

	/* without the scheduler, the defaults */
	unsetenv("SLURM_JOB_ID");
	ck_assert_int_eq(LOAD("--chips", "3"), 0);
	ck_assert_str_eq(c.instance, "default");
	ck_assert_int_eq(s.instance, SUP_SRC_DEFAULT);
	ck_assert_int_eq(c.backend, SUP_BACKEND_SIM);
	ck_assert_int_eq(s.backend, SUP_SRC_DEFAULT);
	ck_assert_int_eq(c.gpus[0], -1); /* sim ignores the masks */

	/* "--flag=value" works as well as "--flag value" */
	ck_assert_int_eq(LOAD("--queue=33"), 0);
	ck_assert_uint_eq(c.queue, 33);
}
END_TEST

/* One bad input: flags, an optional variable, and what the message must name. */
struct bad_case {
	const char *args[4];
	const char *var, *val;
	const char *names;
};

START_TEST(bad_values_name_their_flag_or_variable)
{
	static const struct bad_case cases[] = {
	    {{"--chips", "0"}, NULL, NULL, "--chips"},
	    {{"--chips", "65"}, NULL, NULL, "--chips"},
	    {{"--chips", "-1"}, NULL, NULL, "--chips"},
	    {{"--chips", "2x"}, NULL, NULL, "--chips"},
	    {{"--chips", "99999999999999999999999"}, NULL, NULL, "--chips"},
	    {{NULL}, "CHIPD_CHIPS", "0", "CHIPD_CHIPS"},
	    {{"--queue", "4097"}, NULL, NULL, "--queue"},
	    {{NULL}, "CHIPD_QUEUE", "0", "CHIPD_QUEUE"},
	    {{"--banks", "9"}, NULL, NULL, "--banks"},
	    {{NULL}, "CHIPD_BANKS", "two", "CHIPD_BANKS"},
	    {{"--grace-ms", "600001"}, NULL, NULL, "--grace-ms"},
	    {{"--max-pending", "0"}, NULL, NULL, "--max-pending"},
	    {{"--crash-limit", "17"}, NULL, NULL, "--crash-limit"},
	    {{"--crash-window-ms", "10"}, NULL, NULL, "--crash-window-ms"},
	    {{"--kv-blocks", "0"}, NULL, NULL, "--kv-blocks"},
	    {{"--heartbeat-ms", "1"}, NULL, NULL, "--heartbeat-ms"},
	    {{"--backoff-max-ms", "50"}, NULL, NULL, "--backoff-max-ms"},
	    {{"--backoff-min-ms", "0"}, NULL, NULL, "--backoff-min-ms"},
	    {{NULL}, "CHIPD_BACKOFF_MIN_MS", "soon", "CHIPD_BACKOFF_MIN_MS"},
	    {{"--backoff-min-ms", "6000"}, NULL, NULL, "backoff_max_ms = 5000"},
	    {{"--backoff-max-ms", "200"}, "CHIPD_BACKOFF_MIN_MS", "300", "--backoff-max-ms 200"},
	    {{"--stuck-ms", "400", "--heartbeat-ms", "500"}, NULL, NULL, "--heartbeat-ms"},
	    {{"--stuck-ms", "400"}, "CHIPD_HEARTBEAT_MS", "600", "CHIPD_HEARTBEAT_MS"},
	    {{"--instance", "a/b"}, NULL, NULL, "--instance"},
	    {{"--instance", ""}, NULL, NULL, "--instance"},
	    {{NULL},
	     "CHIPD_INSTANCE",
	     "0123456789012345678901234567890123456789012345678",
	     "CHIPD_INSTANCE"},
	    {{NULL}, "SLURM_JOB_ID", "12 34", "SLURM_JOB_ID"},
	    {{"--backend", "cuda"}, NULL, NULL, "--backend"},
	    {{NULL}, "CHIPD_BACKEND", "gpu", "CHIPD_BACKEND"},
	    {{"--log-level", "loud"}, NULL, NULL, "--log-level"},
	    {{NULL}, "CHIPD_LOG_LEVEL", "verbose", "CHIPD_LOG_LEVEL"},
	    {{NULL}, "CHIPD_NO_OVERLAP", "maybe", "CHIPD_NO_OVERLAP"},
	    {{NULL}, "CHIPD_FOREGROUND", "2", "CHIPD_FOREGROUND"},
	    {{"--notify-fd", "1000"}, NULL, NULL, "--notify-fd"},
	    {{"--notify-fd", "x"}, NULL, NULL, "--notify-fd"},
	    {{"--pidfile", ""}, NULL, NULL, "--pidfile"},
	    {{NULL}, "CHIPD_RUNTIME_DIR", "relative/dir", "CHIPD_RUNTIME_DIR"},
	    {{NULL}, "NOTIFY_SOCKET", "vsock:2:1234", "NOTIFY_SOCKET"},
	    {{NULL}, "WATCHDOG_USEC", "lots", "WATCHDOG_USEC"},
	    {{"--frobnicate"}, NULL, NULL, "--frobnicate"},
	    {{"--chips"}, NULL, NULL, "--chips"},
	    {{"-x"}, NULL, NULL, "-x"},
	    {{"--foreground=1"}, NULL, NULL, "--foreground"},
	    {{"extra"}, NULL, NULL, "extra"},
	};
	struct sup_config c;
	struct sup_sources s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *b = &cases[i];
		char *argv[8] = {"chipd"};
		char msg[256] = "";
		int argc = 1;

		clean_env();
		if (b->var)
			setenv(b->var, b->val, 1);
		for (int a = 0; a < 4 && b->args[a]; a++)
			argv[argc++] = (char *)b->args[a];
		ck_assert_msg(sup_config_load(&c, &s, argc, argv, msg, sizeof(msg)) == -EINVAL,
			      "case %zu (%s) was accepted", i, b->names);
		ck_assert_msg(strstr(msg, b->names) != NULL, "case %zu: \"%s\" does not name %s", i,
			      msg, b->names);
		ck_assert_ptr_null(strchr(msg, '\n')); /* one line */
	}
}
END_TEST

/* A bad instance name is refused saying what is wrong with it, as chipctl says it
 * (libchipd's rule); a CHIPD_INSTANCE set to "" counts as unset. */
START_TEST(bad_instance_names_say_what_is_wrong)
{
	static const struct {
		const char *flag, *var, *val, *says;
	} cases[] = {
	    {"--instance", NULL, "", "--instance : bad instance name: empty"},
	    {"--instance", NULL, "a23456789012345678901234567890123456789012345678",
	     "48 characters, at most 47"},
	    {"--instance", NULL, "a/b", "character '/' is not one of [A-Za-z0-9._-]"},
	    {NULL, "CHIPD_INSTANCE", "a b", "CHIPD_INSTANCE=a b: bad instance name: character ' '"},
	    {NULL, "SLURM_JOB_ID", "7\t1", "SLURM_JOB_ID=7\t1: bad instance name: byte 0x09"},
	};
	struct sup_config c;
	struct sup_sources s;
	char msg[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = {"chipd", (char *)cases[i].flag, (char *)cases[i].val, NULL};

		clean_env();
		if (cases[i].var)
			setenv(cases[i].var, cases[i].val, 1);
		msg[0] = '\0';
		ck_assert_int_eq(
		    sup_config_load(&c, &s, cases[i].flag ? 3 : 1, argv, msg, sizeof(msg)),
		    -EINVAL);
		ck_assert_msg(strstr(msg, cases[i].says), "case %zu: %s", i, msg);
	}
	clean_env();
	setenv("CHIPD_INSTANCE", "", 1);
	setenv("SLURM_JOB_ID", "4711", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_str_eq(c.instance, "4711");
	ck_assert_int_eq(s.instance, SUP_SRC_SCHEDULER);
}
END_TEST

/* The restart backoff's start is a setting like its cap: flag, variable, default,
 * and never above the cap. */
START_TEST(backoff_min_ms_is_a_setting)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[256];
	char *out;

	clean_env();
	ck_assert_int_eq(LOAD("--backoff-min-ms", "20"), 0);
	ck_assert_uint_eq(c.backoff_min_ms, 20);
	ck_assert_int_eq(s.backoff_min_ms, SUP_SRC_FLAG);
	out = printed(&c, &s);
	line_of(out, "backoff_min_ms", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 20 (flag)"), "%s", line);
	free(out);
	setenv("CHIPD_BACKOFF_MIN_MS", "5000", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.backoff_min_ms, 5000); /* equal to the cap: a fixed delay */
	ck_assert_int_eq(s.backoff_min_ms, SUP_SRC_ENV);
	ck_assert_int_eq(LOAD("--backoff-max-ms", "4999"), -EINVAL);
	ck_assert_msg(strstr(msg, "CHIPD_BACKOFF_MIN_MS=5000") &&
			  strstr(msg, "--backoff-max-ms 4999"),
		      "%s", msg);
}
END_TEST

/* The per-request limits: 64-bit values from a flag or a variable, their defaults
 * in print-config, and a range that names the flag. */
START_TEST(request_limits_are_settings)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[256];
	char *out;

	clean_env();
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.max_request_host_bytes, 256ull << 20);
	ck_assert_uint_eq(c.max_request_device_bytes, 1ull << 30);
	ck_assert_uint_eq(c.max_request_steps, 1u << 20);
	ck_assert_int_eq(
	    LOAD("--max-request-device-bytes", "68719476736", "--max-request-steps", "5"), 0);
	ck_assert_uint_eq(c.max_request_device_bytes, 64ull << 30); /* above 32 bits */
	ck_assert_int_eq(s.max_request_device_bytes, SUP_SRC_FLAG);
	ck_assert_uint_eq(c.max_request_steps, 5);
	out = printed(&c, &s);
	line_of(out, "max_request_device_bytes", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 68719476736 (flag)"), "%s", line);
	line_of(out, "max_request_host_bytes", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 268435456 (default)"), "%s", line);
	free(out);
	setenv("CHIPD_MAX_REQUEST_HOST_BYTES", "4096", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.max_request_host_bytes, 4096);
	ck_assert_int_eq(s.max_request_host_bytes, SUP_SRC_ENV);
	unsetenv("CHIPD_MAX_REQUEST_HOST_BYTES");
	ck_assert_int_eq(LOAD("--max-request-steps", "1048577"), -EINVAL);
	ck_assert_msg(strstr(msg, "--max-request-steps 1048577: out of range 1..1048576"), "%s",
		      msg);
	ck_assert_int_eq(LOAD("--max-request-host-bytes", "0"), -EINVAL);
	ck_assert_msg(strstr(msg, "--max-request-host-bytes 0: out of range"), "%s", msg);
}
END_TEST

/* The per-client bounds and the connection limit (docs/protocol.md §9) are settings
 * like the others; a runtime dir too long for the handshake socket is refused. */
START_TEST(client_bounds_are_settings)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[256], dir[200];
	char *out;

	clean_env();
	ck_assert_int_eq(LOAD("--max-client-pending", "3", "--max-clients", "7"), 0);
	ck_assert_uint_eq(c.max_client_pending, 3);
	ck_assert_int_eq(s.max_client_pending, SUP_SRC_FLAG);
	ck_assert_uint_eq(c.max_clients, 7);
	setenv("CHIPD_MAX_CLIENT_RINGS", "9", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.max_client_rings, 9);
	ck_assert_int_eq(s.max_client_rings, SUP_SRC_ENV);
	out = printed(&c, &s);
	line_of(out, "max_client_rings", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 9 (env)"), "%s", line);
	line_of(out, "max_clients", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 128 (default)"), "%s", line);
	free(out);
	unsetenv("CHIPD_MAX_CLIENT_RINGS");
	ck_assert_int_eq(LOAD("--max-client-pending", "0"), -EINVAL);
	ck_assert_msg(strstr(msg, "--max-client-pending 0: out of range 1..4096"), "%s", msg);
	ck_assert_int_eq(LOAD("--max-clients", "4097"), -EINVAL);
	ck_assert_msg(strstr(msg, "--max-clients 4097: out of range 1..4096"), "%s", msg);
	/* the mailbox slots: 1 up to all of the mailbox's */
	ck_assert_int_eq(LOAD("--max-client-slots", "1"), 0);
	ck_assert_uint_eq(c.max_client_slots, 1);
	ck_assert_int_eq(s.max_client_slots, SUP_SRC_FLAG);
	setenv("CHIPD_MAX_CLIENT_SLOTS", "64", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.max_client_slots, 64);
	ck_assert_int_eq(s.max_client_slots, SUP_SRC_ENV);
	out = printed(&c, &s);
	line_of(out, "max_client_slots", line, sizeof(line));
	ck_assert_msg(strstr(line, "= 64 (env)"), "%s", line);
	free(out);
	setenv("CHIPD_MAX_CLIENT_SLOTS", "65", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), -EINVAL);
	ck_assert_msg(strstr(msg, "CHIPD_MAX_CLIENT_SLOTS=65: out of range 1..64"), "%s", msg);
	unsetenv("CHIPD_MAX_CLIENT_SLOTS");
	ck_assert_int_eq(LOAD("--max-client-slots", "0"), -EINVAL);
	ck_assert_msg(strstr(msg, "--max-client-slots 0: out of range 1..64"), "%s", msg);
	memset(dir, 'd', sizeof(dir) - 1);
	dir[0] = '/';
	dir[sizeof(dir) - 1] = '\0';
	setenv("CHIPD_RUNTIME_DIR", dir, 1);
	ck_assert_int_eq(LOAD("--chips", "1"), -EINVAL);
	ck_assert_msg(strstr(msg, "too long for the handshake socket"), "%s", msg);
	unsetenv("CHIPD_RUNTIME_DIR");
}
END_TEST

/* --allow-group (chipd(8), docs/operations.md): a group name or a gid, printed with
 * both; an unknown name is refused naming it; a user's own runtime directory is no
 * place to open to a group. */
START_TEST(allow_group_is_a_setting)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[256], want[128], gid[32];
	const struct group *g = getgrgid(getegid());
	char *out;

	ck_assert_ptr_nonnull(g);
	clean_env();
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_str_eq(c.allow_group, "");
	out = printed(&c, &s);
	line_of(out, "allow_group", line, sizeof(line));
	ck_assert_msg(strstr(line, "= none (default)"), "%s", line);
	free(out);
	setenv("CHIPD_RUNTIME_DIR", "/run/chipd", 1);
	ck_assert_int_eq(LOAD("--allow-group", g->gr_name), 0);
	ck_assert_str_eq(c.allow_group, g->gr_name);
	ck_assert_uint_eq(c.allow_gid, getegid());
	out = printed(&c, &s);
	line_of(out, "allow_group", line, sizeof(line));
	snprintf(want, sizeof(want), "= %s (gid %u) (flag)", g->gr_name, (unsigned)getegid());
	ck_assert_msg(strstr(line, want), "%s", line);
	free(out);
	/* a number is a gid, named when the group database knows it */
	snprintf(gid, sizeof(gid), "%u", (unsigned)getegid());
	setenv("CHIPD_ALLOW_GROUP", gid, 1);
	ck_assert_int_eq(LOAD("--chips", "1"), 0);
	ck_assert_uint_eq(c.allow_gid, getegid());
	ck_assert_str_eq(c.allow_group, g->gr_name);
	ck_assert_int_eq(s.allow_group, SUP_SRC_ENV);
	if (!getgrgid(3999999)) {
		setenv("CHIPD_ALLOW_GROUP", "3999999", 1);
		ck_assert_int_eq(LOAD("--chips", "1"), 0);
		ck_assert_uint_eq(c.allow_gid, 3999999);
		ck_assert_str_eq(c.allow_group, "3999999");
	}
	unsetenv("CHIPD_ALLOW_GROUP");
	ck_assert_int_eq(LOAD("--allow-group", "chipd-no-such-group"), -EINVAL);
	ck_assert_msg(strstr(msg, "--allow-group chipd-no-such-group: no such group"), "%s", msg);
	setenv("CHIPD_ALLOW_GROUP", "chipd-no-such-group", 1);
	ck_assert_int_eq(LOAD("--chips", "1"), -EINVAL);
	ck_assert_msg(strstr(msg, "CHIPD_ALLOW_GROUP=chipd-no-such-group: no such group"), "%s",
		      msg);
	/* XDG_RUNTIME_DIR is a login's own directory: not opened to a group */
	unsetenv("CHIPD_RUNTIME_DIR");
	setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
	setenv("CHIPD_ALLOW_GROUP", g->gr_name, 1);
	ck_assert_int_eq(LOAD("--chips", "1"), -EINVAL);
	ck_assert_msg(strstr(msg, ": needs CHIPD_RUNTIME_DIR") && strstr(msg, "/run/user/77"),
		      "%s", msg);
}
END_TEST

START_TEST(booleans_take_the_usual_spellings)
{
	static const char *const yes[] = {"1", "true", "yes", "TRUE", "Yes"};
	static const char *const no[] = {"0", "false", "no", "FALSE", "No"};
	struct sup_config c;
	struct sup_sources s;
	char msg[256];

	clean_env();
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		setenv("CHIPD_FOREGROUND", yes[i], 1);
		ck_assert_int_eq(LOAD("--queue", "1"), 0);
		ck_assert(c.foreground);
		ck_assert_int_eq(s.foreground, SUP_SRC_ENV);
		setenv("CHIPD_FOREGROUND", no[i], 1);
		ck_assert_int_eq(LOAD("--queue", "1"), 0);
		ck_assert(!c.foreground);
		ck_assert_int_eq(s.foreground, SUP_SRC_ENV);
	}
	/* the switch beats the variable */
	ck_assert_int_eq(LOAD("--foreground"), 0);
	ck_assert(c.foreground);
	ck_assert_int_eq(s.foreground, SUP_SRC_FLAG);
}
END_TEST

START_TEST(no_overlap_forces_one_bank)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[256];
	char *out;

	clean_env();
	ck_assert_int_eq(LOAD("--no-overlap", "--banks", "4"), 0);
	ck_assert(c.no_overlap);
	ck_assert_uint_eq(c.banks, 1);
	out = printed(&c, &s);
	line_of(out, "banks", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 1 (flag"));
	ck_assert_ptr_nonnull(strstr(line, "no_overlap"));
	free(out);

	setenv("CHIPD_NO_OVERLAP", "yes", 1);
	ck_assert_int_eq(LOAD("--queue", "8"), 0);
	ck_assert_uint_eq(c.banks, 1);
	ck_assert_int_eq(s.banks, SUP_SRC_ENV);
}
END_TEST

START_TEST(paths_and_the_runtime_dir)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], want[SUP_PATH_MAX];
	unsigned uid = (unsigned)geteuid();

	clean_env();
	setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
	ck_assert_int_eq(LOAD("--instance", "x.y-z_1"), 0);
	ck_assert_str_eq(c.runtime_dir, "/run/user/77");
	ck_assert_int_eq(s.runtime_dir, SUP_SRC_ENV);
	snprintf(want, sizeof(want), "/run/user/77/chipd.%u.x.y-z_1.pid", uid);
	ck_assert_str_eq(c.pidfile, want);

	setenv("CHIPD_RUNTIME_DIR", "/var/run/chipd", 1);
	ck_assert_int_eq(LOAD("--instance", "a"), 0);
	snprintf(want, sizeof(want), "/var/run/chipd/chipd.%u.a.pid", uid);
	ck_assert_str_eq(c.pidfile, want);

	/* a relative XDG_RUNTIME_DIR is invalid by the XDG spec: ignored */
	unsetenv("CHIPD_RUNTIME_DIR");
	setenv("XDG_RUNTIME_DIR", "run", 1);
	ck_assert_int_eq(LOAD("--instance", "a"), 0);
	ck_assert_str_eq(c.runtime_dir, default_rundir());
	ck_assert_int_eq(s.runtime_dir, SUP_SRC_DEFAULT);

	/* relative files are made absolute: a detached daemon changes directory */
	ck_assert_int_eq(chdir("/tmp"), 0);
	ck_assert_int_eq(LOAD("--pidfile", "my.pid", "--trace", "/abs/t.json"), 0);
	ck_assert_str_eq(c.pidfile, "/tmp/my.pid");
	ck_assert_int_eq(s.pidfile, SUP_SRC_FLAG);
	ck_assert_str_eq(c.trace, "/abs/t.json");
}
END_TEST

START_TEST(print_config_names_every_source)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], line[512];
	const char *eq = NULL;
	char *out;

	clean_env();
	setenv("CHIPD_BANKS", "3", 1);
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
	ck_assert_int_eq(LOAD("--queue", "9", "--backend", "hip"), 0);
	out = printed(&c, &s);

	line_of(out, "queue", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 9 (flag)"));
	line_of(out, "banks", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 3 (env)"));
	line_of(out, "instance", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 77 (scheduler"));
	line_of(out, "chips", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 2 (scheduler"));
	line_of(out, "gpus", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 0,1 (scheduler, CUDA_VISIBLE_DEVICES: 2,3)"));
	line_of(out, "kv_blocks", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= 4096 (default)"));
	line_of(out, "backend", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= hip (flag)"));
	line_of(out, "notify_fd", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= none (default)"));
	ck_assert_ptr_null(strstr(out, "print_config"));

	/* aligned: every " = " at the same column, and one per line */
	for (const char *p = out; *p; p = strchr(p, '\n') + 1) {
		const char *e = strstr(p, " = ");

		ck_assert_ptr_nonnull(e);
		ck_assert(e < strchr(p, '\n'));
		if (eq)
			ck_assert_int_eq(e - p, eq - out);
		else
			eq = e;
	}
	free(out);

	/* sim: no GPUs */
	ck_assert_int_eq(LOAD("--queue", "9"), 0);
	out = printed(&c, &s);
	line_of(out, "gpus", line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "= none (default)"));
	free(out);
}
END_TEST

/* Runs sup_config_load with @flag and returns what it printed on stdout (free it). */
static char *stdout_of(const char *flag, int *rc)
{
	char *argv[] = {"chipd", (char *)flag, NULL};
	struct sup_config c;
	struct sup_sources s;
	char msg[256];
	FILE *t = tmpfile();
	int saved = dup(STDOUT_FILENO);
	char *buf = calloc(1, 1 << 16);
	size_t n;

	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(buf);
	fflush(stdout);
	ck_assert_int_ge(dup2(fileno(t), STDOUT_FILENO), 0);
	*rc = sup_config_load(&c, &s, 2, argv, msg, sizeof(msg));
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	rewind(t);
	n = fread(buf, 1, (1 << 16) - 1, t);
	buf[n] = '\0';
	fclose(t);
	return buf;
}

START_TEST(help_lists_every_flag_and_variable)
{
	static const char *const want[] = {
	    "--instance",
	    "CHIPD_INSTANCE",
	    "--backend",
	    "CHIPD_BACKEND",
	    "--chips",
	    "CHIPD_CHIPS",
	    "--queue",
	    "CHIPD_QUEUE",
	    "--max-pending",
	    "CHIPD_MAX_PENDING",
	    "--max-clients",
	    "CHIPD_MAX_CLIENTS",
	    "--max-client-pending",
	    "CHIPD_MAX_CLIENT_PENDING",
	    "--max-client-rings",
	    "CHIPD_MAX_CLIENT_RINGS",
	    "--max-client-slots N  [CHIPD_MAX_CLIENT_SLOTS, default: 16, range: 1..64]",
	    "slots of each connection's own mailbox",
	    "--banks",
	    "CHIPD_BANKS",
	    "--no-overlap",
	    "CHIPD_NO_OVERLAP",
	    "--foreground",
	    "CHIPD_FOREGROUND",
	    "--log-level",
	    "CHIPD_LOG_LEVEL",
	    "--notify-fd",
	    "--trace",
	    "CHIPD_TRACE",
	    "--pidfile",
	    "CHIPD_PIDFILE",
	    "CHIPD_RUNTIME_DIR",
	    "--grace-ms",
	    "CHIPD_GRACE_MS",
	    "--heartbeat-ms",
	    "CHIPD_HEARTBEAT_MS",
	    "--stuck-ms",
	    "CHIPD_STUCK_MS",
	    "--backoff-min-ms",
	    "CHIPD_BACKOFF_MIN_MS",
	    "--backoff-max-ms",
	    "CHIPD_BACKOFF_MAX_MS",
	    "--crash-limit",
	    "CHIPD_CRASH_LIMIT",
	    "--crash-window-ms",
	    "CHIPD_CRASH_WINDOW_MS",
	    "--kv-blocks",
	    "CHIPD_KV_BLOCKS",
	    "--print-config",
	    "--help",
	    "--version",
	    "SLURM_JOB_ID",
	    "HIP_VISIBLE_DEVICES",
	    "ROCR_VISIBLE_DEVICES",
	    "CUDA_VISIBLE_DEVICES",
	    "SLURM_GPUS_ON_NODE",
	    "NOTIFY_SOCKET",
	    "WATCHDOG_USEC",
	    "default: 10000",
	    "default: 4096",
	};
	char *out;
	int rc;

	clean_env();
	out = stdout_of("--help", &rc);
	ck_assert_int_eq(rc, 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(out, want[i]) != NULL, "--help lacks %s", want[i]);
	free(out);

	out = stdout_of("--version", &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_str_eq(out, "chipd 0.1.0\n");
	free(out);
	out = stdout_of("-V", &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_str_eq(out, "chipd 0.1.0\n");
	free(out);
}
END_TEST

static Suite *sup_config_suite(void)
{
	Suite *s = suite_create("sup_config");
	const struct tu_case cases[] = {
	    {"defaults_when_nothing_is_given", defaults_when_nothing_is_given},
	    {"flag_beats_env_beats_scheduler_beats_default",
	     flag_beats_env_beats_scheduler_beats_default},
	    {"bad_values_name_their_flag_or_variable", bad_values_name_their_flag_or_variable},
	    {"bad_instance_names_say_what_is_wrong", bad_instance_names_say_what_is_wrong},
	    {"backoff_min_ms_is_a_setting", backoff_min_ms_is_a_setting},
	    {"request_limits_are_settings", request_limits_are_settings},
	    {"client_bounds_are_settings", client_bounds_are_settings},
	    {"allow_group_is_a_setting", allow_group_is_a_setting},
	    {"booleans_take_the_usual_spellings", booleans_take_the_usual_spellings},
	    {"no_overlap_forces_one_bank", no_overlap_forces_one_bank},
	    {"paths_and_the_runtime_dir", paths_and_the_runtime_dir},
	    {"print_config_names_every_source", print_config_names_every_source},
	    {"help_lists_every_flag_and_variable", help_lists_every_flag_and_variable},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(sup_config_suite());
}
