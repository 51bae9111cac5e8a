#!/usr/bin/env bash
# package.sh OUTDIR [BUILDDIR [CMAKE-ARG...]] - builds chipd's Debian packages (chipd,
# libchipd0, libchipd-dev, python3-chipd) into OUTDIR: a Release tree (BUILDDIR, by
# default build-deb) configured for /usr with Debian's hardening flags
# (dpkg-buildflags) and the CMAKE-ARGs, then CPack's DEB generator
# (deploy/debian/packaging.cmake). Installs the Debian packages the build needs when
# missing. Prints the paths of the packages.
set -euo pipefail
if [ $# -lt 1 ]; then
	echo "usage: deploy/package.sh OUTDIR [BUILDDIR [CMAKE-ARG...]]" >&2
	exit 64
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
build=${2:-$root/build-deb}
shift $(($# < 2 ? $# : 2))
# shellcheck source=deploy/lib/packages.sh
. "$root/deploy/lib/packages.sh"
chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}" dpkg-dev

# The flags Debian builds its packages with (-O2, stack protector, fortify, relro,
# now); no ccache unless it is installed.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
	LDFLAGS=$(dpkg-buildflags --get LDFLAGS) \
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DCHIPD_DEB=ON -DCHIPD_BENCH=OFF -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
	"${launcher[@]}" "$@" >/dev/null
# Only what the packages hold: the tests and benchmarks are no package's.
cmake --build "$build" -j "$(nproc)" --target chipd_deb_payload >/dev/null
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB >/dev/null)
for deb in "$build"/*.deb; do
	mv "$deb" "$out/"
	echo "$out/$(basename "$deb")"
done
