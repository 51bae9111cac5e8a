/* identity_fds.h - check_identity's tcases of a chipd out of file descriptors. */
#ifndef CHIPD_IDENTITY_FDS_H
#define CHIPD_IDENTITY_FDS_H

#include <check.h>

/* Adds them to @s, each with a timeout of @timeout_s seconds. */
void identity_add_fd_tcases(Suite *s, double timeout_s);

#endif
