# How scripts/conformance runs openai-agents 0.24.0 (examples/frameworks/openai-agents) on the
# SDK's default API, Responses: conformance/openai-agents/runtime.sh (the same venv recipe, the
# same clock and flags), with the runtime description that sets OAI_API=responses, over the
# scenarios of conformance/openai-agents (nothing is copied: `scenarios` names that folder).
# shellcheck source=../openai-agents/runtime.sh
source conformance/openai-agents/runtime.sh
runtime=examples/frameworks/openai-agents/runtime-responses.json
scenarios=conformance/openai-agents
