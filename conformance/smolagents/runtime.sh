# How scripts/conformance makes and runs the smolagents 1.26.0 example (sourced by bash; the
# contract is conformance/bub/runtime.sh's): runtime, drive_flags, setup DIR -> command.

runtime=examples/frameworks/smolagents/runtime.json
# The SDK retries a 5xx twice with back-off; no scenario waits near the default 60 s, but a
# loaded machine starts Python slowly.
drive_flags=(--turn-limit 120s)

# smolagents 1.26.0 needs Python >= 3.10 and its pinned dependencies >= 3.11 (filelock 4.3.2);
# the pins were made with 3.12. By version, never by a fixed path: 3.12 first, then 3.13, then
# 3.11 (conformance/python.sh).
# shellcheck source=../python.sh
source conformance/python.sh
smolagents_find_python() {
  conformance_python 12 13 11
}

# A virtual environment DIR/venv with exactly examples/frameworks/smolagents/requirements.txt,
# made once and kept while it holds smolagents 1.26.0.
setup() {
  local venv=$1/venv python
  if [ ! -x "$venv/bin/python" ] || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("smolagents"))' 2>/dev/null)" != "1.26.0" ]; then
    if ! python=$(smolagents_find_python); then
      echo "no Python 3.11 to 3.13 (smolagents 1.26.0 and its pinned dependencies need one)"
      return 3
    fi
    rm -rf "$venv"
    mkdir -p "$1"
    "$python" -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r examples/frameworks/smolagents/requirements.txt; then
      echo "could not install smolagents==1.26.0 from PyPI" >&2
      return 2
    fi
  fi
  local py pkg
  py=$(cd "$venv/bin" && pwd)/python
  pkg=$(cd examples/frameworks/smolagents && pwd)
  echo "smolagents 1.26.0 at $py, Python $("$py" -c 'import platform; print(platform.python_version())')"
  command=(env "PYTHONPATH=$pkg" "$py" -m smol_runtime "{message}")
}
