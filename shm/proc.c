/* proc.c - process identity (pid + start time) and liveness checks. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* /proc/<pid>/stat is "pid (comm) state ppid ..."; comm may hold spaces and ')',
 * so fields are counted from the last ')'. starttime is field 22 overall, which is
 * the 20th field after the ')' (state is field 3). */
#define STAT_FIELDS_AFTER_COMM_TO_STARTTIME 20

/* Reads the state letter and start time of @pid. Returns false when the process
 * does not exist or its stat line cannot be parsed. */
static bool read_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';

	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == '\0')
		return false;
	*state = p[2];
	p++;
	for (int field = 0; field < STAT_FIELDS_AFTER_COMM_TO_STARTTIME; field++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	*start = v;
	return true;
}

uint64_t shm_proc_start_time(pid_t pid)
{
	char state;
	uint64_t start;

	return read_stat(pid, &state, &start) ? start : 0;
}

/* Per-process identity cache. These are the only process-wide mutable variables of
 * the shm layer: fork() gives the child a copy, which the atfork handler clears. */
static _Atomic pid_t cached_pid;
static _Atomic uint64_t cached_start;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_identity(void)
{
	atomic_store_explicit(&cached_pid, 0, memory_order_relaxed);
	atomic_store_explicit(&cached_start, 0, memory_order_relaxed);
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_identity);
}

pid_t shm_proc_self(void)
{
	pid_t pid = atomic_load_explicit(&cached_pid, memory_order_relaxed);

	if (pid == 0) {
		pthread_once(&atfork_once, register_atfork);
		pid = getpid();
		atomic_store_explicit(&cached_pid, pid, memory_order_relaxed);
	}
	return pid;
}

uint64_t shm_proc_self_start_time(void)
{
	uint64_t start = atomic_load_explicit(&cached_start, memory_order_relaxed);

	if (start == 0) {
		start = shm_proc_start_time(shm_proc_self());
		atomic_store_explicit(&cached_start, start, memory_order_relaxed);
	}
	return start;
}

bool shm_proc_alive(pid_t pid, uint64_t start)
{
	char state;
	uint64_t now;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	/* The pid exists (EPERM included). A zombie ('Z') or dying ('X') process can
	 * never touch shared memory again, so it counts as dead before its parent
	 * reaps it. A different start time means the pid was reused. */
	if (!read_stat(pid, &state, &now)) /* vanished meanwhile, or no /proc */
		return kill(pid, 0) == 0 || errno == EPERM;
	if (state == 'Z' || state == 'X')
		return false;
	return start == 0 || now == start;
}
