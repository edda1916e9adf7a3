"""The entry point shared by the example and its broken copy."""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic_ai import UsageLimitExceeded, UsageLimits


def usage_limits() -> UsageLimits:
    """`UsageLimits(request_limit=N)` with N from `PYD_REQUEST_LIMIT`; pydantic-ai's default when unset."""
    raw = os.environ.get('PYD_REQUEST_LIMIT', '').strip()
    if not raw:
        return UsageLimits()
    return UsageLimits(request_limit=int(raw))


async def run(message: str, broken: bool) -> str:
    if broken:
        from .broken_usage import lead_agent
    else:
        from .agents import lead_agent
    result = await lead_agent.run(message, usage_limits=usage_limits())
    return result.output


def main(argv: list[str], broken: bool) -> int:
    if len(argv) != 1:
        print('usage: python -m pyd_delegation[.broken_usage] "MESSAGE"', file=sys.stderr)
        return 2
    try:
        output = asyncio.run(run(argv[0], broken))
    except UsageLimitExceeded as e:
        print(f'UsageLimitExceeded: {e}')
        return 1
    print(output)
    return 0
