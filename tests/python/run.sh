#!/bin/sh
# run.sh PYTHON - the Python client's suite (tests/python) with pytest, from the
# repository root. Exits 77 (skipped) when PYTHON or its pytest (Debian:
# python3-pytest) is missing. CTest passes CHIPD_LIB, CHIPD_BIN, CHIPD_LAYOUT_BIN and
# PYTHONPATH in the environment (tests/python.cmake).
py=${1:-}
if [ -z "$py" ] || ! command -v "$py" >/dev/null 2>&1; then
	echo "python3 not found: the Python client tests are skipped"
	exit 77
fi
if ! "$py" -c "import pytest" 2>/dev/null; then
	echo "pytest not installed for $py (Debian: python3-pytest): the Python client tests are skipped"
	exit 77
fi
# No bytecode or pytest cache written into the source tree.
export PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider tests/python
