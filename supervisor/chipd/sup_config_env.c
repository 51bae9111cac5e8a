/* sup_config_env.c - what chipd's configuration takes from the environment of the
 * scheduler and the service manager: the visible GPUs (HIP_VISIBLE_DEVICES,
 * ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE) and systemd's notify socket and watchdog. */
#include "sup_config_env.h"

#include "node.h"
#include "region.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* Parses the comma list @mask of variable @var into @cfg->gpu_ids. Returns how many
 * devices it names, or -EINVAL. */
static int parse_mask(struct sup_config *cfg, const char *var, const char *mask, char *msg,
		      size_t cap)
{
	const char *p = mask;
	int n = 0;

	if (!*mask)
		return 0; /* set and empty: no device is visible */
	for (;;) {
		size_t len = strcspn(p, ",");

		if (len == 0)
			return sup_config_fail(msg, cap, "%s=%s: empty entry", var, mask);
		if (len >= SUP_GPU_ID_MAX)
			return sup_config_fail(msg, cap, "%s=%s: entry too long", var, mask);
		if (n < CHIPD_MAX_CHIPS)
			memcpy(cfg->gpu_ids[n], p, len); /* zeroed by defaults() */
		n++;
		if (!p[len])
			return n;
		p += len + 1;
	}
}

/* hip: how many GPUs are visible and which ordinal each chip gets. Worker i gets the
 * i-th visible device: ordinal i within the mask, which the runtime applies itself.
 * The first mask set counts: HIP_VISIBLE_DEVICES (the HIP runtime applies it last, on
 * top of ROCR_VISIBLE_DEVICES, so it says what HIP sees), ROCR_VISIBLE_DEVICES, then
 * CUDA_VISIBLE_DEVICES (the CUDA runtime's, and an alias HIP also honours). */
int sup_config_resolve_gpus(struct sup_config *cfg, struct sup_sources *src,
			    const char *chips_given, char *msg, size_t cap)
{
	static const char *const masks[] = {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
					    "CUDA_VISIBLE_DEVICES"};
	const char *var = NULL, *val = NULL;
	long visible = -1;

	if (cfg->backend == SUP_BACKEND_SIM)
		return 0; /* gpus stay -1 */
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]) && !val; i++) {
		val = getenv(masks[i]);
		var = masks[i];
	}
	if (val) {
		visible = parse_mask(cfg, var, val, msg, cap);
		if (visible < 0)
			return (int)visible;
	} else if ((val = getenv("SLURM_GPUS_ON_NODE")) && *val) {
		uint64_t u;

		var = "SLURM_GPUS_ON_NODE";
		if (sup_config_parse_u64(val, &u) < 0 || u > INT_MAX)
			return sup_config_fail(msg, cap, "%s=%s: not a number", var, val);
		visible = (long)u;
	}
	if (visible >= 0)
		strcpy(cfg->gpu_env, var);

	if (src->chips != SUP_SRC_DEFAULT) {
		if (visible >= 0 && cfg->chips > visible)
			return sup_config_fail(msg, cap, "%s: only %ld GPUs visible (%s=%s)",
					       chips_given, visible, var, val);
		src->gpus = visible >= 0 ? SUP_SRC_SCHEDULER : src->chips;
	} else {
		if (visible < 0)
			return sup_config_fail(msg, cap,
					       "--backend hip: no GPU mask (HIP_VISIBLE_DEVICES, "
					       "ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES) nor "
					       "SLURM_GPUS_ON_NODE: give --chips N");
		if (visible == 0)
			return sup_config_fail(msg, cap, "%s=%s: no GPU visible", var, val);
		if (visible > CHIPD_MAX_CHIPS)
			return sup_config_fail(msg, cap,
					       "%s=%s: %ld GPUs, at most %d chips: give --chips N",
					       var, val, visible, CHIPD_MAX_CHIPS);
		cfg->chips = (uint32_t)visible;
		src->chips = src->gpus = SUP_SRC_SCHEDULER;
	}
	for (uint32_t i = 0; i < cfg->chips; i++)
		cfg->gpus[i] = (int32_t)i;
	return 0;
}

/* systemd's variables: where to say READY=1, and whether a watchdog expects us. */
int sup_config_resolve_systemd(struct sup_config *cfg, struct sup_sources *src, char *msg,
			       size_t cap)
{
	const char *sock = getenv("NOTIFY_SOCKET"), *usec = getenv("WATCHDOG_USEC");
	const char *wpid = getenv("WATCHDOG_PID");
	size_t sun_max = sizeof(((struct sockaddr_un *)0)->sun_path);
	uint64_t u, pid;

	if (sock && *sock) {
		/* "@name" fills sun_path from byte 1 without a NUL; a path needs its NUL */
		if (sock[0] != '/' && sock[0] != '@')
			return sup_config_fail(
			    msg, cap, "NOTIFY_SOCKET=%s: neither a path nor @abstract", sock);
		if (strlen(sock) + (sock[0] == '/') > sun_max)
			return sup_config_fail(
			    msg, cap, "NOTIFY_SOCKET=%s: too long for a socket address", sock);
		strcpy(cfg->notify_socket, sock);
		src->notify_socket = SUP_SRC_ENV;
	}
	if (!usec || !*usec)
		return 0;
	if (sup_config_parse_u64(usec, &u) < 0)
		return sup_config_fail(msg, cap, "WATCHDOG_USEC=%s: not a number", usec);
	if (wpid && *wpid) {
		if (sup_config_parse_u64(wpid, &pid) < 0)
			return sup_config_fail(msg, cap, "WATCHDOG_PID=%s: not a number", wpid);
		if (pid != (uint64_t)getpid())
			return 0; /* the watchdog of another process (our parent's) */
	}
	/* a longer watchdog is pinged more often than needed, which is harmless */
	cfg->watchdog_usec = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
	src->watchdog_usec = SUP_SRC_ENV;
	return 0;
}

/* See sup_config_env.h. */
int sup_config_check_instance(const char *v, char *out, size_t cap, char *why, size_t whycap)
{
	char scratch[SHM_NAME_MAX];

	if (proto_node_instance_check(v, why, whycap) < 0 || strlen(v) >= cap)
		return -EINVAL;
	if (shm_region_name(scratch, sizeof(scratch), (unsigned)geteuid(), v) < 0) {
		snprintf(why, whycap, "too long for uid %u's region name", (unsigned)geteuid());
		return -EINVAL;
	}
	strcpy(out, v);
	return 0;
}
