/* sup_config.h - chipd's one resolved configuration (chipd(8), OPTIONS).
 *
 * Built once at start from a fixed order of sources: command-line flags, then CHIPD_*
 * variables, then the scheduler's environment (Slurm, GPU visibility masks), then
 * defaults. Every value remembers where it came from; `chipd --print-config` prints
 * each with its source. Nothing reads the environment after sup_config_load.
 */
#ifndef CHIPD_SUP_CONFIG_H
#define CHIPD_SUP_CONFIG_H

#include "chipd.h"
#include "sup_log.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SUP_PATH_MAX 256
/* A visible device's name as its mask gives it: an index, or a UUID such as
 * "GPU-8c6d1a2e-..." or "MIG-GPU-.../1/0" (44 bytes). */
#define SUP_GPU_ID_MAX 64
/* --crash-limit's bound: struct sup_worker keeps that many recent deaths. */
#define SUP_CRASH_LIMIT_MAX 16
#define SUP_MAX_CALLABLES_MAX 4096 /* --max-callables */
/* --banks' bound: the worker's WRK_MAX_BANKS. */
#define SUP_BANKS_MAX 8
/* Per-request limits (--max-request-*). The defaults admit every request of the docs,
 * tests and benchmarks with room to spare, and refuse a request whose weights alone
 * would take seconds to fill; the steps' default and bound is the most any workload
 * makes (synthetic's 2^20 tokens). */
#define SUP_REQUEST_HOST_BYTES_DEFAULT	 (256ull << 20)
#define SUP_REQUEST_DEVICE_BYTES_DEFAULT (1ull << 30)
#define SUP_REQUEST_BYTES_MAX		 (1ull << 50)
#define SUP_REQUEST_STEPS_MAX		 (1ull << 20)

/* --max-clients: each connection costs the supervisor two descriptors (the socket and
 * the client's pidfd); the default fits the usual 4096 descriptors with room. */
#define SUP_MAX_CLIENTS_DEFAULT 128u
#define SUP_MAX_CLIENTS_MAX	4096u /* PROTO_NODE_MAX_CLIENTS */

enum sup_source { SUP_SRC_DEFAULT = 0, SUP_SRC_FLAG, SUP_SRC_ENV, SUP_SRC_SCHEDULER };

/* The device layer a chip's worker opens. The supervisor never opens a device (a
 * forked child of a process that did is unusable); the worker turns this into the
 * device layer's own kind after fork (sup_workers.c), so the configuration needs
 * nothing of kernels/. */
enum sup_backend { SUP_BACKEND_SIM = 0, SUP_BACKEND_HIP };

/* Each field has a twin in struct sup_sources telling where its value came from. */
struct sup_config {
	char instance[CHIPD_INSTANCE_MAX]; /* --instance, CHIPD_INSTANCE, SLURM_JOB_ID, "default" */
	enum sup_backend backend;	   /* --backend sim|hip, CHIPD_BACKEND; default sim */
	uint32_t chips;			   /* --chips N, CHIPD_CHIPS; hip: from the masks */
	/* hip: the device ordinal of each chip (the i-th visible device); sim: -1 */
	int32_t gpus[CHIPD_MAX_CHIPS];
	/* hip: the device each chip gets as the mask names it ("2", a UUID), for logs and
	 * print-config; "" when only a count was known */
	char gpu_ids[CHIPD_MAX_CHIPS][SUP_GPU_ID_MAX];
	char gpu_env[32];     /* the variable that gave them ("CUDA_VISIBLE_DEVICES"); "" none */
	uint32_t queue;	      /* --queue: per-worker admission queue, CHIPD_QUEUE; 64 */
	uint32_t max_pending; /* --max-pending: the router's bound, CHIPD_MAX_PENDING; 256 */
	/* --max-clients: connections of the handshake socket, CHIPD_MAX_CLIENTS; 128: one
	 * client region each, made at start (docs/protocol.md §8.7) */
	uint32_t max_clients;
	/* --max-client-pending, --max-client-rings (CHIPD_MAX_CLIENT_*): what one client
	 * process may hold of the node's requests in flight and token rings; 128 each */
	uint32_t max_client_pending, max_client_rings;
	/* --max-client-slots (CHIPD_MAX_CLIENT_SLOTS): the slots of each client region's
	 * mailbox, so the requests one connection may have in flight at once; 16 */
	uint32_t max_client_slots;
	/* --client-data-kib (CHIPD_CLIENT_DATA_KIB): KiB of each client region's data
	 * area, the input and output bytes of its requests; 1024, 0: none */
	uint32_t client_data_kib;
	uint32_t banks;		      /* --banks, CHIPD_BANKS; 2 */
	bool no_overlap;	      /* --no-overlap, CHIPD_NO_OVERLAP=1 */
	bool foreground;	      /* --foreground, CHIPD_FOREGROUND=1 (else detach) */
	enum sup_log_level log_level; /* --log-level error|warn|info|debug, CHIPD_LOG_LEVEL */
	int notify_fd;		      /* --notify-fd N; -1 none */
	char trace[SUP_PATH_MAX];     /* --trace FILE, CHIPD_TRACE; "" none */
	/* --callables DIR, CHIPD_CALLABLES: the callables loaded at start; "" the
	 * built-ins' directory (sup_main.c: wl_default_dir) */
	char callables[SUP_PATH_MAX];
	/* --max-callables N, CHIPD_MAX_CALLABLES: callables held at once (those of
	 * --callables and the registered ones); 64 */
	uint32_t max_callables;
	/* --callable-crash-limit K, CHIPD_CALLABLE_CRASH_LIMIT: worker deaths with a
	 * registered callable's request in flight after which it is quarantined; 3 */
	uint32_t callable_crash_limit;
	char pidfile[SUP_PATH_MAX];	/* --pidfile, CHIPD_PIDFILE; default in runtime_dir */
	char runtime_dir[SUP_PATH_MAX]; /* CHIPD_RUNTIME_DIR, XDG_RUNTIME_DIR, /run/user/UID,
					 * /tmp/chipd-UID; must be private (sup_files.h) */
	/* --allow-group GROUP, CHIPD_ALLOW_GROUP: members of the group may use the node
	 * (sup_admit.c); the group's name as found (or the number given); "" none */
	char allow_group[64];
	gid_t allow_gid;	  /* its gid, when allow_group is not "" */
	uint32_t grace_ms;	  /* --grace-ms, CHIPD_GRACE_MS; 10000 */
	uint32_t heartbeat_ms;	  /* --heartbeat-ms, CHIPD_HEARTBEAT_MS; 500 */
	uint32_t stuck_ms;	  /* --stuck-ms, CHIPD_STUCK_MS; 5000 (no heartbeat) */
	uint32_t progress_ms;	  /* --progress-ms, CHIPD_PROGRESS_MS; 5000 (O/S stalled) */
	uint32_t fill_ms;	  /* --fill-ms, CHIPD_FILL_MS; 600000 (one fill, L stuck) */
	uint32_t backoff_min_ms;  /* --backoff-min-ms, CHIPD_BACKOFF_MIN_MS; 100 */
	uint32_t backoff_max_ms;  /* --backoff-max-ms, CHIPD_BACKOFF_MAX_MS; 5000 */
	uint32_t crash_limit;	  /* --crash-limit K, CHIPD_CRASH_LIMIT; 5 */
	uint32_t crash_window_ms; /* --crash-window-ms T, CHIPD_CRASH_WINDOW_MS; 30000 */
	uint32_t kv_blocks;	  /* --kv-blocks, CHIPD_KV_BLOCKS; per worker, 4096 */
	/* --max-request-host-bytes, --max-request-device-bytes, --max-request-steps and
	 * their CHIPD_MAX_REQUEST_* variables: what one request may cost (the worker
	 * refuses more with bad_request); defaults above */
	uint64_t max_request_host_bytes, max_request_device_bytes, max_request_steps;
	uint32_t watchdog_usec;		  /* WATCHDOG_USEC from the environment; 0 none */
	char notify_socket[SUP_PATH_MAX]; /* NOTIFY_SOCKET; "" none */
	bool print_config;		  /* --print-config: print and exit */
};

struct sup_sources {
	enum sup_source instance, backend, chips, queue, max_pending, max_clients,
	    max_client_pending, max_client_rings, max_client_slots, client_data_kib, banks,
	    no_overlap, foreground,
	    log_level, notify_fd, trace, callables, max_callables, callable_crash_limit, pidfile, runtime_dir, allow_group, grace_ms,
	    heartbeat_ms, stuck_ms, progress_ms, fill_ms, backoff_min_ms, backoff_max_ms, crash_limit,
	    crash_window_ms, kv_blocks, max_request_host_bytes, max_request_device_bytes,
	    max_request_steps, watchdog_usec, notify_socket, gpus;
};

/* The source's name: "default", "flag", "env", "scheduler". */
const char *sup_source_name(enum sup_source s);

/* The backend's name as --backend takes it: "sim", "hip". */
const char *sup_backend_name(enum sup_backend b);

/* Builds the configuration from @argc/@argv and the environment. Returns 0; 1 when
 * --help or --version was printed on stdout (exit 0); -EINVAL with a one-line message
 * in @msg (@cap bytes) naming the flag or variable for a bad flag or value (exit 64).
 * Reads, besides the CHIPD_* variables: SLURM_JOB_ID (the instance), for --backend hip
 * HIP_VISIBLE_DEVICES, else ROCR_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES (worker i
 * gets ordinal i of that
 * list; the masks are never stacked), else SLURM_GPUS_ON_NODE (a count);
 * XDG_RUNTIME_DIR (else /run/user/UID when it is a directory, else /tmp/chipd-UID:
 * looked at, never created here); systemd's NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (another
 * process's watchdog is not ours: watchdog_usec stays 0). An empty CHIPD_* variable
 * counts as unset; relative --pidfile and --trace paths are made absolute against the
 * working directory. --no-overlap forces banks to 1. Uses getopt_long (resets it
 * first), so it is not thread-safe. */
int sup_config_load(struct sup_config *cfg, struct sup_sources *src, int argc, char **argv,
		    char *msg, size_t cap);

/* Prints every value with its source, one "name = value (source)" per line. */
void sup_config_print(const struct sup_config *cfg, const struct sup_sources *src, FILE *out);

#endif
