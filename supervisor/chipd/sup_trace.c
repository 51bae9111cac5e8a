/* sup_trace.c - the trace op: start and stop recording in every running worker, and
 * collect: each worker writes its events as a fragment (a comma-separated list of
 * Chrome trace events, pid = chip) in the runtime directory (private: sup_files.h); the
 * supervisor joins them into one Chrome/Perfetto JSON document, written to a new
 * temporary file of its own (mode 0600, a name nobody could plant beforehand) and
 * renamed. A worker that ends takes its parts with it (sup_trace_parts_remove). */
#include "sup.h"
#include "sup_log.h"

#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The name of chip @chip's fragment in the runtime directory, beside the pid file
 * ("chipd.PID.trace.chipN.part"); the worker writes it under this name plus ".XXXXXX"
 * and renames it. Returns snprintf's length. */
static int part_name(const struct sup *s, uint32_t chip, char *buf, size_t cap)
{
	return snprintf(buf, cap, "chipd.%d.trace.chip%u.part", (int)s->pid, chip);
}

void sup_trace_parts_remove(struct sup *s, uint32_t chip)
{
	char prefix[64];
	size_t len = (size_t)part_name(s, chip, prefix, sizeof(prefix));
	DIR *d = opendir(s->cfg.runtime_dir);
	struct dirent *e;

	if (!d)
		return;
	/* the directory is private (sup_files.h): only chipd's processes name files so */
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, len) == 0 &&
		    (e->d_name[len] == '\0' || e->d_name[len] == '.') &&
		    unlinkat(dirfd(d), e->d_name, 0) == 0)
			SUP_DEBUG((int)chip, 0, "trace part %s of the ended worker removed",
				  e->d_name);
	closedir(d);
}

/* Appends the fragment file @part to @out, a comma first unless it is the first
 * non-empty one. A part that is gone (its worker died since it answered, and
 * sup_trace_parts_remove took it) is left out, as a chip that is gone is. Returns 0
 * or -errno. */
static int append_part(FILE *out, const char *part, bool *first)
{
	char buf[8192];
	FILE *in = fopen(part, "r");
	size_t n;
	bool any = false;
	int rc = 0;

	if (!in)
		return errno == ENOENT ? 0 : -errno;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		if (!any && !*first && fputc(',', out) == EOF)
			rc = -EIO;
		any = true;
		if (fwrite(buf, 1, n, out) != n)
			rc = -EIO;
	}
	if (ferror(in))
		rc = -EIO;
	fclose(in);
	if (any)
		*first = false;
	return rc;
}

/* Joins the fragments @parts[0..n) into @path. */
static int merge(const char *path, char (*parts)[PROTO_PATH_MAX + 16], uint32_t n,
		 struct proto_error *err)
{
	char tmp[PROTO_PATH_MAX + 8];
	bool first = true;
	FILE *out = NULL;
	int rc = 0, fd;

	/* the output's directory may be shared (/tmp): a fresh random name, O_EXCL */
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd >= 0 && !(out = fdopen(fd, "w"))) {
		rc = -errno;
		close(fd);
		unlink(tmp);
		errno = -rc;
	}
	if (!out)
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": cannot write beside %s: %s",
				  path, strerror(errno));
	fputs("{\"traceEvents\":[", out);
	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = append_part(out, parts[i], &first);
	fputs("],\"displayTimeUnit\":\"ns\"}\n", out);
	if (fclose(out) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0) {
		rc = -errno;
		unlink(tmp);
		/* the caller's path: a directory, or one not ours to replace */
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": cannot write %s: %s", path,
				  strerror(-rc));
	}
	if (rc) {
		unlink(tmp);
		return proto_fail(err, CHIPD_E_INTERNAL, "writing %s: %s", path, strerror(-rc));
	}
	return CHIPD_OK;
}

int sup_trace(struct sup *s, int act, int64_t chip, const char *path, uint64_t *events,
	      uint64_t *dropped, struct proto_error *err)
{
	struct sup_call *c = sup_call_new(PROTO_OP_TRACE);
	char(*parts)[PROTO_PATH_MAX + 16] = calloc(CHIPD_MAX_CHIPS, sizeof(*parts));
	uint32_t nparts = 0;
	int code = CHIPD_OK;

	if (!c || !parts) {
		code = proto_fail(err, CHIPD_E_INTERNAL, "out of memory");
		goto out;
	}
	/* the wire's schema refuses it too; --trace is made absolute at start */
	if (act == PROTO_TRACE_COLLECT && (!path || path[0] != '/')) {
		code = proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": must be absolute");
		goto out;
	}
	/* as for every op with a chip (docs/protocol.md 8.4, "chip") */
	if (chip >= (int64_t)s->cfg.chips) {
		code = proto_fail(err, CHIPD_E_BAD_REQUEST, "\"chip\": %lld, this node has %u",
				  (long long)chip, s->cfg.chips);
		goto out;
	}
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];
		struct proto_msg *req = &c->req;
		struct proto_error werr;
		bool ready;

		if (chip >= 0 && (uint32_t)chip != i)
			continue;
		pthread_mutex_lock(&s->lock);
		ready = w->state == CHIPD_CHIP_READY;
		/* before the start is sent: a worker the event loop starts from here on
		 * (a restart of this one) records from its start too */
		if (act == PROTO_TRACE_START)
			w->tracing = true;
		else if (act == PROTO_TRACE_STOP)
			w->tracing = false;
		pthread_mutex_unlock(&s->lock);
		if (!ready)
			continue;
		proto_msg_init(req, PROTO_OP_TRACE);
		req->act = act;
		if (act == PROTO_TRACE_COLLECT) {
			/* beside the pid file, short whatever the output's length */
			char name[64];
			int len;

			(void)part_name(s, i, name, sizeof(name));
			len = snprintf(parts[nparts], sizeof(parts[nparts]), "%s/%s",
				       s->cfg.runtime_dir, name);

			if (len < 0 || (size_t)len >= sizeof(req->path)) {
				code = proto_fail(err, CHIPD_E_INTERNAL,
						  "runtime directory %s: too long for trace parts",
						  s->cfg.runtime_dir);
				goto out;
			}
			memcpy(req->path, parts[nparts], (size_t)len + 1);
		}
		if (sup_call_run(s, w, c, &werr) != CHIPD_OK) {
			if (act == PROTO_TRACE_COLLECT)
				unlink(parts[nparts]); /* whatever the chip left of it */
			SUP_WARN((int)i, 0, "trace %s: %s",
				 act == PROTO_TRACE_COLLECT ? "collect"
				 : act == PROTO_TRACE_START ? "start"
							    : "stop",
				 werr.message);
			/* a chip that refused the collect fails it; one that is gone is left
			 * out of the file */
			if (!c->rc && act == PROTO_TRACE_COLLECT && code == CHIPD_OK) {
				*err = werr;
				code = (int)werr.code;
			}
			continue;
		}
		*events += (uint64_t)c->ans.events;
		*dropped += (uint64_t)c->ans.dropped;
		if (act == PROTO_TRACE_COLLECT)
			nparts++;
	}
	if (act == PROTO_TRACE_COLLECT && code == CHIPD_OK)
		code = merge(path, parts, nparts, err);
	/* merged or not (an output path nobody can write, a chip that refused): none is
	 * left in the runtime directory */
	for (uint32_t i = 0; i < nparts; i++)
		unlink(parts[i]);
out:
	sup_call_free(c);
	free(parts);
	return code;
}
