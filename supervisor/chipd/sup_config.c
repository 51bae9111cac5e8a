/* sup_config.c - chipd's one resolved configuration. See sup_config.h.
 *
 * One table describes every value: its flag, its CHIPD_* variable, its field, its
 * range. Loading runs in the order of precedence turned inside out: defaults first,
 * then each value takes its flag if given, else its variable; then the values left at
 * their default ask the scheduler's environment (instance, chips, GPUs, runtime dir);
 * then derived values (pidfile, banks under --no-overlap) and cross-checks.
 */
#include "sup_config.h"
#include "sup_config_env.h"
#include "sup_files.h"

#include "node.h"
#include "region.h"
#include "xchg.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef CHIPD_VERSION
#define CHIPD_VERSION "0.1.0" /* sup_base.cmake passes the project's version */
#endif

/* The longest --kv-blocks: 2^20 blocks of 4096 floats are 16 GiB per worker. */
#define SUP_KV_BLOCKS_MAX (1u << 20)
/* --max-client-slots' default: each connection's own mailbox has this many slots (its
 * requests in flight at once); no client's use of them touches another's. */
#define SUP_MAX_CLIENT_SLOTS_DEFAULT PROTO_NODE_CLIENT_SLOTS
/* getopt_long's value for table entry i; above every short option's character. */
#define OPT_BASE 256

enum opt_kind {
	K_U32,
	K_U64,
	K_BOOL,
	K_FD,
	K_PATH,
	K_DIR,
	K_STR,
	K_INSTANCE,
	K_BACKEND,
	K_LEVEL,
	K_GPUS,
	K_GROUP
};

#define O_EMPTY_OK 1u /* "" is a valid value (none) */
#define O_NOPRINT  2u /* not a value of the configuration (--print-config) */

struct opt {
	const char *name; /* print-config's name: the field's */
	const char *flag; /* long option without "--"; NULL: none */
	const char *arg;  /* its argument in --help; NULL: a switch */
	const char *env;  /* its CHIPD_* variable; NULL: none */
	enum opt_kind kind;
	size_t off, size; /* the field in struct sup_config */
	ptrdiff_t src;	  /* its twin in struct sup_sources; -1: always the default */
	uint64_t min, max;
	unsigned flags;
	const char *help;
	const char *def; /* the default in --help, when not the default config's value */
};

#define FIELD(f) offsetof(struct sup_config, f), sizeof(((struct sup_config *)0)->f)
#define SRC(f)	 ((ptrdiff_t)offsetof(struct sup_sources, f))
#define NOSRC	 ((ptrdiff_t)-1)

static const struct opt opts[] = {
    {"instance", "instance", "NAME", "CHIPD_INSTANCE", K_INSTANCE, FIELD(instance), SRC(instance),
     0, 0, 0, "names the node region and the pidfile; [A-Za-z0-9._-]",
     "$SLURM_JOB_ID, else default"},
    {"backend", "backend", "sim|hip", "CHIPD_BACKEND", K_BACKEND, FIELD(backend), SRC(backend), 0,
     0, 0, "the device layer of the workers", NULL},
    {"chips", "chips", "N", "CHIPD_CHIPS", K_U32, FIELD(chips), SRC(chips), 1, CHIPD_MAX_CHIPS, 0,
     "workers, one per chip; hip: at most the visible GPUs", "sim: 2; hip: the visible GPUs"},
    {"gpus", NULL, NULL, NULL, K_GPUS, FIELD(gpus), SRC(gpus), 0, 0, 0, NULL, NULL},
    {"queue", "queue", "N", "CHIPD_QUEUE", K_U32, FIELD(queue), SRC(queue), 1, 4096, 0,
     "admitted requests waiting in each worker", NULL},
    {"max_pending", "max-pending", "N", "CHIPD_MAX_PENDING", K_U32, FIELD(max_pending),
     SRC(max_pending), 1, PROTO_NODE_MAX_RINGS, 0, "live requests of the node (the router)", NULL},
    {"max_clients", "max-clients", "N", "CHIPD_MAX_CLIENTS", K_U32, FIELD(max_clients),
     SRC(max_clients), 1, SUP_MAX_CLIENTS_MAX, 0,
     "connections of the handshake socket (client processes, each connection counted)", NULL},
    {"max_client_pending", "max-client-pending", "N", "CHIPD_MAX_CLIENT_PENDING", K_U32,
     FIELD(max_client_pending), SRC(max_client_pending), 1, PROTO_NODE_MAX_RINGS, 0,
     "live requests of one client process", NULL},
    {"max_client_rings", "max-client-rings", "N", "CHIPD_MAX_CLIENT_RINGS", K_U32,
     FIELD(max_client_rings), SRC(max_client_rings), 1, PROTO_NODE_MAX_RINGS, 0,
     "token rings one client process holds (streams in flight or ended and not yet read)", NULL},
    {"client_data_kib", "client-data-kib", "N", "CHIPD_CLIENT_DATA_KIB", K_U32,
     FIELD(client_data_kib), SRC(client_data_kib), 0, PROTO_XCHG_DATA_MAX / 1024, 0,
     "KiB of each connection's data area (request input and output bytes; 0: none)", NULL},
    {"max_client_slots", "max-client-slots", "N", "CHIPD_MAX_CLIENT_SLOTS", K_U32,
     FIELD(max_client_slots), SRC(max_client_slots), 1, PROTO_NODE_SLOTS, 0,
     "slots of each connection's own mailbox (in its client region): its requests in flight "
     "at once; one more is answered queue_full by libchipd, retryable",
     NULL},
    {"banks", "banks", "N", "CHIPD_BANKS", K_U32, FIELD(banks), SRC(banks), 1, SUP_BANKS_MAX, 0,
     "arena banks per worker (2: build one step while the last runs; more: a slow "
     "request leaves the others banks to run in)",
     NULL},
    {"no_overlap", "no-overlap", NULL, "CHIPD_NO_OVERLAP", K_BOOL, FIELD(no_overlap),
     SRC(no_overlap), 0, 0, 0, "the baseline: one bank, O waits for S (forces banks 1)", NULL},
    {"foreground", "foreground", NULL, "CHIPD_FOREGROUND", K_BOOL, FIELD(foreground),
     SRC(foreground), 0, 0, 0, "stay in the foreground (else detach)", NULL},
    {"log_level", "log-level", "LEVEL", "CHIPD_LOG_LEVEL", K_LEVEL, FIELD(log_level),
     SRC(log_level), 0, 0, 0, "error, warn, info or debug", NULL},
    {"notify_fd", "notify-fd", "FD", NULL, K_FD, FIELD(notify_fd), SRC(notify_fd), 0, INT_MAX, 0,
     "s6 readiness: write a newline to FD when ready, then close it", "none"},
    {"trace", "trace", "FILE", "CHIPD_TRACE", K_PATH, FIELD(trace), SRC(trace), 0, 0, O_EMPTY_OK,
     "record a trace of the run into FILE (Chrome JSON)", "none"},
    {"callables", "callables", "DIR", "CHIPD_CALLABLES", K_PATH, FIELD(callables), SRC(callables),
     0, 0, O_EMPTY_OK,
     "load every callable (*.so) of DIR before the node is ready (docs/callables.md)",
     "the built-in callables' directory"},
    {"max_callables", "max-callables", "N", "CHIPD_MAX_CALLABLES", K_U32, FIELD(max_callables),
     SRC(max_callables), 1, SUP_MAX_CALLABLES_MAX, 0,
     "callables the node holds at once, loaded at start and registered (chipctl register)", NULL},
    {"callable_crash_limit", "callable-crash-limit", "K", "CHIPD_CALLABLE_CRASH_LIMIT", K_U32,
     FIELD(callable_crash_limit), SRC(callable_crash_limit), 1, 1000, 0,
     "a registered callable in flight on K worker deaths is unregistered (quarantined)", NULL},
    {"pidfile", "pidfile", "FILE", "CHIPD_PIDFILE", K_PATH, FIELD(pidfile), SRC(pidfile), 0, 0, 0,
     "guards one supervisor per instance", "RUNTIME_DIR/chipd.UID.INSTANCE.pid"},
    {"runtime_dir", NULL, "DIR", "CHIPD_RUNTIME_DIR", K_DIR, FIELD(runtime_dir), SRC(runtime_dir),
     0, 0, 0,
     "private directory of the pidfile, the handshake socket, the detached log and trace parts",
     "$XDG_RUNTIME_DIR, else /run/user/UID, else /tmp/chipd-UID"},
    {"allow_group", "allow-group", "GROUP", "CHIPD_ALLOW_GROUP", K_GROUP, FIELD(allow_group),
     SRC(allow_group), 0, 0, 0,
     "let the members of GROUP (a name or a gid) use the node too: the node region "
     "becomes mode 0440 and the runtime directory 0750 and the socket 0660 of GROUP; "
     "not in a user's own runtime directory (XDG_RUNTIME_DIR, /run/user/UID: set "
     "CHIPD_RUNTIME_DIR); clients name chipd's user with CHIPD_USER",
     "none"},
    {"grace_ms", "grace-ms", "MS", "CHIPD_GRACE_MS", K_U32, FIELD(grace_ms), SRC(grace_ms), 0,
     600000, 0, "stop: time for in-flight requests before the workers are killed", NULL},
    {"heartbeat_ms", "heartbeat-ms", "MS", "CHIPD_HEARTBEAT_MS", K_U32, FIELD(heartbeat_ms),
     SRC(heartbeat_ms), 10, 60000, 0, "interval of the heartbeats to each worker", NULL},
    {"stuck_ms", "stuck-ms", "MS", "CHIPD_STUCK_MS", K_U32, FIELD(stuck_ms), SRC(stuck_ms), 100,
     600000, 0, "a worker without a heartbeat answer this long is killed", NULL},
    {"progress_ms", "progress-ms", "MS", "CHIPD_PROGRESS_MS", K_U32, FIELD(progress_ms),
     SRC(progress_ms), 100, 600000, 0,
     "a worker whose scheduler or orchestrator makes no progress this long with work "
     "pending is degraded and restarted",
     NULL},
    {"fill_ms", "fill-ms", "MS", "CHIPD_FILL_MS", K_U32, FIELD(fill_ms), SRC(fill_ms), 100,
     86400000, 0,
     "a worker whose loader is in one request's fill this long is degraded and restarted; "
     "that request ends timeout",
     NULL},
    {"backoff_min_ms", "backoff-min-ms", "MS", "CHIPD_BACKOFF_MIN_MS", K_U32, FIELD(backoff_min_ms),
     SRC(backoff_min_ms), 1, 3600000, 0,
     "first restart delay of a worker that died; it doubles after each death", NULL},
    {"backoff_max_ms", "backoff-max-ms", "MS", "CHIPD_BACKOFF_MAX_MS", K_U32, FIELD(backoff_max_ms),
     SRC(backoff_max_ms), 100, 3600000, 0, "cap of the restart delay", NULL},
    {"crash_limit", "crash-limit", "K", "CHIPD_CRASH_LIMIT", K_U32, FIELD(crash_limit),
     SRC(crash_limit), 1, SUP_CRASH_LIMIT_MAX, 0,
     "a chip that dies K times within the crash window is failed", NULL},
    {"crash_window_ms", "crash-window-ms", "MS", "CHIPD_CRASH_WINDOW_MS", K_U32,
     FIELD(crash_window_ms), SRC(crash_window_ms), 1000, 86400000, 0, "the crash window", NULL},
    {"kv_blocks", "kv-blocks", "N", "CHIPD_KV_BLOCKS", K_U32, FIELD(kv_blocks), SRC(kv_blocks), 1,
     SUP_KV_BLOCKS_MAX, 0, "KV cache blocks of each worker", NULL},
    {"max_request_host_bytes", "max-request-host-bytes", "BYTES", "CHIPD_MAX_REQUEST_HOST_BYTES",
     K_U64, FIELD(max_request_host_bytes), SRC(max_request_host_bytes), 1, SUP_REQUEST_BYTES_MAX, 0,
     "a request whose host memory (weights staged while loading) exceeds this is refused", NULL},
    {"max_request_device_bytes", "max-request-device-bytes", "BYTES",
     "CHIPD_MAX_REQUEST_DEVICE_BYTES", K_U64, FIELD(max_request_device_bytes),
     SRC(max_request_device_bytes), 1, SUP_REQUEST_BYTES_MAX, 0,
     "a request whose device memory, KV blocks aside, exceeds this is refused", NULL},
    {"max_request_steps", "max-request-steps", "N", "CHIPD_MAX_REQUEST_STEPS", K_U64,
     FIELD(max_request_steps), SRC(max_request_steps), 1, SUP_REQUEST_STEPS_MAX, 0,
     "a request of more steps (tokens, after max_tokens) than this is refused", NULL},
    {"watchdog_usec", NULL, NULL, NULL, K_U32, FIELD(watchdog_usec), SRC(watchdog_usec), 0, 0, 0,
     NULL, NULL},
    {"notify_socket", NULL, NULL, NULL, K_STR, FIELD(notify_socket), SRC(notify_socket), 0, 0,
     O_EMPTY_OK, NULL, NULL},
    {"print_config", "print-config", NULL, NULL, K_BOOL, FIELD(print_config), NOSRC, 0, 0,
     O_NOPRINT, "print every value with its source, then exit", NULL},
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static const char *const source_names[] = {"default", "flag", "env", "scheduler"};

const char *sup_source_name(enum sup_source s)
{
	return (unsigned)s < sizeof(source_names) / sizeof(source_names[0]) ? source_names[s] : "?";
}

static const char *const backend_names[] = {[SUP_BACKEND_SIM] = "sim", [SUP_BACKEND_HIP] = "hip"};

const char *sup_backend_name(enum sup_backend b)
{
	return (unsigned)b < sizeof(backend_names) / sizeof(backend_names[0]) ? backend_names[b]
									      : "?";
}

static int parse_backend(const char *s, enum sup_backend *out)
{
	for (size_t i = 0; i < sizeof(backend_names) / sizeof(backend_names[0]); i++) {
		if (strcmp(s, backend_names[i]) == 0) {
			*out = (enum sup_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

static const struct opt *opt_named(const char *name)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (strcmp(opts[i].name, name) == 0)
			return &opts[i];
	}
	abort(); /* a name of this file's own table */
}

static void *field(const struct opt *o, struct sup_config *cfg)
{
	return (char *)cfg + o->off;
}

static const void *cfield(const struct opt *o, const struct sup_config *cfg)
{
	return (const char *)cfg + o->off;
}

static enum sup_source source_of(const struct opt *o, const struct sup_sources *src)
{
	return o->src < 0 ? SUP_SRC_DEFAULT
			  : *(const enum sup_source *)((const char *)src + o->src);
}

static void set_source(const struct opt *o, struct sup_sources *src, enum sup_source s)
{
	if (o->src >= 0)
		*(enum sup_source *)((char *)src + o->src) = s;
}

int sup_config_fail(char *msg, size_t cap, const char *fmt, ...)
{
	if (msg && cap) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(msg, cap, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Where a value comes from, as an operator would write it: "--chips" or "CHIPD_CHIPS",
 * and how its value follows it (" " or "="). */
struct origin {
	char name[48];
	const char *sep;
};

static struct origin origin_of(const struct opt *o, enum sup_source s)
{
	struct origin w = {"", " = "};

	if (s == SUP_SRC_FLAG) {
		snprintf(w.name, sizeof(w.name), "--%s", o->flag);
		w.sep = " ";
	} else if (s == SUP_SRC_ENV && o->env) {
		snprintf(w.name, sizeof(w.name), "%s", o->env);
		w.sep = "=";
	} else {
		snprintf(w.name, sizeof(w.name), "%s", o->name);
	}
	return w;
}

static void defaults(struct sup_config *cfg, struct sup_sources *src)
{
	memset(cfg, 0, sizeof(*cfg));
	memset(src, 0, sizeof(*src)); /* SUP_SRC_DEFAULT is 0 */
	strcpy(cfg->instance, "default");
	cfg->backend = SUP_BACKEND_SIM;
	cfg->chips = 2;
	for (uint32_t i = 0; i < CHIPD_MAX_CHIPS; i++)
		cfg->gpus[i] = -1;
	cfg->queue = 64;
	cfg->max_pending = 256;
	cfg->max_clients = SUP_MAX_CLIENTS_DEFAULT;
	/* half of the node's defaults (--max-pending and its 256 rings): a client alone
	 * can run as many streams as chipbench e2e's 64 client threads in one process
	 * and more, and one client cannot take what every other client needs */
	cfg->max_client_pending = 128;
	cfg->max_client_rings = 128;
	cfg->max_client_slots = SUP_MAX_CLIENT_SLOTS_DEFAULT;
	cfg->client_data_kib = 1024;
	cfg->banks = 8;
	cfg->log_level = SUP_LOG_INFO;
	cfg->notify_fd = -1;
	strcpy(cfg->runtime_dir, "/tmp");
	cfg->grace_ms = 10000;
	cfg->heartbeat_ms = 500;
	cfg->stuck_ms = 5000;
	cfg->progress_ms = 5000;
	cfg->fill_ms = 600000;
	cfg->backoff_min_ms = 100;
	cfg->backoff_max_ms = 5000;
	cfg->crash_limit = 5;
	cfg->max_callables = 64;
	cfg->callable_crash_limit = 3;
	cfg->crash_window_ms = 30000;
	cfg->kv_blocks = 4096;
	cfg->max_request_host_bytes = SUP_REQUEST_HOST_BYTES_DEFAULT;
	cfg->max_request_device_bytes = SUP_REQUEST_DEVICE_BYTES_DEFAULT;
	cfg->max_request_steps = SUP_REQUEST_STEPS_MAX;
}

int sup_config_parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes"}, *const no[] = {"0", "false", "no"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
			*out = strcasecmp(s, yes[i]) == 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* Resolves group @v, a name or a numeric gid, into @cfg's allow_group (the group's
 * name when it has one) and allow_gid; NULL, or why not. */
static const char *parse_group(const char *v, struct sup_config *cfg)
{
	struct group gr, *found = NULL;
	char buf[4096];
	uint64_t u;

	if (sup_config_parse_u64(v, &u) == 0) {
		if (u >= (gid_t)-1)
			return "out of range";
		cfg->allow_gid = (gid_t)u;
		if (getgrgid_r((gid_t)u, &gr, buf, sizeof(buf), &found) == 0 && found &&
		    strlen(found->gr_name) < sizeof(cfg->allow_group))
			strcpy(cfg->allow_group, found->gr_name);
		else /* a gid without a name in the group database is still a gid */
			snprintf(cfg->allow_group, sizeof(cfg->allow_group), "%llu",
				 (unsigned long long)u);
		return NULL;
	}
	if (getgrnam_r(v, &gr, buf, sizeof(buf), &found) != 0 || !found)
		return "no such group";
	if (strlen(v) >= sizeof(cfg->allow_group))
		return "too long";
	strcpy(cfg->allow_group, v);
	cfg->allow_gid = found->gr_gid;
	return NULL;
}

/* Copies path @v into @out (@cap bytes), made absolute against the working directory
 * so that the daemon's later chdir("/") does not move it. */
static int absolute_path(const char *v, char *out, size_t cap)
{
	char cwd[PATH_MAX];
	int n;

	if (!*v || v[0] == '/')
		n = snprintf(out, cap, "%s", v);
	else if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	else
		n = snprintf(out, cap, "%s/%s", cwd, v);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Sets @o's field from the text @v that @from gave (@from_name: the variable, when
 * not @o's own), or says what is wrong with it, naming where it came from. */
static int apply(const struct opt *o, struct sup_config *cfg, struct sup_sources *src,
		 const char *v, enum sup_source from, const char *from_name, char *msg, size_t cap)
{
	struct origin w = origin_of(o, from);
	const char *why = NULL;
	char range[64], iwhy[96], ibad[128];
	uint64_t u = 0;
	void *f = field(o, cfg);
	int rc;

	if (from_name) {
		snprintf(w.name, sizeof(w.name), "%s", from_name);
		w.sep = "=";
	}
	if (!*v && !(o->flags & O_EMPTY_OK) && o->kind != K_INSTANCE)
		return sup_config_fail(msg, cap, "%s%s%s: empty", w.name, w.sep, v);
	switch (o->kind) {
	case K_U32:
	case K_U64:
	case K_FD:
		rc = sup_config_parse_u64(v, &u);
		snprintf(range, sizeof(range), "out of range %llu..%llu",
			 (unsigned long long)o->min, (unsigned long long)o->max);
		if (rc == -EINVAL)
			why = "not a number";
		else if (rc < 0 || u < o->min || u > o->max)
			why = range;
		else if (o->kind == K_U32)
			*(uint32_t *)f = (uint32_t)u;
		else if (o->kind == K_U64)
			*(uint64_t *)f = u;
		else if (fcntl((int)u, F_GETFD) < 0)
			/* an s6 notification fd is inherited: one that is not open is a typo */
			why = "not an open file descriptor";
		else
			*(int *)f = (int)u;
		break;
	case K_BOOL:
		if (parse_bool(v, f) < 0)
			why = "not a boolean (1/0, true/false, yes/no)";
		break;
	case K_INSTANCE:
		if (sup_config_check_instance(v, f, o->size, iwhy, sizeof(iwhy)) < 0) {
			snprintf(ibad, sizeof(ibad), "bad instance name: %s", iwhy);
			why = ibad;
		}
		break;
	case K_BACKEND:
		if (parse_backend(v, f) < 0)
			why = "unknown backend (sim or hip)";
		break;
	case K_LEVEL:
		if (sup_log_level_parse(v, f) < 0)
			why = "unknown log level (error, warn, info, debug)";
		break;
	case K_DIR:
	case K_PATH:
		rc = o->kind == K_DIR && v[0] != '/' ? -EINVAL : absolute_path(v, f, o->size);
		if (rc == -EINVAL)
			why = "not an absolute path";
		else if (rc == -ENAMETOOLONG)
			why = "path too long";
		else if (rc < 0)
			why = strerror(-rc);
		break;
	case K_STR:
		if (strlen(v) >= o->size)
			why = "too long";
		else
			strcpy(f, v);
		break;
	case K_GROUP:
		why = parse_group(v, cfg);
		break;
	case K_GPUS:
		abort(); /* never set from text */
	}
	if (why)
		return sup_config_fail(msg, cap, "%s%s%s: %s", w.name, w.sep, v, why);
	set_source(o, src, from);
	return 0;
}

/* Applies @name's value from the environment variable @var when it is set and not
 * empty, as source @from. Returns 0 (also when unset) or -EINVAL. */
static int apply_env(const char *name, const char *var, enum sup_source from,
		     struct sup_config *cfg, struct sup_sources *src, char *msg, size_t cap)
{
	const char *v = getenv(var);

	if (!v || !*v)
		return 0;
	return apply(opt_named(name), cfg, src, v, from, var, msg, cap);
}

/* Prints @o's value in @cfg: numbers as numbers, an empty string or fd as "none". */
static void print_value(const struct opt *o, const struct sup_config *cfg, FILE *out)
{
	const void *f = cfield(o, cfg);

	switch (o->kind) {
	case K_U32:
		fprintf(out, "%u", *(const uint32_t *)f);
		break;
	case K_U64:
		fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)f);
		break;
	case K_FD:
		if (*(const int *)f < 0)
			fputs("none", out);
		else
			fprintf(out, "%d", *(const int *)f);
		break;
	case K_BOOL:
		fputs(*(const bool *)f ? "yes" : "no", out);
		break;
	case K_BACKEND:
		fputs(sup_backend_name(cfg->backend), out);
		break;
	case K_LEVEL:
		fputs(sup_log_level_name(cfg->log_level), out);
		break;
	case K_GPUS:
		if (cfg->backend == SUP_BACKEND_SIM)
			fputs("none", out);
		for (uint32_t i = 0; cfg->backend != SUP_BACKEND_SIM && i < cfg->chips; i++)
			fprintf(out, "%s%d", i ? "," : "", cfg->gpus[i]);
		break;
	case K_GROUP:
		if (cfg->allow_group[0])
			fprintf(out, "%s (gid %u)", cfg->allow_group, (unsigned)cfg->allow_gid);
		else
			fputs("none", out);
		break;
	case K_INSTANCE:
	case K_PATH:
	case K_DIR:
	case K_STR:
		fputs(*(const char *)f ? (const char *)f : "none", out);
		break;
	}
}

static void print_usage(FILE *out)
{
	struct sup_config def;
	struct sup_sources dsrc;

	defaults(&def, &dsrc);
	fprintf(out, "Usage: chipd [OPTION]...\n"
		     "Runs the chipd supervisor of this node: one worker process per chip, the\n"
		     "client mailbox and readiness. Each value comes from its flag, else its\n"
		     "variable, else the scheduler's environment, else its default.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];

		if (!o->help)
			continue;
		if (o->flag)
			fprintf(out, "  --%s%s%s", o->flag, o->arg ? " " : "",
				o->arg ? o->arg : "");
		else
			fprintf(out, "  (no flag)");
		fprintf(out, "  [%s%s, default: ", o->env ? o->env : "no variable",
			o->env && !o->arg ? "=1" : "");
		if (o->def)
			fputs(o->def, out);
		else /* the value itself, so that the help cannot drift from defaults() */
			print_value(o, &def, out);
		if ((o->kind == K_U32 || o->kind == K_U64) && o->max) /* chipd.8 states it too */
			fprintf(out, ", range: %llu..%llu", (unsigned long long)o->min,
				(unsigned long long)o->max);
		fprintf(out, "]\n      %s\n", o->help);
	}
	fprintf(out, "  -h, --help     print this help and exit\n"
		     "  -V, --version  print the version and exit\n\n"
		     "Also read: SLURM_JOB_ID (the instance); for --backend hip\n"
		     "HIP_VISIBLE_DEVICES, else ROCR_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES\n"
		     "(worker i gets the i-th visible GPU), else SLURM_GPUS_ON_NODE (a count);\n"
		     "XDG_RUNTIME_DIR; systemd's NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID.\n"
		     "Booleans: 1/0, true/false, yes/no. An empty CHIPD_* variable is unset.\n");
}

/* Walks argv with getopt_long. Fills @given[i] with the text of table entry i's flag
 * (the last one wins; "1" for a switch). Returns 0, 1 after --help or --version, or
 * -EINVAL. */
static int parse_flags(int argc, char **argv, const char **given, char *msg, size_t cap)
{
	struct option lopts[NOPTS + 3];
	size_t n = 0;
	int c;

	for (size_t i = 0; i < NOPTS; i++) {
		if (opts[i].flag)
			lopts[n++] = (struct option){opts[i].flag,
						     opts[i].arg ? required_argument : no_argument,
						     NULL, OPT_BASE + (int)i};
	}
	lopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lopts[n++] = (struct option){"version", no_argument, NULL, 'V'};
	lopts[n] = (struct option){0};

	optind = 0; /* glibc: start over, also for a second load (tests) */
	opterr = 0; /* errors go into @msg, not to stderr */
	/* '+': stop at the first operand instead of permuting argv; ':': report a missing
	 * argument as ':' */
	while ((c = getopt_long(argc, argv, "+:hV", lopts, NULL)) != -1) {
		if (c == 'h') {
			print_usage(stdout);
			return 1;
		}
		if (c == 'V') {
			printf("chipd %s\n", CHIPD_VERSION);
			return 1;
		}
		if (c == ':')
			return sup_config_fail(msg, cap, "%s: missing value", argv[optind - 1]);
		if (c == '?' && optopt >= OPT_BASE) /* "--foreground=1" */
			return sup_config_fail(msg, cap, "%s: takes no value", argv[optind - 1]);
		if (c == '?' && optopt)
			return sup_config_fail(msg, cap, "unknown option -%c", optopt);
		if (c < OPT_BASE || c >= OPT_BASE + (int)NOPTS)
			return sup_config_fail(msg, cap, "unknown option %s", argv[optind - 1]);
		given[c - OPT_BASE] = optarg ? optarg : "1";
	}
	if (optind < argc)
		return sup_config_fail(msg, cap, "unexpected argument %s", argv[optind]);
	return 0;
}

/* "--chips 4" or "CHIPD_CHIPS=4": how the chip count was given (for a message). */
static const char *chips_given(const struct sup_config *cfg, const struct sup_sources *src)
{
	static _Thread_local char buf[64];
	struct origin w = origin_of(opt_named("chips"), src->chips);

	snprintf(buf, sizeof(buf), "%s%s%u", w.name, w.sep, cfg->chips);
	return buf;
}

/* The values the scheduler's environment gives when neither flag nor CHIPD_* did,
 * then the derived ones and the checks across values. */
static int resolve(struct sup_config *cfg, struct sup_sources *src, char *msg, size_t cap)
{
	int rc = 0;
	/* the runtime directory is a user's own (XDG_RUNTIME_DIR, /run/user/UID) */
	bool user_dir = src->runtime_dir == SUP_SRC_DEFAULT;

	if (src->instance == SUP_SRC_DEFAULT)
		rc = apply_env("instance", "SLURM_JOB_ID", SUP_SRC_SCHEDULER, cfg, src, msg, cap);
	if (rc == 0 && src->runtime_dir == SUP_SRC_DEFAULT) {
		const char *x = getenv("XDG_RUNTIME_DIR");

		/* the XDG spec: a relative XDG_RUNTIME_DIR is invalid and ignored */
		if (x && x[0] == '/')
			rc = apply_env("runtime_dir", "XDG_RUNTIME_DIR", SUP_SRC_ENV, cfg, src, msg,
				       cap);
	}
	if (rc == 0 && src->runtime_dir == SUP_SRC_DEFAULT) {
		struct stat st;

		/* pam_systemd's per-user directory, else one of our own in /tmp (checked
		 * private at start: sup_rundir_check) */
		snprintf(cfg->runtime_dir, sizeof(cfg->runtime_dir), "/run/user/%u",
			 (unsigned)geteuid());
		if (stat(cfg->runtime_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			snprintf(cfg->runtime_dir, sizeof(cfg->runtime_dir),
				 SUP_RUNDIR_FALLBACK_FMT, (unsigned)geteuid());
			user_dir = false;
		}
	}
	if (rc == 0 && user_dir && cfg->allow_group[0]) {
		struct origin g = origin_of(opt_named("allow_group"), src->allow_group);

		/* chipd opens its runtime directory to the group: never a login's own */
		return sup_config_fail(
		    msg, cap,
		    "%s%s%s: needs CHIPD_RUNTIME_DIR, a directory of chipd's own that it "
		    "opens to the group (such as /run/chipd), not the user's %s",
		    g.name, g.sep, cfg->allow_group, cfg->runtime_dir);
	}
	if (rc == 0)
		rc = sup_config_resolve_gpus(cfg, src, chips_given(cfg, src), msg, cap);
	if (rc == 0)
		rc = sup_config_resolve_systemd(cfg, src, msg, cap);
	if (rc < 0)
		return rc;

	if (src->pidfile == SUP_SRC_DEFAULT) {
		int n = snprintf(cfg->pidfile, sizeof(cfg->pidfile), "%s/chipd.%u.%s.pid",
				 cfg->runtime_dir, (unsigned)geteuid(), cfg->instance);

		if (n < 0 || (size_t)n >= sizeof(cfg->pidfile))
			return sup_config_fail(msg, cap,
					       "runtime dir %s: too long for the pidfile's path",
					       cfg->runtime_dir);
	}
	{
		/* the handshake socket's path must fit sun_path (and the node descriptor) */
		char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
		int n = snprintf(sock, sizeof(sock), "%s/chipd.%u.%s.sock", cfg->runtime_dir,
				 (unsigned)geteuid(), cfg->instance);

		if (n < 0 || (size_t)n >= sizeof(sock))
			return sup_config_fail(
			    msg, cap,
			    "runtime dir %s: too long for the handshake socket's path "
			    "(%d bytes, at most %zu): set CHIPD_RUNTIME_DIR to a shorter one",
			    cfg->runtime_dir, n, sizeof(sock) - 1);
	}
	if (cfg->no_overlap) {
		cfg->banks = 1;
		src->banks = src->no_overlap;
	}
	if (cfg->backoff_min_ms > cfg->backoff_max_ms) {
		struct origin lo = origin_of(opt_named("backoff_min_ms"), src->backoff_min_ms);
		struct origin hi = origin_of(opt_named("backoff_max_ms"), src->backoff_max_ms);

		return sup_config_fail(msg, cap, "%s%s%u must not be longer than %s%s%u", lo.name,
				       lo.sep, cfg->backoff_min_ms, hi.name, hi.sep,
				       cfg->backoff_max_ms);
	}
	if (cfg->stuck_ms <= cfg->heartbeat_ms) {
		struct origin s = origin_of(opt_named("stuck_ms"), src->stuck_ms);
		struct origin h = origin_of(opt_named("heartbeat_ms"), src->heartbeat_ms);

		return sup_config_fail(msg, cap, "%s%s%u must be longer than %s%s%u", s.name, s.sep,
				       cfg->stuck_ms, h.name, h.sep, cfg->heartbeat_ms);
	}
	return 0;
}

int sup_config_load(struct sup_config *cfg, struct sup_sources *src, int argc, char **argv,
		    char *msg, size_t cap)
{
	const char *given[NOPTS] = {0};
	int rc;

	if (msg && cap)
		msg[0] = '\0';
	defaults(cfg, src);
	rc = parse_flags(argc, argv, given, msg, cap);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];
		const char *env = o->env ? getenv(o->env) : NULL;

		if (given[i])
			rc = apply(o, cfg, src, given[i], SUP_SRC_FLAG, NULL, msg, cap);
		else if (env && *env)
			rc = apply(o, cfg, src, env, SUP_SRC_ENV, NULL, msg, cap);
		if (rc < 0)
			return rc;
	}
	return resolve(cfg, src, msg, cap);
}

/* What print-config adds after a value's source: where the scheduler's values came
 * from, and why banks is 1. */
static void print_note(const struct opt *o, const struct sup_config *cfg,
		       const struct sup_sources *src, FILE *out)
{
	if (o->kind == K_INSTANCE && src->instance == SUP_SRC_SCHEDULER)
		fputs(", SLURM_JOB_ID", out);
	if (o->off == offsetof(struct sup_config, banks) && cfg->no_overlap)
		fputs(", forced to 1 by no_overlap", out);
	if ((o->kind == K_GPUS || o->off == offsetof(struct sup_config, chips)) &&
	    cfg->gpu_env[0] && source_of(o, src) == SUP_SRC_SCHEDULER) {
		fprintf(out, ", %s", cfg->gpu_env);
		for (uint32_t i = 0; o->kind == K_GPUS && i < cfg->chips && cfg->gpu_ids[i][0]; i++)
			fprintf(out, "%s%s", i ? "," : ": ", cfg->gpu_ids[i]);
	}
}

void sup_config_print(const struct sup_config *cfg, const struct sup_sources *src, FILE *out)
{
	int width = 0;

	for (size_t i = 0; i < NOPTS; i++) {
		int len = (int)strlen(opts[i].name);

		width = len > width ? len : width;
	}
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];

		if (o->flags & O_NOPRINT)
			continue;
		fprintf(out, "%-*s = ", width, o->name);
		print_value(o, cfg, out);
		fprintf(out, " (%s", sup_source_name(source_of(o, src)));
		print_note(o, cfg, src, out);
		fputs(")\n", out);
	}
}
