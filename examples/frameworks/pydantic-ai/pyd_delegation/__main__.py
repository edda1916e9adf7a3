"""`python -m pyd_delegation "MESSAGE"`: one user turn of the delegation example.

Runs `lead_agent` on MESSAGE with `usage_limits=UsageLimits(request_limit=N)`, N from
`PYD_REQUEST_LIMIT` (unset: pydantic-ai's default `UsageLimits()`, a request limit of 50),
and prints the run's output. When the limit stops the run, pydantic-ai raises
`UsageLimitExceeded`; as pydantic-ai's "Usage Limits" docs do, the error is printed, here
with the prefix `UsageLimitExceeded: `, and the process exits 1.

`python -m pyd_delegation.broken_usage "MESSAGE"` runs the same with a parent whose tool
omits `usage=ctx.usage` (the deliberately broken copy).
"""

from __future__ import annotations

import sys

from .cli import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], broken=False))
