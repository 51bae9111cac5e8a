/* client_register.c - libchipd's run-time registration: chipd_register and
 * chipd_unregister (docs/callables.md, "Registration"; docs/protocol.md §8.4). An
 * unregister that drains or cancels asks again until the name's requests ended or the
 * caller's timeout passed, and then gives the drain up (mode "resume"), so the name is
 * either gone or takes requests as before. The asks share the caller's one deadline;
 * the resume alone may go past it, by UNREGISTER_RESUME_MS at most. */
#include "client_internal.h"
#include "proto.h"
#include "wait.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often a drain asks whether the name's requests ended. */
#define UNREGISTER_POLL_MS 20u
/* How long the resume of a drain given up may wait for its answer once the caller's
 * deadline passed: the forward bound (docs/callables.md, "Registration"), so that a
 * router held by one chip that does not answer still takes it. */
#define UNREGISTER_RESUME_MS 2000u

/* A callable's name as chipd checks it (kernels/wl_load.c): the same rule and limit. */
static bool ident_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n > 0 && n < CHIPD_CALLABLE_NAME_MAX;
}

int chipd_register(chipd_conn *c, const char *path, const char *name, uint32_t timeout_ms,
		   char *name_out, uint32_t *version, struct chipd_error *err)
{
	struct proto_msg *m;
	int rc;

	if (!path || path[0] != '/' || strlen(path) >= PROTO_PATH_MAX)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "register: the path must be absolute and at most %u bytes",
				   PROTO_PATH_MAX - 1);
	if (name && !ident_ok(name))
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "register: the name given is not 1..%d characters of [a-z0-9_]",
				   CHIPD_CALLABLE_NAME_MAX - 1);
	m = malloc(2 * sizeof(*m));
	if (!m)
		return client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	proto_msg_init(&m[0], PROTO_OP_REGISTER);
	memcpy(m[0].path, path, strlen(path) + 1);
	if (name)
		memcpy(m[0].wl, name, strlen(name) + 1);
	rc = client_call_msg(c, &m[0], &m[1], timeout_ms, err);
	if (rc == 0 && name_out)
		memcpy(name_out, m[1].wl, sizeof(m[1].wl));
	if (rc == 0 && version)
		*version = (uint32_t)m[1].version;
	free(m);
	return rc;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* Gives the drain of @name up (mode resume): the name takes requests again. Waits
 * what is left of @deadline, or UNREGISTER_RESUME_MS when less is left. Returns the
 * call's result. */
static int resume(chipd_conn *c, struct proto_msg *m, const char *name, uint64_t deadline)
{
	uint32_t left = client_ms_left(deadline);

	proto_msg_init(&m[0], PROTO_OP_UNREGISTER);
	memcpy(m[0].wl, name, strlen(name) + 1);
	m[0].mode = PROTO_UNREG_RESUME;
	return client_call_msg(c, &m[0], &m[1],
			       left > UNREGISTER_RESUME_MS ? left : UNREGISTER_RESUME_MS, NULL);
}

int chipd_unregister(chipd_conn *c, const char *name, int mode, uint32_t timeout_ms,
		     struct chipd_error *err)
{
	uint64_t deadline = client_deadline_ms(timeout_ms);
	struct proto_msg *m;
	int rc;

	if (!name || !ident_ok(name))
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "unregister: the name given is not 1..%d characters of [a-z0-9_]",
				   CHIPD_CALLABLE_NAME_MAX - 1);
	if (mode < CHIPD_UNREGISTER_REFUSE || mode > CHIPD_UNREGISTER_CANCEL)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "unregister: mode %d is not refuse, drain or cancel", mode);
	m = malloc(2 * sizeof(*m));
	if (!m)
		return client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	/* each ask gets what is left of the caller's timeout (the first all of it); the
	 * drain is given up once the deadline passed */
	for (bool asked = false;; asked = true) {
		proto_msg_init(&m[0], PROTO_OP_UNREGISTER);
		memcpy(m[0].wl, name, strlen(name) + 1);
		m[0].mode = mode;
		rc = client_call_msg(c, &m[0], &m[1], asked ? client_ms_left(deadline) : timeout_ms,
				     err);
		if (rc == 0 && m[1].active == 0)
			break;
		/* the deadline near, or passed during a later ask (given only what was
		 * left of it): the last answer (m[1]) says what is left to do */
		if ((rc == 0 && shm_now_ns() + UNREGISTER_POLL_MS * SHM_NS_PER_MS >= deadline) ||
		    (rc == -ETIMEDOUT && asked))
			rc = mode == CHIPD_UNREGISTER_REFUSE
				 ? client_fail(err, -ETIMEDOUT, CHIPD_E_TIMEOUT,
					       "unregister %s: a chip has not unloaded it after "
					       "%" PRIu32 " ms; it takes no new requests, and goes "
					       "once unloaded (ask again, or close the connection)",
					       name, timeout_ms)
				 : client_fail(err, -ETIMEDOUT, CHIPD_E_TIMEOUT,
					       "unregister %s: %" PRIu32 " requests still in "
					       "flight after %" PRIu32 " ms; it stays registered",
					       name, (uint32_t)m[1].active, timeout_ms);
		if (rc) {
			/* a drain under way is given up: the name takes requests again */
			if (mode != CHIPD_UNREGISTER_REFUSE && (asked || rc == -ETIMEDOUT) &&
			    resume(c, m, name, deadline) != 0 && err)
				snprintf(err->message + strlen(err->message),
					 CHIPD_MSG_MAX - strlen(err->message),
					 "; giving the drain up got no answer: %s may still "
					 "refuse new requests",
					 name);
			break;
		}
		sleep_ms(UNREGISTER_POLL_MS);
	}
	free(m);
	return rc;
}
