/* check_sup_config_env.c - chipd's configuration from its environment: the Slurm job
 * id as the instance, the GPU masks (HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
 * CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE) and systemd's socket and watchdog. Each
 * tcase runs in its own forked process (tu_run), so setting the environment here
 * touches no other tcase. */
#include "sup_config_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(slurm_job_id_names_the_instance)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], want[SUP_PATH_MAX];

	clean_env();
	setenv("SLURM_JOB_ID", "123456", 1);
	ck_assert_int_eq(LOAD("--foreground"), 0);
	ck_assert_str_eq(c.instance, "123456");
	ck_assert_int_eq(s.instance, SUP_SRC_SCHEDULER);
	/* and so the default pidfile */
	snprintf(want, sizeof(want), "%s/chipd.%u.123456.pid", default_rundir(),
		 (unsigned)geteuid());
	ck_assert_str_eq(c.pidfile, want);
	ck_assert_int_eq(s.pidfile, SUP_SRC_DEFAULT);
}
END_TEST

START_TEST(hip_gets_ordinals_within_the_mask)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256];

	clean_env();
	setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_uint_eq(c.chips, 2);
	ck_assert_int_eq(s.chips, SUP_SRC_SCHEDULER);
	ck_assert_int_eq(s.gpus, SUP_SRC_SCHEDULER);
	/* not 2 and 3: the runtime applies the mask itself, masks are not stacked */
	ck_assert_int_eq(c.gpus[0], 0);
	ck_assert_int_eq(c.gpus[1], 1);
	ck_assert_int_eq(c.gpus[2], -1);
	ck_assert_str_eq(c.gpu_ids[0], "2");
	ck_assert_str_eq(c.gpu_ids[1], "3");
	ck_assert_str_eq(c.gpu_env, "CUDA_VISIBLE_DEVICES");

	/* ROCR_VISIBLE_DEVICES first; UUIDs are names, not numbers */
	setenv("ROCR_VISIBLE_DEVICES", "GPU-aa11,GPU-bb22,GPU-cc33", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_uint_eq(c.chips, 3);
	ck_assert_int_eq(c.gpus[2], 2);
	ck_assert_str_eq(c.gpu_ids[2], "GPU-cc33");
	ck_assert_str_eq(c.gpu_env, "ROCR_VISIBLE_DEVICES");

	/* HIP_VISIBLE_DEVICES before both: HIP applies it on top of ROCR's */
	setenv("HIP_VISIBLE_DEVICES", "1,0", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_uint_eq(c.chips, 2);
	ck_assert_int_eq(c.gpus[1], 1);
	ck_assert_int_eq(c.gpus[2], -1);
	ck_assert_str_eq(c.gpu_ids[0], "1");
	ck_assert_str_eq(c.gpu_env, "HIP_VISIBLE_DEVICES");
	ck_assert_int_eq(LOAD("--backend", "hip", "--chips", "3"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "HIP_VISIBLE_DEVICES=1,0"));
	unsetenv("HIP_VISIBLE_DEVICES");

	/* --chips may take fewer than the visible ones, ordinals from 0 */
	ck_assert_int_eq(LOAD("--backend", "hip", "--chips", "1"), 0);
	ck_assert_uint_eq(c.chips, 1);
	ck_assert_int_eq(s.chips, SUP_SRC_FLAG);
	ck_assert_int_eq(c.gpus[0], 0);
	ck_assert_int_eq(c.gpus[1], -1);

	/* no mask: Slurm's count */
	unsetenv("ROCR_VISIBLE_DEVICES");
	unsetenv("CUDA_VISIBLE_DEVICES");
	setenv("SLURM_GPUS_ON_NODE", "4", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), 0);
	ck_assert_uint_eq(c.chips, 4);
	ck_assert_int_eq(c.gpus[3], 3);
	ck_assert_str_eq(c.gpu_ids[0], "");
	ck_assert_str_eq(c.gpu_env, "SLURM_GPUS_ON_NODE");

	/* nothing known: --chips says how many, from ordinal 0 */
	unsetenv("SLURM_GPUS_ON_NODE");
	ck_assert_int_eq(LOAD("--backend", "hip", "--chips", "2"), 0);
	ck_assert_int_eq(c.gpus[1], 1);
	ck_assert_int_eq(s.gpus, SUP_SRC_FLAG);
	ck_assert_int_eq(LOAD("--backend", "hip"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "--chips"));
}
END_TEST

START_TEST(hip_refuses_more_chips_than_visible)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256];

	clean_env();
	setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
	ck_assert_int_eq(LOAD("--backend", "hip", "--chips", "3"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "--chips"));
	ck_assert_ptr_nonnull(strstr(msg, "CUDA_VISIBLE_DEVICES=2,3"));
	setenv("CHIPD_CHIPS", "4", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "CHIPD_CHIPS"));

	/* set but empty: nothing visible */
	unsetenv("CHIPD_CHIPS");
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "CUDA_VISIBLE_DEVICES"));
	setenv("CUDA_VISIBLE_DEVICES", "0,,1", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "CUDA_VISIBLE_DEVICES"));
	unsetenv("CUDA_VISIBLE_DEVICES");
	setenv("SLURM_GPUS_ON_NODE", "two", 1);
	ck_assert_int_eq(LOAD("--backend", "hip"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "SLURM_GPUS_ON_NODE"));
}
END_TEST

START_TEST(systemd_socket_and_watchdog)
{
	struct sup_config c;
	struct sup_sources s;
	char msg[256], pid[32];

	clean_env();
	setenv("NOTIFY_SOCKET", "@chipd-notify", 1);
	setenv("WATCHDOG_USEC", "3000000", 1);
	ck_assert_int_eq(LOAD("--queue", "1"), 0);
	ck_assert_str_eq(c.notify_socket, "@chipd-notify");
	ck_assert_int_eq(s.notify_socket, SUP_SRC_ENV);
	ck_assert_uint_eq(c.watchdog_usec, 3000000);
	ck_assert_int_eq(s.watchdog_usec, SUP_SRC_ENV);

	/* WATCHDOG_PID names who is watched: us, or someone else */
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(LOAD("--queue", "1"), 0);
	ck_assert_uint_eq(c.watchdog_usec, 3000000);
	snprintf(pid, sizeof(pid), "%d", (int)getppid());
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(LOAD("--queue", "1"), 0);
	ck_assert_uint_eq(c.watchdog_usec, 0);
	ck_assert_int_eq(s.watchdog_usec, SUP_SRC_DEFAULT);

	setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
	ck_assert_int_eq(LOAD("--queue", "1"), 0);
	ck_assert_str_eq(c.notify_socket, "/run/systemd/notify");
}
END_TEST

static Suite *sup_config_env_suite(void)
{
	Suite *s = suite_create("sup_config_env");
	const struct tu_case cases[] = {
	    {"slurm_job_id_names_the_instance", slurm_job_id_names_the_instance},
	    {"hip_gets_ordinals_within_the_mask", hip_gets_ordinals_within_the_mask},
	    {"hip_refuses_more_chips_than_visible", hip_refuses_more_chips_than_visible},
	    {"systemd_socket_and_watchdog", systemd_socket_and_watchdog},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(sup_config_env_suite());
}
