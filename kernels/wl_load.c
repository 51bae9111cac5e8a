/* wl_load.c - the loaded callables: loading a directory of them or one file (with the
 * owner and mode checks sudo and systemd make), checking each table once, finding them
 * by name, and unloading one no request uses (run-time registration). The list is
 * under one mutex; each entry is its own allocation, so a request's pointer to its
 * callable stays valid while the list changes (an entry goes only when unused). */
#include "wl_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <link.h>
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

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wl_callable **reg; /* nreg entries of cap_reg, under reg_lock */
static unsigned nreg, cap_reg;
static const char **names; /* nreg + 1 entries, NULL-terminated */
static unsigned limit = WL_WORKLOADS_DEFAULT;
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

static int bad_as(char *msg, size_t cap, int err, const char *kind, const char *path,
		  const char *what)
{
	snprintf(msg, cap, "%s %s: %s", kind, path, what);
	return err;
}

static int bad(char *msg, size_t cap, int err, const char *path, const char *what)
{
	return bad_as(msg, cap, err, "callable", path, what);
}

static int path_ok(const char *path, bool dir, char *msg, size_t cap)
{
	return wl_path_ok("callable", path, dir, msg, cap);
}

/* wl_path_ok, and the file's stat in *@sbp. */
static int path_stat_ok(const char *kind, const char *path, bool dir, struct stat *sbp, char *msg,
			size_t cap)
{
	struct stat sb;
	char what[160];

	if ((dir ? stat(path, &sb) : lstat(path, &sb)) != 0) {
		snprintf(what, sizeof(what), "%s", strerror(errno));
		return bad_as(msg, cap, -ENOENT, kind, path, what);
	}
	if (dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))
		return bad_as(msg, cap, -EPERM, kind, path,
			   dir ? "not a directory" : "not a regular file");
	if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		snprintf(what, sizeof(what), "owned by uid %u, neither root nor chipd's uid %u",
			 (unsigned)sb.st_uid, (unsigned)geteuid());
		return bad_as(msg, cap, -EPERM, kind, path, what);
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(what, sizeof(what), "writable by group or others (mode %04o)",
			 (unsigned)(sb.st_mode & 07777));
		return bad_as(msg, cap, -EPERM, kind, path, what);
	}
	*sbp = sb;
	return 0;
}

int wl_path_ok(const char *kind, const char *path, bool dir, char *msg, size_t cap)
{
	struct stat sb;

	return path_stat_ok(kind, path, dir, &sb, msg, cap);
}

static struct wl_file_id file_id_of(const struct stat *sb)
{
	return (struct wl_file_id){(uint64_t)sb->st_dev, (uint64_t)sb->st_ino,
				   (uint64_t)sb->st_size,
				   (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec};
}

static bool file_id_eq(const struct wl_file_id *a, const struct wl_file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns;
}

/* After the dlopen of @path: the file there is still the one checked before it
 * (@checked), and the one @want names (NULL: any). 0, or -ESTALE with the reason. */
static int file_same(const char *path, const struct wl_file_id *checked,
		     const struct wl_file_id *want, char *msg, size_t cap)
{
	struct stat sb;
	struct wl_file_id now;

	if (lstat(path, &sb) != 0)
		return bad(msg, cap, -ESTALE, path, "removed while it was being loaded");
	now = file_id_of(&sb);
	if (!file_id_eq(&now, checked))
		return bad(msg, cap, -ESTALE, path,
			   "replaced or rewritten while it was being loaded");
	if (want && !file_id_eq(&now, want))
		return bad(msg, cap, -ESTALE, path,
			   "not the file registered: replaced or rewritten since (unregister "
			   "it and register it again)");
	return 0;
}

/* A kernel file's name: 1..WL_KFILE_MAX-1 bytes, no '/' (it lies beside the library).
 * NULL is allowed (no code for that device). */
static const char *kfile_bad(const char *f)
{
	size_t n;

	if (!f)
		return NULL;
	n = strnlen(f, WL_KFILE_MAX);
	if (n == 0)
		return "is empty";
	if (n >= WL_KFILE_MAX)
		return "is 256 bytes or longer";
	if (strchr(f, '/') || strcmp(f, ".") == 0 || strcmp(f, "..") == 0)
		return "is not a file name beside the callable (it has a '/')";
	return NULL;
}

/* The own kernels' fields (chipd_callable.h, kernels): 0, or -EINVAL with @what. */
static int kernels_ok(const struct chipd_callable *cl, char *what, size_t cap)
{
	const char *files[3] = {cl->kernels_sim, cl->kernels_amd, cl->kernels_nvidia};
	static const char *const fields[3] = {"kernels_sim", "kernels_amd", "kernels_nvidia"};

	if (cl->nkernels > CHIPD_CL_KERNELS_MAX) {
		snprintf(what, cap, "nkernels %" PRIu32 " is more than %d", cl->nkernels,
			 CHIPD_CL_KERNELS_MAX);
		return -EINVAL;
	}
	if (!cl->kernels != !cl->nkernels) {
		snprintf(what, cap, "kernels is %s but nkernels is %" PRIu32,
			 cl->kernels ? "set" : "NULL", cl->nkernels);
		return -EINVAL;
	}
	for (int i = 0; i < 3; i++) {
		const char *why = kfile_bad(files[i]);

		if (why || (files[i] && !cl->nkernels)) {
			snprintf(what, cap, "%s %s", fields[i],
				 why ? why : "names a file but there are no kernels");
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < cl->nkernels; i++) {
		const struct chipd_cl_kernel *k = &cl->kernels[i];
		const char *why = NULL;

		if (!ident_ok(k->name))
			why = "its name is not 1..23 characters of [a-z0-9_]";
		else if (k->args_size == 0 || k->args_size > CHIPD_CL_KARGS_MAX)
			why = "its args_size is not 1..4096";
		for (uint32_t j = 0; !why && j < i; j++)
			if (strcmp(cl->kernels[j].name, k->name) == 0)
				why = "listed twice";
		if (why) {
			snprintf(what, cap, "kernel %" PRIu32 " (%.23s): %s", i,
				 ident_ok(k->name) ? k->name : "?", why);
			return -EINVAL;
		}
	}
	return 0;
}

/* Keeps chipd's copy of the checked kernel fields of @cl in @wc. */
static void kernels_copy(struct wl_callable *wc, const struct chipd_callable *cl)
{
	const char *files[3] = {cl->kernels_sim, cl->kernels_amd, cl->kernels_nvidia};

	wc->nkernels = cl->nkernels;
	for (uint32_t i = 0; i < cl->nkernels; i++) {
		snprintf(wc->knames[i], sizeof(wc->knames[i]), "%s", cl->kernels[i].name);
		wc->kargs[i] = cl->kernels[i].args_size;
	}
	for (int i = 0; i < 3; i++)
		snprintf(wc->kfile[i], sizeof(wc->kfile[i]), "%s", files[i] ? files[i] : "");
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
		return bad(msg, cap, -EINVAL, path, "token_bytes is not 4");
	if (cl->reserved[0] || cl->reserved[1] || cl->reserved[2] || cl->reserved[3])
		return bad(msg, cap, -EINVAL, path, "reserved fields are not zero");
	if (cl->payload_bytes > CHIPD_CL_PAYLOAD_MAX) {
		snprintf(what, sizeof(what), "payload_bytes %u is over %u", cl->payload_bytes,
			 CHIPD_CL_PAYLOAD_MAX);
		return bad(msg, cap, -EINVAL, path, what);
	}
	if (cl->input_max > CHIPD_CL_INPUT_MAX) {
		snprintf(what, sizeof(what), "input_max %u is over %u", cl->input_max,
			 CHIPD_CL_INPUT_MAX);
		return bad(msg, cap, -EINVAL, path, what);
	}
	if (cl->output_max > CHIPD_CL_OUTPUT_MAX) {
		snprintf(what, sizeof(what), "output_max %u is over %u", cl->output_max,
			 CHIPD_CL_OUTPUT_MAX);
		return bad(msg, cap, -EINVAL, path, what);
	}
	if (kernels_ok(cl, what, sizeof(what)) != 0)
		return bad(msg, cap, -EINVAL, path, what);
	if (!cl->steps || !cl->cost || !cl->reserve || !cl->fill || !cl->build || !cl->release)
		return bad(msg, cap, -EINVAL, path,
			   "a required hook (steps, cost, reserve, fill, build, release) is NULL");
	return 0;
}

/* ---- loading ---- */

static void names_update(void)
{
	for (unsigned i = 0; i < nreg; i++)
		names[i] = reg[i]->name;
	if (names)
		names[nreg] = NULL;
}

/* Room for one more entry (and its name), under reg_lock. */
static int grow(void)
{
	struct wl_callable **nr;
	const char **nn;
	unsigned cap = cap_reg ? 2 * cap_reg : 8;

	if (nreg < cap_reg)
		return 0;
	nr = realloc(reg, cap * sizeof(*reg));
	if (!nr)
		return -ENOMEM;
	reg = nr;
	nn = realloc(names, (cap + 1) * sizeof(*names));
	if (!nn)
		return -ENOMEM;
	names = nn;
	cap_reg = cap;
	return 0;
}

static struct wl_callable *find_locked(const char *name)
{
	for (unsigned i = 0; i < nreg; i++)
		if (strcmp(reg[i]->name, name) == 0)
			return reg[i];
	return NULL;
}

static void drop_entry(unsigned i)
{
	struct wl_callable *wc = reg[i];

	memmove(&reg[i], &reg[i + 1], (nreg - i - 1) * sizeof(*reg));
	nreg--;
	names_update();
	wl_kernels_free(wc);
	dlclose(wc->dl);
	free(wc);
}

/* dlerror's text after a failed dlopen of @path, without the "PATH: " it starts with
 * (the message names the file already, and must fit an error envelope whole). */
static const char *dlopen_why(const char *path)
{
	const char *e = dlerror();
	size_t n = strlen(path);

	if (!e)
		return "unknown error";
	if (strncmp(e, path, n) == 0 && e[n] == ':' && e[n + 1] == ' ')
		return e + n + 2;
	return e;
}

/* Whether @sym, the address dlsym found for the entry, is a data symbol's (an object:
 * a table exported under the entry's name), which would be called as code and crash
 * the process loading it (chipd at start, the supervisor at a registration). An
 * address no symbol of the object starts at (an IFUNC's resolved code) is taken as
 * code, as before. */
static bool entry_is_data(void *sym)
{
	const ElfW(Sym) *es = NULL;
	Dl_info info;

	if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es || info.dli_saddr != sym)
		return false;
	return ELF64_ST_TYPE(es->st_info) != STT_FUNC &&
	       ELF64_ST_TYPE(es->st_info) != STT_GNU_IFUNC;
}

/* Loads @path under @name (NULL: the table's), the file @want names when not NULL;
 * its identity in *@got when not NULL. Under reg_lock. */
static int load_file(const char *path, const char *name, const struct wl_file_id *want,
		     struct wl_file_id *got, bool *no_entry, char *msg, size_t cap)
{
	const struct chipd_callable *cl;
	chipd_callable_entry_fn entry;
	struct wl_callable *wc, *old;
	char what[WL_MSG_MAX + 64], imsg[WL_MSG_MAX] = "";
	bool shared = false;
	struct wl_file_id checked;
	struct stat sb;
	void *dl, *sym;
	int err = path_stat_ok("callable", path, false, &sb, msg, cap);

	if (err)
		return err;
	checked = file_id_of(&sb);
	if (name && !ident_ok(name))
		return bad(msg, cap, -EINVAL, path,
			   "the name given is not 1..23 characters of [a-z0-9_]");
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		snprintf(what, sizeof(what), "cannot load: %s", dlopen_why(path));
		return bad(msg, cap, -EINVAL, path, what);
	}
	/* before its entry is called: what was checked above is what dlopen read */
	err = file_same(path, &checked, want, msg, cap);
	if (err) {
		dlclose(dl);
		return err;
	}
	sym = dlsym(dl, CHIPD_CALLABLE_ENTRY);
	*(void **)&entry = sym && !entry_is_data(sym) ? sym : NULL;
	cl = entry ? entry() : NULL;
	if (sym && !entry)
		err = bad(msg, cap, -EINVAL, path,
			  CHIPD_CALLABLE_ENTRY " is a data symbol, not a function");
	else if (!entry && dlsym(dl, "chipd_callable_v1"))
		err = bad(msg, cap, -EINVAL, path,
			  "built for ABI 1, this chipd loads 2: rebuild it with this chipd's "
			  "chipd_callable.h");
	else if (!entry) {
		err = bad(msg, cap, -EINVAL, path, "no symbol " CHIPD_CALLABLE_ENTRY);
		*no_entry = true;
	}
	else if (!cl)
		err = bad(msg, cap, -EINVAL, path, CHIPD_CALLABLE_ENTRY " returned NULL");
	else if (cl->abi != CHIPD_CALLABLE_ABI) {
		snprintf(what, sizeof(what), "ABI version %" PRIu32 ", this chipd loads %d", cl->abi,
			 CHIPD_CALLABLE_ABI);
		err = bad(msg, cap, -EINVAL, path, what);
	} else
		err = table_ok(cl, path, msg, cap);
	if (!err && !name)
		name = cl->name;
	if (!err && (old = find_locked(name)) != NULL) {
		snprintf(what, sizeof(what), "workload \"%.23s\" is already loaded from %.*s",
			 name, WL_MSG_MAX - 40, old->path);
		err = bad(msg, cap, -EEXIST, path, what);
	}
	if (!err && nreg >= limit) {
		snprintf(what, sizeof(what), "more than %u workloads (the limit)", limit);
		err = bad(msg, cap, -ENOSPC, path, what);
	}
	/* one file under two names is one copy of the library (dlopen counts references,
	 * and finds a loaded one by its path alone): it was initialised when first loaded,
	 * and its requests may be running; a path whose file changed since then would
	 * give the old copy under the new file's name */
	for (unsigned i = 0; !err && i < nreg; i++) {
		if (reg[i]->dl != dl)
			continue;
		if (!file_id_eq(&reg[i]->file, &checked)) {
			snprintf(what, sizeof(what),
				 "loaded already as %s from a file since replaced or rewritten: "
				 "unregister %s first",
				 reg[i]->name, reg[i]->name);
			err = bad(msg, cap, -ESTALE, path, what);
		}
		shared = true;
	}
	if (!err && !shared && cl->init && cl->init(&wl_host, imsg, sizeof(imsg)) != 0) {
		snprintf(what, sizeof(what), "init failed: %s", imsg[0] ? imsg : "(no message)");
		err = bad(msg, cap, -EINVAL, path, what);
	}
	wc = err ? NULL : calloc(1, sizeof(*wc));
	if (!err && (!wc || grow() != 0)) {
		free(wc);
		err = bad(msg, cap, -ENOMEM, path, "out of memory");
	}
	if (err) {
		dlclose(dl);
		return err;
	}
	wc->cl = cl;
	wc->dl = dl;
	snprintf(wc->name, sizeof(wc->name), "%s", name);
	snprintf(wc->path, sizeof(wc->path), "%s", path);
	for (uint32_t i = 0; i < cl->nparams; i++)
		wc->info[i] = (struct wl_param_info){cl->params[i].key, cl->params[i].def,
						     cl->params[i].lo, cl->params[i].hi,
						     cl->params[i].doc};
	kernels_copy(wc, cl);
	wc->file = checked;
	if (got)
		*got = checked;
	reg[nreg++] = wc;
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

/* Whether a callable loaded since entry @first names @file as one of its kernel files
 * (a sim kernel file is a "*.so" beside its callable, but no callable). Under reg_lock. */
static bool is_kernel_file(const char *file, unsigned first)
{
	for (unsigned i = first; i < nreg; i++)
		for (int k = 0; k < 3; k++)
			if (strcmp(reg[i]->kfile[k], file) == 0)
				return true;
	return false;
}

int wl_load_dir(const char *dir, char *msg, size_t cap)
{
	char **files = NULL, path[WL_PATH_MAX];
	bool *deferred = NULL; /* files without an entry: kernel files, or refused */
	unsigned first;
	size_t n = 0;
	int err = path_ok(dir, true, msg, cap);

	pthread_mutex_lock(&reg_lock);
	first = nreg;

	if (!err)
		err = list_dir(dir, &files, &n, msg, cap);
	if (!err && n == 0)
		err = bad(msg, cap, -ENOENT, dir, "no callable (*.so) in the directory");
	if (!err && !(deferred = calloc(n, sizeof(*deferred))))
		err = bad(msg, cap, -ENOMEM, dir, "out of memory");
	for (size_t i = 0; !err && i < n; i++) {
		bool no_entry = false;

		if (snprintf(path, sizeof(path), "%s/%s", dir, files[i]) >= (int)sizeof(path))
			err = bad(msg, cap, -ENAMETOOLONG, dir, "a path is too long");
		else
			err = load_file(path, NULL, NULL, NULL, &no_entry, msg, cap);
		if (err && no_entry) { /* a callable's sim kernels? decided once all loaded */
			err = 0;
			deferred[i] = true;
		}
	}
	for (size_t i = 0; !err && i < n; i++) {
		if (!deferred[i] || is_kernel_file(files[i], first))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]); /* fitted above */
		err = bad(msg, cap, -EINVAL, path, "no symbol " CHIPD_CALLABLE_ENTRY);
	}
	free(deferred);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	while (err && nreg > first) /* all or nothing: what this call loaded goes again */
		drop_entry(nreg - 1);
	for (unsigned i = first; !err && i < nreg; i++)
		reg[i]->at_start = true;
	pthread_mutex_unlock(&reg_lock);
	return err;
}

int wl_load_file(const char *path, const char *name, char *msg, size_t cap)
{
	return wl_load_file_as(path, name, NULL, NULL, msg, cap);
}

int wl_load_file_as(const char *path, const char *name, const struct wl_file_id *want,
		    struct wl_file_id *got, char *msg, size_t cap)
{
	char dir[WL_PATH_MAX];
	bool no_entry = false;
	int err;

	if (!path || path[0] != '/')
		return bad(msg, cap, -EINVAL, path ? path : "(none)", "not an absolute path");
	if (strlen(path) >= WL_PATH_MAX)
		return bad(msg, cap, -ENAMETOOLONG, "(path)", "the path is too long");
	/* its directory, as wl_load_dir's: one writable by another user would let them
	 * swap the file between the checks and the load */
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	err = path_ok(dir[0] ? dir : "/", true, msg, cap);
	if (err)
		return err;
	pthread_mutex_lock(&reg_lock);
	err = load_file(path, name, want, got, &no_entry, msg, cap);
	pthread_mutex_unlock(&reg_lock);
	return err;
}

int wl_unload(const char *name, char *msg, size_t cap)
{
	int err = -ENOENT;
	uint32_t users;

	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < nreg; i++) {
		if (strcmp(reg[i]->name, name) != 0)
			continue;
		users = atomic_load_explicit(&reg[i]->users, memory_order_acquire);
		if (users) {
			snprintf(msg, cap, "workload \"%s\" has %u requests in use", name, users);
			err = -EBUSY;
		} else {
			drop_entry(i);
			err = 0;
		}
		break;
	}
	if (err == -ENOENT)
		snprintf(msg, cap, "no workload \"%s\" is loaded", name);
	pthread_mutex_unlock(&reg_lock);
	return err;
}

int wl_set_limit(unsigned n)
{
	int err = 0;

	pthread_mutex_lock(&reg_lock);
	if (n == 0 || n < nreg)
		err = -EINVAL;
	else
		limit = n;
	pthread_mutex_unlock(&reg_lock);
	return err;
}

unsigned wl_count(void)
{
	unsigned n;

	pthread_mutex_lock(&reg_lock);
	n = nreg;
	pthread_mutex_unlock(&reg_lock);
	return n;
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

	if (wl_count())
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
	return wl_count() > 0;
}

const struct wl_callable *wl_find(const char *name)
{
	const struct wl_callable *wc;

	ensure_loaded();
	pthread_mutex_lock(&reg_lock);
	wc = find_locked(name);
	pthread_mutex_unlock(&reg_lock);
	return wc;
}

const char *const *wl_names(void)
{
	static const char *const none[] = {NULL};

	ensure_loaded();
	return names ? names : none;
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
