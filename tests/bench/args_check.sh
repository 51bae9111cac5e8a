#!/bin/sh
# args_check.sh CHIPBENCH - a bad option value is a usage error: exit 64 and one line
# on stderr naming the option and the value (bench_args.c), never a silent 0 and a
# run; --help prints the usage on stdout and exits 0. Nothing here starts a chipd.
bin=$1
fails=0
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT

# expect LINE ARG...: chipbench ARG... exits 64 with LINE first on stderr
expect() {
	want=$1
	shift
	"$bin" "$@" >/dev/null 2>"$err"
	rc=$?
	line=$(head -n 1 "$err")
	if [ "$rc" -ne 64 ] || [ "$line" != "$want" ]; then
		echo "FAIL: chipbench $*: exit $rc, first line: $line"
		echo "      wanted exit 64, first line: $want"
		fails=$((fails + 1))
	else
		echo "ok: chipbench $*: exit 64: $line"
	fi
}

# expect_help MODE FLAG: exit 0, the mode's usage on stdout and nothing on stderr
expect_help() {
	out=$("$bin" "$1" "$2" 2>"$err")
	rc=$?
	case "$out" in
	"usage: chipbench $1 "*) ;;
	*) rc="$rc (no usage on stdout)" ;;
	esac
	if [ "$rc" != 0 ] || [ -s "$err" ]; then
		echo "FAIL: chipbench $1 $2: exit $rc, stderr: $(head -n 1 "$err")"
		fails=$((fails + 1))
	else
		echo "ok: chipbench $1 $2: exit 0: $(printf '%s\n' "$out" | head -n 1)"
	fi
}

expect "chipbench overlap: --device-us: 'abc' is not a whole number in 1..4294967295" \
	overlap --device-us abc
expect "chipbench overlap: --tokens: needs a value" overlap --tokens
expect "chipbench overlap: --requests: '65' is not a whole number in 1..64" \
	overlap --requests=65
expect "chipbench e2e: --seconds: '-1' is not a number in 0..3600" e2e --seconds -1
expect "chipbench e2e: --seconds: '0' is not more than 0" e2e --seconds 0
expect "chipbench e2e: --tokens: '' is not a whole number in 1..4294967295" e2e --tokens ''
expect "chipbench e2e: --small-repeats: '0' is not a whole number in 1..99" e2e --small-repeats 0
expect "chipbench e2e: --clients: '1,0' is not N,N,...: at most 8, each 1..256" \
	e2e --clients 1,0
expect \
	"chipbench dispatch: --tasks: '99999999999999999999' is not a whole number in 1..4294967295" \
	dispatch --tasks 99999999999999999999
expect "chipbench dispatch: --runs: '-1' is not a whole number in 1..101" dispatch --runs -1
expect "chipbench dispatch: unknown option '--bogus'" dispatch --bogus
expect "chipbench dispatch: --kernel-us: '10000001' is not a whole number in 0..10000000" \
	dispatch --kernel-us 10000001
expect "chipbench mailbox: --cpus: 'x' is not C,S (CPUs, -1 = unpinned)" mailbox --cpus x
expect "chipbench mailbox: --iters: '5x' is not a whole number in 1..4294967295" \
	mailbox --iters 5x
expect "chipbench mailbox: --no-chipd=1: takes no value" mailbox --no-chipd=1
expect "chipbench startup: --chips: '0' is not N,N,...: at most 8, each 1..64" \
	startup --chips 0
expect "chipbench idle: stray argument 'extra-arg'" idle extra-arg
expect "chipbench idle: --seconds: 'nan' is not a number in 0..3600" idle --seconds nan
for mode in mailbox overlap dispatch e2e startup idle; do
	expect_help "$mode" --help
done
expect_help startup -h

[ "$fails" -eq 0 ] || echo "args_check: $fails case(s) failed"
[ "$fails" -eq 0 ]
