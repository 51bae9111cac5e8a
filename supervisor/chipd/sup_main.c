/* sup_main.c - chipd, the node supervisor: resolve the configuration, guard the
 * instance (pid file), create the node region, fork one worker per chip before any
 * thread starts, serve clients on the router thread and supervise on the event loop
 * until stopped; then end the workers, unlink the region, exit 0.
 *
 * Exit status: 0 after a clean stop; 1 a failure at start (the runtime directory not
 * private included) or no worker could start; 64 bad usage; 70 the spawner died
 * (SUP_EXIT_SPAWNER_LOST); 73 the instance is already served (pid file or live
 * region). */
#include "sup.h"
#include "sup_spawner.h"
#include "sup_clstat.h"
#include "sup_files.h"
#include "sup_log.h"
#include "sup_probe.h"
#include "sup_register.h"
#include "sup_notify.h"

#include "proto.h"
#include "wait.h"
#include "wl.h"

#include <errno.h>
#include <fcntl.h>
#include <libutil.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 64
#define EXIT_BUSY  73

static struct sup g_sup;
/* detached: where the log goes once chipd is ready (sup_detached_ready) */
static char g_log_path[SUP_PATH_MAX + 64];

/* Guards one supervisor per instance. Returns 0, or the exit status. */
static int take_pidfile(struct sup *s)
{
	pid_t other = 0;

	s->pidfh = pidfile_open(s->cfg.pidfile, 0600, &other);
	if (s->pidfh)
		return 0;
	if (errno == EEXIST) {
		fprintf(stderr,
			"chipd: instance \"%s\" is already served by pid %d (pid file %s)\n",
			s->cfg.instance, (int)other, s->cfg.pidfile);
		return EXIT_BUSY;
	}
	fprintf(stderr, "chipd: pid file %s: %s\n", s->cfg.pidfile, strerror(errno));
	return 1;
}

static int create_region(struct sup *s)
{
	struct proto_node_config nc;
	struct shm_diag diag = {0};
	int rc;

	rc = shm_region_name(s->region_name, sizeof(s->region_name), (unsigned)getuid(),
			     s->cfg.instance);
	if (rc) {
		fprintf(stderr, "chipd: instance \"%s\": not a valid name\n", s->cfg.instance);
		return EXIT_USAGE;
	}
	proto_node_config_default(&nc, s->cfg.chips);
	/* one client region per connection the node allows, each with a mailbox of the
	 * per-client bound's size (docs/protocol.md §8.7) */
	nc.nclients = s->cfg.max_clients;
	nc.data_bytes = (uint64_t)s->cfg.client_data_kib * 1024u;
	nc.mbox_slots = s->cfg.max_client_slots;
	rc = proto_node_create(&s->node, s->region_name, &nc, SHM_CREATE_RECLAIM_STALE, &diag);
	if (rc == -EEXIST) {
		/* The pid file was ours, yet another chipd serves the instance: it runs with
		 * another --pidfile, or its pid file was removed. */
		pid_t other = shm_region_holder(s->region_name);

		if (other > 0)
			fprintf(stderr,
				"chipd: instance \"%s\" is already served by pid %d (its region %s "
				"is in use; that chipd does not use pid file %s)\n",
				s->cfg.instance, (int)other, s->region_name, s->cfg.pidfile);
		else
			fprintf(stderr, "chipd: instance \"%s\" is already served: %s\n",
				s->cfg.instance, diag.msg);
		return EXIT_BUSY;
	}
	if (rc) {
		fprintf(stderr, "chipd: cannot create %s: %s\n", s->region_name,
			diag.msg[0] ? diag.msg : strerror(-rc));
		return 1;
	}
	/* before READY: a member of the group maps it read-only, nobody else at all */
	if (s->cfg.allow_group[0] &&
	    (rc = shm_region_share_group(&s->node.region, s->cfg.allow_gid, &diag)) != 0) {
		fprintf(stderr, "chipd: --allow-group %s: %s\n", s->cfg.allow_group, diag.msg);
		proto_node_detach(&s->node);
		shm_region_unlink(s->region_name);
		return 1;
	}
	for (uint32_t i = 0; i < s->cfg.chips; i++)
		s->node.dir[i].chip = i;
	return 0;
}

/* Says why the detached log @path cannot be used (@rc from sup_file_append): for a file
 * that is not ours alone, or not a regular file at all (a directory: -EISDIR), what it
 * is and what it must be. */
static void log_refused(const char *path, int rc)
{
	struct stat st;

	if (lstat(path, &st) == 0 && (rc == -EPERM || !S_ISREG(st.st_mode)))
		fprintf(stderr,
			"chipd: log file %s: %s of uid %u, mode %04o: refusing it (it must be a "
			"regular file of uid %u with mode 0600 or stricter; remove it)\n",
			path, S_ISREG(st.st_mode) ? "a file" : "not a regular file",
			(unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
	else
		fprintf(stderr, "chipd: log file %s: %s\n", path, strerror(-rc));
}

/* SIGTERM, SIGINT, SIGQUIT, SIGHUP and SIGCHLD are the event loop's (a signalfd): blocked from
 * before the pid file is taken, so a SIGTERM at any moment of the start stops chipd
 * through the loop (pid file and region removed, exit 0) instead of killing it; the
 * spawner and the workers inherit the mask. */
static void block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The detaching parent: waits for the child's ready byte on @fd (true) or the end of
 * the pipe (false). A SIGTERM, SIGINT or SIGQUIT meanwhile (one pending since before the fork
 * included: they stay blocked here) is the child's: it is passed on, and the child
 * stops through its loop, so a caller's timeout or Ctrl-C (the child has a session of
 * its own) stops chipd and does not leave it running detached. */
static bool wait_ready(pid_t pid, int fd)
{
	sigset_t set;
	char c;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	for (;;) {
		struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		struct signalfd_siginfo si;

		if (poll(pf, sfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sfd >= 0 && (pf[1].revents & POLLIN) &&
		    read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			kill(pid, (int)si.ssi_signo);
		if (pf[0].revents)
			break;
	}
	if (sfd >= 0)
		close(sfd);
	return read(fd, &c, 1) == 1;
}

/* Detaches from the terminal: the parent waits until the child is ready (exit 0) or
 * has exited, and then exits with the child's status (1 when that was 0 or a signal:
 * it never became ready), so `chipd && chipctl ...` works and a second chipd on a
 * served instance exits 73 detached too. Returns in the child. */
static void detach(struct sup *s)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0) {
		perror("chipd: pipe");
		exit(1);
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("chipd: fork");
		exit(1);
	}
	if (pid > 0) {
		int status;

		close(p[1]);
		if (wait_ready(pid, p[0]))
			exit(0);
		/* End of file without the ready byte: the child exited (its processes hold
		 * the pipe only while it lives: they die with it) */
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status))
			exit(WEXITSTATUS(status));
		exit(1);
	}
	close(p[0]);
	s->daemon_fd = p[1];
	setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	/* Until ready, errors still reach the caller on stderr; then stdout and stderr
	 * become this file (sup_detached_ready), and at once in the spawner and the
	 * workers, which live on: nothing of chipd keeps the caller's pipes open. */
	snprintf(g_log_path, sizeof(g_log_path), "%s/chipd.%u.%s.log", s->cfg.runtime_dir,
		 (unsigned)geteuid(), s->cfg.instance);
	s->log_fd = sup_file_append(g_log_path);
	if (s->log_fd < 0) {
		log_refused(g_log_path, s->log_fd);
		pidfile_remove(s->pidfh); /* the instance is not served: no pid file stays */
		exit(1);
	}
}

void sup_detached_ready(struct sup *s)
{
	if (s->log_fd >= 0) {
		SUP_INFO(-1, 0, "ready; the log goes on in %s", g_log_path);
		dup2(s->log_fd, STDOUT_FILENO);
		dup2(s->log_fd, STDERR_FILENO);
		close(s->log_fd);
		s->log_fd = -1;
	}
	if (s->daemon_fd >= 0) {
		sup_notify_fd(s->daemon_fd);
		s->daemon_fd = -1;
	}
}

/* Descriptors chipd holds beside its clients': the pid file, the log, the event loop's
 * (signalfd, timerfd, eventfd, io_uring), the spawner's socket and pidfd, the handshake
 * socket and its spare, and room for those open for a while (a trace's files, a
 * registered library); and one pidfd per worker. */
#define SUP_FD_RESERVE 64u

/* Each client connection costs three descriptors (the socket, the client's pidfd and
 * its client region's memfd, held from start): the soft limit is raised towards the
 * hard one to hold --max-clients of them, and the bound is lowered (with a warning)
 * where the hard limit cannot. A limit that holds not one client stops the start (1).
 * Before the regions are made. */
static int fit_fd_limit(struct sup *s)
{
	struct rlimit rl;
	rlim_t rest = SUP_FD_RESERVE + s->cfg.chips;
	rlim_t need = 3 * (rlim_t)s->cfg.max_clients + rest;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return 0;
	rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_cur < rest + 3) {
		SUP_ERR(-1, 0,
			"descriptor limit %llu holds no client: %u chips and one client need %llu "
			"(raise it: ulimit -n, LimitNOFILE=)",
			(unsigned long long)rl.rlim_cur, s->cfg.chips,
			(unsigned long long)(rest + 3));
		return 1;
	}
	uint32_t fit = (uint32_t)((rl.rlim_cur - rest) / 3);

	SUP_WARN(-1, 0, "descriptor limit %llu holds %u clients, not max-clients=%u",
		 (unsigned long long)rl.rlim_cur, fit, s->cfg.max_clients);
	s->cfg.max_clients = fit;
	return 0;
}

static void cleanup(struct sup *s)
{
	sup_router_stop(s);
	sup_conn_close_all(s);
	pthread_mutex_lock(&s->lock);
	/* streams nobody could end are ended here, cancelled as every stream the stop's
	 * grace left open (docs/protocol.md 8.4, drain); every stream's outcome is
	 * counted (one that ended since the last sweep too) */
	for (uint32_t i = 0; i < s->nreqs; i++)
		if (s->reqs[i].used)
			sup_table_end(s, &s->reqs[i], CHIPD_E_CANCELLED);
	pthread_mutex_unlock(&s->lock);
	atomic_store_explicit(&s->sup_state, CHIPD_SUP_STOPPED, memory_order_release);
	shm_region_set_state(&s->node.region, SHM_STATE_STOPPED);
	shm_region_unlink(s->region_name);
	sup_spawner_stop(s);
	if (s->loop_wake_fd >= 0)
		close(s->loop_wake_fd);
	s->loop_wake_fd = -1;
	sup_workers_free(s);
	sup_table_free(s);
	sup_clstat_free(s);
	sup_register_free(s);
	proto_node_detach(&s->node);
	if (s->pidfh)
		pidfile_remove(s->pidfh);
}

/* Loads the workloads before anything else: the workers, forked later, inherit them.
 * A callable refused (docs/callables.md, "Loading"), or its own kernels (as far as
 * they can be checked without the chips' devices: "Own kernels"), stops the start
 * with a message naming its file. */
static int load_callables(const struct sup_config *cfg)
{
	char dir[WL_PATH_MAX], msg[WL_MSG_MAX + WL_PATH_MAX];
	int rc;

	if (cfg->callables[0])
		snprintf(dir, sizeof(dir), "%s", cfg->callables);
	else
		wl_default_dir(dir, sizeof(dir));
	rc = wl_load_dir(dir, msg, sizeof(msg));
	if (rc == -ENOSPC) { /* the option that sets the limit, as a registration names it */
		fprintf(stderr, "chipd: %s (chipd --max-callables %u)\n", msg, cfg->max_callables);
		return 1;
	}
	if (rc == 0)
		rc = wl_kernels_check(cfg->backend == SUP_BACKEND_HIP ? DEV_HIP : DEV_SIM, msg,
				      sizeof(msg));
	if (rc)
		fprintf(stderr, "chipd: %s\n", msg);
	return rc ? 1 : 0;
}

/* One line per loaded callable, once the start got past the instance checks. */
static void log_callables(void)
{
	for (const char *const *name = wl_names(); *name; name++) {
		const char *path = "?";
		uint32_t version = 0;

		(void)wl_callable_info(*name, &version, &path);
		SUP_INFO(-1, 0, "callable %s version %u loaded from %s", *name, version, path);
	}
}

/* --trace FILE is written at the stop, under a fresh name beside FILE and renamed
 * (sup_trace.c): a FILE that is a directory, or a directory that takes no new file,
 * would lose the whole run's trace at its end, so either stops the start (1), before
 * the instance is taken. */
static int check_trace_file(const char *path)
{
	char tmp[sizeof(((struct sup_config *)0)->trace) + 8];
	struct stat st;
	size_t len;
	int fd;

	if (!path[0])
		return 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "chipd: trace file %s: is a directory\n", path);
		return 1;
	}
	len = strnlen(path, sizeof(tmp) - sizeof(".XXXXXX")); /* the config's: shorter */
	memcpy(tmp, path, len);
	memcpy(tmp + len, ".XXXXXX", sizeof(".XXXXXX"));
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "chipd: trace file %s: cannot write beside it: %s\n", path,
			strerror(errno));
		return 1;
	}
	close(fd);
	unlink(tmp);
	return 0;
}

int main(int argc, char **argv, char **envp)
{
	struct sup *s = &g_sup;
	char msg[256];
	int rc;

	/* a registration's probe of a callable (sup_probe.c), not a supervisor */
	if (argc > 1 && strcmp(argv[1], SUP_PROBE_ARG) == 0)
		return sup_probe_main(argc, argv);
	sup_std_fds_hold();
	setproctitle_init(argc, argv, envp);
	rc = sup_config_load(&s->cfg, &s->src, argc, argv, msg, sizeof(msg));
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "chipd: %s\n(see chipd --help)\n", msg);
		return EXIT_USAGE;
	}
	if (s->cfg.print_config) {
		sup_config_print(&s->cfg, &s->src, stdout);
		return 0;
	}
	sup_log_init(s->cfg.log_level, "chipd");
	block_signals();
	(void)wl_set_limit(s->cfg.max_callables); /* nothing is loaded yet: cannot fail */
	rc = load_callables(&s->cfg);
	if (rc)
		return rc;
	s->notify_fd = s->cfg.notify_fd;
	s->daemon_fd = -1;
	s->log_fd = -1;
	s->spawn_fd = -1;
	s->spawner_pidfd = -1;
	s->listen_fd = -1;
	s->spare_fd = -1;
	/* the pid file, the detached log and the trace parts have predictable names:
	 * only a directory nobody else can write is safe for them */
	rc = sup_rundir_check_group(s->cfg.runtime_dir,
				    s->cfg.allow_group[0] ? s->cfg.allow_gid : (gid_t)-1, msg,
				    sizeof(msg));
	if (rc) {
		fprintf(stderr, "chipd: %s\n", msg);
		return 1;
	}
	if (check_trace_file(s->cfg.trace))
		return 1;
	/* not dumpable (inherited by the spawner and the workers): /proc keeps every
	 * client region's memfd, and the mappings, from the other processes of the uid,
	 * so a client reaches no region but the one its hello brought (docs/protocol.md
	 * §8.7) */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		fprintf(stderr, "chipd: PR_SET_DUMPABLE: %s\n", strerror(errno));
	rc = take_pidfile(s);
	if (rc)
		return rc;
	/* only now that the instance is ours: a chipd refused above leaves the running
	 * one's directory to its group */
	if (s->cfg.allow_group[0] &&
	    sup_rundir_share(s->cfg.runtime_dir, s->cfg.allow_gid, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "chipd: %s\n", msg);
		pidfile_remove(s->pidfh);
		return 1;
	}
	if (!s->cfg.foreground)
		detach(s);
	if (pidfile_write(s->pidfh) != 0)
		SUP_WARN(-1, 0, "pid file %s: %s", s->cfg.pidfile, strerror(errno));
	/* a low descriptor, taken before the regions' many: the spare is of use only
	 * while every lower one is taken (sup_conn_accept) */
	s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fit_fd_limit(s)) {
		pidfile_remove(s->pidfh);
		return 1;
	}
	rc = create_region(s);
	if (rc) {
		pidfile_remove(s->pidfh);
		return rc;
	}
	s->pid = getpid();
	s->started_ns = shm_now_ns();
	atomic_store_explicit(&s->sup_state, CHIPD_SUP_STARTING, memory_order_relaxed);
	pthread_mutex_init(&s->lock, NULL);
	/* before any thread that may ask for the stop */
	s->loop_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = s->loop_wake_fd < 0 ? -errno : sup_table_init(s);
	if (rc == 0)
		rc = sup_clstat_init(s);
	if (rc == 0)
		rc = sup_workers_init(s);
	if (rc == 0) /* shared with every worker: mapped before the spawner is forked */
		rc = sup_register_init(s);
	/* the spawner is forked before any thread of ours starts (it forks the workers) */
	if (rc == 0)
		rc = sup_spawner_start(s);
	for (uint32_t i = 0; rc == 0 && i < s->cfg.chips; i++)
		rc = sup_worker_spawn(s, &s->workers[i]);
	/* bound after the spawner forked, by this process: its SO_PEERCRED is the region's
	 * creator, as clients check (docs/protocol.md §9) */
	if (rc == 0)
		rc = sup_conn_listen(s);
	if (rc == 0)
		rc = sup_router_start(s);
	if (rc) {
		SUP_ERR(-1, 0, "start-up failed: %s", strerror(-rc));
		for (uint32_t i = 0; i < s->cfg.chips; i++)
			if (s->workers[i].pid > 0)
				(void)sup_pidfd_signal(s->workers[i].pidfd, SIGKILL);
		cleanup(s);
		return 1;
	}
	setproctitle("supervisor (instance %s, %u chips)", s->cfg.instance, s->cfg.chips);
	log_callables();
	SUP_INFO(-1, 0, "starting: instance %s, backend %s, %u chips, pid %d", s->cfg.instance,
		 sup_backend_name(s->cfg.backend), s->cfg.chips, (int)s->pid);
	rc = sup_loop_run(s);
	cleanup(s);
	SUP_INFO(-1, 0, "stopped");
	return rc;
}
