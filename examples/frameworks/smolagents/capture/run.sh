#!/usr/bin/env bash
# capture/run.sh SCENARIO LOG [VAR=VALUE...]: serve SCENARIO with rehearsal, put tools/log_proxy.py
# in front of it (it appends every request, its X-Rehearsal-Agent header and the reply to LOG as
# JSON lines), and run smol_runtime once on the scenario's first user message.
# REHEARSAL (default: rehearsal on PATH) and PYTHON (default: python3 with smolagents) may be set.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
scen=$1 log=$2; shift 2
d=$(mktemp -d); rm -f "$log"
"${REHEARSAL:-rehearsal}" serve "$scen" --runtime "$here/dialect.json" --ready-file "$d/ready" --trace >"$log.serve" 2>&1 &
serve=$!
while [ ! -f "$d/ready" ]; do sleep 0.2; done
base=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["base_url"])' "$d/ready")
python3 "$here/tools/log_proxy.py" "$base" "$log" "$d/port" & proxy=$!
while [ ! -s "$d/port" ]; do sleep 0.2; done
user=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"][0]["user"])' "$scen")
(cd "$d" && env OPENAI_BASE_URL="http://127.0.0.1:$(cat "$d/port")/v1" SMOL_LOG_LEVEL=0 PYTHONPATH="$here" "$@" \
  "${PYTHON:-python3}" -m smol_runtime "$user") || echo "smol_runtime exited $?"
wait "$serve" || true
kill "$proxy"
