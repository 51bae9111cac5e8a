#!/bin/sh
# cli_data.sh CHIPD CHIPCTL DC_ECHO - `chipctl submit`'s bytes against a real chipd (one
# sim chip, an 8 KiB client data area) with the tests' echo callable (tests/callables/
# data_callable.c: payload byte i of step s = input[(s + i) % len] + s + i, token
# value sum(input) + s, output = the input reversed) registered:
#  1. --input FILE with --follow --json: each token's "payload" hex and the end line's
#     "output" hex are the callable's, byte for byte;
#  2. --follow as text: "ID SEQ VALUE PAYLOAD" lines, the output's hex in the end line;
#  3. --input - (2000 bytes: through the data area) and --output FILE: FILE holds the
#     reversed input, byte for byte, also when FILE is a pipe (/dev/stdout) or a FIFO;
#     an --output FILE that cannot be written: the end line's error names the request;
#  4. refused before submitting (exit 64, the limit named): input over 1048576 bytes,
#     empty input, --output without --output-cap, --output with --count 2, --output-cap
#     with nowhere to put the output, an --output FILE that cannot be opened; and by
#     libchipd: more input than the data area ([bad_request], no --json document);
#  5. --output-cap for a callable without output: the request is refused bad_request
#     (exit 1), the supervisor's message shown;
#  6. a callable without payloads prints its tokens as before (three fields, no
#     "payload" key).
# Every step is bounded by `timeout`.
set -eu
chipd=$1
chipctl=$2
echo_so=$3
# shellcheck source=tests/chipd/lib.sh
. "$(dirname "$0")/lib.sh"
chipd_test cli_data.sh
# refused WANT-TEXT CMD...: CMD exits 64 and says WANT-TEXT on standard error
refused() {
	want=$1
	shift
	rc=0
	timeout 30 "$@" >"$dir/out" 2>"$dir/err" || rc=$?
	[ "$rc" -eq 64 ] && grep -qF -- "$want" "$dir/err" ||
		fail "$*: exit $rc, not 64 with '$want': $(cat "$dir/err")"
}

timeout 30 "$chipd" --chips 1 --client-data-kib 8 --log-level warn ||
	fail "chipd did not start"
timeout 20 "$chipctl" register --name echo "$echo_so" >/dev/null || fail "register echo"

# 1. payloads and output as JSON, compared with the callable's rule
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 37 + 11) % 256 for i in range(100)))' \
	>"$dir/in.bin"
timeout 60 "$chipctl" submit --follow --json --input "$dir/in.bin" --output-cap 4096 echo \
	tokens=3 >"$dir/echo.json" || fail "submit --input --output-cap --json"
python3 - "$dir/in.bin" "$dir/echo.json" <<'PY' || fail "--json: not the echo's bytes"
import json, sys
inp = open(sys.argv[1], "rb").read()
lines = [json.loads(l) for l in open(sys.argv[2])]
toks, end = lines[:-1], lines[-1]
assert [t["seq"] for t in toks] == [0, 1, 2], lines
for t in toks:
    s = t["seq"]
    want = bytes((inp[(s + i) % len(inp)] + s + i) % 256 for i in range(24))
    assert bytes.fromhex(t["payload"]) == want, (t, want.hex())
    assert t["value"] == sum(inp) + s, t
assert end["end"] == "completed" and end["output_len"] == len(inp), end
assert bytes.fromhex(end["output"]) == inp[::-1], end
print("--json: 3 payloads and the output, byte for byte")
PY

# 2. the same as text: payload hex after the value, output hex in the end line
timeout 60 "$chipctl" submit --follow --input "$dir/in.bin" --output-cap 4096 echo tokens=2 \
	>"$dir/echo.txt" || fail "submit --follow --input"
python3 - "$dir/in.bin" "$dir/echo.txt" <<'PY' || fail "--follow: not the echo's bytes"
import re, sys
inp = open(sys.argv[1], "rb").read()
lines = open(sys.argv[2]).read().splitlines()
for s, line in enumerate(lines[:2]):
    f = line.split()
    want = bytes((inp[(s + i) % len(inp)] + s + i) % 256 for i in range(24))
    assert len(f) == 4 and f[1] == str(s) and f[3] == want.hex(), (line, want.hex())
m = re.fullmatch(r"request @\d+: completed, 2 tokens, [\d.]+ ms, output 100 bytes ([0-9a-f]+)",
                 lines[2])
assert m and bytes.fromhex(m.group(1)) == inp[::-1], lines[2]
print("--follow: payloads and the output line")
PY

# 3. standard input through the data area (over 1024 bytes), the output to a file
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 7 + b"\n" * 208)' \
	>"$dir/big.bin"
timeout 60 "$chipctl" submit --input - --output-cap 2048 --output "$dir/out.bin" echo \
	tokens=1 <"$dir/big.bin" >"$dir/ids" || fail "submit --input - --output"
grep -qx '@[0-9]*' "$dir/ids" || fail "--output: printed $(cat "$dir/ids")"
python3 -c 'import sys; open(sys.argv[2], "wb").write(open(sys.argv[1], "rb").read()[::-1])' \
	"$dir/big.bin" "$dir/want.bin"
cmp "$dir/out.bin" "$dir/want.bin" || fail "--output FILE is not the input reversed"
echo "--input - --output FILE: 2000 bytes, byte for byte"

# 3a. --output into what cannot be truncated or written at an offset: a pipe
#     (/dev/fd/3 here, as /dev/stdout piped) and a FIFO get the reversed input in order
{
	rc=0
	timeout 60 "$chipctl" submit --input "$dir/big.bin" --output-cap 2048 --output /dev/fd/3 \
		echo tokens=1 3>&1 >"$dir/pipe.ids" 2>"$dir/pipe.err" || rc=$?
	echo "$rc" >"$dir/pipe.rc"
} | cat >"$dir/pipe.bin"
[ "$(cat "$dir/pipe.rc")" -eq 0 ] ||
	fail "--output into a pipe: exit $(cat "$dir/pipe.rc"): $(cat "$dir/pipe.err")"
cmp "$dir/pipe.bin" "$dir/want.bin" || fail "--output into a pipe is not the input reversed"
mkfifo "$dir/out.fifo"
timeout 60 cat "$dir/out.fifo" >"$dir/fifo.bin" &
reader=$!
rc=0
timeout 60 "$chipctl" submit --input "$dir/big.bin" --output-cap 2048 --output "$dir/out.fifo" \
	echo tokens=1 >"$dir/fifo.ids" 2>"$dir/fifo.err" || rc=$?
wait "$reader" || fail "the FIFO's reader: exit $?"
[ "$rc" -eq 0 ] || fail "--output into a FIFO: exit $rc: $(cat "$dir/fifo.err")"
cmp "$dir/fifo.bin" "$dir/want.bin" || fail "--output into a FIFO is not the input reversed"
echo "--output into a pipe and a FIFO: 2000 bytes, byte for byte"

# 3b. an --output FILE that opens but cannot be written (/dev/full: ENOSPC):
#     the request's end line names it ("request"), code null, errno 5 (EIO), exit 1
if [ -w /dev/full ]; then
	rc=0
	timeout 60 "$chipctl" submit --follow --json --input "$dir/in.bin" --output-cap 4096 \
		--output /dev/full echo tokens=1 >"$dir/full.json" 2>"$dir/full.err" || rc=$?
	[ "$rc" -eq 1 ] || fail "--output /dev/full: exit $rc, not 1: $(cat "$dir/full.err")"
	python3 - "$dir/full.json" <<'PY' || fail "--output /dev/full: $(cat "$dir/full.json")"
import json, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
e = end["error"]
assert end["end"] == "failed" and end["exit"] == 1, end
assert e["code"] is None and e["errno"] == 5 and e["request"] == end["id"], end
assert "chip" not in e, end
PY
	grep -q '^chipctl submit: request @[0-9]*: --output /dev/full: .* \[local\]$' \
		"$dir/full.err" || fail "--output /dev/full: $(cat "$dir/full.err")"
	echo "--output FILE not written: the end line names the request"
fi

# 4. refused, the limit named
head -c 1048577 /dev/zero >"$dir/huge.bin"
refused "over 1048576 bytes" "$chipctl" submit --input "$dir/huge.bin" echo
: >"$dir/empty.bin"
refused "is empty" "$chipctl" submit --input "$dir/empty.bin" echo
refused "standard input is empty" "$chipctl" submit --input - echo </dev/null
refused "cannot open" "$chipctl" submit --input "$dir/none.bin" echo
refused "--output needs --output-cap" "$chipctl" submit --output "$dir/o" echo
refused "not --count 2" "$chipctl" submit --output-cap 8 --output "$dir/o" --count 2 echo
refused "--output-cap: the output prints with --follow" "$chipctl" submit --output-cap 8 echo
refused "--output: cannot open" "$chipctl" submit --output-cap 8 --output "$dir/no/o" echo
head -c 9000 /dev/zero >"$dir/over.bin"
refused "the data area holds 8192 [bad_request]" "$chipctl" submit --input "$dir/over.bin" echo
# libchipd's refusal is a usage error: with --json too, no document
refused "the data area holds 8192 [bad_request]" "$chipctl" submit --json --input "$dir/over.bin" echo
[ ! -s "$dir/out" ] || fail "a usage error printed a document: $(cat "$dir/out")"
[ ! -e "$dir/o" ] || fail "a refused submit wrote --output's file"
echo "refusals: ok"

# 5. output asked of a callable that writes none: the request's bad_request, shown
rc=0
timeout 60 "$chipctl" submit --follow --output-cap 64 synthetic tokens=2 >"$dir/syn.out" \
	2>"$dir/syn.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'writes no output.*\[bad_request\]' "$dir/syn.err" ||
	fail "--output-cap synthetic: exit $rc, $(cat "$dir/syn.out" "$dir/syn.err")"
echo "--output-cap without an output: $(cat "$dir/syn.err")"

# 6. no payload: the lines of before
timeout 60 "$chipctl" submit --follow synthetic tokens=2 >"$dir/plain.txt" || fail "synthetic"
awk 'NR <= 2 && NF != 3 { exit 1 }' "$dir/plain.txt" || fail "payload-less tokens: $(cat "$dir/plain.txt")"
grep -q 'ms$' "$dir/plain.txt" || fail "payload-less end line changed: $(cat "$dir/plain.txt")"
timeout 60 "$chipctl" submit --follow --json synthetic tokens=2 >"$dir/plain.json" ||
	fail "synthetic --json"
! grep -q '"payload"\|"output' "$dir/plain.json" || fail "payload-less JSON: $(cat "$dir/plain.json")"
echo "payload-less streams: unchanged"
