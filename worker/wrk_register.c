/* wrk_register.c - callables registered while the node runs (docs/callables.md,
 * "Registration"): the supervisor's load and unload ops, and the replay of its
 * registry when a worker starts. Everything runs on the mailbox thread (M), which is
 * also the only one that admits requests, so a callable is never unloaded under an
 * admission; a request admitted earlier holds it (wl_unload refuses while one does). */
#include "wrk_internal.h"

#include "wl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* How long an unload waits for the name's last requests to be freed: a request ends
 * (its terminal record, which the supervisor sees) a moment before the worker frees
 * it. Beyond this the unload is refused busy and the supervisor asks again. */
#define UNLOAD_WAIT_MS 1000
#define UNLOAD_POLL_MS 5

static void set_loaded(struct wrk *w, const char *name, bool on)
{
	uint64_t bit = 1ull << w->cfg.chip;

	for (uint32_t i = 0; w->cfg.registry && i < w->cfg.registry_len; i++) {
		struct wrk_reg_entry *e = &w->cfg.registry[i];

		if (atomic_load_explicit(&e->state, memory_order_acquire) == WRK_REG_FREE ||
		    strncmp(e->name, name, sizeof(e->name)) != 0)
			continue;
		if (on)
			atomic_fetch_or_explicit(&e->loaded, bit, memory_order_relaxed);
		else
			atomic_fetch_and_explicit(&e->loaded, ~bit, memory_order_relaxed);
	}
}

/* Loads @name's own kernels on the chip's device; on a failure unloads the callable
 * here too (the chip refuses it) and says why in @msg. */
static int attach(struct wrk *w, const char *name, char *msg, size_t cap)
{
	char umsg[WL_MSG_MAX];
	int rc = wl_kernels_attach(name, w->dev, msg, cap);

	if (rc)
		(void)wl_unload(name, umsg, sizeof(umsg));
	return rc;
}

void wrk_kernels_attach_all(struct wrk *w)
{
	char msg[WL_MSG_MAX + WL_PATH_MAX], name[WL_KEY_MAX];
	const char *const *names;

	if (!wl_loaded())
		return; /* nothing yet: not even the built-ins (first use loads them) */
	names = wl_names();
	for (uint32_t i = 0; names[i];) {
		snprintf(name, sizeof(name), "%s", names[i]);
		if (attach(w, name, msg, sizeof(msg)) == 0) {
			i++;
			continue;
		}
		fprintf(stderr, "chipd: chip %u: %s\n", w->cfg.chip, msg);
		names = wl_names(); /* without it now: the same index is the next name */
	}
}

void wrk_register_replay(struct wrk *w)
{
	char msg[WL_MSG_MAX + WL_PATH_MAX];

	for (uint32_t i = 0; w->cfg.registry && i < w->cfg.registry_len; i++) {
		struct wrk_reg_entry *e = &w->cfg.registry[i];
		char name[WRK_REG_NAME_MAX], path[WRK_REG_PATH_MAX];
		struct wl_file_id file;

		uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);

		if ((seq & 1) ||
		    atomic_load_explicit(&e->state, memory_order_acquire) != WRK_REG_LIVE)
			continue;
		/* private copies, NUL-terminated whatever the entry holds */
		snprintf(name, sizeof(name), "%.*s", (int)sizeof(name) - 1, e->name);
		snprintf(path, sizeof(path), "%.*s", (int)sizeof(path) - 1, e->path);
		memcpy(&file, &e->file, sizeof(file));
		/* release: the copies above stay before this read of seq (no fence) */
		if (atomic_fetch_add_explicit(&e->seq, 0, memory_order_acq_rel) != seq)
			continue; /* rewritten meanwhile: the supervisor's own call brings it */
		/* the file the supervisor loaded, not one put at its path since */
		if (wl_load_file_as(path, name, &file, NULL, msg, sizeof(msg)) == 0 &&
		    attach(w, name, msg, sizeof(msg)) == 0)
			set_loaded(w, name, true);
		else
			fprintf(stderr, "chipd: chip %u: replaying callable %s: %s\n", w->cfg.chip,
				name, msg);
	}
}

/* The file the supervisor loaded for @name, from its registry entry (PENDING during
 * the registration whose load this is): false when none is there, or it is being
 * rewritten. Mailbox thread. */
static bool registered_file(const struct wrk *w, const char *name, struct wl_file_id *file)
{
	for (uint32_t i = 0; w->cfg.registry && i < w->cfg.registry_len; i++) {
		struct wrk_reg_entry *e = &w->cfg.registry[i];
		uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
		bool same;

		if ((seq & 1) ||
		    atomic_load_explicit(&e->state, memory_order_acquire) == WRK_REG_FREE)
			continue;
		same = strncmp(e->name, name, sizeof(e->name)) == 0;
		memcpy(file, &e->file, sizeof(*file));
		/* release: the reads above stay before this read of seq (no fence) */
		if (same && atomic_fetch_add_explicit(&e->seq, 0, memory_order_acq_rel) == seq)
			return true;
	}
	return false;
}

int wrk_run_load(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		 struct proto_error *err)
{
	struct wrk *w = ctx;
	char msg[WL_MSG_MAX + WL_PATH_MAX];
	const char *path = NULL;
	struct wl_file_id file;
	uint32_t version;
	int rc;

	(void)ans;
	/* the replay (a registration racing this start) or a repeated load: the same
	 * file under the same name is loaded already */
	if (wl_callable_info(req->wl, &version, &path) == 0 && strcmp(path, req->path) == 0) {
		rc = 0;
	} else if (!registered_file(w, req->wl, &file)) {
		snprintf(msg, sizeof(msg), "callable %s: not in the registry", req->wl);
		rc = -ENOENT;
	} else { /* the file the supervisor loaded, not one put at its path since */
		rc = wl_load_file_as(req->path, req->wl, &file, NULL, msg, sizeof(msg));
	}
	if (rc == -ENOSPC)
		return proto_fail(err, CHIPD_E_NO_CAPACITY, "chip %u: %s", w->cfg.chip, msg);
	if (!rc) /* its own kernels, on this chip's device */
		rc = attach(w, req->wl, msg, sizeof(msg));
	if (rc)
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "chip %u: %s", w->cfg.chip, msg);
	if (!path) /* loaded here now, not before: the supervisor's answer decides */
		snprintf(w->loaded, sizeof(w->loaded), "%.*s", (int)sizeof(w->loaded) - 1, req->wl);
	set_loaded(w, req->wl, true);
	return CHIPD_OK;
}

void wrk_load_abandon(struct wrk *w)
{
	char msg[WL_MSG_MAX];
	int rc;

	if (!w->loaded[0])
		return;
	/* nothing can hold it: the supervisor admits no request of a name it registers */
	rc = wl_unload(w->loaded, msg, sizeof(msg));
	if (rc == 0 || rc == -ENOENT) {
		set_loaded(w, w->loaded, false);
		fprintf(stderr,
			"chipd: chip %u: callable %s: the supervisor gave up on its load (the "
			"registration failed): unloaded here\n",
			w->cfg.chip, w->loaded);
	} else {
		fprintf(stderr, "chipd: chip %u: callable %s: the supervisor gave up on its load: %s\n",
			w->cfg.chip, w->loaded, msg);
	}
	w->loaded[0] = '\0';
}

int wrk_run_unload(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		   struct proto_error *err)
{
	struct wrk *w = ctx;
	char msg[WL_MSG_MAX];
	int rc;

	(void)ans;
	for (int waited = 0;; waited += UNLOAD_POLL_MS) {
		struct timespec ts = {0, UNLOAD_POLL_MS * 1000000L};

		rc = wl_unload(req->wl, msg, sizeof(msg));
		if (rc != -EBUSY || waited >= UNLOAD_WAIT_MS)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc == -EBUSY) /* retryable: the supervisor asks again */
		return proto_fail(err, CHIPD_E_QUEUE_FULL, "chip %u: %s", w->cfg.chip, msg);
	if (rc && rc != -ENOENT) /* not loaded here (its replay failed): unloaded all the same */
		return proto_fail(err, CHIPD_E_INTERNAL, "chip %u: %s", w->cfg.chip, msg);
	set_loaded(w, req->wl, false);
	return CHIPD_OK;
}
