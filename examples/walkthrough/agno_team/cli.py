"""``python -m agno_team "MESSAGE"``: one team run; prints its output, exits 1 on an error."""

from __future__ import annotations

import sys

from agno.run.base import RunStatus

from agno_team.team import build_team


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print('usage: python -m agno_team "MESSAGE"', file=sys.stderr)
        return 2
    response = build_team().run(args[0])
    if response.status == RunStatus.error:
        print(f"error: {response.content}", file=sys.stderr)
        return 1
    print(response.content)
    return 0
