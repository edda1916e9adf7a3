"""The team, written the way agno's docs teach it ("Building Teams", "Delegation").

A leader in the default coordinate mode and two members, each an ``Agent`` with a ``name``
and a ``role``. The leader is offered one tool, ``delegate_task_to_member(member_id, task)``;
agno runs the named member on ``task`` and hands its stripped output back as the tool result.

Every agent's model is an ``OpenAIChat`` pointed at ``OPENAI_BASE_URL`` (agno's documented
way to reach an OpenAI-compatible server). The one line here that exists for the test harness
is ``default_headers={"X-Rehearsal-Agent": label}``: it names the agent sending each request,
the ground truth rehearsal measures its attribution against (docs/evidence.md), and changes
nothing agno does.
"""

from __future__ import annotations

import os

from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.team import Team

AGENT_HEADER = "X-Rehearsal-Agent"

# Application data the researcher's tool reads (a real app would query a service).
FACTS = {
    "ganymede": "Ganymede: largest moon of Jupiter, 5268 km across",
    "titan": "Titan: largest moon of Saturn, 5150 km across",
}


def lookup_fact(topic: str) -> str:
    """Look a topic up in the fact sheet.

    Args:
        topic: The topic, one word.
    """
    return FACTS.get(topic.strip().lower(), f"no fact sheet for {topic!r}")


def model_for(label: str) -> OpenAIChat:
    """An OpenAI Chat Completions model on OPENAI_BASE_URL, its requests labelled `label`."""
    return OpenAIChat(
        id=os.environ.get("AGNO_MODEL", "gpt-4.1-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY"),
        default_headers={AGENT_HEADER: label},
    )


def build_team() -> Team:
    researcher = Agent(
        name="Researcher",
        role="Find facts with the lookup_fact tool",
        model=model_for("researcher"),
        tools=[lookup_fact],
    )
    writer = Agent(
        name="Writer",
        role="Write one clear sentence from the facts given",
        model=model_for("writer"),
    )
    return Team(
        name="Research Team",
        members=[researcher, writer],
        model=model_for("root"),
        instructions="Delegate to the appropriate member, then answer from their results.",
    )
