#!/usr/bin/env bash
# quickstart.sh - sets up and runs chipd's main job on a fresh Debian 12 machine.
# For now that job is the shared-memory mailbox benchmark (two pinned processes,
# chipd's mailbox against raw shared memory, a futex, a unix socket and iceoryx);
# it grows into the supervisor demo as the supervisor lands.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=deploy/lib/packages.sh
. deploy/lib/packages.sh

chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}"
# Optional peer of the benchmark: iceoryx and its RouDi daemon.
chipd_need_packages libiceoryx-binding-c-dev iceoryx ||
	echo "chipd: iceoryx unavailable; its row will say skipped" >&2

cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc)" --target chipbench >/dev/null
exec build-release/tests/bench/chipbench mailbox "$@"
