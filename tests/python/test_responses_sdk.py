"""The `openai` Python SDK's Responses client against `rehearsal serve` (issue 40).

Starts `rehearsal serve tests/wire/responses.json`, plays the scenario's runtime with
`client.responses.create` (plain, with two function calls in one reply), `client.responses.stream`
(text and function calls accumulated by the SDK's own stream helper), `stream=True` (the raw
typed events), a scripted 429 the SDK raises as RateLimitError, the usage, and the root's
second request both ways: naming its first response by `previous_response_id`, and resending
the SDK's own output items (as openai-agents does); then checks that the server judges the run
a pass (exit 0, JSON verdict). An unknown `previous_response_id` is raised as BadRequestError
with the code `previous_response_not_found`.

Run by scripts/python-tests (which makes the virtual environment, openai==3.63.0, the version
the framework examples pin); needs REHEARSAL_BIN.
"""

import json
import os
import sys
import unittest

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_openai_sdk import Served, recorder  # noqa: E402  (the same subprocess wrapper and results)

TOOLS = [{"type": "function", "name": "Agent", "description": "Delegate a task", "strict": False,
          "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}]
TRUNCATED = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]"
ROOT = [{"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Check the logs"}]}]
LOW = {"effort": "low"}
# Each feature shown working is a line for docs/wire.md's clients table (scripts/clients-table).
works = recorder("openai", openai, "Responses", "tests/python/test_responses_sdk.py")


def outputs(calls, first=TRUNCATED):
    """The function_call_output items answering the root's two calls, then a system message."""
    return [{"type": "function_call_output", "call_id": calls[0].call_id, "output": first},
            {"type": "function_call_output", "call_id": calls[1].call_id,
             "output": [{"type": "input_text", "text": "No errors."}]},
            {"role": "system", "content": "Reminder: answer briefly."}]


def verdict_of(served):
    code, out = served.wait()
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    verdict = next(r for r in records if r.get("type") == "scenario")
    return code, verdict, out + "".join(served.stderr)


class ResponsesSdk(unittest.TestCase):
    def client(self, served):
        return openai.OpenAI(base_url=served.base_url, api_key="rehearsal", max_retries=0, timeout=20)

    def children(self, client):
        """The two children: a 429 then a streamed answer, and a raw stream of events."""
        child = "Summarise the logs"
        with self.assertRaises(openai.RateLimitError) as raised:
            client.responses.create(model="rehearsal", input=child, reasoning=LOW)
        self.assertEqual(raised.exception.status_code, 429)
        self.assertEqual(raised.exception.body["type"], "rate_limit_error")
        works("error status")
        with client.responses.stream(model="rehearsal", input=child, reasoning=LOW) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        self.assertEqual("".join(deltas), "The logs show nothing unusual.")
        self.assertEqual(final.output_text, "The logs show nothing unusual.")
        self.assertEqual(final.status, "completed")
        works("streaming")

        events = list(client.responses.create(model="rehearsal", input="Count the errors", reasoning=LOW,
                                              stream=True))
        self.assertEqual([e.type for e in events], [
            "response.created", "response.in_progress", "response.output_item.added",
            "response.content_part.added", "response.output_text.delta", "response.output_text.done",
            "response.content_part.done", "response.output_item.done", "response.completed"])
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        self.assertEqual(events[-1].response.output_text, "No errors.")

    def test_create_stream_calls_a_429_usage_and_previous_response_id(self):
        served = Served("tests/wire/responses.json")
        try:
            client = self.client(served)
            # 1. Not streamed: two function calls in one reply (parallel calls), and the usage.
            first = client.responses.create(model="rehearsal", instructions="You are the root.", input=ROOT,
                                            tools=TOOLS, reasoning=LOW, parallel_tool_calls=True)
            self.assertEqual(first.id, "resp_0")
            self.assertEqual(first.output_text, "Delegating both.")
            works("plain")
            self.assertEqual([i.type for i in first.output], ["message", "function_call", "function_call"])
            calls = first.output[1:]
            self.assertEqual((calls[0].name, json.loads(calls[0].arguments)), ("Agent", {"task": "Summarise the logs"}))
            works("tool calls")
            self.assertEqual([json.loads(c.arguments) for c in calls],
                             [{"task": "Summarise the logs"}, {"task": "Count the errors"}])
            self.assertEqual([c.call_id for c in calls], ["call_1", "call_2"])
            works("parallel calls")
            self.assertEqual((first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens),
                             (11, 18, 29))
            works("usage")
            self.assertEqual(first.usage.output_tokens_details.reasoning_tokens, 0)

            # 2. The children.
            self.children(client)

            # 3. The root goes on from its first response: only the results are new.
            last = client.responses.create(model="rehearsal", instructions="You are the root.",
                                           previous_response_id=first.id, input=outputs(calls), tools=TOOLS,
                                           reasoning=LOW)
            self.assertEqual(last.output_text, "Done: the logs are fine and hold no errors.")
            self.assertEqual(last.previous_response_id, "resp_0")

            code, verdict, out = verdict_of(served)
            self.assertEqual((code, verdict["verdict"]), (0, "pass"), out)
        finally:
            served.kill()

    def test_a_streamed_root_resending_the_sdks_own_output_items_passes_too(self):
        served = Served("tests/wire/responses.json")
        try:
            client = self.client(served)
            # The root's first reply streamed: the SDK accumulates the message and both calls.
            with client.responses.stream(model="rehearsal", instructions="You are the root.", input=ROOT,
                                         tools=TOOLS, reasoning=LOW) as stream:
                arguments = [e.arguments for e in stream if e.type == "response.function_call_arguments.done"]
                first = stream.get_final_response()
            self.assertEqual([json.loads(a) for a in arguments],
                             [{"task": "Summarise the logs"}, {"task": "Count the errors"}])
            self.assertEqual(first.output_text, "Delegating both.")
            calls = [i for i in first.output if i.type == "function_call"]
            self.assertEqual([c.name for c in calls], ["Agent", "Agent"])
            self.children(client)
            # The whole conversation again, the SDK's output items as it dumps them, `store`
            # off: what openai-agents sends by default.
            history = ROOT + [item.model_dump(exclude_none=True) for item in first.output] + outputs(calls)
            last = client.responses.create(model="rehearsal", instructions="You are the root.", input=history,
                                           tools=TOOLS, reasoning=LOW, store=False)
            self.assertEqual(last.output_text, "Done: the logs are fine and hold no errors.")
            code, verdict, out = verdict_of(served)
            self.assertEqual((code, verdict["verdict"]), (0, "pass"), out)
        finally:
            served.kill()

    def test_an_unknown_previous_response_is_a_bad_request_naming_it(self):
        served = Served("tests/wire/responses.json", idle_limit="1s")
        try:
            client = self.client(served)
            with self.assertRaises(openai.BadRequestError) as raised:
                client.responses.create(model="rehearsal", previous_response_id="resp_41", input="Check the logs")
            self.assertEqual(raised.exception.code, "previous_response_not_found")
            self.assertEqual(raised.exception.param, "previous_response_id")
            self.assertIn("resp_41", raised.exception.message)
            served.wait()
        finally:
            served.kill()


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
