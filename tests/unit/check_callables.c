/* check_callables.c - loading callables (kernels/wl_load.c, docs/callables.md): the
 * built-ins from their directory, a callable of the tests' own built against the ABI
 * alone and run through the workload interface, and every refusal with a message that
 * names the file: owner and mode of the file and the directory, not a regular file,
 * not loadable, no entry, another ABI version, a bad table, a failing init, a name
 * already loaded (and nothing of the directory stays loaded); chipd --callables and
 * CHIPD_CALLABLES refusing to start on such a directory. */
#include "device.h"
#include "testutil.h"
#include "wl.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CL_BUILTIN_DIR
#error "CL_BUILTIN_DIR: the build tree's built-in callables"
#endif
#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

#define MSG_CAP (WL_MSG_MAX + 2 * WL_PATH_MAX)

/* A fresh private directory (mode 0700) under TMPDIR. */
static void tmpdir_make(char *dir, size_t cap)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, cap, "%s/chipd-cl.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void tmpdir_remove(const char *dir)
{
	char cmd[WL_PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Copies @src to @dir/@name with mode @mode; returns the path in @out. */
static void put(const char *dir, const char *src, const char *name, mode_t mode, char *out,
		size_t cap)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), fd;
	ssize_t n;

	ck_assert_msg(in >= 0, "%s: %s", src, strerror(errno));
	snprintf(out, cap, "%s/%s", dir, name);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(fd, buf, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	close(in);
	close(fd);
	ck_assert_int_eq(chmod(out, mode), 0);
}

static void put_test(const char *dir, const char *variant, const char *name, char *out,
		     size_t cap)
{
	char src[WL_PATH_MAX];

	snprintf(src, sizeof(src), "%s/%s.so", CL_TEST_DIR, variant);
	put(dir, src, name, 0755, out, cap);
}

/* wl_load_dir(@dir) fails with @err and a message holding @path and @what. */
static void expect_refused(const char *dir, int err, const char *path, const char *what)
{
	char msg[MSG_CAP];

	msg[0] = '\0';
	ck_assert_msg(wl_load_dir(dir, msg, sizeof(msg)) == err, "%s", msg);
	ck_assert_msg(strstr(msg, path) != NULL, "'%s' does not name %s", msg, path);
	ck_assert_msg(strstr(msg, what) != NULL, "'%s' does not say '%s'", msg, what);
	ck_assert(!wl_loaded()); /* all or nothing */
}

START_TEST(builtins_load)
{
	char msg[MSG_CAP];
	const char *const *names;
	const char *path;
	uint32_t version;

	ck_assert_msg(wl_load_dir(CL_BUILTIN_DIR, msg, sizeof(msg)) == 0, "%s", msg);
	names = wl_names();
	ck_assert_str_eq(names[0], "gemm");
	ck_assert_str_eq(names[1], "paged_attention");
	ck_assert_str_eq(names[2], "synthetic");
	ck_assert_ptr_null(names[3]);
	ck_assert_int_eq(wl_callable_info("synthetic", &version, &path), 0);
	ck_assert_uint_eq(version, 1);
	ck_assert_str_eq(path, CL_BUILTIN_DIR "/synthetic.so");
	ck_assert_int_eq(wl_callable_info("nope", &version, &path), -ENOENT);
	/* loading them again: every name is taken, and nothing more is loaded */
	ck_assert_int_eq(wl_load_dir(CL_BUILTIN_DIR, msg, sizeof(msg)), -EEXIST);
	ck_assert_ptr_null(wl_names()[3]);
}
END_TEST

/* The tests' own callable, beside the built-ins, runs through the workload interface
 * on the sim device, token for token its reference. */
START_TEST(own_callable_runs)
{
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], msg[MSG_CAP];
	struct wl_params p;
	struct wl_cost cost;
	struct wl_env env = {0};
	struct wl_req *r;
	struct wl_exec *x;
	struct wl_arena host, dev;
	struct wl_step st;
	struct wl_out out;
	uint64_t tok, ref[5];
	void *hmem = malloc(1 << 16), *dmem;

	tmpdir_make(dir, sizeof(dir));
	put_test(dir, "tc_good", "tiny.so", path, sizeof(path));
	ck_assert_msg(wl_load_dir(CL_BUILTIN_DIR, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(wl_load_dir(dir, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_str_eq(wl_names()[3], "tiny");
	ck_assert_str_eq(wl_summary("tiny"), "a spin kernel per step; tokens are seed * 7 + step");

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "tokens=5,seed=3", msg, sizeof(msg)), 0);
	ck_assert_msg(wl_cost("tiny", &p, &cost, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_uint_eq(cost.steps, 5);
	ck_assert_uint_eq(cost.dev_bytes, sizeof(int32_t));
	ck_assert_int_eq(wl_ref_tokens("tiny", &p, ref, 5, msg, sizeof(msg)), 0);

	ck_assert_int_eq(dev_open(&env.dev, DEV_SIM, 0, NULL, 0), 0);
	ck_assert_int_eq(wl_exec_create(&x, env.dev, 2), 0);
	ck_assert_int_eq(dev_alloc(env.dev, 1 << 16, &dmem), 0);
	ck_assert_msg(wl_req_create(&r, &env, "tiny", &p, msg, sizeof(msg)) == 0, "%s", msg);
	for (uint32_t i = 0; i < 5; i++) {
		wl_arena_init(&host, hmem, 1 << 16);
		wl_arena_init(&dev, dmem, 1 << 16);
		ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
		ck_assert_int_eq(wl_req_build(r, &st, 0, &out), 0);
		ck_assert_int_eq(wl_exec_run(x, &st), 0);
		ck_assert_int_eq(wl_req_token(r, &out, &tok), 0);
		ck_assert_uint_eq(tok, ref[i]);
		ck_assert_uint_eq(tok, 3 * 7 + i);
	}
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), -ENODATA);
	wl_req_destroy(r);
	wl_exec_destroy(x);
	dev_free(env.dev, dmem);
	ck_assert_uint_eq(dev_live(env.dev), 0);
	dev_close(env.dev);
	free(hmem);

	/* its parameters are checked against its table */
	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "tokens=65", msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_validate("tiny", &p, msg, sizeof(msg)), -EINVAL);
	ck_assert_str_eq(msg, "tiny: tokens 65 outside [1, 64]");
	tmpdir_remove(dir);
}
END_TEST

/* A request of tiny with @params on @env, created (reserved and filled). */
static struct wl_req *tiny_req(const struct wl_env *env, const char *params)
{
	char msg[MSG_CAP];
	struct wl_params p;
	struct wl_req *r;

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, params, msg, sizeof(msg)), 0);
	ck_assert_msg(wl_req_create(&r, env, "tiny", &p, msg, sizeof(msg)) == 0, "%s", msg);
	return r;
}

/* The tests' tiny loaded from a fresh directory @dir (WL_PATH_MAX bytes), and a sim
 * device opened into @env->dev. */
static void tiny_loaded(char *dir, struct wl_env *env)
{
	char path[WL_PATH_MAX], msg[MSG_CAP];

	tmpdir_make(dir, WL_PATH_MAX);
	put_test(dir, "tc_good", "tiny.so", path, sizeof(path));
	ck_assert_msg(wl_load_file(path, NULL, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(dev_open(&env->dev, DEV_SIM, 0, NULL, 0), 0);
}

/* Undoes tiny_loaded once its requests are gone: nothing of the device is left. */
static void tiny_unloaded(const char *dir, struct wl_env *env)
{
	char msg[MSG_CAP];

	ck_assert_uint_eq(dev_live(env->dev), 0);
	dev_close(env->dev);
	ck_assert_int_eq(wl_unload("tiny", msg, sizeof(msg)), 0);
	tmpdir_remove(dir);
}

/* A reserve hook that fails and writes no message (tiny, seed 987), into a buffer that
 * holds an earlier call's words, and one that fills the buffer to its last byte with
 * no NUL (seed 986): the first is refused with a message naming the hook, nothing of
 * what the buffer held before; the second with its own message, ended within the
 * buffer. Before, the first refusal carried the stale words (in the worker, the stack
 * of the mailbox thread) and the second one was read past its end. */
START_TEST(hook_failing_silently_is_named)
{
	char dir[WL_PATH_MAX], msg[MSG_CAP];
	struct wl_env env = {0};
	struct wl_params p;
	struct wl_req *r = NULL;

	tiny_loaded(dir, &env);

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "seed=987", msg, sizeof(msg)), 0);
	snprintf(msg, sizeof(msg), "stale words of an earlier call");
	ck_assert_int_eq(wl_req_create(&r, &env, "tiny", &p, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(msg, "tiny: its reserve hook failed (-22)") == msg, "'%s'", msg);

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "seed=986", msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_req_create(&r, &env, "tiny", &p, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_uint_eq(strnlen(msg, sizeof(msg)), sizeof(msg) - 1);
	ck_assert_int_eq(msg[0], 'y');

	tiny_unloaded(dir, &env);
}
END_TEST

/* kv_give with ids the request does not hold (tiny, seed 993: its own blocks a second
 * time, every other block of the pool, -1 and the pool's size) gives back its own
 * blocks only: the shared pool keeps the other request's blocks taken and its free
 * count whole; a private pool is freed once, and the second give finds no pool. */
START_TEST(kv_give_returns_only_what_the_request_holds)
{
	char dir[WL_PATH_MAX], msg[MSG_CAP];
	struct wl_env env = {0};
	struct wl_kvpool *kv;
	struct wl_req *good, *bad, *again;

	tiny_loaded(dir, &env);
	ck_assert_int_eq(wl_kvpool_create(&kv, env.dev, 4, 1), 0);
	env.kv = kv;

	good = tiny_req(&env, "seed=992");
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 2);
	bad = tiny_req(&env, "seed=993");
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 0);
	wl_req_destroy(bad);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 2); /* good's 2 stay taken */
	/* the 2 free ones are handed out once each: a third taker is refused */
	again = tiny_req(&env, "seed=992");
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 0);
	{
		struct wl_params p;
		struct wl_req *none;

		wl_params_init(&p);
		ck_assert_int_eq(wl_params_parse(&p, "seed=992", msg, sizeof(msg)), 0);
		ck_assert_int_eq(wl_req_create(&none, &env, "tiny", &p, msg, sizeof(msg)),
				 -ENOSPC);
	}
	wl_req_destroy(again);
	wl_req_destroy(good);
	ck_assert_uint_eq(wl_kvpool_free_blocks(kv), 4);
	wl_kvpool_destroy(kv);

	/* a private pool (no shared one): made by kv_take, gone with the request */
	env.kv = NULL;
	wl_req_destroy(tiny_req(&env, "seed=993"));
	wl_req_destroy(tiny_req(&env, "seed=992"));
	tiny_unloaded(dir, &env);
}
END_TEST

/* launch without arguments and copy_task with a NULL source or destination are
 * refused -EINVAL at the call, adding nothing to the step (tiny, seed 990, adds 1000 to
 * its token per such refusal): not taken into the step, where copying the missing
 * arguments would crash the building thread, the worker's orchestrator. */
START_TEST(null_task_memory_refused_at_the_call)
{
	char dir[WL_PATH_MAX];
	struct wl_env env = {0};
	struct wl_req *r;
	struct wl_exec *x;
	struct wl_arena host, dev;
	struct wl_step st;
	struct wl_out out;
	uint64_t tok;
	void *hmem = malloc(1 << 16), *dmem;

	tiny_loaded(dir, &env);
	ck_assert_int_eq(wl_exec_create(&x, env.dev, 1), 0);
	ck_assert_int_eq(dev_alloc(env.dev, 1 << 16, &dmem), 0);
	r = tiny_req(&env, "seed=990,tokens=1");
	wl_arena_init(&host, hmem, 1 << 16);
	wl_arena_init(&dev, dmem, 1 << 16);
	ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), 0);
	ck_assert_uint_eq(st.n, 2); /* its launch and its token's copy */
	ck_assert_int_eq(wl_exec_run(x, &st), 0);
	ck_assert_int_eq(wl_req_token(r, &out, &tok), 0);
	ck_assert_uint_eq(tok, 990 * 7 + 3 * 1000);
	wl_req_destroy(r);
	wl_exec_destroy(x);
	dev_free(env.dev, dmem);
	free(hmem);
	tiny_unloaded(dir, &env);
}
END_TEST

/* A launch whose shape the device layer's check refuses (tiny, seed 985: a spin of
 * more than an hour) is refused -EINVAL at the call, so the build fails and the step
 * stays empty: the callable's bug never reaches the device. synthetic's fail_step, the
 * fault the device-error tests inject, passes every check before the device (its
 * task is queued) and faults when it runs: the stream's error, on a device that lives
 * on. Before, tiny's launch went into the step and the device layer refused it when
 * the scheduler queued it, as it did synthetic's fail_step (a spin too long). */
START_TEST(bad_launch_shape_refused_at_the_call)
{
	char dir[WL_PATH_MAX], msg[MSG_CAP];
	struct wl_env env = {0};
	struct wl_params p;
	struct wl_req *r;
	struct wl_exec *x;
	struct wl_arena host, dev;
	struct wl_step st;
	struct wl_out out;
	void *hmem = malloc(1 << 16), *dmem;

	tiny_loaded(dir, &env);
	ck_assert_msg(wl_load_dir(CL_BUILTIN_DIR, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(wl_exec_create(&x, env.dev, 1), 0);
	ck_assert_int_eq(dev_alloc(env.dev, 1 << 16, &dmem), 0);
	wl_arena_init(&host, hmem, 1 << 16);
	wl_arena_init(&dev, dmem, 1 << 16);
	ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
	r = tiny_req(&env, "seed=985,tokens=1");
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), -EINVAL);
	ck_assert_uint_eq(st.n, 0);
	/* what the worker's log line of the failed build says */
	ck_assert_str_eq(st.why, "spin: ns 3601000000000 above an hour");
	wl_req_destroy(r);

	wl_params_init(&p);
	ck_assert_int_eq(wl_params_parse(&p, "tokens=2,device_us=0,fail_step=0", msg, sizeof(msg)),
			 0);
	ck_assert_msg(wl_req_create(&r, &env, "synthetic", &p, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
	ck_assert_int_eq(wl_req_build(r, &st, 0, &out), 0);
	ck_assert_uint_eq(st.n, 3); /* the bad token's copy, the kernel, the token's copy */
	ck_assert_str_eq(st.why, ""); /* a good build leaves no reason behind */
	for (uint32_t i = 0; i < st.n; i++)
		ck_assert_int_eq(wl_task_check(&st.tasks[i], msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_exec_run(x, &st), -EINVAL); /* the kernel's, when it ran */
	ck_assert(!dev_lost(env.dev));
	ck_assert_int_eq(dev_last_error(env.dev, msg, sizeof(msg)), -EINVAL);
	ck_assert_str_eq(msg, "embed: token 1 outside vocab 1");
	dev_clear_error(env.dev);
	wl_req_destroy(r);
	wl_exec_destroy(x);
	dev_free(env.dev, dmem);
	free(hmem);
	tiny_unloaded(dir, &env);
}
END_TEST

/* A copy task into the step's host arena must stay inside the token (and payload) of
 * the request being built: tiny, seed 989, copies 8 bytes into its 4-byte token, whose
 * next 4 bytes are the token of the request built after it in the same step (tiny, seed
 * 988, which writes its token on the host in its build). That copy is refused -EINVAL,
 * failing seed 989's build alone, and the other request's token stays its own. */
START_TEST(copy_past_the_token_refused)
{
	char dir[WL_PATH_MAX];
	struct wl_env env = {0};
	struct wl_req *over, *other;
	struct wl_exec *x;
	struct wl_arena host, dev;
	struct wl_step st;
	struct wl_out out_over, out_other;
	uint64_t tok;
	int rc_over;
	void *hmem = malloc(1 << 16), *dmem;

	tiny_loaded(dir, &env);
	ck_assert_int_eq(wl_exec_create(&x, env.dev, 1), 0);
	ck_assert_int_eq(dev_alloc(env.dev, 1 << 16, &dmem), 0);
	over = tiny_req(&env, "seed=989,tokens=1");
	other = tiny_req(&env, "seed=988,tokens=1");
	wl_arena_init(&host, hmem, 1 << 16);
	wl_arena_init(&dev, dmem, 1 << 16);
	ck_assert_int_eq(wl_step_init(&st, &host, &dev, 8), 0);
	rc_over = wl_req_build(over, &st, 0, &out_over);
	ck_assert_int_eq(wl_req_build(other, &st, rc_over ? 0 : 1, &out_other), 0);
	ck_assert_int_eq(wl_exec_run(x, &st), 0);
	ck_assert_int_eq(wl_req_token(other, &out_other, &tok), 0);
	ck_assert_uint_eq(tok, 988 * 7);
	ck_assert_int_eq(rc_over, -EINVAL);
	ck_assert_uint_eq(st.n, 0); /* the refused build left nothing; the other adds none */
	wl_req_destroy(over);
	wl_req_destroy(other);
	wl_exec_destroy(x);
	dev_free(env.dev, dmem);
	free(hmem);
	tiny_unloaded(dir, &env);
}
END_TEST

/* Each broken variant is refused with its reason, naming its file. */
START_TEST(broken_refused)
{
	static const struct {
		const char *variant;
		int err;
		const char *what;
	} cases[] = {
	    {"tc_abi", -EINVAL, "ABI version 99, this chipd loads 2"},
	    {"tc_no_entry", -EINVAL, "no symbol chipd_callable_v2"},
	    {"tc_init", -EINVAL, "init failed: broken on purpose"},
	    {"tc_table", -EINVAL, "its name is not"},
	    /* called as the entry it would crash the loader (chipd, the supervisor) */
	    {"tc_data", -EINVAL, "chipd_callable_v2 is a data symbol, not a function"},
	};
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], good[WL_PATH_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tmpdir_make(dir, sizeof(dir));
		/* a good one first: it is unloaded again when the later one is refused */
		put(dir, CL_BUILTIN_DIR "/gemm.so", "a_gemm.so", 0755, good, sizeof(good));
		put_test(dir, cases[i].variant, "b_broken.so", path, sizeof(path));
		expect_refused(dir, cases[i].err, path, cases[i].what);
		tmpdir_remove(dir);
	}
}
END_TEST

START_TEST(duplicate_refused)
{
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], gemm[WL_PATH_MAX];

	tmpdir_make(dir, sizeof(dir));
	put(dir, CL_BUILTIN_DIR "/gemm.so", "gemm.so", 0755, gemm, sizeof(gemm));
	put_test(dir, "tc_dup", "other_gemm.so", path, sizeof(path));
	expect_refused(dir, -EEXIST, path, "workload \"gemm\" is already loaded from");
	tmpdir_remove(dir);
}
END_TEST

/* The checks sudo and systemd make, on the file and on the directory. */
START_TEST(paths_refused)
{
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], link[WL_PATH_MAX + 8];

	tmpdir_make(dir, sizeof(dir));
	expect_refused(dir, -ENOENT, dir, "no callable (*.so) in the directory");

	put_test(dir, "tc_good", "tiny.so", path, sizeof(path));
	ck_assert_int_eq(chmod(path, 0775), 0);
	expect_refused(dir, -EPERM, path, "writable by group or others (mode 0775)");
	ck_assert_int_eq(chmod(path, 0757), 0);
	expect_refused(dir, -EPERM, path, "writable by group or others (mode 0757)");
	ck_assert_int_eq(chmod(path, 0755), 0);

	ck_assert_int_eq(chmod(dir, 0777), 0);
	expect_refused(dir, -EPERM, dir, "writable by group or others (mode 0777)");
	ck_assert_int_eq(chmod(dir, 0700), 0);

	if (geteuid() == 0) { /* another owner: only root can make one */
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		expect_refused(dir, -EPERM, path, "owned by uid 65534");
		ck_assert_int_eq(chown(path, 0, 0), 0);
	}

	ck_assert_int_eq(unlink(path), 0);
	snprintf(link, sizeof(link), "%s/link.so", dir);
	ck_assert_int_eq(symlink(CL_BUILTIN_DIR "/gemm.so", link), 0);
	expect_refused(dir, -EPERM, link, "not a regular file");
	ck_assert_int_eq(unlink(link), 0);

	put(dir, "/dev/null", "empty.so", 0644, path, sizeof(path));
	expect_refused(dir, -EINVAL, path, ".so: cannot load: file too short");
	tmpdir_remove(dir);

	expect_refused("/nonexistent/chipd-callables", -ENOENT, "/nonexistent/chipd-callables",
		       "No such file or directory");
}
END_TEST

/* Runs chipd with @argv (and CHIPD_CALLABLES=@env when not NULL); its exit status, its
 * stderr in @err. */
static int run_chipd(const char *const *argv, const char *env, char *err, size_t cap)
{
	int pfd[2], status;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		if (env)
			setenv("CHIPD_CALLABLES", env, 1);
		else
			unsetenv("CHIPD_CALLABLES");
		setenv("CHIPD_INSTANCE", "cl-test", 1);
		execv(CHIPD_BIN, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (used + 1 < cap && (n = read(pfd[0], err + used, cap - 1 - used)) > 0)
		used += (size_t)n;
	err[used] = '\0';
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(chipd_refuses_to_start)
{
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], err[4096];
	const char *flag[] = {"chipd", "--foreground", "--callables", dir, NULL};
	const char *plain[] = {"chipd", "--foreground", NULL};
	const char *few[] = {"chipd", "--foreground", "--max-callables", "1", NULL};

	tmpdir_make(dir, sizeof(dir));
	put_test(dir, "tc_abi", "old.so", path, sizeof(path));
	ck_assert_int_eq(run_chipd(flag, NULL, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, path) && strstr(err, "ABI version 99"), "%s", err);
	ck_assert_int_eq(run_chipd(plain, dir, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, path) && strstr(err, "ABI version 99"), "%s", err);
	tmpdir_remove(dir);
	/* more callables than --max-callables: the message names the option */
	ck_assert_int_eq(run_chipd(few, NULL, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "more than 1 workloads (the limit) (chipd --max-callables 1)"),
		      "%s", err);
}
END_TEST

/* One file loaded and unloaded at run time (wl_load_file, wl_unload): under its own
 * name and under another (one copy of the library), not while a request holds it,
 * a relative path and a bad name refused, the limit (wl_set_limit). */
START_TEST(load_and_unload_one)
{
	char dir[WL_PATH_MAX], path[WL_PATH_MAX], msg[MSG_CAP];
	struct wl_env env = {0};
	struct wl_params p;
	struct wl_req *r;

	tmpdir_make(dir, sizeof(dir));
	put_test(dir, "tc_good", "tiny.so", path, sizeof(path));
	ck_assert_msg(wl_load_dir(CL_BUILTIN_DIR, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(wl_load_file("tiny.so", NULL, msg, sizeof(msg)), -EINVAL);
	ck_assert_msg(strstr(msg, "not an absolute path"), "%s", msg);
	ck_assert_int_eq(wl_load_file(path, "Bad-Name", msg, sizeof(msg)), -EINVAL);
	ck_assert_msg(wl_load_file(path, NULL, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(wl_load_file(path, "tiny_two", msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_uint_eq(wl_count(), 5);
	ck_assert_str_eq(wl_names()[4], "tiny_two");
	/* a request holds "tiny": refused busy until it is destroyed */
	wl_params_init(&p);
	ck_assert_int_eq(dev_open(&env.dev, DEV_SIM, 0, NULL, 0), 0);
	ck_assert_msg(wl_req_create(&r, &env, "tiny", &p, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(wl_unload("tiny", msg, sizeof(msg)), -EBUSY);
	ck_assert_str_eq(msg, "workload \"tiny\" has 1 requests in use");
	wl_req_destroy(r);
	ck_assert_int_eq(wl_unload("tiny", msg, sizeof(msg)), 0);
	ck_assert_int_eq(wl_unload("tiny", msg, sizeof(msg)), -ENOENT);
	ck_assert_int_eq(wl_param_table("tiny", &(const struct wl_param_info *){NULL}), -ENOENT);
	/* the other name still runs (the library stayed loaded for it) */
	ck_assert_msg(wl_req_create(&r, &env, "tiny_two", &p, msg, sizeof(msg)) == 0, "%s", msg);
	wl_req_destroy(r);
	dev_close(env.dev);
	/* the limit: 4 loaded, a fifth refused */
	ck_assert_int_eq(wl_set_limit(3), -EINVAL);
	ck_assert_int_eq(wl_set_limit(4), 0);
	ck_assert_int_eq(wl_load_file(path, NULL, msg, sizeof(msg)), -ENOSPC);
	ck_assert_msg(strstr(msg, "more than 4 workloads (the limit)"), "%s", msg);
	ck_assert_int_eq(wl_set_limit(5), 0);
	ck_assert_msg(wl_load_file(path, NULL, msg, sizeof(msg)) == 0, "%s", msg);
	tmpdir_remove(dir);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"load_and_unload_one", load_and_unload_one},
	    {"builtins_load", builtins_load},
	    {"own_callable_runs", own_callable_runs},
	    {"kv_give_returns_only_what_the_request_holds",
	     kv_give_returns_only_what_the_request_holds},
	    {"null_task_memory_refused_at_the_call", null_task_memory_refused_at_the_call},
	    {"bad_launch_shape_refused_at_the_call", bad_launch_shape_refused_at_the_call},
	    {"hook_failing_silently_is_named", hook_failing_silently_is_named},
	    {"copy_past_the_token_refused", copy_past_the_token_refused},
	    {"broken_refused", broken_refused},
	    {"duplicate_refused", duplicate_refused},
	    {"paths_refused", paths_refused},
	    {"chipd_refuses_to_start", chipd_refuses_to_start},
	};
	Suite *s = suite_create("callables");

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return tu_run(s);
}
