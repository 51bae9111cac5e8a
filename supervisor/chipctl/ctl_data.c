/* ctl_data.c - the bytes of `chipctl submit`: a request's input read from a file or
 * standard input, token payloads and output blobs printed as hex, an output written
 * to a file opened before the request is submitted.
 *
 * Where the input travels (inline in the submit, or through the connection's data
 * area) is libchipd's choice (chipd_submit); chipctl bounds it by CHIPD_INPUT_MAX
 * only, the most a request may carry, and leaves the data area's size to libchipd's
 * own refusal, which names it. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ctl_input_read(const struct ctl *g, const char *path, uint8_t **buf, uint32_t *len)
{
	bool std = strcmp(path, "-") == 0;
	FILE *f = std ? stdin : fopen(path, "rbe");
	const char *name = std ? "standard input" : path;
	size_t n = 0, got;
	uint8_t *b;
	int rc = 0;

	if (!f)
		return ctl_usage(g, "--input: cannot open '%s': %s", path, strerror(errno));
	/* one byte more than a request takes tells "too large" from "just fits" */
	b = malloc(CHIPD_INPUT_MAX + 1u);
	if (!b) {
		rc = CTL_EXIT_FAILED;
		goto out_close;
	}
	do {
		got = fread(b + n, 1, CHIPD_INPUT_MAX + 1u - n, f);
		n += got;
	} while (got && n <= CHIPD_INPUT_MAX);
	if (ferror(f))
		rc = ctl_usage(g, "--input: cannot read %s: %s", name, strerror(errno));
	else if (n == 0)
		rc = ctl_usage(g, "--input: %s is empty (a request's input is 1..%u bytes)", name,
			       CHIPD_INPUT_MAX);
	else if (n > CHIPD_INPUT_MAX)
		rc = ctl_usage(g, "--input: %s is over %u bytes, the most a request takes", name,
			       CHIPD_INPUT_MAX);
	if (rc) {
		free(b);
		goto out_close;
	}
	*buf = b;
	*len = (uint32_t)n;
out_close:
	if (!std)
		fclose(f);
	return rc;
}

void ctl_hex(FILE *f, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%02x", (unsigned)p[i]);
}

int ctl_output_open(const struct ctl *g, const char *path, int *fd)
{
	/* "-" would be a file of that name, where --input - is standard input: refused,
	 * as standard output carries chipctl's own lines (ids, tokens) */
	if (strcmp(path, "-") == 0)
		return ctl_usage(g, "--output -: standard output carries chipctl's own lines; "
				    "give a file (/dev/stdout to mix them)");
	/* not truncated yet: a request that fails leaves the file as it was */
	*fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	if (*fd < 0)
		return ctl_usage(g, "--output: cannot open '%s': %s", path, strerror(errno));
	return 0;
}

int ctl_output_write(int fd, const void *p, uint32_t n)
{
	const char *b = p;
	uint32_t done = 0;
	struct stat st;
	bool file;

	if (fstat(fd, &st))
		return -errno;
	/* A regular file's content is replaced in place; a pipe, a FIFO or a terminal
	 * (--output /dev/stdout) cannot be truncated or written at an offset: the bytes
	 * are written to it in order. */
	file = S_ISREG(st.st_mode);
	if (file && ftruncate(fd, 0))
		return -errno;
	while (done < n) {
		ssize_t w =
		    file ? pwrite(fd, b + done, n - done, done) : write(fd, b + done, n - done);

		if (w < 0 && errno != EINTR)
			return -errno;
		if (w == 0)
			return -EIO; /* nothing taken: not progress */
		done += w > 0 ? (uint32_t)w : 0;
	}
	return 0;
}
