/* sup_config_env.h - the parts of chipd's configuration (sup_config.c) that come from
 * the environment of the scheduler and of systemd, and the parsing both share. */
#ifndef CHIPD_SUP_CONFIG_ENV_H
#define CHIPD_SUP_CONFIG_ENV_H

#include "sup_config.h"

#include <stddef.h>
#include <stdint.h>

/* Formats the one-line message into @msg (@cap bytes); returns -EINVAL. */
int sup_config_fail(char *msg, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses a decimal number without sign or blanks. Returns 0, -EINVAL or -ERANGE. */
int sup_config_parse_u64(const char *s, uint64_t *out);

/* hip: how many GPUs are visible and which ordinal each chip gets (sim: nothing).
 * @chips_given says how a chip count not the default was given ("--chips 4"), for
 * the message when it exceeds the visible GPUs. Returns 0 or -EINVAL (@msg). */
int sup_config_resolve_gpus(struct sup_config *cfg, struct sup_sources *src,
			    const char *chips_given, char *msg, size_t cap);

/* systemd's variables: where to say READY=1, and whether a watchdog expects us.
 * Returns 0 or -EINVAL (@msg). */
int sup_config_resolve_systemd(struct sup_config *cfg, struct sup_sources *src, char *msg,
			       size_t cap);

/* The instance naming rule of the node region (proto_node_instance_check, the one
 * libchipd applies, and a region name that fits with our uid); copies @v into @out
 * (@cap bytes), or says in @why what is wrong. Returns 0 or -EINVAL. */
int sup_config_check_instance(const char *v, char *out, size_t cap, char *why, size_t whycap);

#endif
