# How scripts/conformance makes and runs the openai-agents 0.24.0 example
# (examples/frameworks/openai-agents), sourced by bash. The contract is conformance/bub/runtime.sh's:
#
#   runtime      the runtime description rehearsal drive takes
#   drive_flags  further flags for rehearsal drive
#   setup DIR    makes the runtime ready under DIR (target/conformance/openai-agents), sets the
#                array `command`; returns 0 when ready, 3 when this machine lacks a suitable
#                Python (the run is SKIPPED), anything else when it could not be made.

runtime=examples/frameworks/openai-agents/runtime.json
# The SDK is asyncio: every scenario runs on the harness's virtual time (docs/clock-protocol.md),
# so a reply's latency and the SDK's own timeouts cost no wall time and the order is the same
# in every run.
drive_flags=(--clock --turn-limit 120s)

# A Python >= 3.10 (openai-agents 0.24.0's Requires-Python), by version, never by a fixed path:
# 3.12 first (the version the pins were frozen with), then the newer, then the older
# (conformance/python.sh).
# shellcheck source=../python.sh
source conformance/python.sh
oai_find_python() {
  conformance_python 12 13 14 11 10
}

# DIR/venv with exactly examples/frameworks/openai-agents/requirements.txt (openai-agents==0.24.0
# and every dependency pinned), made once and kept while it holds 0.24.0; the example's package
# is put on the venv's path with a .pth file (nothing is copied, so edits are seen at once, and
# the clock shim that drive puts first on PYTHONPATH stays first).
setup() {
  local venv=$1/venv python example site
  example=$(cd examples/frameworks/openai-agents && pwd)
  if [ ! -x "$venv/bin/python" ] || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("openai-agents"))' 2>/dev/null)" != "0.24.0" ]; then
    if ! python=$(oai_find_python); then
      echo "no Python >= 3.10 (openai-agents 0.24.0 needs one)"
      return 3
    fi
    rm -rf "$venv"
    mkdir -p "$1"
    "$python" -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r examples/frameworks/openai-agents/requirements.txt; then
      echo "could not install openai-agents==0.24.0 from PyPI" >&2
      return 2
    fi
  fi
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$example" >"$site/oai_runtime_example.pth"
  local py
  py=$(cd "$venv/bin" && pwd)/python
  echo "openai-agents 0.24.0 at $py, Python $("$py" -c 'import platform; print(platform.python_version())')"
  command=("$py" -m oai_runtime "{message}")
}
