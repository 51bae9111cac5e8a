/* wl_kern.c - a callable's own kernels on a device: the file for the device's kind,
 * loaded from the callable's directory with the loader's owner and mode checks, every
 * kernel of the table resolved in it, and the functions launch_own finds (wl_host.c).
 * The bindings (callable, device) are one list under one mutex: loads and unloads are
 * rare (a registration), lookups one per launch. */
#include "wl_internal.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wl_kmod {
	struct wl_kmod *next;
	const struct wl_callable *wc;
	struct dev *dev;
	struct dev_module *mod;
	struct dev_func *fn[CHIPD_CL_KERNELS_MAX];
};

static pthread_mutex_t kern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wl_kmod *kmods; /* under kern_lock */

/* The kernel file's slot in wl_callable.kfile for @kind, and the device's name. */
static int kfile_slot(enum dev_kind kind, const char **what)
{
	if (kind == DEV_SIM) {
		*what = "sim";
		return 0;
	}
#ifdef CHIPD_HIP_CUDA
	*what = "nvidia";
	return 2;
#else
	*what = "amd";
	return 1;
#endif
}

static struct wl_kmod *find_locked(const struct wl_callable *wc, struct dev *d)
{
	for (struct wl_kmod *k = kmods; k; k = k->next)
		if (k->wc == wc && k->dev == d)
			return k;
	return NULL;
}

/* The path of @wc's kernel file for @kind into @path, checked as the callable's own
 * file is (wl_path_ok); its name in *@file. */
static int file_path(const struct wl_callable *wc, enum dev_kind kind, char *path,
		     const char **file, char *msg, size_t cap)
{
	char dir[WL_PATH_MAX], why[WL_PATH_MAX + 128];
	const char *what;
	int err;

	*file = wc->kfile[kfile_slot(kind, &what)];
	if (!(*file)[0]) {
		snprintf(msg, cap, "callable %s: no kernels for the %s device (kernels_%s is NULL)",
			 wc->name, what, what);
		return -ENOENT;
	}
	snprintf(dir, sizeof(dir), "%s", wc->path);
	if (snprintf(path, WL_PATH_MAX, "%s/%s", dirname(dir), *file) >= WL_PATH_MAX) {
		snprintf(msg, cap, "callable %s: the path of %s is too long", wc->name, *file);
		return -ENAMETOOLONG;
	}
	err = wl_path_ok("kernel file", path, false, why, sizeof(why));
	if (err)
		snprintf(msg, cap, "callable %s: %s", wc->name, why);
	return err;
}

static int file_check(const struct wl_callable *wc, enum dev_kind kind, char *msg, size_t cap)
{
	char path[WL_PATH_MAX];
	const char *file;

	return file_path(wc, kind, path, &file, msg, cap);
}

/* Loads @wc's file on @d and resolves its kernels into @k. */
static int load(const struct wl_callable *wc, struct dev *d, struct wl_kmod *k, char *msg,
		size_t cap)
{
	char path[WL_PATH_MAX], dmsg[DEV_ERRMSG_MAX];
	struct dev_info info;
	const char *file;
	int err;

	dev_get_info(d, &info);
	err = file_path(wc, info.kind, path, &file, msg, cap);
	if (err)
		return err;
	err = dev_module_load(d, path, &k->mod);
	if (err) {
		dev_last_error(d, dmsg, sizeof(dmsg));
		snprintf(msg, cap, "callable %s: cannot load its kernels from %s: %s", wc->name,
			 file, dmsg);
		return err == -ENOENT ? -ENOENT : -EINVAL;
	}
	for (uint32_t i = 0; i < wc->nkernels; i++) {
		if (dev_module_func(k->mod, wc->knames[i], &k->fn[i]) == 0)
			continue;
		snprintf(msg, cap, "callable %s: kernel \"%s\" not found in %s", wc->name,
			 wc->knames[i], file);
		dev_module_unload(k->mod);
		return -ENOENT;
	}
	return 0;
}

int wl_kernels_attach(const char *workload, struct dev *d, char *msg, size_t cap)
{
	const struct wl_callable *wc = wl_find(workload);
	struct wl_kmod *k;
	int err = 0;

	if (!wc) {
		snprintf(msg, cap, "no workload \"%s\" is loaded", workload);
		return -ENOENT;
	}
	if (!wc->nkernels)
		return 0;
	pthread_mutex_lock(&kern_lock);
	if (find_locked(wc, d))
		goto out;
	k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(msg, cap, "callable %s: out of memory for its kernels", wc->name);
		err = -ENOMEM;
		goto out;
	}
	k->wc = wc;
	k->dev = d;
	err = load(wc, d, k, msg, cap);
	if (err) {
		free(k);
		goto out;
	}
	k->next = kmods;
	kmods = k;
out:
	pthread_mutex_unlock(&kern_lock);
	return err;
}

/* Unloads and frees every binding of @wc on @d (NULL: of any). */
static void drop(const struct wl_callable *wc, struct dev *d)
{
	struct wl_kmod **pp = &kmods, *k;

	pthread_mutex_lock(&kern_lock);
	while ((k = *pp) != NULL) {
		if ((wc && k->wc != wc) || (d && k->dev != d)) {
			pp = &k->next;
			continue;
		}
		*pp = k->next;
		dev_module_unload(k->mod);
		free(k);
	}
	pthread_mutex_unlock(&kern_lock);
}

void wl_kernels_detach(const char *workload, struct dev *d)
{
	const struct wl_callable *wc = wl_find(workload);

	if (wc)
		drop(wc, d);
}

void wl_kernels_detach_all(struct dev *d)
{
	drop(NULL, d);
}

void wl_kernels_free(struct wl_callable *wc)
{
	drop(wc, NULL);
}

const struct dev_func *wl_kernels_func(const struct wl_callable *wc, struct dev *d,
				       uint32_t index)
{
	const struct dev_func *f = NULL;
	struct wl_kmod *k;

	if (index >= wc->nkernels)
		return NULL;
	pthread_mutex_lock(&kern_lock);
	k = find_locked(wc, d);
	if (k)
		f = k->fn[index];
	pthread_mutex_unlock(&kern_lock);
	return f;
}

int wl_kernels_check(enum dev_kind kind, char *msg, size_t cap)
{
	const char *const *names = wl_names();
	struct dev *d = NULL;
	int err = 0;

	for (unsigned i = 0; !err && names[i]; i++) {
		const struct wl_callable *wc = wl_find(names[i]);
		struct wl_kmod k = {0};

		if (!wc || !wc->nkernels)
			continue;
		if (kind != DEV_SIM) {
			err = file_check(wc, kind, msg, cap);
			continue;
		}
		if (!d && (err = dev_open(&d, DEV_SIM, 0, msg, cap)) != 0)
			break;
		err = load(wc, d, &k, msg, cap);
		if (!err)
			dev_module_unload(k.mod);
	}
	dev_close(d);
	return err;
}
