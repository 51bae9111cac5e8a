/* sup_config_fixture.h - what check_sup_config and check_sup_config_env share. */
#ifndef CHIPD_SUP_CONFIG_FIXTURE_H
#define CHIPD_SUP_CONFIG_FIXTURE_H

#include "sup_config.h"

#include <stddef.h>

/* The runtime directory without CHIPD_RUNTIME_DIR and XDG_RUNTIME_DIR: pam_systemd's
 * /run/user/UID where this machine has it, else chipd's own in /tmp. */
const char *default_rundir(void);

/* Removes whatever the test's own environment (a Slurm job, a systemd unit, a GPU
 * box) would feed into the configuration. */
void clean_env(void);

/* Loads from the flags given after @msg (NULL-terminated); "chipd" is argv[0]. */
int load(struct sup_config *c, struct sup_sources *s, char *msg, size_t cap, ...);

#define LOAD(...) load(&c, &s, msg, sizeof(msg), __VA_ARGS__, (char *)NULL)

/* What sup_config_print writes for @c. Free the result. */
char *printed(const struct sup_config *c, const struct sup_sources *s);

/* The line of @out that describes @name, without its newline, in @line. */
void line_of(const char *out, const char *name, char *line, size_t cap);

#endif
