#!/bin/sh
# venv.sh NAME PYTHON REQUIREMENT... -- TEST...
#
# Makes a fresh venv of PYTHON in $PY_CACHE/venv-NAME (outside the clone),
# installs the Python client there as its users do (pip install
# './clients/python[asyncio,postgres]', a PEP 517 build from PyPI) with the
# other REQUIREMENTs, shows what it got, and runs the TEST files of
# clients/python/tests against the installed copy (FENCER_INSTALLED=1).
# pip's cache is $PY_CACHE/pip, so a second run is warm. Needs FENCERD.
set -eu
cd "$(dirname "$0")/../../.."
name=$1 py=$2
shift 2
reqs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do reqs="$reqs $1"; shift; done
[ $# -gt 0 ] && shift
: "${PY_CACHE:=$HOME/.cache/fencer-py}"
export PIP_CACHE_DIR="$PY_CACHE/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
v="$PY_CACHE/venv-$name"
echo "== $name: a fresh venv of $py ($("$py" --version 2>&1)) in $v"
rm -rf "$v"
"$py" -m venv "$v"
# shellcheck disable=SC2086 # one word per requirement
"$v/bin/pip" install -q ./clients/python'[asyncio,postgres]' $reqs
"$v/bin/python" -c 'import fencer, redis; print("fencer", fencer.__version__, "from", fencer.__file__, "on redis-py", redis.__version__)'
cd clients/python/tests
FENCER_INSTALLED=1 "$v/bin/python" -m pytest -q -p no:cacheprovider "$@"
