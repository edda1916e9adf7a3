#!/usr/bin/env bash
# Make a virtual environment for py_runtime's tests and run them.
# The interpreter is found by version (3.13, 3.12, then 3.11), never by a fixed path;
# set PYTHON to choose one. The venv goes to $VENV (default: ../../target/py_runtime-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${VENV:-$here/../../target/py_runtime-venv}"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  for v in 3.13 3.12 3.11; do
    if command -v "python$v" >/dev/null 2>&1; then py="python$v"; break; fi
    if command -v pyenv >/dev/null 2>&1 && cand="$(pyenv prefix "$v" 2>/dev/null)"; then
      py="$cand/bin/python3"; break
    fi
  done
fi
if [ -z "$py" ] && command -v python3 >/dev/null 2>&1 &&
   python3 -c 'import sys; raise SystemExit(sys.version_info < (3, 11))'; then
  py=python3
fi
if [ -z "$py" ]; then echo "run_tests.sh: no Python >= 3.11 found (set PYTHON)" >&2; exit 3; fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/pip" install -q -r "$here/requirements-dev.txt"
cd "$here"
exec "$venv/bin/python" -m unittest discover -s tests -v
