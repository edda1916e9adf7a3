#!/usr/bin/env bash
# Runs the clock shim's tests (stdlib only, no virtual environment needed) with every Python
# >= 3.11 found on this machine, by version: python3.13, python3.12, python3.11 on PATH, then
# pyenv's, then python3 if it is recent enough. Exits non-zero if none is found or a run fails.
# With --with-httpx it also makes a throw-away virtual environment with httpx (pinned) for the
# newest of them and runs test_httpx.py there, then the Rust endpoint against the shim
# (`cargo test --test suite clock_shim -- --ignored`, 20 runs); PyPI needed. Without it, those
# are skipped.
set -euo pipefail
with_httpx=0
if [ "${1:-}" = "--with-httpx" ]; then with_httpx=1; fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

find_python() {
    local version="$1" candidate
    if candidate="$(command -v "python$version" 2>/dev/null)" && "$candidate" -c 'pass' 2>/dev/null; then
        echo "$candidate"; return 0
    fi
    if command -v pyenv >/dev/null 2>&1; then
        local root; root="$(pyenv root)"
        for candidate in "$root"/versions/"$version".*/bin/python"$version"; do
            if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
        done
    fi
    if candidate="$(command -v python3 2>/dev/null)" \
        && [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$version" ]; then
        echo "$candidate"; return 0
    fi
    return 1
}

ran=0
for version in 3.13 3.12 3.11; do
    if python="$(find_python "$version")"; then
        echo "== rehearsal_clock tests with $("$python" --version) ($python)"
        (cd "$here/tests" && "$python" -m unittest -v test_shim test_httpx)
        if [ "$with_httpx" -eq 1 ] && [ "$ran" -eq 0 ]; then
            venv="$(mktemp -d)"
            trap 'rm -rf "$venv"' EXIT
            "$python" -m venv "$venv"
            "$venv/bin/python" -m pip install --quiet "httpx==0.28.1"
            echo "== test_httpx with httpx 0.28.1 on $("$python" --version)"
            (cd "$here/tests" && "$venv/bin/python" -m unittest -v test_httpx)
            echo "== the Rust clock endpoint with the shim and httpx (20 runs)"
            (cd "$here/../.." && REHEARSAL_CLOCK_PYTHON="$venv/bin/python" \
                cargo test --test suite clock_shim -- --ignored --nocapture)
        fi
        ran=$((ran + 1))
    else
        echo "== no Python $version found: skipped"
    fi
done
if [ "$ran" -eq 0 ]; then
    echo "no Python >= 3.11 found: the clock shim's tests did not run" >&2
    exit 1
fi
