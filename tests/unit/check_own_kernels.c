/* check_own_kernels.c - a callable's own kernels (docs/callables.md, "Own kernels";
 * kernels/wl_kern.c, wl_host.c's launch_own, wl_load.c's table checks): the tests'
 * callable tc_own runs its kernel on the sim device token for token its reference;
 * launch_own refuses a bad index and bad dims; every refusal names what is wrong: a
 * kernel missing from the file, the file missing or unsafe, no file for the device,
 * a bad table (args_size, a name twice, a path), a library built for ABI 1; a
 * directory of callables holding a sim kernel file; chipd refusing to start on one
 * whose kernels fail. */
#include "device.h"
#include "testutil.h"
#include "wl.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif
#ifndef CHIPD_BIN
#error "CHIPD_BIN: the chipd under test"
#endif

#define MSG_CAP (WL_MSG_MAX + 2 * WL_PATH_MAX)

static char dir[256], own[320], kfile[320];

/* A private directory with tc_own.so, tc_v1.so and tc_kernels_sim.so (mode 0755). */
static void setup(void)
{
	const char *t = getenv("TMPDIR");
	char cmd[1024];

	snprintf(dir, sizeof(dir), "%s/chipd-own.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "cp %s/tc_own.so %s/tc_v1.so %s/tc_kernels_sim.so '%s'/ && chmod 0755 '%s'/*.so",
		 CL_TEST_DIR, CL_TEST_DIR, CL_TEST_DIR, dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(own, sizeof(own), "%s/tc_own.so", dir);
	snprintf(kfile, sizeof(kfile), "%s/tc_kernels_sim.so", dir);
}

static void teardown(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs @tokens steps of tiny_own with @seed on @d; each token must be @expect + step. */
static void run_tokens(struct dev *d, int64_t tokens, int64_t seed, int64_t expect)
{
	struct wl_env env = {.dev = d};
	char msg[MSG_CAP];
	struct wl_params p;
	struct wl_req *r;
	struct wl_exec *x;
	struct wl_arena host, dev;
	struct wl_step st;
	struct wl_out out;
	uint64_t tok;
	void *hmem = malloc(1 << 16), *dmem;

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_set(&p, "tokens", tokens), 0);
	ck_assert_int_eq(wl_params_set(&p, "seed", seed), 0);
	ck_assert_int_eq(wl_exec_create(&x, d, 2), 0);
	ck_assert_int_eq(dev_alloc(d, 1 << 16, &dmem), 0);
	ck_assert_msg(wl_req_create(&r, &env, "tiny_own", &p, msg, sizeof(msg)) == 0, "%s", msg);
	for (int64_t i = 0; i < tokens; i++) {
		wl_arena_init(&host, hmem, 1 << 16);
		wl_arena_init(&dev, dmem, 1 << 16);
		ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
		ck_assert_int_eq(wl_req_build(r, &st, (uint32_t)i % 2, &out), 0);
		ck_assert_uint_eq(st.n, 2); /* the launch and the copy: no probe added a task */
		ck_assert_int_eq(wl_exec_run(x, &st), 0);
		ck_assert_int_eq(wl_req_token(r, &out, &tok), 0);
		ck_assert_uint_eq(tok, (uint64_t)(expect + i));
	}
	wl_req_destroy(r);
	wl_exec_destroy(x);
	dev_free(d, dmem);
	free(hmem);
}

/* tiny_own's kernel makes its reference's tokens; its requests wait for the kernels to
 * be on the device; the unload unloads them. */
START_TEST(own_kernel_runs)
{
	char msg[MSG_CAP];
	struct wl_env env = {0};
	struct wl_params p;
	struct wl_req *r;
	uint64_t ref[5];

	ck_assert_msg(wl_load_file(own, NULL, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(dev_open(&env.dev, DEV_SIM, 0, NULL, 0), 0);
	wl_params_init(&p);
	ck_assert_int_eq(wl_req_create(&r, &env, "tiny_own", &p, msg, sizeof(msg)), -ENODEV);
	ck_assert_str_eq(msg, "tiny_own: its kernels are not loaded on this device");
	ck_assert_msg(wl_kernels_attach("tiny_own", env.dev, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(wl_kernels_attach("tiny_own", env.dev, msg, sizeof(msg)), 0); /* again */
	ck_assert_uint_eq(dev_live(env.dev), 1);
	ck_assert_int_eq(wl_params_set(&p, "tokens", 5), 0);
	ck_assert_int_eq(wl_params_set(&p, "seed", 3), 0);
	ck_assert_int_eq(wl_ref_tokens("tiny_own", &p, ref, 5, msg, sizeof(msg)), 0);
	ck_assert_uint_eq(ref[0], 21);
	run_tokens(env.dev, 5, 3, 21);
	/* seed 500: launch_own refused a bad index and 9 bad dims, -EINVAL each */
	run_tokens(env.dev, 3, 500, 500 * 7 + 10 * 1000);
	ck_assert_int_eq(wl_kernels_attach("nope", env.dev, msg, sizeof(msg)), -ENOENT);
	ck_assert_int_eq(wl_unload("tiny_own", msg, sizeof(msg)), 0);
	ck_assert_uint_eq(dev_live(env.dev), 0); /* its module went with it */
	dev_close(env.dev);
}
END_TEST

/* Loads tiny_own broken as @fault says, and attaches its kernels: refused with @err
 * and a message holding @what (and nothing stays loaded on the device). */
static void attach_refused(const char *fault, int err, const char *what)
{
	char msg[MSG_CAP];
	struct dev *d;

	if (fault)
		ck_assert_int_eq(setenv("TC_OWN_FAULT", fault, 1), 0);
	ck_assert_msg(wl_load_file(own, NULL, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(dev_open(&d, DEV_SIM, 0, NULL, 0), 0);
	msg[0] = '\0';
	ck_assert_int_eq(wl_kernels_attach("tiny_own", d, msg, sizeof(msg)), err);
	ck_assert_msg(strstr(msg, what), "'%s' does not say '%s'", msg, what);
	ck_assert_uint_eq(dev_live(d), 0);
	ck_assert_int_eq(wl_unload("tiny_own", msg, sizeof(msg)), 0);
	dev_close(d);
	ck_assert_int_eq(unsetenv("TC_OWN_FAULT"), 0);
}

START_TEST(kernels_refused)
{
	attach_refused("missing_kernel", -ENOENT,
		       "callable tiny_own: kernel \"tc_nope\" not found in tc_kernels_sim.so");
	attach_refused("missing_file", -ENOENT, "callable tiny_own: kernel file /");
	attach_refused("missing_file", -ENOENT, "/tc_absent_sim.so: No such file or directory");
	attach_refused("no_sim", -ENOENT,
		       "callable tiny_own: no kernels for the sim device (kernels_sim is NULL)");
	ck_assert_int_eq(chmod(kfile, 0775), 0);
	attach_refused(NULL, -EPERM, "tc_kernels_sim.so: writable by group or others (mode 0775)");
	ck_assert_int_eq(chmod(kfile, 0755), 0);
	ck_assert_int_eq(unlink(kfile), 0);
	ck_assert_int_eq(symlink(CL_TEST_DIR "/tc_kernels_sim.so", kfile), 0);
	attach_refused(NULL, -EPERM, "not a regular file");
}
END_TEST

/* A kernel file that is not a shared object: refused as not loadable. */
START_TEST(kernel_file_not_loadable)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp /dev/null '%s' && chmod 0755 '%s'", kfile, kfile);
	ck_assert_int_eq(system(cmd), 0);
	attach_refused(NULL, -EINVAL, "cannot load its kernels from tc_kernels_sim.so");
}
END_TEST

/* The table's kernel fields are checked at load, naming the field. */
START_TEST(table_refused)
{
	static const struct {
		const char *fault, *what;
	} cases[] = {
	    {"args_size", "kernel 0 (tc_fill): its args_size is not 1..4096"},
	    {"dup", "kernel 1 (tc_fill): listed twice"},
	    {"slash", "kernels_sim is not a file name beside the callable (it has a '/')"},
	};
	char msg[MSG_CAP];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(setenv("TC_OWN_FAULT", cases[i].fault, 1), 0);
		ck_assert_int_eq(wl_load_file(own, NULL, msg, sizeof(msg)), -EINVAL);
		ck_assert_msg(strstr(msg, own) && strstr(msg, cases[i].what), "%s", msg);
	}
	ck_assert_int_eq(unsetenv("TC_OWN_FAULT"), 0);
	ck_assert_uint_eq(wl_count(), 0);
}
END_TEST

/* A library built against the ABI 1 header: refused, saying how to fix it, in a
 * message that fits an error envelope whole (159 bytes, docs/protocol.md §8.3) with a
 * path of 48 bytes. */
START_TEST(abi1_library_refused)
{
	char msg[MSG_CAP], path[320], want[MSG_CAP];

	snprintf(path, sizeof(path), "%s/tc_v1.so", dir);
	ck_assert_int_eq(wl_load_file(path, NULL, msg, sizeof(msg)), -EINVAL);
	snprintf(want, sizeof(want),
		 "callable %s: built for ABI 1, this chipd loads 2: rebuild it with this chipd's "
		 "chipd_callable.h",
		 path);
	ck_assert_str_eq(msg, want);
	ck_assert_uint_le(strlen(msg) - strlen(path) + 48, 159);
}
END_TEST

/* A directory of callables (chipd --callables) holds the sim kernel file beside its
 * callable: not a callable, and not refused as one; a stray library still is. */
START_TEST(directory_with_kernel_file)
{
	char msg[MSG_CAP], path[320], cmd[1024];

	snprintf(path, sizeof(path), "%s/tc_v1.so", dir);
	ck_assert_int_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/stray.so", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", kfile, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(wl_load_dir(dir, msg, sizeof(msg)), -EINVAL);
	ck_assert_msg(strstr(msg, path) && strstr(msg, "no symbol chipd_callable_v2"), "%s", msg);
	ck_assert_uint_eq(wl_count(), 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_msg(wl_load_dir(dir, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_uint_eq(wl_count(), 1);
	ck_assert_str_eq(wl_names()[0], "tiny_own");
}
END_TEST

/* chipd --callables DIR with tc_own in DIR (and $TC_OWN_FAULT = @fault): exits 1
 * before it is ready, its stderr holding @what. */
static void start_refused(const char *fault, const char *what)
{
	char cmd[2048], err[2048] = "", path[320];
	FILE *f;
	int status;

	snprintf(path, sizeof(path), "%s/stderr.txt", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s%s CHIPD_INSTANCE=own-kernels-test '%s' --foreground --chips 1 "
		 "--callables '%s' 2>'%s'",
		 fault ? "TC_OWN_FAULT=" : "", fault ? fault : "", CHIPD_BIN, dir, path);
	status = system(cmd);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	err[fread(err, 1, sizeof(err) - 1, f)] = '\0';
	fclose(f);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_msg(strstr(err, what), "'%s' does not say '%s'", err, what);
}

/* chipd refuses to start on a callable whose sim kernels it cannot load. */
START_TEST(chipd_start_checks_kernels)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/tc_v1.so", dir);
	ck_assert_int_eq(unlink(path), 0);
	start_refused("missing_kernel", "kernel \"tc_nope\" not found in tc_kernels_sim.so");
	ck_assert_int_eq(chmod(kfile, 0775), 0);
	start_refused(NULL, "tc_kernels_sim.so: writable by group or others (mode 0775)");
	ck_assert_int_eq(unlink(kfile), 0);
	start_refused(NULL, "tc_kernels_sim.so: No such file or directory");
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"own_kernel_runs", own_kernel_runs},
	    {"kernels_refused", kernels_refused},
	    {"kernel_file_not_loadable", kernel_file_not_loadable},
	    {"table_refused", table_refused},
	    {"abi1_library_refused", abi1_library_refused},
	    {"directory_with_kernel_file", directory_with_kernel_file},
	    {"chipd_start_checks_kernels", chipd_start_checks_kernels},
	};
	Suite *s = suite_create("own_kernels");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return tu_run(s);
}
