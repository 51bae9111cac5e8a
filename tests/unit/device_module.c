/* device_module.c - modules on the sim device (dev_module_load, dev_module_func,
 * dev_launch_func): a shared object's functions found by name, run once per block on
 * the stream they were launched on, their arguments copied at the launch; and the
 * sim's GPU model holds for them as for the built-in kernels: the current device per
 * thread, a failed stream skipping later work, a lost device refusing every call. */
#include "device.h"
#include "tc_kernels.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#ifndef TC_KERNELS_SIM
#error "TC_KERNELS_SIM: the tests' sim kernel file"
#endif

void device_add_module_tcases(Suite *s);

static struct dev *open_index(int index)
{
	struct dev *d;

	ck_assert_int_eq(dev_open(&d, DEV_SIM, index, NULL, 0), 0);
	return d;
}

/* @d's last error holds @what. */
static void expect_error(struct dev *d, const char *what)
{
	char msg[DEV_ERRMSG_MAX];

	dev_last_error(d, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, what), "'%s' does not say '%s'", msg, what);
}

static struct dev_func *fill_of(struct dev *d, struct dev_module **m)
{
	struct dev_func *f;

	ck_assert_int_eq(dev_module_load(d, TC_KERNELS_SIM, m), 0);
	ck_assert_int_eq(dev_module_func(*m, "tc_fill", &f), 0);
	return f;
}

START_TEST(module_loads_and_finds_by_name)
{
	struct dev *d = open_index(0);
	struct dev_module *m;
	struct dev_func *f;

	ck_assert_int_eq(dev_module_load(d, "/nonexistent/k_sim.so", &m), -ENOENT);
	ck_assert_ptr_null(m);
	expect_error(d, "/nonexistent/k_sim.so");
	ck_assert_int_eq(dev_module_load(d, "/dev/null", &m), -EINVAL);
	expect_error(d, "sim: /dev/null: ");
	f = fill_of(d, &m);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(dev_live(d), 1); /* a module is live until unloaded */
	ck_assert_int_eq(dev_module_func(m, "tc_nope", &f), -ENOENT);
	ck_assert_ptr_null(f);
	expect_error(d, "no function \"tc_nope\"");
	dev_module_unload(m);
	dev_module_unload(NULL);
	ck_assert_uint_eq(dev_live(d), 0);
	dev_close(d);
}
END_TEST

/* Every block runs (x fastest, then y, z), each thread of it writes its element. */
START_TEST(function_runs_once_per_block)
{
	struct dev *d = open_index(0);
	struct dev_module *m;
	struct dev_func *f = fill_of(d, &m);
	struct dev_stream *s;
	const struct dev_dims dims = {{3, 2, 2}, {2, 2, 1}, 0};
	int32_t *out, host[48];
	struct tc_fill_args a;

	ck_assert_int_eq(dev_alloc(d, sizeof(host), (void **)&out), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	a = (struct tc_fill_args){out, 100, 0};
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), 0);
	ck_assert_int_eq(dev_copy(d, s, host, out, sizeof(host), DEV_D2H), 0);
	ck_assert_int_eq(dev_stream_sync(s), 0);
	for (int i = 0; i < 48; i++)
		ck_assert_int_eq(host[i], 100 + i);
	dev_stream_destroy(s);
	dev_free(d, out);
	dev_module_unload(m);
	dev_close(d);
}
END_TEST

/* The arguments are the launch's copy: the caller's struct may change at once (lazy
 * mode: nothing runs before the sync). */
START_TEST(arguments_are_copied_at_the_launch)
{
	struct dev *d = open_index(0);
	struct dev_module *m;
	struct dev_func *f;
	struct dev_stream *s;
	const struct dev_dims dims = {{1, 1, 1}, {4, 1, 1}, 0};
	int32_t *out, host[4];
	struct tc_fill_args a;

	ck_assert_int_eq(dev_sim_set_lazy(d, true), 0);
	f = fill_of(d, &m);
	ck_assert_int_eq(dev_alloc(d, sizeof(host), (void **)&out), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	a = (struct tc_fill_args){out, 7, 0};
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), 0);
	a.base = 1000;
	a.out = NULL;
	ck_assert_int_eq(dev_copy(d, s, host, out, sizeof(host), DEV_D2H), 0);
	ck_assert_int_eq(dev_stream_sync(s), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(host[i], 7 + i);
	dev_stream_destroy(s);
	dev_free(d, out);
	dev_module_unload(m);
	dev_close(d);
}
END_TEST

/* Dims and arguments out of range are refused at the launch, naming what is wrong. */
START_TEST(bad_launches_refused)
{
	static const struct {
		struct dev_dims dims;
		const char *what;
	} cases[] = {
	    {{{0, 1, 1}, {1, 1, 1}, 0}, "grid x 0 is outside 1..2147483647"},
	    {{{0x80000000u, 1, 1}, {1, 1, 1}, 0}, "grid x 2147483648"},
	    {{{1, 65536, 1}, {1, 1, 1}, 0}, "grid y 65536 is outside 1..65535"},
	    {{{1, 1, 65536}, {1, 1, 1}, 0}, "grid z 65536"},
	    {{{1, 1, 1}, {0, 1, 1}, 0}, "block x 0 is outside 1..1024"},
	    {{{1, 1, 1}, {1, 1025, 1}, 0}, "block y 1025"},
	    {{{1, 1, 1}, {1, 1, 65}, 0}, "block z 65 is outside 1..64"},
	    {{{1, 1, 1}, {64, 32, 1}, 0}, "a block of 2048 threads exceeds 1024"},
	    {{{1, 1, 1}, {1, 1, 1}, 49153}, "49153 bytes of shared memory exceed 49152"},
	};
	static const struct dev_dims ok = {{1, 1, 1}, {1, 1, 1}, 0};
	struct dev *d = open_index(0);
	struct dev_module *m;
	struct dev_func *f = fill_of(d, &m);
	struct dev_stream *s;
	struct tc_fill_args a = {NULL, 0, 0};
	char big[DEV_FUNC_ARGS_MAX + 1] = {0};

	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(dev_launch_func(s, f, &cases[i].dims, &a, sizeof(a)), -EINVAL);
		expect_error(d, cases[i].what);
	}
	ck_assert_int_eq(dev_launch_func(s, f, &ok, &a, 0), -EINVAL);
	expect_error(d, "arguments of 0 bytes (1..4096)");
	ck_assert_int_eq(dev_launch_func(s, f, &ok, big, sizeof(big)), -EINVAL);
	expect_error(d, "arguments of 4097 bytes");
	ck_assert_int_eq(dev_launch_func(s, NULL, &ok, &a, sizeof(a)), -EINVAL);
	ck_assert_int_eq(dev_launch_func(NULL, f, &ok, &a, sizeof(a)), -EINVAL);
	ck_assert_int_eq(dev_stream_sync(s), 0); /* nothing was queued */
	dev_stream_destroy(s);
	dev_module_unload(m);
	dev_close(d);
}
END_TEST

/* A function of device 0 on a stream of device 1, and a launch from a thread whose
 * current device is another: refused, as a GPU runtime fails them. */
START_TEST(launch_checks_device_and_current)
{
	struct dev *d0 = open_index(0), *d1 = open_index(1);
	struct dev_module *m0, *m1;
	struct dev_func *f0, *f1;
	struct dev_stream *s1;
	const struct dev_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
	int32_t *out;
	struct tc_fill_args a;

	ck_assert_int_eq(dev_select(d0), 0);
	f0 = fill_of(d0, &m0);
	f1 = fill_of(d1, &m1); /* loading selects d1 */
	ck_assert_int_eq(dev_alloc(d1, sizeof(int32_t), (void **)&out), 0);
	ck_assert_int_eq(dev_stream_create(d1, &s1), 0);
	a = (struct tc_fill_args){out, 5, 0};
	ck_assert_int_eq(dev_launch_func(s1, f0, &dims, &a, sizeof(a)), -EINVAL);
	expect_error(d1, "a function of another device");
	ck_assert_int_eq(dev_select(d0), 0);
	ck_assert_int_eq(dev_launch_func(s1, f1, &dims, &a, sizeof(a)), -ENXIO);
	expect_error(d1, "dev_select first");
	ck_assert_int_eq(dev_select(d1), 0);
	ck_assert_int_eq(dev_launch_func(s1, f1, &dims, &a, sizeof(a)), 0);
	ck_assert_int_eq(dev_stream_sync(s1), 0);
	dev_stream_destroy(s1);
	dev_free(d1, out);
	dev_module_unload(m1);
	dev_module_unload(m0);
	dev_close(d1);
	dev_close(d0);
}
END_TEST

/* A failed stream skips the functions queued after its fault; a lost device refuses
 * loads and launches. */
START_TEST(failed_stream_and_lost_device)
{
	struct dev *d = open_index(0);
	struct dev_module *m, *m2;
	struct dev_func *f = fill_of(d, &m);
	struct dev_stream *s;
	const struct dev_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
	int32_t *out, host = -1;
	struct tc_fill_args a;

	ck_assert_int_eq(dev_alloc(d, sizeof(int32_t), (void **)&out), 0);
	ck_assert_int_eq(dev_copy(d, NULL, out, &host, sizeof(host), DEV_H2D), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	a = (struct tc_fill_args){out, 9, 0};
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_KERNEL), 0);
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), 0); /* the fault */
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), 0); /* skipped */
	ck_assert_int_eq(dev_stream_sync(s), -EIO);
	ck_assert_int_eq(dev_copy(d, NULL, &host, out, sizeof(host), DEV_D2H), 0);
	ck_assert_int_eq(host, -1);
	dev_stream_destroy(s);

	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_STICKY), 0);
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), 0);
	ck_assert_int_eq(dev_stream_sync(s), DEV_ERR_LOST);
	ck_assert_int_eq(dev_launch_func(s, f, &dims, &a, sizeof(a)), DEV_ERR_LOST);
	ck_assert_int_eq(dev_module_load(d, TC_KERNELS_SIM, &m2), DEV_ERR_LOST);
	ck_assert_ptr_null(m2);
	dev_stream_destroy(s);
	dev_free(d, out);
	dev_module_unload(m);
	dev_close(d);
}
END_TEST

void device_add_module_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"module_loads_and_finds_by_name", module_loads_and_finds_by_name},
	    {"function_runs_once_per_block", function_runs_once_per_block},
	    {"arguments_are_copied_at_the_launch", arguments_are_copied_at_the_launch},
	    {"bad_launches_refused", bad_launches_refused},
	    {"launch_checks_device_and_current", launch_checks_device_and_current},
	    {"failed_stream_and_lost_device", failed_stream_and_lost_device},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
