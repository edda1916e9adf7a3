"""`python -m py_runtime "message"`: one headless user turn, the final message on stdout.

Environment: OPENAI_BASE_URL, OPENAI_API_KEY, PY_RUNTIME_MODEL (else OPENAI_MODEL, else
`gpt-4o-mini`). State across turns lives in a JSON file in the working directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from .runtime import Rules, Runtime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py_runtime", description=__doc__.splitlines()[0])
    ap.add_argument("message", help="the user message of this turn")
    ap.add_argument("--session", default=None,
                    help="keep history across turns in .py_runtime/<SESSION>.json")
    ap.add_argument("--state", default=None, help="explicit state file (overrides --session)")
    a = ap.parse_args(argv)
    try:
        rules = Rules.from_env()
    except ValueError as e:
        print(f"py_runtime: configuration error: {e}", file=sys.stderr)
        return 2
    workdir = Path.cwd()
    state_path = Path(a.state) if a.state else (
        workdir / ".py_runtime" / f"{a.session}.json" if a.session else None)
    state = {}
    if state_path is not None and state_path.exists():
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            print(f"py_runtime: {state_path}:{e.lineno}:{e.colno}: bad state file: {e.msg}",
                  file=sys.stderr)
            return 2
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=os.environ.get("OPENAI_BASE_URL"),
                         api_key=os.environ.get("OPENAI_API_KEY", "unused"), max_retries=0)
    model = os.environ.get("PY_RUNTIME_MODEL") or os.environ.get("OPENAI_MODEL") or "gpt-4o-mini"
    rt = Runtime(client, model, rules, state, workdir)
    outcome = asyncio.run(rt.turn(a.message))
    if state_path is not None:
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    print(outcome.message)
    return 0
