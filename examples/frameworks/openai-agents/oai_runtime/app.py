"""A small openai-agents 0.24.0 application, written the way the SDK's docs teach.

The agents are the docs' own examples, put together in one app:

- "Agents as tools" (docs/tools.md): an orchestrator that calls translation agents through
  ``agent.as_tool(tool_name=..., tool_description=...)``; the child's input is the tool's
  ``input`` argument and its final output is the tool result.
- "Structured input for tool-agents" (docs/tools.md, examples/agent_patterns/
  agents_as_tools_structured.py): a translator exposed with ``as_tool(...,
  parameters=TranslationInput)``.
- "Handoffs" (docs/handoffs.md): ``handoffs=[billing_agent, handoff(refund_agent,
  input_filter=handoff_filters.remove_all_tools)]``; the model sees ``transfer_to_billing_agent``
  and ``transfer_to_refund_agent``.

Model set-up is the docs' "Models" / "Configuring the SDK" pattern: ``set_default_openai_client``,
``set_tracing_disabled(True)``, and each agent given its own model on its own client (the
documented per-agent model). ``OAI_API`` chooses the API, as the docs' two set-ups do: with
``chat_completions`` (the default here, for an endpoint speaking Chat Completions)
``set_default_openai_api("chat_completions")`` and an ``OpenAIChatCompletionsModel`` per agent;
with ``responses`` the SDK's own default API, left as it is, and an ``OpenAIResponsesModel`` per
agent. The per-agent client carries
``default_headers={"X-Rehearsal-Agent": <name>}``: that header is the only thing here that
exists for the test harness, and it changes nothing the framework does.
"""

from __future__ import annotations

import os

import httpx2
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    function_tool,
    handoff,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.extensions import handoff_filters
from agents.run_config import ToolExecutionConfig

AGENT_HEADER = "X-Rehearsal-Agent"

# Application data the children's function tool reads (a real app would query a service).
GLOSSARY = {
    "invoice": {"spanish": "factura", "french": "facture", "italian": "fattura"},
    "refund": {"spanish": "reembolso", "french": "remboursement", "italian": "rimborso"},
    "hello": {"spanish": "hola", "french": "bonjour", "italian": "ciao"},
}
INVOICES = {"INV-1": "INV-1: 120.00 EUR, paid on 2026-11-02", "INV-2": "INV-2: 75.50 EUR, open"}


def _env_int(name: str) -> int | None:
    """An optional positive integer from the environment (unset or empty: None)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    value = int(raw)
    if value < 1:
        raise SystemExit(f"{name} must be a positive integer, got {raw!r}")
    return value


class Settings:
    """What the app reads from its environment; every limit defaults to the SDK's own."""

    def __init__(self) -> None:
        self.base_url = os.environ.get("OPENAI_BASE_URL")  # None: the SDK's default endpoint
        self.api_key = os.environ.get("OPENAI_API_KEY", "unused")
        self.model = os.environ.get("OAI_MODEL", "gpt-4.1-mini")
        # Runner.run(max_turns=...): unset, the SDK's DEFAULT_MAX_TURNS (10).
        self.max_turns = _env_int("OAI_MAX_TURNS")
        # as_tool(max_turns=...): unset, the nested run gets DEFAULT_MAX_TURNS (10).
        self.tool_max_turns = _env_int("OAI_TOOL_MAX_TURNS")
        # RunConfig(tool_execution=ToolExecutionConfig(max_function_tool_concurrency=...)):
        # unset, every function tool call of one model reply starts at once.
        self.max_tool_concurrency = _env_int("OAI_MAX_TOOL_CONCURRENCY")
        # The API every agent's model speaks: `chat_completions` (unset) or `responses`, the
        # SDK's default.
        self.api = os.environ.get("OAI_API", "").strip() or "chat_completions"
        if self.api not in APIS:
            raise SystemExit(f"OAI_API must be one of {', '.join(APIS)}, got {self.api!r}")


APIS = ("chat_completions", "responses")


def configure(settings: Settings) -> httpx2.AsyncClient:
    """The SDK-wide set-up of docs/config.md: a default client, the API (Chat Completions set
    explicitly; Responses is the SDK's default), no tracing."""
    http_client = httpx2.AsyncClient()
    set_default_openai_client(
        AsyncOpenAI(base_url=settings.base_url, api_key=settings.api_key, http_client=http_client),
        use_for_tracing=False,
    )
    if settings.api == "chat_completions":
        set_default_openai_api("chat_completions")
    set_tracing_disabled(True)
    return http_client


def model_for(label: str, settings: Settings, http_client: httpx2.AsyncClient) -> Model:
    """The documented per-agent model: a Chat Completions or Responses model on a client of
    its own."""
    client = AsyncOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        http_client=http_client,
        default_headers={AGENT_HEADER: label},
    )
    if settings.api == "responses":
        return OpenAIResponsesModel(model=settings.model, openai_client=client)
    return OpenAIChatCompletionsModel(model=settings.model, openai_client=client)


@function_tool
def lookup_term(term: str, language: str) -> str:
    """Look a term up in the company glossary.

    Args:
        term: The English term.
        language: spanish, french or italian.
    """
    entry = GLOSSARY.get(term.strip().lower())
    if entry is None or language.strip().lower() not in entry:
        return f"no glossary entry for {term!r} in {language!r}"
    return f"{term} -> {entry[language.strip().lower()]}"


@function_tool
def get_invoice(invoice_id: str) -> str:
    """Fetch an invoice by id.

    Args:
        invoice_id: The invoice id, such as INV-1.
    """
    return INVOICES.get(invoice_id.strip().upper(), f"no invoice {invoice_id!r}")


# docs/tools.md, "Structured input for tool-agents": the example's own model, as written there
# (no docstring: a docstring would become the schema's description and the summary's first line).
class TranslationInput(BaseModel):
    text: str = Field(description="Text to translate.")
    source: str = Field(description="Source language code or name.")
    target: str = Field(description="Target language code or name.")


SPELLINGS = ("all", "tool", "structured", "handoff")


def build(spelling: str, settings: Settings, http_client: httpx2.AsyncClient) -> Agent:
    """The root agent for one spelling of delegation (``all``: every spelling at once)."""

    def model(label: str) -> Model:
        return model_for(label, settings, http_client)

    def translation_agent(language: str) -> Agent:
        name = f"{language}_agent"
        return Agent(
            name=name,
            instructions=f"You translate the user's message to {language.capitalize()}. "
            "Use lookup_term for company terms.",
            tools=[lookup_term],
            model=model(name),
        )

    tools = []
    handoffs = []
    if spelling in ("all", "tool"):
        for language in ("spanish", "french", "italian"):
            tools.append(
                translation_agent(language).as_tool(
                    tool_name=f"translate_to_{language}",
                    tool_description=f"Translate the user's message to {language.capitalize()}",
                    max_turns=settings.tool_max_turns,
                )
            )
    if spelling in ("all", "structured"):
        translator = Agent(
            name="translator",
            instructions=(
                "Translate the input text into the target language. "
                "If the target is not clear, ask the user for clarification."
            ),
            model=model("translator"),
        )
        tools.append(
            translator.as_tool(
                tool_name="translate_text",
                tool_description=(
                    "Translate text between languages. Provide text, source language, "
                    "and target language."
                ),
                parameters=TranslationInput,
                max_turns=settings.tool_max_turns,
            )
        )
    if spelling in ("all", "handoff"):
        handoffs.append(
            Agent(
                name="billing_agent",
                handoff_description="Answers questions about invoices and payments.",
                instructions="You are the billing agent. Use get_invoice to look invoices up.",
                tools=[get_invoice],
                model=model("billing_agent"),
            )
        )
        # docs/handoffs.md, "Input filters": the refund agent gets the history without tool calls.
        handoffs.append(
            handoff(
                Agent(
                    name="refund_agent",
                    handoff_description="Handles refund requests.",
                    instructions="You are the refund agent. Explain the refund policy and next steps.",
                    model=model("refund_agent"),
                ),
                input_filter=handoff_filters.remove_all_tools,
            )
        )
    return Agent(
        name="orchestrator",
        instructions=(
            "You are a support and translation assistant. You use the tools given to you to "
            "translate; if asked for multiple translations, you call the relevant tools. "
            "Hand billing questions to the billing agent and refund requests to the refund agent."
        ),
        tools=tools,
        handoffs=handoffs,
        model=model("root"),
    )


def run_config(settings: Settings) -> RunConfig:
    return RunConfig(
        tool_execution=ToolExecutionConfig(
            max_function_tool_concurrency=settings.max_tool_concurrency
        ),
    )
