"""A deliberately broken copy of `agents.py`: the delegate's run is not given `usage=ctx.usage`.

The docs: "You'll generally want to pass `ctx.usage` to the `usage` keyword argument of the
delegate agent run so usage within that run counts towards the total usage of the parent agent
run." Without it the delegate's requests are counted nowhere the root's `request_limit` looks,
so a run over its limit goes on unnoticed (issue 39's example: the sixth request over a limit
of four). Everything else is the same as `agents.py`.

Run: `python -m pyd_delegation.broken_usage "MESSAGE"`.
"""

from __future__ import annotations

import sys

from pydantic_ai import Agent, RunContext

from .clients import chat_model

research_agent = Agent(
    chat_model('research_agent'),
    name='research_agent',
    instructions='Answer the question you are given in a few sentences.',
)

lead_agent = Agent(
    chat_model('root'),
    name='lead_agent',
    instructions=(
        'Use the `ask_researcher` tool to look up what you need, '
        'then answer the user in one short paragraph.'
    ),
)


@lead_agent.tool
async def ask_researcher(ctx: RunContext, question: str) -> str:
    """Ask the research agent a question and get its answer."""
    r = await research_agent.run(question)  # BROKEN on purpose: no `usage=ctx.usage`
    return r.output


if __name__ == '__main__':
    from .cli import main

    sys.exit(main(sys.argv[1:], broken=True))
