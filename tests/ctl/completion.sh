#!/bin/bash
# completion.sh CHIPD CHIPCTL - deploy/bash-completion/chipctl against a running chipd:
# commands, a command's options, --instance with the running instance, submit's
# workloads and a workload's KEY= parameters, register's PATH as files, unregister's NAME
# as the callables, --out, --input and --output as files, submit's data options,
# numbers left alone, and nothing offered (no error, no hang) when the instance is
# not running. Exit status 0, or 1 with the failed case.
set -u
chipd=$(readlink -f "$1")
chipctl=$(readlink -f "$2")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
inst=comp$$
tmp=$(mktemp -d)
export CHIPD_RUNTIME_DIR=$tmp
trap '"$chipctl" --instance "$inst" stop >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail=0

# shellcheck source=/dev/null # the file under test
. "$root/deploy/bash-completion/chipctl"
[ "$(complete -p chipctl)" = "complete -F _chipctl chipctl" ] || { echo "not registered"; exit 1; }

# expect LINE WANT...: completing LINE (cursor at its end) offers exactly WANT
expect() {
	local line=$1 got want
	shift
	COMP_LINE=$line COMP_POINT=${#line}
	_chipctl
	got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
	want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
	if [ "$got" != "$want" ]; then
		echo "FAIL '$line': got [$got] want [$want]"
		fail=1
	else
		echo "ok   '$line' -> [$got]"
	fi
}
# has LINE WORD: completing LINE offers WORD among others
has() {
	COMP_LINE=$1 COMP_POINT=${#1}
	_chipctl
	if printf '%s\n' "${COMPREPLY[@]}" | grep -qxF -- "$2"; then
		echo "ok   '$1' offers $2"
	else
		echo "FAIL '$1': no $2 in [${COMPREPLY[*]}]"
		fail=1
	fi
}

# not running: commands and options still complete; workloads offer nothing, at once
expect "$chipctl st" status stats stop
expect "$chipctl --instance $inst submit " ""
"$chipd" --instance "$inst" --chips 1 2>"$tmp/chipd.err" || { cat "$tmp/chipd.err"; exit 1; }

expect "$chipctl " ping status submit workloads callables register unregister cancel stats top \
	drain stop trace export
expect "$chipctl dr" drain
expect "$chipctl drain --" --grace-ms --json --help --instance --timeout-ms
has "$chipctl submit --" --max-tokens
has "$chipctl --instance ${inst:0:5}" "$inst"
expect "$chipctl --instance $inst submit " paged_attention gemm synthetic
expect "$chipctl submit --instance $inst --count 2 syn" synthetic
has "$chipctl --instance $inst submit synthetic " "tokens="
has "$chipctl --instance $inst submit synthetic tokens=4 " "device_us="
expect "$chipctl --instance $inst submit --count " ""
expect "$chipctl unregister --" --drain --cancel --json --help --instance --timeout-ms
expect "$chipctl --instance $inst unregister syn" synthetic
expect "$chipctl --instance $inst unregister synthetic " ""
has "$chipctl register --" --name
expect "$chipctl register --name " ""
touch "$tmp/mine.so"
expect "$chipctl register --name x $tmp/mi" "$tmp/mine.so"
touch "$tmp/trace-out.json"
has "$chipctl submit --" --input
has "$chipctl submit --" --output-cap
has "$chipctl submit --" --output
touch "$tmp/req-in.bin"
expect "$chipctl submit --input $tmp/req-i" "$tmp/req-in.bin"
expect "$chipctl submit --output-cap 64 --output $tmp/req-i" "$tmp/req-in.bin"
expect "$chipctl submit --output-cap " ""
expect "$chipctl --instance $inst submit --input $tmp/req-in.bin --output-cap 8 syn" synthetic
expect "$chipctl trace --out $tmp/trace-o" "$tmp/trace-out.json"
exit $fail
