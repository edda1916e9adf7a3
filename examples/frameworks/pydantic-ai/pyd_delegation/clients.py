"""The models the agents are given: one `OpenAIChatModel` per agent, each with its own
`OpenAIProvider` and its own `httpx2.AsyncClient` (pydantic-ai's docs, "OpenAI-compatible
Models": `OpenAIProvider(base_url=..., api_key=..., http_client=...)`).

The client's request event hook writes the ground-truth header `X-Rehearsal-Agent` that
`rehearsal drive` compares its attribution with (it never reads it to decide): `root` on the
root agent's requests, and on a delegate's requests the delegate's name followed by the id of
the run that sent them (`research_agent#<run id>`). The run id is needed because one reply
may delegate twice: two runs of one delegate agent are two sub-agents, and one name per
sub-agent is what the header must carry. The id is read from pydantic-ai's current run
context, which pydantic-ai sets around every model request; the agents themselves are
untouched.

Environment: `OPENAI_BASE_URL` (required), `OPENAI_API_KEY` (anything; read by the
provider), `PYD_MODEL` (the model name the requests carry; default `rehearsal`).
"""

from __future__ import annotations

import os

import httpx2
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

HEADER = 'X-Rehearsal-Agent'


def _current_run_id() -> str | None:
    # pydantic-ai sets the current RunContext around each model request
    # (`pydantic_ai/_agent_graph.py`, `set_current_run_context`); it is not a documented API,
    # so a missing one leaves the label without a run id rather than failing the request.
    try:
        from pydantic_ai._run_context import get_current_run_context
    except ImportError:  # pragma: no cover - another pydantic-ai version
        return None
    ctx = get_current_run_context()
    return getattr(ctx, 'run_id', None) if ctx is not None else None


def _labeller(agent: str):
    async def label(request: httpx2.Request) -> None:
        if agent == 'root':
            request.headers[HEADER] = 'root'
        else:
            run_id = _current_run_id()
            request.headers[HEADER] = f'{agent}#{run_id}' if run_id else agent

    return label


def chat_model(agent: str) -> OpenAIChatModel:
    """The Chat Completions model for one agent, on a client of its own that labels its requests."""
    http_client = httpx2.AsyncClient(event_hooks={'request': [_labeller(agent)]})
    return OpenAIChatModel(
        os.environ.get('PYD_MODEL', 'rehearsal'),
        provider=OpenAIProvider(base_url=os.environ['OPENAI_BASE_URL'], http_client=http_client),
    )
