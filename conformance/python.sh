# Finding a Python by version for a conformance runtime (sourced by conformance/*/runtime.sh,
# which scripts/conformance runs from the checkout's root): never a fixed path.
#
#   conformance_python 12 13 11    prints the path of the first Python 3.12, else 3.13, else
#                                  3.11 found: pyenv's newest patch release of that minor
#                                  version, else python3.M or python3 on PATH of that version.
#                                  Returns 1 when none is found.
conformance_python() {
  local minor root v c
  for minor in "$@"; do
    if command -v pyenv >/dev/null 2>&1; then
      root=$(pyenv root)
      for v in $(pyenv versions --bare 2>/dev/null | grep -E "^3\.$minor(\.[0-9]+)*\$" | sort -t. -k3,3nr); do
        if [ -x "$root/versions/$v/bin/python3" ]; then echo "$root/versions/$v/bin/python3"; return 0; fi
      done
    fi
    for c in "python3.$minor" python3; do
      if command -v "$c" >/dev/null 2>&1 &&
        "$c" -c "import sys; sys.exit(0 if sys.version_info[:2] == (3, $minor) else 1)" 2>/dev/null; then
        command -v "$c"; return 0
      fi
    done
  done
  return 1
}
