# How scripts/conformance makes and runs the pydantic-ai delegation example (sourced by bash;
# the contract is conformance/bub/runtime.sh's):
#
#   runtime      the runtime description drive takes (a file, relative to the checkout)
#   drive_flags  further flags for `rehearsal drive`
#   setup DIR    makes DIR/venv from PyPI with the exact versions of
#                examples/frameworks/pydantic-ai/requirements.txt, puts the example's folder on
#                the venv's path (a .pth file), and sets `command`; returns 3 (SKIPPED) when the
#                machine has no Python >= 3.11 (pydantic-ai-slim 2.78.0's Requires-Python).

runtime=examples/frameworks/pydantic-ai/runtime.json
# pydantic-ai runs on asyncio: virtual time makes the order of two delegates' requests, and so
# the run, the same every time (docs/clock-protocol.md).
drive_flags=(--clock --turn-limit 120s)

# A Python >= 3.11 by version, never by a fixed path: pyenv's, newest first, then PATH.
# shellcheck source=../python.sh
source conformance/python.sh
pydantic_ai_find_python() {
  conformance_python 14 13 12 11
}

setup() {
  local venv=$1/venv python example requirements=examples/frameworks/pydantic-ai/requirements.txt
  example=$(cd examples/frameworks/pydantic-ai && pwd)
  # Made once, and again whenever the pins change (a copy of them is kept beside the venv).
  if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$1/requirements.txt" ||
    [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("pydantic-ai-slim"))' 2>/dev/null)" != "2.78.0" ]; then
    if ! python=$(pydantic_ai_find_python); then
      echo "no Python >= 3.11 (pydantic-ai-slim 2.78.0 needs one)"
      return 3
    fi
    rm -rf "$venv" "$1/requirements.txt"
    mkdir -p "$1"
    "$python" -m venv "$venv" || return 2
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"; then
      echo "could not install $requirements from PyPI" >&2
      return 2
    fi
    cp "$requirements" "$1/requirements.txt"
  fi
  # The example package (pyd_delegation) on the venv's path, wherever the checkout is.
  "$venv/bin/python" - "$example" <<'PY' || return 2
import pathlib, sys, sysconfig
pathlib.Path(sysconfig.get_paths()["purelib"], "pyd_delegation_example.pth").write_text(sys.argv[1] + "\n")
PY
  echo "pydantic-ai-slim 2.78.0 at $venv, Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
  command=("$(cd "$venv/bin" && pwd)/python" -m pyd_delegation "{message}")
}
