"""The `anthropic` Python SDK against `rehearsal serve` (issue 40): the Messages API.

Starts `rehearsal serve tests/wire/anthropic.json`, plays the scenario's runtime with
`client.messages.create` (plain, with two tool calls in one reply), `client.messages.stream`
(text and tool_use blocks accumulated by the SDK), `client.beta.messages.create` (the
`?beta=true` query Claude Code sends), a scripted 529 the SDK raises as OverloadedError, and
`count_tokens`; then checks that the server judges the run a pass (exit 0, JSON verdict).

Run by scripts/python-tests (which makes the virtual environment); needs REHEARSAL_BIN.
"""

import json
import os
import sys
import unittest

import anthropic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_openai_sdk import Served, recorder  # noqa: E402  (the same subprocess wrapper and results)

TOOLS = [{"name": "Agent", "description": "Delegate a task",
          "input_schema": {"type": "object", "properties": {"task": {"type": "string"}}}}]
TRUNCATED = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]"


class AnthropicSdk(unittest.TestCase):
    def test_messages_plain_streamed_and_tool_use_with_an_overloaded_error(self):
        works = recorder("anthropic", anthropic, "Messages", "tests/python/test_anthropic_sdk.py")
        served = Served("tests/wire/anthropic.json")
        try:
            # The SDK's base URL has no /v1: it appends /v1/messages itself.
            base = served.base_url.removesuffix("/v1")
            client = anthropic.Anthropic(base_url=base, api_key="dummy", max_retries=0, timeout=20)
            root = [{"role": "user", "content": "Check the logs"}]

            # count_tokens, as a client checks a prompt's size: not an exchange.
            counted = client.messages.count_tokens(model="rehearsal", system="You are the root.", messages=root)
            self.assertEqual(counted.input_tokens, 8)

            # 1. Not streamed: two tool_use blocks in one reply.
            first = client.messages.create(model="rehearsal", max_tokens=1024, system="You are the root.",
                                           messages=root, tools=TOOLS)
            self.assertEqual(first.stop_reason, "tool_use")
            self.assertEqual([b.type for b in first.content], ["text", "tool_use", "tool_use"])
            self.assertEqual(first.content[0].text, "Delegating both.")
            works("plain")
            calls = first.content[1:]
            self.assertEqual((calls[0].name, calls[0].input), ("Agent", {"task": "Summarise the logs"}))
            works("tool calls")
            self.assertEqual([c.input for c in calls], [{"task": "Summarise the logs"}, {"task": "Count the errors"}])
            self.assertNotEqual(calls[0].id, calls[1].id)
            works("parallel calls")
            self.assertGreater(first.usage.input_tokens, 0)
            self.assertGreater(first.usage.output_tokens, 0)
            works("usage")

            # 2. The first child: a scripted 529, raised as OverloadedError; its retry streamed.
            child = [{"role": "user", "content": "Summarise the logs"}]
            with self.assertRaises(anthropic.OverloadedError) as raised:
                client.messages.create(model="rehearsal", max_tokens=1024, messages=child)
            self.assertEqual(raised.exception.status_code, 529)
            self.assertEqual(raised.exception.body["error"]["type"], "overloaded_error")
            works("error status")
            with client.messages.stream(model="rehearsal", max_tokens=1024, messages=child) as stream:
                text = "".join(stream.text_stream)
                final = stream.get_final_message()
            self.assertEqual(text, "The logs show nothing unusual.")
            self.assertEqual(final.stop_reason, "end_turn")
            works("streaming")

            # 3. The second child, through the beta client (`?beta=true`).
            second = client.beta.messages.create(model="rehearsal", max_tokens=1024,
                                                 messages=[{"role": "user", "content": "Count the errors"}],
                                                 betas=["claude-code-20250219"])
            self.assertEqual(second.content[0].text, "No errors.")

            # 4. The root, handed both results as tool_result blocks and a system message
            # mid-conversation; streamed, the SDK accumulating the message.
            root += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                     {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": calls[0].id, "content": TRUNCATED},
                         {"type": "tool_result", "tool_use_id": calls[1].id,
                          "content": [{"type": "text", "text": "No errors."}]}]},
                     {"role": "system", "content": "Reminder: answer briefly."}]
            with client.messages.stream(model="rehearsal", max_tokens=1024, system="You are the root.",
                                        messages=root, tools=TOOLS) as stream:
                last = stream.get_final_message()
            self.assertEqual(last.content[0].text, "Done: the logs are fine and hold no errors.")

            code, out = served.wait()
            records = [json.loads(line) for line in out.splitlines() if line.strip()]
            verdict = next(r for r in records if r.get("type") == "scenario")
            self.assertEqual((code, verdict["verdict"]), (0, "pass"), out + "".join(served.stderr))
        finally:
            served.kill()

    def test_a_streamed_tool_use_is_accumulated_by_the_sdk(self):
        served = Served("tests/wire/anthropic.json", idle_limit="1s")
        try:
            client = anthropic.Anthropic(base_url=served.base_url.removesuffix("/v1"), api_key="dummy",
                                         max_retries=0, timeout=20)
            with client.messages.stream(model="rehearsal", max_tokens=1024, system="You are the root.",
                                        messages=[{"role": "user", "content": "Check the logs"}],
                                        tools=TOOLS) as stream:
                message = stream.get_final_message()
            self.assertEqual(message.stop_reason, "tool_use")
            self.assertEqual([(b.type, getattr(b, "input", None)) for b in message.content],
                             [("text", None), ("tool_use", {"task": "Summarise the logs"}),
                              ("tool_use", {"task": "Count the errors"})])
            served.wait()
        finally:
            served.kill()


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
