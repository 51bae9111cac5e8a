# shellcheck shell=sh
# lib.sh - sourced by the tests of this folder that drive a real chipd with chipctl:
# chipd_test NAME sets CHIPD_INSTANCE to a name of this run, makes the scratch folder
# $dir, and on exit stops the instance ($chipctl) and removes $dir; fail MSG prints
# "NAME: MSG" and exits 1. The caller sets chipctl first.
chipd_test() {
	test_name=$1
	export CHIPD_INSTANCE="${test_name%.sh}-test-$$"
	dir=$(mktemp -d)
	trap chipd_test_cleanup EXIT
}
chipd_test_cleanup() {
	"${chipctl:?}" stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
fail() {
	echo "$test_name: $*" >&2
	exit 1
}
