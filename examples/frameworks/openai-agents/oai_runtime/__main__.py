"""``python -m oai_runtime [--spelling all|tool|structured|handoff] MESSAGE``: one user turn.

Runs the root agent with ``Runner.run`` (docs/running_agents.md) and prints
``result.final_output`` to stdout. An exception the SDK raises (``MaxTurnsExceeded``, a model
error) is printed to stderr and the exit code is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agents import Runner

from .app import SPELLINGS, Settings, build, configure, run_config


async def main(message: str, spelling: str) -> str:
    settings = Settings()
    http_client = configure(settings)
    try:
        agent = build(spelling, settings, http_client)
        # Runner.run's own default max_turns (DEFAULT_MAX_TURNS, 10) unless the env sets one.
        limits = {} if settings.max_turns is None else {"max_turns": settings.max_turns}
        result = await Runner.run(agent, message, run_config=run_config(settings), **limits)
        return str(result.final_output)
    finally:
        await http_client.aclose()


def cli() -> int:
    parser = argparse.ArgumentParser(prog="oai_runtime", description=__doc__)
    parser.add_argument("--spelling", choices=SPELLINGS, default="all")
    parser.add_argument("message")
    args = parser.parse_args()
    try:
        output = asyncio.run(main(args.message, args.spelling))
    except Exception as exc:  # the SDK's own exception, reported as the process's failure
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
