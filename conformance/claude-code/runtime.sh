# How scripts/conformance makes and runs Claude Code 2.1.337 (examples/frameworks/claude-code),
# sourced by bash. The contract is conformance/bub/runtime.sh's:
#
#   runtime      the runtime description rehearsal drive takes
#   drive_flags  further flags for rehearsal drive
#   setup DIR    installs the pinned Claude Code under DIR/npm with `npm ci` (the package.json and
#                package-lock.json of examples/frameworks/claude-code: @anthropic-ai/claude-code
#                2.1.337 and its native binary for this platform, about 430 MB, 6-20 s from the
#                registry), sets `command`; returns 3 (SKIPPED) when this machine has no npm or
#                the package ships no binary that runs here, 2 when the install fails.

runtime=examples/frameworks/claude-code/runtime.json
# Claude Code is a native binary, not Python: --clock does not reach it, so the scenarios run
# on wall time (their latencies are a second at most) and each turn gets the default limit.
drive_flags=(--turn-limit 60s)

CLAUDE_CODE_VERSION=2.1.337

# The binary `npm ci` left, if it runs and says it is the pinned version.
claude_code_binary() {
  local bin=$1/npm/node_modules/.bin/claude
  [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "^$CLAUDE_CODE_VERSION " && echo "$bin"
}

setup() {
  local example=examples/frameworks/claude-code dir=$1/npm bin
  if ! bin=$(claude_code_binary "$1"); then
    if ! command -v npm >/dev/null 2>&1; then
      echo "no npm on PATH (Claude Code $CLAUDE_CODE_VERSION installs from the npm registry)"
      return 3
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$example/package.json" "$example/package-lock.json" "$dir/"
    if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); then
      echo "could not install @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION from npm" >&2
      return 2
    fi
    # The package's postinstall puts the platform's binary in place of its stub; run it again
    # where npm skipped install scripts.
    if ! claude_code_binary "$1" >/dev/null; then
      (cd "$dir" && node node_modules/@anthropic-ai/claude-code/install.cjs) >/dev/null 2>&1
    fi
    if ! bin=$(claude_code_binary "$1"); then
      echo "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION installed no binary that runs on $(uname -sm)"
      return 3
    fi
  fi
  bin=$(cd "$(dirname "$bin")" && pwd)/claude
  echo "Claude Code $CLAUDE_CODE_VERSION at $bin"
  # `-p` prints the final reply and exits (headless, as a script or CI runs it);
  # --dangerously-skip-permissions (with IS_SANDBOX=1 from the description, as root needs)
  # lets every tool run without a prompt no one could answer.
  command=("$bin" -p "{message}" --dangerously-skip-permissions)
}
