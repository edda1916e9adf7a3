# How scripts/conformance makes and runs bub 0.5.1 (sourced by bash; lab/bub-clock/run sources
# it too, for the same virtual environment). A runtime's file defines:
#
#   runtime      what `rehearsal drive --runtime` takes: a built-in name or a description file
#   drive_flags  an array of further flags for `rehearsal drive`
#   setup DIR    makes the runtime ready under DIR (target/conformance/<runtime>) and sets the
#                array `command`: what runs one turn, after `--`, `{message}` standing for the
#                user's text. It returns 0 when ready, 3 when this machine lacks what the
#                runtime needs (it says what; the run is SKIPPED), anything else when the
#                runtime could not be made.

runtime=bub
# bub's SDK retries with back-off on a busy machine; root-model-error-exits-1 needs the room.
drive_flags=(--turn-limit 120s)

# A Python >= 3.12 (bub 0.5.1's Requires-Python) by version, never by a fixed path: 3.12 first
# (the version these runs were measured on), then 3.13 and 3.14 (conformance/python.sh).
# shellcheck source=../python.sh
source conformance/python.sh
bub_find_python() {
  conformance_python 12 13 14
}

# A virtual environment DIR/venv with bub==0.5.1 and the dependency versions it was tested
# with (conformance/bub/requirements.txt), made once and kept while it holds bub 0.5.1.
setup() {
  local venv=$1/venv python
  if [ ! -x "$venv/bin/bub" ] || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("bub"))' 2>/dev/null)" != "0.5.1" ]; then
    if ! python=$(bub_find_python); then
      echo "no Python >= 3.12 (bub 0.5.1 needs one)"
      return 3
    fi
    rm -rf "$venv"
    mkdir -p "$1"
    "$python" -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check bub==0.5.1 -c conformance/bub/requirements.txt; then
      echo "could not install bub==0.5.1 from PyPI" >&2
      return 2
    fi
  fi
  local bub
  bub=$(cd "$venv/bin" && pwd)/bub
  echo "bub 0.5.1 at $bub, Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
  # BUB_MODEL_TIMEOUT_SECONDS bounds each of bub's model calls: child-model-timeout-reaches-parent
  # needs it, and no other scenario's reply comes near 10 s.
  command=(env BUB_MODEL_TIMEOUT_SECONDS=10 "$bub" run "{message}")
}
