# packages.sh - sourced by the deploy scripts: install Debian packages when missing.
# shellcheck shell=bash

# chipd_need_packages PKG...: installs the packages that are not installed yet.
# Needs root (or sudo) only when something is missing.
chipd_need_packages() {
	local missing=() pkg
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "chipd: installing Debian packages: ${missing[*]}" >&2
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || {
			echo "chipd: need root to run: apt-get install ${missing[*]}" >&2
			return 1
		}
		sudo=sudo
	fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

# The packages every build needs.
# shellcheck disable=SC2034 # used by the scripts that source this file
CHIPD_BUILD_PACKAGES=(build-essential cmake pkg-config check libsubunit-dev libbsd-dev
	liburing-dev libmsgpack-dev)
# What the test command needs beyond the build: clang's libFuzzer for the decoder's
# fuzz run; promtool (package prometheus: 22.5 MB to download with its dependencies)
# to check `chipctl stats --prom`; pytest and pip for the Python client (tests/python);
# dpkg-dev (dpkg-shlibdeps, dpkg-buildflags) and lintian for the Debian packages
# (deploy/package.sh, tests/deploy/packages.sh).
# shellcheck disable=SC2034
CHIPD_TEST_PACKAGES=(clang libclang-rt-14-dev prometheus python3-pytest python3-pip
	python3-setuptools python3-wheel dpkg-dev lintian)
# Optional peers of the benchmarks, installed by the quick start: StarPU, the baseline
# of `chipbench dispatch` (libstarpu-dev: up to 14.0 MB to download with its dependencies,
# 63 MB installed; too big for the test command, and the benchmark skips the peer
# without it).
# shellcheck disable=SC2034
CHIPD_BENCH_PACKAGES=(libstarpu-dev)
