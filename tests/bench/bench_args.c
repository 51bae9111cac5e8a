/* bench_args.c - the chipbench modes' option parser (bench_args.h). getopt_long does
 * the walking, so --name=value, unique abbreviations and options after positional
 * arguments work as they always did; this file adds the table and checks each value
 * before storing it. */
#include "bench_args.h"

#include "bench_chipd.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>

/* getopt_long's val for table entry i: clear of every short option and of '?', ':' */
#define BA_VAL_BASE 256

int bench_args_error(const char *mode, void (*usage)(FILE *), const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "chipbench %s: ", mode);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	return 64;
}

/* Decimal digits only: strtoul alone would take "-1" (as ULONG_MAX), " 5" and "+5". */
static int ba_unsigned(const char *s, const struct bench_arg *a)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno || v > UINT_MAX || (double)v < a->min || (double)v > a->max)
		return -EINVAL;
	*(unsigned *)a->dst = (unsigned)v;
	return 0;
}

static int ba_double(const char *s, const struct bench_arg *a)
{
	double v;
	char *end;

	if (!*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	/* the range test is written so that a NaN fails it */
	if (*end || errno || !(v >= a->min && v <= a->max))
		return -EINVAL;
	*(double *)a->dst = v;
	return 0;
}

/* Stores @value (NULL for a flag) at @a's dst. Returns 0, or 64 after the error line
 * and the usage. */
static int ba_store(const char *mode, const struct bench_arg *a, const char *value,
		    void (*usage)(FILE *))
{
	switch (a->kind) {
	case BENCH_ARG_FLAG:
	case BENCH_ARG_CLEAR:
		*(bool *)a->dst = a->kind == BENCH_ARG_FLAG;
		return 0;
	case BENCH_ARG_STRING:
		*(const char **)a->dst = value;
		return 0;
	case BENCH_ARG_UNSIGNED:
		if (ba_unsigned(value, a) == 0)
			return 0;
		return bench_args_error(mode, usage,
					"--%s: '%s' is not a whole number in %.0f..%.0f", a->name,
					value, a->min, a->max);
	case BENCH_ARG_DOUBLE:
		if (ba_double(value, a) == 0)
			return 0;
		return bench_args_error(mode, usage, "--%s: '%s' is not a number in %g..%g",
					a->name, value, a->min, a->max);
	case BENCH_ARG_LIST: {
		const struct bench_arg_list *l = a->dst;

		if (bench_chipd_parse_list(value, l->v, l->cap, (unsigned)a->max, l->n) == 0)
			return 0;
		return bench_args_error(mode, usage,
					"--%s: '%s' is not N,N,...: at most %u, each 1..%.0f",
					a->name, value, l->cap, a->max);
	}
	case BENCH_ARG_CUSTOM:
		if (a->parse(value, a->dst) == 0)
			return 0;
		return bench_args_error(mode, usage, "--%s: '%s' is not %s", a->name, value,
					a->metavar);
	}
	return bench_args_error(mode, usage, "--%s: unknown option kind %d", a->name, (int)a->kind);
}

int bench_args_parse(int argc, char **argv, const char *mode, const struct bench_arg *args,
		     size_t n, void (*usage)(FILE *))
{
	struct option lopts[BENCH_ARGS_MAX + 2] = {{0}};
	int c;

	if (n > BENCH_ARGS_MAX)
		return bench_args_error(mode, usage, "%zu options: more than BENCH_ARGS_MAX", n);
	for (size_t i = 0; i < n; i++) {
		bool flag = args[i].kind == BENCH_ARG_FLAG || args[i].kind == BENCH_ARG_CLEAR;

		lopts[i] = (struct option){args[i].name, flag ? no_argument : required_argument,
					   NULL, BA_VAL_BASE + (int)i};
	}
	lopts[n] = (struct option){"help", no_argument, NULL, 'h'};
	/* the errors are ours, one line each; 0 starts a fresh scan (glibc) */
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, ":h", lopts, NULL)) != -1) {
		int rc;

		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == ':')
			return bench_args_error(mode, usage, "%s: needs a value", argv[optind - 1]);
		if (c == '?' && optopt > 0 && optopt < BA_VAL_BASE && optopt != 'h')
			return bench_args_error(mode, usage, "unknown option '-%c'", optopt);
		if (c == '?' && optopt)
			return bench_args_error(mode, usage, "%s: takes no value",
						argv[optind - 1]);
		if (c < BA_VAL_BASE || c >= BA_VAL_BASE + (int)n)
			return bench_args_error(mode, usage, "unknown option '%s'",
						argv[optind - 1]);
		rc = ba_store(mode, &args[c - BA_VAL_BASE], optarg, usage);
		if (rc)
			return rc;
	}
	if (optind < argc)
		return bench_args_error(mode, usage, "stray argument '%s'", argv[optind]);
	return 0;
}
