/* mode_idle.c - `chipbench idle`: what an idle node costs. A chipd with 2 sim
 * workers is started and left alone (after a settling pause, so start-up's work is
 * not counted) for --seconds; the CPU time (utime + stime of /proc/<pid>/stat, all
 * threads) of the supervisor, its spawner and the workers over that window is
 * reported as % of one core, and the resident memory (VmRSS of /proc/<pid>/status)
 * of the supervisor and each worker afterwards.
 *
 * Targets: CPU <= 1% of one core for the whole node; supervisor VmRSS <=
 * 16 MiB; a sim worker's VmRSS <= 32 MiB beyond what it is configured to hold (its
 * arena banks and KV pool, which the sim device keeps in host memory). This mode has
 * no same-run baseline: the targets are absolute budgets, printed with PASS/MISS. */
#include "modes.h"

#include "bench_args.h"
#include "bench_chipd.h"
#include "wrk.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ID_SETTLE_MS	 500 /* after readiness: workers finish their own set-up */
#define ID_CPU_PCT_MAX	 1.0
#define ID_SUP_RSS_MAX	 (16ull << 20)
#define ID_WRK_RSS_EXTRA (32ull << 20)
#define ID_CHIPS	 2u
#define ID_BANKS	 "2"
#define ID_KV_BLOCKS	 "4096"

/* One process of the node. */
struct id_proc {
	char role[24];
	pid_t pid;
	int rc;
	unsigned long long ticks0, ticks1; /* utime + stime */
	double cpu_pct;
	unsigned long long rss, anon, shmem; /* bytes */
};

/* Reads ppid and utime + stime of @pid. Returns 0 or -errno. */
static int id_stat(pid_t pid, pid_t *ppid, unsigned long long *ticks)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	int pp;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &pp, &ut,
			 &st) != 3)
		return -EBADMSG;
	if (ppid)
		*ppid = pp;
	if (ticks)
		*ticks = (unsigned long long)ut + st;
	return 0;
}

/* Reads VmRSS, RssAnon and RssShmem of @p->pid. Returns 0 or -errno. */
static int id_status(struct id_proc *p)
{
	char path[64], line[256];
	unsigned long long kb;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			p->rss = kb << 10;
		else if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			p->anon = kb << 10;
		else if (sscanf(line, "RssShmem: %llu kB", &kb) == 1)
			p->shmem = kb << 10;
	}
	fclose(f);
	return p->rss ? 0 : -EBADMSG;
}

/* The first child of @parent found in /proc that is not in @skip (n entries), or 0. */
static pid_t id_child_of(pid_t parent, const pid_t *skip, unsigned n)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	if (!dir)
		return 0;
	while (!found && (e = readdir(dir))) {
		pid_t pid, pp = 0;
		bool skipped = false;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		for (unsigned i = 0; i < n; i++)
			skipped |= skip[i] == pid;
		if (!skipped && id_stat(pid, &pp, NULL) == 0 && pp == parent)
			found = pid;
	}
	closedir(dir);
	return found;
}

static void id_usage(FILE *f)
{
	fputs("usage: chipbench idle [--chipd PATH] [--seconds S] [--json]\n"
	      "  an idle chipd with 2 sim workers for S seconds (default 10): CPU of the\n"
	      "  supervisor, spawner and workers as % of one core; VmRSS of the supervisor\n"
	      "  and the workers; PASS/MISS against the idle targets\n",
	      f);
}

static const char *id_verdict(bool ok)
{
	return ok ? "PASS" : "MISS";
}

int mode_idle(int argc, char **argv)
{
	static const char *const extra[] = {"--banks", ID_BANKS, "--kv-blocks", ID_KV_BLOCKS, NULL};
	struct id_proc procs[2 + ID_CHIPS];
	struct chipd_status *st = NULL;
	struct chipd_error err;
	struct wrk_config wc;
	struct bench_chipd d;
	const char *bin = NULL;
	double seconds = 10, total_pct = 0;
	unsigned long long configured, wrk_rss_max = 0;
	bool json = false, cpu_ok, sup_ok, wrk_ok;
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t t0, t1;
	unsigned np = 0;
	const struct bench_arg args[] = {
	    {"chipd", BENCH_ARG_STRING, &bin},
	    {"seconds", BENCH_ARG_DOUBLE, &seconds, 0, 3600},
	    {"json", BENCH_ARG_FLAG, &json},
	};
	int rc =
	    bench_args_parse(argc, argv, "idle", args, sizeof(args) / sizeof(args[0]), id_usage);

	if (rc)
		return rc == 1 ? 0 : rc;
	/* the table's range takes 0; the window needs some time */
	if (!(seconds > 0))
		return bench_args_error("idle", id_usage, "--seconds: '%g' is not more than 0",
					seconds);
	if (hz <= 0) {
		fprintf(stderr, "chipbench idle: no clock tick rate (sysconf _SC_CLK_TCK)\n");
		return 1;
	}
	rc = 1;
	/* what a worker holds by configuration: wrk_config_default's bank sizes, with the
	 * banks and KV blocks passed to chipd here (the sim device's memory is host memory) */
	wrk_config_default(&wc);
	wc.nbanks = (uint32_t)atoi(ID_BANKS);
	wc.kv_blocks = (uint32_t)atoi(ID_KV_BLOCKS);
	configured = (unsigned long long)wc.nbanks * (wc.bank_host_bytes + wc.bank_dev_bytes) +
		     (unsigned long long)wc.kv_blocks * wc.kv_block_floats * sizeof(float);

	memset(procs, 0, sizeof(procs));
	st = calloc(1, sizeof(*st));
	if (!st || bench_chipd_start(&d, bench_chipd_bin(bin), "idle", ID_CHIPS, extra)) {
		free(st);
		return 1;
	}
	if (chipd_status(d.conn, BENCH_CHIPD_CALL_MS, st, &err) || st->nchips != ID_CHIPS) {
		fprintf(stderr, "chipbench idle: status: %s\n", err.message);
		goto out_stop;
	}
	snprintf(procs[np].role, sizeof(procs[np].role), "supervisor");
	procs[np++].pid = d.pid;
	for (unsigned i = 0; i < ID_CHIPS; i++) {
		snprintf(procs[np].role, sizeof(procs[np].role), "worker %u (sim)", i);
		procs[np++].pid = (pid_t)st->chips[i].pid;
	}
	/* the spawner: the supervisor's child that is not a worker */
	{
		pid_t skip[ID_CHIPS] = {procs[1].pid, procs[2].pid};

		snprintf(procs[np].role, sizeof(procs[np].role), "spawner");
		procs[np].pid = id_child_of(d.pid, skip, ID_CHIPS);
		if (procs[np].pid)
			np++;
		else
			fprintf(stderr, "chipbench idle: no spawner found: not counted\n");
	}

	nanosleep(&(struct timespec){.tv_sec = ID_SETTLE_MS / 1000,
				     .tv_nsec = (ID_SETTLE_MS % 1000) * 1000000L},
		  NULL);
	t0 = bench_chipd_now_ns();
	for (unsigned i = 0; i < np; i++)
		procs[i].rc = id_stat(procs[i].pid, NULL, &procs[i].ticks0);
	nanosleep(&(struct timespec){.tv_sec = (time_t)seconds,
				     .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)},
		  NULL);
	for (unsigned i = 0; i < np; i++)
		if (!procs[i].rc)
			procs[i].rc = id_stat(procs[i].pid, NULL, &procs[i].ticks1);
	t1 = bench_chipd_now_ns();
	for (unsigned i = 0; i < np; i++) {
		struct id_proc *p = &procs[i];

		if (!p->rc)
			p->rc = id_status(p);
		if (p->rc) {
			fprintf(stderr, "chipbench idle: %s (pid %d): %s\n", p->role, (int)p->pid,
				strerror(-p->rc));
			goto out_stop;
		}
		p->cpu_pct = 100.0 * (double)(p->ticks1 - p->ticks0) / (double)hz /
			     ((double)(t1 - t0) / 1e9);
		total_pct += p->cpu_pct;
		if (strncmp(p->role, "worker", 6) == 0 && p->rss > wrk_rss_max)
			wrk_rss_max = p->rss;
	}
	/* the same workers throughout: none died and was restarted while measured */
	if (chipd_status(d.conn, BENCH_CHIPD_CALL_MS, st, &err) ||
	    (pid_t)st->chips[0].pid != procs[1].pid || (pid_t)st->chips[1].pid != procs[2].pid) {
		fprintf(stderr, "chipbench idle: the workers changed while measured\n");
		goto out_stop;
	}
	cpu_ok = total_pct <= ID_CPU_PCT_MAX;
	sup_ok = procs[0].rss <= ID_SUP_RSS_MAX;
	wrk_ok = wrk_rss_max <= configured + ID_WRK_RSS_EXTRA;

	if (json) {
		printf("{\"mode\": \"idle\", \"chips\": %u, \"seconds\": %.3f, \"clk_tck\": %ld, "
		       "\"worker_configured_bytes\": %llu, \"procs\": [",
		       ID_CHIPS, (double)(t1 - t0) / 1e9, hz, configured);
		for (unsigned i = 0; i < np; i++)
			printf("%s\n    {\"role\": \"%s\", \"pid\": %d, \"cpu_pct\": %.3f, "
			       "\"vmrss\": %llu, \"rss_anon\": %llu, \"rss_shmem\": %llu}",
			       i ? "," : "", procs[i].role, (int)procs[i].pid, procs[i].cpu_pct,
			       procs[i].rss, procs[i].anon, procs[i].shmem);
		printf("\n  ], \"cpu_pct_total\": %.3f, \"targets\": {\"cpu\": \"%s\", "
		       "\"supervisor_rss\": \"%s\", \"worker_rss\": \"%s\"}}\n",
		       total_pct, id_verdict(cpu_ok), id_verdict(sup_ok), id_verdict(wrk_ok));
	} else {
		printf("idle: chipd, %u sim workers, idle %.1f s (after %d ms settling); CPU from "
		       "/proc/<pid>/stat at %ld ticks/s\n",
		       ID_CHIPS, (double)(t1 - t0) / 1e9, ID_SETTLE_MS, hz);
		printf("%-16s %8s %9s %10s %10s %10s\n", "process", "pid", "CPU %", "VmRSS",
		       "RssAnon", "RssShmem");
		for (unsigned i = 0; i < np; i++)
			printf("%-16s %8d %8.2f%% %7.1fMiB %7.1fMiB %7.1fMiB\n", procs[i].role,
			       (int)procs[i].pid, procs[i].cpu_pct, procs[i].rss / 1048576.0,
			       procs[i].anon / 1048576.0, procs[i].shmem / 1048576.0);
		printf("worker configured: %u banks x (%zu KiB host + %zu KiB device arena) + KV "
		       "%u blocks x %u floats = %.1f MiB\n",
		       wc.nbanks, wc.bank_host_bytes >> 10, wc.bank_dev_bytes >> 10, wc.kv_blocks,
		       wc.kv_block_floats, configured / 1048576.0);
		printf("target: node CPU <= %.1f%% of one core: %.2f%% %s\n", ID_CPU_PCT_MAX,
		       total_pct, id_verdict(cpu_ok));
		printf("target: supervisor VmRSS <= %llu MiB: %.1f MiB %s\n", ID_SUP_RSS_MAX >> 20,
		       procs[0].rss / 1048576.0, id_verdict(sup_ok));
		printf("target: worker VmRSS <= configured + %llu MiB = %.1f MiB: %.1f MiB (the "
		       "larger) %s\n",
		       ID_WRK_RSS_EXTRA >> 20, (configured + ID_WRK_RSS_EXTRA) / 1048576.0,
		       wrk_rss_max / 1048576.0, id_verdict(wrk_ok));
	}
	rc = 0;
out_stop:
	if (bench_chipd_stop(&d, NULL)) {
		fprintf(stderr, "chipbench idle: chipd did not stop cleanly\n");
		rc = 1;
	}
	free(st);
	return rc;
}
