"""Agent delegation, written the way pydantic-ai's "Multi-agent Applications" page teaches it.

The parent (`lead_agent`) has a tool, `ask_researcher`, that runs the delegate (`research_agent`)
with `await research_agent.run(question, usage=ctx.usage)` and returns the delegate's output.
The root run takes `usage_limits=UsageLimits(request_limit=N)`: with `usage=ctx.usage` the
delegate's requests count towards the parent's usage, and so towards that limit.

Nothing here knows about rehearsal except `clients.py`, which hands each agent's model an
`httpx2.AsyncClient` whose event hook names the agent in a request header.
"""

from __future__ import annotations

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
    r = await research_agent.run(
        question,
        usage=ctx.usage,
    )
    return r.output
