/* bench_args.h - the chipbench modes' option parser: one table of long options per
 * mode, each value checked (whole numbers and ranges, no trailing garbage) before it
 * is stored, so that a typo is a usage error (exit 64) instead of a silent 0. */
#ifndef CHIPD_BENCH_ARGS_H
#define CHIPD_BENCH_ARGS_H

#include <stddef.h>
#include <stdio.h>

/* The most options one table may hold (--help comes on top). */
#define BENCH_ARGS_MAX 16

enum bench_arg_kind {
	BENCH_ARG_FLAG,	    /* no value: sets the bool at dst to true */
	BENCH_ARG_CLEAR,    /* no value: sets the bool at dst to false (--no-X of a default-on X) */
	BENCH_ARG_UNSIGNED, /* unsigned: a decimal whole number in min..max */
	BENCH_ARG_DOUBLE,   /* double: a finite number in min..max */
	BENCH_ARG_STRING,   /* const char *: the argument itself */
	BENCH_ARG_LIST,	    /* struct bench_arg_list: N,N,... (bench_chipd_parse_list) */
	BENCH_ARG_CUSTOM,   /* parse(value, dst): 0, or -EINVAL when value is not metavar */
};

/* Where a BENCH_ARG_LIST stores its numbers: at most @cap of them in @v, their count
 * in *@n. */
struct bench_arg_list {
	unsigned *v;
	unsigned cap;
	unsigned *n;
};

/* One long option, --name. */
struct bench_arg {
	const char *name;
	enum bench_arg_kind kind;
	void *dst;
	double min, max;     /* UNSIGNED, DOUBLE: the range, both ends in; LIST: 1..max each */
	const char *metavar; /* CUSTOM: what a good value looks like, for the error line */
	int (*parse)(const char *value, void *dst); /* CUSTOM only */
};

/* Parses argv[1..argc-1] of chipbench mode @mode against the @n options of @args,
 * storing each value at its dst as it comes (a repeated option: the last wins); -h
 * and --help are always there. Returns 0 when every argument was good; 1 for --help,
 * with @usage printed on stdout (the mode then exits 0); 64 for anything else (an
 * unknown option, a missing or bad value, a stray positional argument), after one
 * line on stderr naming the option and the value, then @usage. */
int bench_args_parse(int argc, char **argv, const char *mode, const struct bench_arg *args,
		     size_t n, void (*usage)(FILE *));

/* For a mode's own checks after bench_args_parse: prints "chipbench @mode: " and the
 * printf-style message as one line, then @usage, on stderr. Returns 64. */
int bench_args_error(const char *mode, void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
