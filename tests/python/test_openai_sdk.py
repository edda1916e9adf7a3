"""The `openai` Python SDK against `rehearsal serve` (issue 23).

Starts `rehearsal serve tests/wire/sdk.json` in its own process group, plays the scenario's
runtime with `client.chat.completions.create`, streamed and not, with tool calls and a
scripted 429, and checks that the server then judges the run a pass (exit 0, JSON verdict);
then tests/wire/anthropic.json (the scenario is the same whatever the API) for two tool calls
in one reply and a 529. Each feature shown working is a line in target/clients/ (`recorder`),
from which scripts/clients-table renders docs/wire.md's table of clients.

Run by scripts/python-tests (which makes the virtual environment); needs REHEARSAL_BIN.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import unittest

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = [{"type": "function", "function": {"name": "Agent", "description": "Delegate a task",
                                           "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}}]
TRUNCATED = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]"
# The features of docs/wire.md's table of clients, in its column order.
FEATURES = ("plain", "streaming", "tool calls", "parallel calls", "error status", "usage")


def recorder(client, module, api, test):
    """A function writing one `works` line for a feature of `client` (its version from `module`)
    over `api` to $REHEARSAL_CLIENT_RESULTS (default target/clients/), for scripts/clients-table."""
    directory = os.environ.get("REHEARSAL_CLIENT_RESULTS", os.path.join(ROOT, "target", "clients"))
    os.makedirs(directory, exist_ok=True)
    slug = lambda s: re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")  # noqa: E731
    path = os.path.join(directory, f"python-{slug(client)}-{slug(api)}.jsonl")

    def works(feature):
        assert feature in FEATURES, feature
        line = {"client": f"{client} (Python)", "version": module.__version__, "api": api, "feature": feature,
                "result": "works", "test": test}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    return works


class Served:
    """`rehearsal serve` as a subprocess in its own process group, killed with it."""

    def __init__(self, scenario, idle_limit="20s"):
        self.proc = subprocess.Popen(
            [os.environ["REHEARSAL_BIN"], "serve", scenario, "--runtime", "roku", "--time-scale", "0",
             "--idle-limit", idle_limit, "--format", "json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.stderr = []
        self.base_url = None
        for line in self.proc.stderr:
            self.stderr.append(line)
            m = re.match(r"export OPENAI_BASE_URL=(\S+)", line)
            if m:
                self.base_url = m.group(1)
                break
        if self.base_url is None:
            self.kill()
            raise RuntimeError("rehearsal serve printed no base URL:\n" + "".join(self.stderr))
        # The rest of stderr is drained so the server never blocks on a full pipe.
        self.drain = threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True)
        self.drain.start()

    def wait(self, timeout=30):
        # stdout ends when the server exits (it judges, reports and exits by itself).
        timer = threading.Timer(timeout, self.kill)
        timer.start()
        try:
            out = self.proc.stdout.read()
            self.proc.wait()
        finally:
            timer.cancel()
        self.drain.join(timeout=5)
        return self.proc.returncode, out

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe and not pipe.closed:
                pipe.close()


class OpenAISdk(unittest.TestCase):
    def test_create_streamed_and_not_with_tool_calls_and_an_error_reply(self):
        works = recorder("openai", openai, "Chat Completions", "tests/python/test_openai_sdk.py")
        served = Served("tests/wire/sdk.json")
        try:
            client = openai.OpenAI(base_url=served.base_url, api_key="rehearsal", max_retries=0, timeout=20)
            root = [{"role": "system", "content": "You are the root."}, {"role": "user", "content": "Check the logs"}]

            # 1. Not streamed: a tool call.
            first = client.chat.completions.create(model="rehearsal", messages=root, tools=TOOLS)
            self.assertEqual(first.choices[0].finish_reason, "tool_calls")
            call = first.choices[0].message.tool_calls[0]
            self.assertEqual((call.type, call.function.name), ("function", "Agent"))
            self.assertEqual(json.loads(call.function.arguments), {"task": "Summarise the logs"})
            works("tool calls")
            self.assertIsNone(first.choices[0].message.content)
            self.assertGreater(first.usage.total_tokens, 0)

            # 2. Streamed, with usage: the child's text.
            stream = client.chat.completions.create(
                model="rehearsal", messages=[{"role": "user", "content": "Summarise the logs"}],
                stream=True, stream_options={"include_usage": True})
            chunks = list(stream)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            self.assertEqual(text, "The logs show nothing unusual.")
            self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "stop")
            works("streaming")
            self.assertEqual(chunks[-1].choices, [])
            self.assertGreater(chunks[-1].usage.completion_tokens, 0)
            works("usage")

            # 3. Streamed: a tool call in deltas, accumulated as SDK users do.
            root += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": TRUNCATED}]
            calls, content, finish = {}, "", None
            for chunk in client.chat.completions.create(model="rehearsal", messages=root, tools=TOOLS, stream=True):
                delta = chunk.choices[0].delta
                content += delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
                for d in delta.tool_calls or []:
                    slot = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                    slot["id"] = d.id or slot["id"]
                    slot["name"] += (d.function.name or "") if d.function else ""
                    slot["arguments"] += (d.function.arguments or "") if d.function else ""
            self.assertEqual(finish, "tool_calls")
            self.assertEqual(content, "One more.")
            self.assertEqual(list(calls), [0])
            second = calls[0]
            self.assertEqual(second["name"], "Agent")
            self.assertEqual(json.loads(second["arguments"]), {"task": "Count the errors in every log file we have"})

            # 4. A scripted 429: the SDK raises RateLimitError with the API's message.
            child = [{"role": "user", "content": "Count the errors in every log file we have"}]
            with self.assertRaises(openai.RateLimitError) as raised:
                client.chat.completions.create(model="rehearsal", messages=child)
            self.assertEqual(raised.exception.status_code, 429)
            self.assertEqual(raised.exception.body["type"], "requests")
            self.assertIn("Rate limit reached", raised.exception.message)
            works("error status")
            retried = client.chat.completions.create(model="rehearsal", messages=child)
            self.assertEqual(retried.choices[0].message.content, "No errors.")

            # 5. The root's last request ends the script.
            root += [{"role": "assistant", "content": content,
                      "tool_calls": [{"id": second["id"], "type": "function",
                                      "function": {"name": "Agent", "arguments": second["arguments"]}}]},
                     {"role": "tool", "tool_call_id": second["id"], "content": "No errors."}]
            last = client.chat.completions.create(model="rehearsal", messages=root, tools=TOOLS)
            self.assertEqual(last.choices[0].message.content, "Done: the logs are fine and hold no errors.")
            works("plain")

            code, out = served.wait()
            records = [json.loads(line) for line in out.splitlines() if line.strip()]
            verdict = next(r for r in records if r.get("type") == "scenario")
            self.assertEqual((code, verdict["verdict"]), (0, "pass"), out + "".join(served.stderr))
        finally:
            served.kill()

    def test_two_tool_calls_in_one_reply_and_a_529(self):
        works = recorder("openai", openai, "Chat Completions", "tests/python/test_openai_sdk.py")
        served = Served("tests/wire/anthropic.json")
        try:
            client = openai.OpenAI(base_url=served.base_url, api_key="rehearsal", max_retries=0, timeout=20)
            root = [{"role": "system", "content": "You are the root."}, {"role": "user", "content": "Check the logs"}]
            first = client.chat.completions.create(model="rehearsal", messages=root, tools=TOOLS)
            message = first.choices[0].message
            self.assertEqual(message.content, "Delegating both.")
            calls = message.tool_calls
            self.assertEqual([json.loads(c.function.arguments) for c in calls],
                             [{"task": "Summarise the logs"}, {"task": "Count the errors"}])
            self.assertNotEqual(calls[0].id, calls[1].id)
            works("parallel calls")
            child = [{"role": "user", "content": "Summarise the logs"}]
            with self.assertRaises(openai.InternalServerError) as raised:
                client.chat.completions.create(model="rehearsal", messages=child)
            self.assertEqual(raised.exception.status_code, 529)
            self.assertEqual(client.chat.completions.create(model="rehearsal", messages=child).choices[0].message.content,
                             "The logs show nothing unusual.")
            second = client.chat.completions.create(model="rehearsal",
                                                    messages=[{"role": "user", "content": "Count the errors"}])
            self.assertEqual(second.choices[0].message.content, "No errors.")
            root += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": calls[0].id, "content": TRUNCATED},
                     {"role": "tool", "tool_call_id": calls[1].id, "content": "No errors."}]
            last = client.chat.completions.create(model="rehearsal", messages=root, tools=TOOLS)
            self.assertEqual(last.choices[0].message.content, "Done: the logs are fine and hold no errors.")
            code, out = served.wait()
            records = [json.loads(line) for line in out.splitlines() if line.strip()]
            verdict = next(r for r in records if r.get("type") == "scenario")
            self.assertEqual((code, verdict["verdict"]), (0, "pass"), out + "".join(served.stderr))
        finally:
            served.kill()

    def test_a_malformed_request_is_an_api_error_and_fails_the_run(self):
        served = Served("tests/wire/sdk.json", idle_limit="1s")
        try:
            client = openai.OpenAI(base_url=served.base_url, api_key="rehearsal", max_retries=0, timeout=20)
            with self.assertRaises(openai.BadRequestError) as raised:
                client.chat.completions.create(model="rehearsal", messages=[{"role": "wizard", "content": "hi"}])
            self.assertIn("messages[0].role is `wizard`", raised.exception.message)
            code, out = served.wait()
            self.assertEqual(code, 1, out)
            self.assertIn("wire: malformed request: request #1", out)
        finally:
            served.kill()


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
