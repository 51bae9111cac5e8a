#!/bin/sh
# chipd_options.sh CHIPD CHIPD_8 - chipd(8) and chipd agree on the configuration:
#   1. every option chipd.8 lists under OPTIONS is one chipd accepts;
#   2. every flag of `chipd --help` is listed in chipd.8;
#   3. every key `chipd --print-config` prints is documented: the option --KEY (with
#      - for _) in OPTIONS, or the word KEY in the --print-config item;
#   4. each flag's CHIPD_* variable (as --help pairs them) is named in that flag's
#      item of chipd.8, and every CHIPD_* variable chipd.8 names is one --help lists;
#   5. each numeric flag's range (--help's "range: LO..HI") is stated in its item of
#      chipd.8, as LO..HI or "LO to HI".
# Prints every mismatch, then exits 1 if there was one.
set -eu
chipd=$1
man=$2
bad=0
miss() {
	echo "chipd_options.sh: $*" >&2
	bad=1
}

# chipd's own view, without whatever CHIPD_* or Slurm variables this shell has
run_chipd() {
	env -i "PATH=$PATH" "$chipd" "$@"
}
help=$(run_chipd --help)
config=$(run_chipd --print-config)

# The OPTIONS section, roff escapes \- made plain: one item per .TP (or .TQ).
options=$(sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$man" | sed 's/\\-/-/g')
# The option an item's first line names: "--name" ("-h, --help" gives --help).
man_flags=$(printf '%s\n' "$options" | awk '
	/^\.T[PQ]/ { item = 1; next }
	item && /^\./ { if (match($0, /--[a-z][a-z-]*/)) print substr($0, RSTART, RLENGTH); item = 0 }')
[ -n "$man_flags" ] || miss "no option found in $man"

# 1. every documented option exists: chipd may refuse its missing value, not the name
for f in $man_flags; do
	err=$(run_chipd --print-config "$f" 2>&1 >/dev/null </dev/null || true)
	case $err in
	*"unknown option"*) miss "chipd.8 lists $f, which chipd does not accept: $err" ;;
	esac
done

# 2. every flag of --help is documented
help_flags=$(printf '%s\n' "$help" | sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p')
[ -n "$help_flags" ] || miss "no flag found in chipd --help"
for f in $help_flags; do
	printf '%s\n' "$man_flags" | grep -qx -- "$f" || miss "chipd accepts $f; chipd.8 does not list it"
done

# 3. every print-config key is documented
pc_item=$(printf '%s\n' "$options" | awk '
	/^\.TP/ { on = 0 }
	/^\.B --print-config/ { on = 1; next }
	on')
keys=$(printf '%s\n' "$config" | sed -n 's/^\([a-z_][a-z_]*\) *= .*/\1/p')
[ -n "$keys" ] || miss "chipd --print-config printed no key"
for k in $keys; do
	f=--$(printf '%s' "$k" | tr _ -)
	printf '%s\n' "$man_flags" | grep -qx -- "$f" && continue
	printf '%s\n' "$pc_item" | grep -qw -- "$k" ||
		miss "chipd --print-config prints $k: no option $f in chipd.8, nor $k under --print-config"
done

# 4. variables: each flag's own in its item; none documented that chipd does not read
printf '%s\n' "$help" | sed -n 's/^  \(--[a-z][a-z-]*\).*\[\(CHIPD_[A-Z_]*\).*/\1 \2/p' | {
	failed=0
	while read -r f var; do
		printf '%s\n' "$options" | awk -v f="$f" '
			/^\.T[PQ]/ { item = 1; on = 0; next }
			item && /^\./ { on = match($0, f "([^a-z-]|$)") > 0; item = 0 }
			on' | grep -qw -- "$var" || {
			echo "chipd_options.sh: chipd.8's $f item does not name $var" >&2
			failed=1
		}
	done
	exit $failed
} || bad=1
# shellcheck disable=SC2013 # the names are words
for var in $(grep -o 'CHIPD_[A-Z_]*[A-Z]' "$man" | sort -u); do
	printf '%s\n' "$help" | grep -qw -- "$var" || miss "chipd.8 names $var; chipd --help does not"
done
for var in $(printf '%s\n' "$help" | grep -o 'CHIPD_[A-Z_]*[A-Z]' | sort -u); do
	grep -qw -- "$var" "$man" || miss "chipd reads $var; chipd.8 does not name it"
done
# 5. ranges: --help's, in each flag's item
printf '%s\n' "$help" | sed -n 's/^  \(--[a-z][a-z-]*\) .*range: \([0-9]*\)\.\.\([0-9]*\)\]$/\1 \2 \3/p' | {
	failed=0
	while read -r f lo hi; do
		printf '%s\n' "$options" | awk -v f="$f" '
			/^\.T[PQ]/ { item = 1; on = 0; next }
			item && /^\./ { on = match($0, f "([^a-z-]|$)") > 0; item = 0 }
			on' | grep -qF -e "$lo..$hi" -e "$lo to $hi" || {
			echo "chipd_options.sh: chipd.8's $f item does not give its range $lo..$hi" >&2
			failed=1
		}
	done
	exit $failed
} || bad=1
[ -n "$(printf '%s\n' "$help" | grep 'range: ')" ] || miss "chipd --help gives no range"
exit $bad
