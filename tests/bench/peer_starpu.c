/* peer_starpu.c - empty tasks through StarPU (see peer_starpu.h). */
#include "peer_starpu.h"

#include "wait.h"

#include <errno.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* StarPU 1.3's default policy: locality work stealing. */
#define PS_SCHED "lws"

struct peer_starpu {
	struct starpu_task *tasks; /* one step; caller-owned (destroy = 0), cleaned per step */
	unsigned step;
	const char *policy; /* the scheduling policy's name */
};

/* The empty task: what StarPU costs to schedule a task that does nothing. */
static void ps_empty(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
}

static struct starpu_codelet ps_codelet = {
    .cpu_funcs = {ps_empty},
    .nbuffers = 0,
    .name = "chipbench_empty",
};

int peer_starpu_open(struct peer_starpu **out, unsigned ncpus, unsigned step, char *why, size_t cap)
{
	struct peer_starpu *p;
	struct starpu_conf conf;
	int err;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (p)
		p->tasks = calloc(step, sizeof(*p->tasks));
	if (!p || !p->tasks) {
		snprintf(why, cap, "out of memory");
		free(p);
		return -ENOMEM;
	}
	p->step = step;
	err = starpu_conf_init(&conf);
	if (err) {
		snprintf(why, cap, "starpu_conf_init: %d", err);
		goto err_free;
	}
	conf.precedence_over_environment_variables = 1;
	/* named, so that the report says which: StarPU 1.3's default unless STARPU_SCHED */
	conf.sched_policy_name = getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : PS_SCHED;
	conf.ncpus = (int)ncpus;
	conf.ncuda = 0;
	conf.nopencl = 0;
	conf.nmic = 0;
	conf.nmpi_ms = 0;
	err = starpu_init(&conf);
	if (err) {
		snprintf(why, cap, "starpu_init: %s",
			 err == -ENODEV ? "no worker can run" : strerror(-err));
		goto err_free;
	}
	p->policy = conf.sched_policy_name;
	*out = p;
	return 0;

err_free:
	free(p->tasks);
	free(p);
	return err < 0 ? err : -EIO;
}

/* Submits @n tasks (chained or not) and waits for them. 0 or a negative errno. */
static int ps_step(struct peer_starpu *p, unsigned n, bool chain)
{
	int err = 0;
	unsigned i;

	for (i = 0; i < n && !err; i++) {
		struct starpu_task *t = &p->tasks[i];

		starpu_task_init(t);
		t->cl = &ps_codelet;
		t->destroy = 0; /* the next task may name it as a dependency */
		if (chain && i > 0) {
			struct starpu_task *prev = &p->tasks[i - 1];

			starpu_task_declare_deps_array(t, 1, &prev);
		}
		err = starpu_task_submit(t);
	}
	if (starpu_task_wait_for_all() && !err)
		err = -EIO;
	while (i--)
		starpu_task_clean(&p->tasks[i]);
	return err;
}

double peer_starpu_run(struct peer_starpu *p, unsigned tasks, bool chain)
{
	uint64_t t0 = shm_now_ns();
	unsigned left = tasks;
	int err = 0;

	while (left && !err) {
		unsigned n = left < p->step ? left : p->step;

		err = ps_step(p, n, chain);
		left -= n;
	}
	if (err)
		return err;
	return (double)(shm_now_ns() - t0) / tasks;
}

void peer_starpu_describe(const struct peer_starpu *p, char *buf, size_t cap)
{
	int major, minor, release;

	starpu_get_version(&major, &minor, &release);
	snprintf(buf, cap, "StarPU %d.%d.%d, policy %s", major, minor, release, p->policy);
}

void peer_starpu_close(struct peer_starpu *p)
{
	if (!p)
		return;
	starpu_shutdown();
	free(p->tasks);
	free(p);
}
