/* wl_load.c - the loaded callables: loading a directory of them (with the owner and
 * mode checks sudo and systemd make), checking each table once, and finding them by
 * name. Loading happens before any thread uses the workloads (chipd loads before it
 * forks its workers; a library user gets the built-ins on first use). */
#include "wl_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CHIPD_CALLABLES_REL
#define CHIPD_CALLABLES_REL "../lib/chipd/callables"
#endif
#ifndef CHIPD_CALLABLES_BUILD_DIR
#define CHIPD_CALLABLES_BUILD_DIR ""
#endif

static struct wl_callable reg[WL_WORKLOADS_MAX];
static unsigned nreg;
static const char *names[WL_WORKLOADS_MAX + 1];
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* ---- checks ---- */

/* A name or key: 1..CHIPD_CL_NAME_MAX-1 characters of [a-z0-9_]. */
static bool ident_ok(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n > 0 && n < CHIPD_CL_NAME_MAX;
}

/* One line of printable ASCII, shorter than CHIPD_CL_DOC_MAX bytes. */
static bool doc_ok(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (s[n] < 0x20 || s[n] > 0x7e)
			return false;
	return n > 0 && n < CHIPD_CL_DOC_MAX;
}

static int bad(char *msg, size_t cap, int err, const char *path, const char *what)
{
	snprintf(msg, cap, "callable %s: %s", path, what);
	return err;
}

/* Owned by root or by us, not writable by group or others: the file (a regular file,
 * not followed if a link) or the directory. */
static int path_ok(const char *path, bool dir, char *msg, size_t cap)
{
	struct stat sb;
	char what[160];

	if ((dir ? stat(path, &sb) : lstat(path, &sb)) != 0) {
		snprintf(what, sizeof(what), "%s", strerror(errno));
		return bad(msg, cap, -ENOENT, path, what);
	}
	if (dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))
		return bad(msg, cap, -EPERM, path,
			   dir ? "not a directory" : "not a regular file");
	if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		snprintf(what, sizeof(what), "owned by uid %u, neither root nor chipd's uid %u",
			 (unsigned)sb.st_uid, (unsigned)geteuid());
		return bad(msg, cap, -EPERM, path, what);
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(what, sizeof(what), "writable by group or others (mode %04o)",
			 (unsigned)(sb.st_mode & 07777));
		return bad(msg, cap, -EPERM, path, what);
	}
	return 0;
}

static int table_ok(const struct chipd_callable *cl, const char *path, char *msg, size_t cap)
{
	char what[200];

	if (!ident_ok(cl->name))
		return bad(msg, cap, -EINVAL, path, "its name is not 1..23 characters of [a-z0-9_]");
	if (!doc_ok(cl->doc))
		return bad(msg, cap, -EINVAL, path, "its doc is not one line of printable ASCII");
	if (cl->nparams > CHIPD_CL_PARAMS_MAX || (cl->nparams && !cl->params))
		return bad(msg, cap, -EINVAL, path, "more than 16 parameters, or none listed");
	for (uint32_t i = 0; i < cl->nparams; i++) {
		const struct chipd_cl_param *p = &cl->params[i];
		const char *why = NULL;

		if (!ident_ok(p->key))
			why = "its key is not 1..23 characters of [a-z0-9_]";
		else if (p->type != CHIPD_CL_INT64)
			why = "its type is not CHIPD_CL_INT64";
		else if (p->lo > p->def || p->def > p->hi)
			why = "its default is outside its range";
		else if (!doc_ok(p->doc))
			why = "its doc is not one line of printable ASCII";
		for (uint32_t j = 0; !why && j < i; j++)
			if (strcmp(cl->params[j].key, p->key) == 0)
				why = "listed twice";
		if (why) {
			snprintf(what, sizeof(what), "parameter %u (%.23s): %s", i,
				 ident_ok(p->key) ? p->key : "?", why);
			return bad(msg, cap, -EINVAL, path, what);
		}
	}
	if (cl->token_bytes != sizeof(int32_t))
		return bad(msg, cap, -EINVAL, path, "token_bytes is not 4 (ABI 1)");
	if (cl->inputs || cl->outputs || cl->reserved[0] || cl->reserved[1] || cl->reserved[2] ||
	    cl->reserved[3])
		return bad(msg, cap, -EINVAL, path, "reserved fields are not zero (ABI 1)");
	if (!cl->steps || !cl->cost || !cl->reserve || !cl->fill || !cl->build || !cl->release)
		return bad(msg, cap, -EINVAL, path,
			   "a required hook (steps, cost, reserve, fill, build, release) is NULL");
	return 0;
}

/* ---- loading ---- */

static void names_update(void)
{
	for (unsigned i = 0; i < nreg; i++)
		names[i] = reg[i].cl->name;
	names[nreg] = NULL;
}

static int load_file(const char *path, char *msg, size_t cap)
{
	const struct chipd_callable *cl;
	chipd_callable_entry_fn entry;
	struct wl_callable *wc;
	char what[WL_MSG_MAX + 64], imsg[WL_MSG_MAX] = "";
	void *dl;
	int err = path_ok(path, false, msg, cap);

	if (err)
		return err;
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		snprintf(what, sizeof(what), "cannot load: %s", dlerror());
		return bad(msg, cap, -EINVAL, path, what);
	}
	*(void **)&entry = dlsym(dl, CHIPD_CALLABLE_ENTRY);
	cl = entry ? entry() : NULL;
	if (!entry)
		err = bad(msg, cap, -EINVAL, path, "no symbol " CHIPD_CALLABLE_ENTRY);
	else if (!cl)
		err = bad(msg, cap, -EINVAL, path, CHIPD_CALLABLE_ENTRY " returned NULL");
	else if (cl->abi != CHIPD_CALLABLE_ABI) {
		snprintf(what, sizeof(what), "ABI version %" PRIu32 ", this chipd loads %d", cl->abi,
			 CHIPD_CALLABLE_ABI);
		err = bad(msg, cap, -EINVAL, path, what);
	} else
		err = table_ok(cl, path, msg, cap);
	for (unsigned i = 0; !err && i < nreg; i++)
		if (strcmp(reg[i].cl->name, cl->name) == 0) {
			snprintf(what, sizeof(what), "workload \"%s\" is already loaded from %s",
				 cl->name, reg[i].path);
			err = bad(msg, cap, -EEXIST, path, what);
		}
	if (!err && nreg == WL_WORKLOADS_MAX) {
		snprintf(what, sizeof(what), "more than %d workloads", WL_WORKLOADS_MAX);
		err = bad(msg, cap, -ENOSPC, path, what);
	}
	if (!err && cl->init && cl->init(&wl_host, imsg, sizeof(imsg)) != 0) {
		snprintf(what, sizeof(what), "init failed: %s", imsg[0] ? imsg : "(no message)");
		err = bad(msg, cap, -EINVAL, path, what);
	}
	if (err) {
		dlclose(dl);
		return err;
	}
	wc = &reg[nreg];
	memset(wc, 0, sizeof(*wc));
	wc->cl = cl;
	wc->dl = dl;
	snprintf(wc->path, sizeof(wc->path), "%s", path);
	for (uint32_t i = 0; i < cl->nparams; i++)
		wc->info[i] = (struct wl_param_info){cl->params[i].key, cl->params[i].def,
						     cl->params[i].lo, cl->params[i].hi,
						     cl->params[i].doc};
	nreg++;
	names_update();
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The "*.so" entries of @dir, sorted, in *@out (free each and the array). */
static int list_dir(const char *dir, char ***out, size_t *n, char *msg, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t len;

	*n = 0;
	if (!d)
		return bad(msg, cap, -ENOENT, dir, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		len = strlen(e->d_name);
		if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0)
			continue;
		nv = realloc(v, (*n + 1) * sizeof(*v));
		if (!nv || !(nv[*n] = strdup(e->d_name))) {
			v = nv ? nv : v;
			closedir(d);
			for (size_t i = 0; i < *n; i++)
				free(v[i]);
			free(v);
			return bad(msg, cap, -ENOMEM, dir, "out of memory");
		}
		v = nv;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_names);
	*out = v;
	return 0;
}

int wl_load_dir(const char *dir, char *msg, size_t cap)
{
	char **files = NULL, path[WL_PATH_MAX];
	unsigned first = nreg;
	size_t n = 0;
	int err = path_ok(dir, true, msg, cap);

	if (!err)
		err = list_dir(dir, &files, &n, msg, cap);
	if (!err && n == 0)
		err = bad(msg, cap, -ENOENT, dir, "no callable (*.so) in the directory");
	for (size_t i = 0; !err && i < n; i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir, files[i]) >= (int)sizeof(path))
			err = bad(msg, cap, -ENAMETOOLONG, dir, "a path is too long");
		else
			err = load_file(path, msg, cap);
	}
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	if (err) { /* all or nothing: what this call loaded goes again */
		while (nreg > first)
			dlclose(reg[--nreg].dl);
		names_update();
	}
	return err;
}

void wl_default_dir(char *buf, size_t cap)
{
	char exe[WL_PATH_MAX];
	struct stat sb;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		snprintf(buf, cap, "%s/%s", dirname(exe), CHIPD_CALLABLES_REL);
		if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode))
			return;
	}
	snprintf(buf, cap, "%s", CHIPD_CALLABLES_BUILD_DIR);
}

static void load_default(void)
{
	char dir[WL_PATH_MAX], msg[WL_MSG_MAX + WL_PATH_MAX];

	if (nreg)
		return; /* loaded explicitly */
	wl_default_dir(dir, sizeof(dir));
	if (wl_load_dir(dir, msg, sizeof(msg)) != 0)
		fprintf(stderr, "chipd: the built-in workloads: %s\n", msg);
}

static void ensure_loaded(void)
{
	pthread_once(&default_once, load_default);
}

bool wl_loaded(void)
{
	return nreg > 0;
}

const struct wl_callable *wl_find(const char *name)
{
	ensure_loaded();
	for (unsigned i = 0; i < nreg; i++)
		if (strcmp(reg[i].cl->name, name) == 0)
			return &reg[i];
	return NULL;
}

const char *const *wl_names(void)
{
	ensure_loaded();
	return names;
}

int wl_callable_info(const char *workload, uint32_t *version, const char **path)
{
	const struct wl_callable *wc = wl_find(workload);

	if (!wc)
		return -ENOENT;
	*version = wc->cl->version;
	*path = wc->path;
	return 0;
}
