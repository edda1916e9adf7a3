"""Run the manager on one user message and print its final answer.

    python -m smol_runtime "user message"

The agents are built as "Orchestrate a multi-agent system" teaches
(https://huggingface.co/docs/smolagents/v1.26.0/en/examples/multiagents): managed agents with a
`name` and a `description`, handed to the manager in `managed_agents`. Both levels are
`ToolCallingAgent`s (see README.md for why not a `CodeAgent` manager). The model is
`OpenAIServerModel` (https://huggingface.co/docs/smolagents/v1.26.0/en/reference/models#openaimodel),
one object per agent; `client_kwargs` (documented: "Additional keyword arguments to pass to the
OpenAI client") gives each agent's OpenAI client the default header `X-Rehearsal-Agent`, naming
the agent that sends the request: `root` for the manager, a managed agent's own `name` for it.

Environment:
    OPENAI_BASE_URL     the OpenAI-compatible server (required)
    OPENAI_API_KEY      its key (anything for rehearsal; default "unused")
    SMOL_MODEL          the model id (default "rehearsal")
    SMOL_MAX_STEPS      the manager's max_steps (default: smolagents' own, 20)
    SMOL_CHILD_MAX_STEPS  each managed agent's max_steps (default: smolagents' own, 20)
    SMOL_LOG_LEVEL      smolagents' verbosity_level, -1 (off), 0 (errors), 1 (default) or 2 (debug); on stderr
"""

import os
import sys

from rich.console import Console
from smolagents import AgentLogger, LogLevel, OpenAIServerModel, PythonInterpreterTool, ToolCallingAgent

AGENT_HEADER = "X-Rehearsal-Agent"


def model_for(agent: str) -> OpenAIServerModel:
    """One model object per agent; its OpenAI client labels every request with the agent's name."""
    return OpenAIServerModel(
        model_id=os.environ.get("SMOL_MODEL", "rehearsal"),
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
        client_kwargs={"default_headers": {AGENT_HEADER: agent}},
    )


def max_steps(variable: str) -> dict:
    """`max_steps=N` when the variable is set, else nothing: smolagents' own default stands."""
    value = os.environ.get(variable, "").strip()
    return {"max_steps": int(value)} if value else {}


def build() -> ToolCallingAgent:
    level = LogLevel(int(os.environ.get("SMOL_LOG_LEVEL", "1")))
    # smolagents logs with rich to stdout; this entry point keeps stdout for the final answer.
    logger = AgentLogger(level=level, console=Console(stderr=True, highlight=False))
    researcher = ToolCallingAgent(
        tools=[PythonInterpreterTool()],
        model=model_for("researcher"),
        name="researcher",
        description="Researches a question and reports what it found.",
        logger=logger,
        **max_steps("SMOL_CHILD_MAX_STEPS"),
    )
    reviewer = ToolCallingAgent(
        tools=[],
        model=model_for("reviewer"),
        name="reviewer",
        description="Reviews a draft and reports the problems it finds.",
        provide_run_summary=True,
        logger=logger,
        **max_steps("SMOL_CHILD_MAX_STEPS"),
    )
    return ToolCallingAgent(
        tools=[PythonInterpreterTool()],
        model=model_for("root"),
        managed_agents=[researcher, reviewer],
        logger=logger,
        **max_steps("SMOL_MAX_STEPS"),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m smol_runtime MESSAGE", file=sys.stderr)
        return 2
    answer = build().run(argv[0])
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
