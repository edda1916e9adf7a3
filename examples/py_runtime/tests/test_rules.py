"""Each rule as the model sees it, in the correct mode and with its bug switch on.

Run from examples/py_runtime: `python -m unittest discover -s tests -v`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai import AsyncOpenAI  # noqa: E402

from fakeserver import FakeServer  # noqa: E402
from py_runtime.runtime import Rules, Runtime, truncate  # noqa: E402

ENV_KEYS = ("PY_RUNTIME_BUG", "PY_RUNTIME_DEPTH_LIMIT", "BUB_SUBAGENT_MAX_CONCURRENCY", "PY_RUNTIME_RESULT_LIMIT_CHARS",
            "PY_RUNTIME_STEP_BUDGET", "BUB_SUBAGENT_TIMEOUT_SECONDS")


def run_turn(script: Any, env: dict[str, str], message: str = "go") -> tuple[Any, FakeServer]:
    saved = {k: os.environ.pop(k, None) for k in ENV_KEYS}
    os.environ.update(env)
    server = FakeServer(script)
    try:
        async def go() -> Any:
            client = AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
            rt = Runtime(client, "m", Rules.from_env(), {}, Path(tempfile.mkdtemp()))
            return await rt.turn(message)

        return asyncio.run(go()), server
    finally:
        server.close()
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def child_by_prompt(server: FakeServer, prompt: str) -> list[dict[str, Any]]:
    """Requests of the child whose first user message is `prompt`."""
    agents = [r["agent"] for r in server.requests if r["agent"] != "req-1" and r["n"] == 1
              and r["body"]["messages"][-1]["content"] == prompt]
    return [r for r in server.requests if r["agent"] in agents]


def notifications(server: FakeServer) -> list[str]:
    return [m["content"] for r in server.of("req-1") if r["agent"] == "req-1"
            for m in r["body"]["messages"] if m["role"] == "user"
            and m["content"].startswith("<subagent-notification")]


def last_root_notifications(server: FakeServer) -> list[str]:
    out: list[str] = []
    for r in server.requests:
        if r["agent"] == "req-1":
            out = [m["content"] for m in r["body"]["messages"]
                   if m["role"] == "user" and m["content"].startswith("<subagent-notification")]
    return out


def children_answer(delays: dict[str, float], root: Any) -> Any:
    """A script: the root follows `root(n, body)`, a child answers its prompt after a delay."""
    def script(agent: str, n: int, body: dict[str, Any]):
        if agent == "req-1":
            return root(n, body)
        prompt = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return delays.get(prompt, 0.0), f"answer to {prompt}", []
    return script


def spawn(*calls: dict[str, Any]):
    return lambda n, body: (0.0, "", [("subagent", c) for c in calls]) if n == 1 else (0.0, "done", [])


class Immediate(unittest.TestCase):
    def test_spawn_result_and_notification_format(self):
        out, s = run_turn(children_answer({}, spawn({"prompt": "A"})), {})
        self.assertEqual(out.message, "done")
        tool = [m for m in s.requests[-1]["body"]["messages"] if m["role"] == "tool"][0]
        # bub.spawn.immediate-result and bub.task-id.seeded (seed 0)
        self.assertEqual(tool["content"],
                         '{"task_id":"sub-e220a839","status":"running","session":"temp/sub-e220a839"}')
        self.assertEqual(last_root_notifications(s), [
            '<subagent-notification task_id="sub-e220a839" status="completed">\n'
            "answer to A\n</subagent-notification>"])
        # bub.child.request-id
        self.assertIn("req-1-sub-e220a839", s.counts)

    def test_refusals(self):
        root = lambda n, b: (0.0, "", [("subagent", {"prompt": " "}),
                                       ("subagent.wait", {"task_ids": ["sub-00000000"]}),
                                       ("subagent", {"prompt": "x", "allowed_tools": ["nope", "FS.READ"]})]) \
            if n == 1 else (0.0, "done", [])
        _, s = run_turn(children_answer({}, root), {})
        tools = [m["content"] for m in s.requests[-1]["body"]["messages"] if m["role"] == "tool"]
        self.assertEqual(tools, ["error: empty prompt", "unknown task id: 'sub-00000000'",
                                 "unknown tool name(s): 'nope'"])

    def test_terminal_call_stops_the_other_calls(self):
        root = lambda n, b: (0.0, "", [("subagent", {"prompt": "A"}), ("final_answer", {"message": "fin"})])
        out, s = run_turn(children_answer({}, root), {})
        # roku.terminal.no-other-call-runs: the subagent listed first never starts.
        self.assertEqual((out.message, list(s.counts)), ("fin", ["req-1"]))

    def test_cancel_frees_the_slot_and_is_never_notified(self):
        def root(n, body):
            if n == 1:
                return 0.0, "", [("subagent", {"prompt": "A"}), ("subagent", {"prompt": "B"}),
                                 ("subagent.cancel", {"task_id": "sub-e220a839"})]
            return 0.0, "done", []
        _, s = run_turn(children_answer({"A": 1.0}, root), {"BUB_SUBAGENT_MAX_CONCURRENCY": "1"})
        tools = [m["content"] for m in [r for r in s.requests if r["agent"] == "req-1"][1]["body"]["messages"]
                 if m["role"] == "tool"]
        self.assertEqual(tools[1], '{"task_id":"sub-6e789e6a","status":"queued","session":"temp/sub-6e789e6a"}')
        self.assertEqual(tools[2], '{"task_id":"sub-e220a839","status":"cancelled"}')
        self.assertEqual([n.split('"')[1] for n in last_root_notifications(s)], ["sub-6e789e6a"])

    def test_offered_tools(self):
        _, s = run_turn(children_answer({}, spawn({"prompt": "A", "allowed_tools": " FS.READ ,, final_answer"})), {})
        names = lambda r: [t["function"]["name"] for t in r["body"]["tools"]]
        # bub.tools.family after the pseudo tools; bub.child.tools-default without family or ask_user
        self.assertEqual(names(s.requests[0]), ["fs_read", "final_answer", "ask_user", "fail", "subagent",
                                                "subagent.wait", "subagent.send", "subagent.cancel"])
        self.assertEqual(names(child_by_prompt(s, "A")[0]), ["fs_read", "final_answer", "fail"])

    def test_depth_limit_zero_guards_the_root(self):
        _, s = run_turn(children_answer({}, spawn({"prompt": "A"})), {"PY_RUNTIME_DEPTH_LIMIT": "0"})
        self.assertNotIn("subagent", [t["function"]["name"] for t in s.requests[0]["body"]["tools"]])
        tool = [m for m in s.requests[1]["body"]["messages"] if m["role"] == "tool"][0]["content"]
        self.assertEqual(tool, "[Sub-agent error] Sub-agents cannot spawn further sub-agents.")

    def test_truncate_unit(self):
        self.assertEqual(truncate("a" * 11, 10), "a" * 10 + "...\n[Sub-agent response truncated to 10 chars]")
        self.assertEqual(len(truncate("x" * 5000, 4000)), 4048)


class Sessions(unittest.TestCase):
    def test_named_session_continued_by_send(self):
        def root(n, body):
            if n == 1:
                return 0.0, "", [("subagent", {"prompt": "first", "session": "notes"})]
            if n == 2:
                return 0.0, "", [("subagent.wait", {})]
            if n == 3:
                return 0.0, "", [("subagent.send", {"task_id": " sub-e220a839\n", "message": "second"})]
            return 0.0, "done", []
        out, s = run_turn(children_answer({}, root), {})
        self.assertEqual(out.message, "done")
        runs = [r for r in s.requests if r["agent"] == "req-1-sub-e220a839"]
        # bub.session.named-shared: the second run starts from what the first recorded.
        self.assertEqual([(m["role"], m["content"]) for m in runs[1]["body"]["messages"]], [
            ("system", "You are a helpful agent."), ("user", "first"),
            ("assistant", "answer to first"), ("user", "second")])
        self.assertEqual(last_root_notifications(s)[-1].split("\n")[1], "answer to second")

    def test_unfinished_results_open_the_next_turn(self):
        state: dict[str, Any] = {}

        def script(agent, n, body):
            if agent.startswith("req-1-"):
                return 0.3, "late answer", []
            if agent == "req-1":
                return 0.0, "", [("subagent", {"prompt": "A"})] if n == 1 else [("fail", {"reason": "gave up"})]
            return 0.0, "ok", []
        server = FakeServer(script)
        try:
            async def go():
                client = AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
                outs = []
                for msg in ("one", "two"):
                    rt = Runtime(client, "m", Rules(), state, Path(tempfile.mkdtemp()))
                    outs.append(await rt.turn(msg))
                return outs
            outs = asyncio.run(go())
        finally:
            server.close()
        self.assertEqual([o.message for o in outs], ["gave up", "ok"])
        self.assertEqual(state["tasks"][0]["status"], "completed")
        first = [r for r in server.requests if r["agent"] == "req-2"][0]["body"]["messages"]
        # bub.turn.unfinished-next-turn: the new user message, then the notifications.
        self.assertEqual([m["content"] for m in first[-2:]][0], "two")
        self.assertTrue(first[-1]["content"].startswith("<subagent-notification"))


    def test_task_of_an_earlier_turn_is_known(self):
        state: dict[str, Any] = {}

        def script(agent, n, body):
            if agent == "req-1":
                return spawn({"prompt": "A"})(n, body)
            if agent == "req-2":
                return (0.0, "", [("subagent.cancel", {"task_id": "sub-e220a839"})]) if n == 1 \
                    else (0.0, "ok", [])
            return 0.0, "child", []
        server = FakeServer(script)
        try:
            async def go():
                client = AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
                for msg in ("one", "two"):
                    await Runtime(client, "m", Rules(), state, Path(tempfile.mkdtemp())).turn(msg)
            asyncio.run(go())
        finally:
            server.close()
        second = [r for r in server.requests if r["agent"] == "req-2"][1]["body"]["messages"]
        # bub.cancel.finished-error, for a task started in the turn before.
        self.assertEqual(second[-1]["content"], "task sub-e220a839 has already finished")


class Bugs(unittest.TestCase):
    """Each test asserts the correct behaviour, then that the switch changes what the model sees."""

    def assertBug(self, name: str, check, env: dict[str, str] | None = None):
        env = env or {}
        check(False, env)
        check(True, dict(env, PY_RUNTIME_BUG=name))

    def test_timeout_from_queue(self):
        def check(buggy: bool, env):
            script = children_answer({"A": 0.5, "B": 0.4}, spawn(
                {"prompt": "A", "timeout_seconds": 0.8}, {"prompt": "B", "timeout_seconds": 0.8}))
            _, s = run_turn(script, dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="1"))
            statuses = [n.split('status="')[1].split('"')[0] for n in last_root_notifications(s)]
            # bub.timeout.from-start: B waited 0.5 s in the queue, then needed 0.4 s of its 0.8 s.
            self.assertEqual(statuses, ["completed", "timed_out"] if buggy else ["completed", "completed"])
        self.assertBug("timeout_from_queue", check)

    def test_cap_off_by_one(self):
        def check(buggy: bool, env):
            script = children_answer({"A": 0.4, "B": 0.4, "C": 0.4},
                                     spawn({"prompt": "A"}, {"prompt": "B"}, {"prompt": "C"}))
            _, s = run_turn(script, dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="2"))
            starts = sorted(r["t"] for r in s.requests if r["agent"] != "req-1" and r["n"] == 1)
            # bub.cap.max-running: the third child makes no request until a slot frees.
            self.assertEqual(starts[2] - starts[0] < 0.2, buggy)
        self.assertBug("cap_off_by_one", check)

    def test_lifo_queue(self):
        def check(buggy: bool, env):
            script = children_answer({}, spawn({"prompt": "A"}, {"prompt": "B"}, {"prompt": "C"}))
            _, s = run_turn(script, dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="1"))
            order = [r["body"]["messages"][-1]["content"] for r in s.requests
                     if r["agent"] != "req-1" and r["n"] == 1]
            self.assertEqual(order, ["A", "C", "B"] if buggy else ["A", "B", "C"])  # bub.cap.fifo-queue
        self.assertBug("lifo_queue", check)

    def test_depth_off_by_one(self):
        def check(buggy: bool, env):
            def script(agent, n, body):
                if agent == "req-1":
                    return spawn({"prompt": "A"})(n, body)
                if n == 1 and body["messages"][-1]["content"] == "A":
                    return 0.0, "", [("subagent", {"prompt": "grandchild"})]
                return 0.0, "child done", []
            _, s = run_turn(script, env)
            child = child_by_prompt(s, "A")
            offered = [t["function"]["name"] for t in child[0]["body"]["tools"]]
            self.assertEqual("subagent" in offered, buggy)  # bub.child.cannot-spawn
            # core.depth.no-agent-beyond-limit: no agent runs at depth 2.
            self.assertEqual(len(child_by_prompt(s, "grandchild")) > 0, buggy)
            if not buggy:
                result = [m for m in child[1]["body"]["messages"] if m["role"] == "tool"][0]["content"]
                self.assertEqual(result, "Unknown tool name: subagent.")
        self.assertBug("depth_off_by_one", check)

    def _child_text(self, text: str, env):
        def script(agent, n, body):
            if agent == "req-1":
                return spawn({"prompt": "A"})(n, body)
            return 0.0, text, []
        _, s = run_turn(script, dict(env, PY_RUNTIME_RESULT_LIMIT_CHARS="10"))
        return last_root_notifications(s)[0].split("\n", 1)[1].rsplit("\n", 1)[0]

    def test_truncate_bytes(self):
        def check(buggy: bool, env):
            body = self._child_text("日本語日本語日本語日", env)  # 10 chars, 30 bytes
            self.assertEqual(body != "日本語日本語日本語日", buggy)  # roku.truncation.scalar-values
        self.assertBug("truncate_bytes", check)

    def test_truncate_off_by_one(self):
        def check(buggy: bool, env):
            self.assertEqual(self._child_text("abcdefghij", env) != "abcdefghij", buggy)
            self.assertEqual(self._child_text("abcdefghijk", env),
                             "abcdefghij...\n[Sub-agent response truncated to 10 chars]")
        self.assertBug("truncate_off_by_one", check)

    def test_fork_snapshot_late(self):
        def check(buggy: bool, env):
            root = spawn({"prompt": "A"}, {"prompt": "F", "session": "fork"})
            _, s = run_turn(children_answer({"A": 0.3}, root), dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="1"))
            first = child_by_prompt(s, "F")[0]["body"]["messages"]
            roles = [m["role"] for m in first]
            # bub.session.fork-snapshot-when-queued: the copy ends at the calling message.
            self.assertEqual("tool" in roles, buggy)
            if not buggy:
                self.assertEqual(roles, ["system", "user", "assistant", "user"])
        self.assertBug("fork_snapshot_late", check)

    def test_temp_inherits_history(self):
        def check(buggy: bool, env):
            _, s = run_turn(children_answer({}, spawn({"prompt": "A"})), env)
            roles = [m["role"] for m in child_by_prompt(s, "A")[0]["body"]["messages"]]
            self.assertEqual(roles != ["system", "user"], buggy)  # bub.session.temp-empty
        self.assertBug("temp_inherits_history", check)

    def test_fork_splice(self):
        def check(buggy: bool, env):
            def root(n, body):
                if n == 1:
                    return 0.0, "", [("subagent", {"prompt": "F", "session": "fork"})]
                return (0.5 if n == 2 else 0.0), "done", []
            _, s = run_turn(children_answer({}, root), env)
            last = [r for r in s.requests if r["agent"] == "req-1"][-1]["body"]["messages"]
            # bub.session.fork-no-leak: the parent's later request holds the child's result only.
            spliced = [m for m in last if m["role"] == "assistant" and m["content"] == "answer to F"]
            self.assertEqual(len(spliced) > 0, buggy)
            self.assertEqual(any(m["role"] == "user" and m["content"] == "F" for m in last), buggy)
            self.assertIn("answer to F", last[-1]["content"])  # the notification still arrives
        self.assertBug("fork_splice", check)

    def test_siblings_share_fork(self):
        def check(buggy: bool, env):
            root = spawn({"prompt": "A", "session": "fork"}, {"prompt": "B", "session": "fork"})
            _, s = run_turn(children_answer({}, root), dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="1"))
            first = child_by_prompt(s, "B")[0]["body"]["messages"]
            # bub.session.fork-snapshot: B starts from its own copy, up to the calling message.
            roles = [m["role"] for m in first]
            if buggy:
                self.assertEqual([m["content"] for m in first[-3:]], ["A", "answer to A", "B"])
            else:
                self.assertEqual(roles, ["system", "user", "assistant", "user"])
        self.assertBug("siblings_share_fork", check)

    def test_prompt_template(self):
        def check(buggy: bool, env):
            _, s = run_turn(children_answer({}, spawn({"prompt": "A"})), env)
            first = [r for r in s.requests if r["agent"] != "req-1" and r["n"] == 1][0]["body"]["messages"]
            # bub.session.temp-empty: the first request holds the prompt only, as written.
            self.assertEqual([m["role"] for m in first], ["system", "user"])
            self.assertEqual(first[-1]["content"] != "A", buggy)
            self.assertIn("A", first[-1]["content"])
        self.assertBug("prompt_template", check)

    def test_budget_refund(self):
        def check(buggy: bool, env):
            def root(n, body):
                if n == 1:
                    return 0.0, "", [("subagent", {"prompt": "A"})]
                return 0.0, "", [("subagent.wait", {})] if n == 2 else (0.0, "done", [])
            out, s = run_turn(children_answer({}, root), dict(env, PY_RUNTIME_STEP_BUDGET="12"))
            # 12 - 1 spawn - 10 grant - 1 wait = 0: core.budget.never-refunded
            self.assertEqual(s.counts["req-1"], 3 if buggy else 2)
            if not buggy:
                self.assertEqual(out.message, "Step budget exhausted after 0 steps; goal: go")
        self.assertBug("budget_refund", check)

    def test_delivery_spawn_order(self):
        def check(buggy: bool, env):
            def root(n, body):
                if n == 1:
                    return 0.0, "", [("subagent", {"prompt": "A"}), ("subagent", {"prompt": "B"})]
                return (0.8 if n == 2 else 0.0), "done", []
            _, s = run_turn(children_answer({"A": 0.4, "B": 0.1}, root), env)
            bodies = [n.split("\n")[1] for n in last_root_notifications(s)]
            # bub.delivery.completion-order
            self.assertEqual(bodies, ["answer to A", "answer to B"] if buggy else ["answer to B", "answer to A"])
        self.assertBug("delivery_spawn_order", check)

    def test_wait_then_notify(self):
        def check(buggy: bool, env):
            def root(n, body):
                if n == 1:
                    return 0.0, "", [("subagent", {"prompt": "A"})]
                return (0.0, "", [("subagent.wait", {})]) if n == 2 else (0.0, "done", [])
            _, s = run_turn(children_answer({}, root), env)
            wait = [m for m in [r for r in s.requests if r["agent"] == "req-1"][2]["body"]["messages"] if m["role"] == "tool"][-1]["content"]
            self.assertEqual(json.loads(wait)[0]["result"], "answer to A")
            self.assertEqual(len(notifications(s)) > 0, buggy)  # bub.delivery.once
        self.assertBug("wait_then_notify", check)

    def test_timeout_text_float(self):
        def check(buggy: bool, env):
            script = children_answer({"A": 1.5}, spawn({"prompt": "A", "timeout_seconds": 1}))
            _, s = run_turn(script, env)
            body = last_root_notifications(s)[0].split("\n")[1]
            self.assertEqual(body, "Timed out after 1.0 seconds." if buggy else "Timed out after 1 seconds.")
        self.assertBug("timeout_text_float", check)

    # --- switches written blind to the fuzzer (BUGS.md) ----------------------------------

    def test_blind_cancel_notified(self):
        def check(buggy: bool, env):
            def root(n, body):
                if n == 1:
                    return 0.0, "", [("subagent", {"prompt": "A"})]
                if n == 2:  # A has asked by now and is still waiting for its reply
                    return 0.2, "", [("subagent.cancel", {"task_id": "sub-e220a839"})]
                return 0.0, "done", []
            out, s = run_turn(children_answer({"A": 1.0}, root), env)
            self.assertEqual(len(child_by_prompt(s, "A")), 1)  # A asked once, then was stopped
            root_reqs = [r for r in s.requests if r["agent"] == "req-1"]
            tool = [m for m in root_reqs[2]["body"]["messages"] if m["role"] == "tool"][-1]["content"]
            self.assertEqual(tool, '{"task_id":"sub-e220a839","status":"cancelled"}')  # bub.cancel.result
            # bub.cancel.no-notification: the parent already has its answer, no notification follows.
            self.assertEqual(notifications(s), [
                '<subagent-notification task_id="sub-e220a839" status="cancelled">\n'
                "Cancelled.\n</subagent-notification>"] if buggy else [])
            self.assertEqual((out.message, len(root_reqs)), ("done", 3))
        self.assertBug("blind_cancel_notified", check)

    def test_blind_named_busy_running_only(self):
        def check(buggy: bool, env):
            root = spawn({"prompt": "A"}, {"prompt": "N1", "session": "notes"},
                         {"prompt": "N2", "session": "notes"})
            # three spawns of 1 + 10 steps each need more than the default 30
            _, s = run_turn(children_answer({"A": 0.3}, root),
                            dict(env, BUB_SUBAGENT_MAX_CONCURRENCY="1", PY_RUNTIME_STEP_BUDGET="40"))
            second = [r for r in s.requests if r["agent"] == "req-1"][1]["body"]["messages"]
            tools = [m["content"] for m in second if m["role"] == "tool"]
            self.assertEqual(tools[1], '{"task_id":"sub-6e789e6a","status":"queued","session":"notes"}')
            # bub.session.named-one-at-a-time: N1 is queued on `notes`, so the session is in use.
            self.assertEqual(tools[2], '{"task_id":"sub-06c45d18","status":"queued","session":"notes"}'
                             if buggy else "session 'notes' is in use by task sub-6e789e6a")
            self.assertEqual(len(child_by_prompt(s, "N2")) > 0, buggy)  # a second run on the session
        self.assertBug("blind_named_busy_running_only", check)

    def test_blind_zero_timeout_default(self):
        def check(buggy: bool, env):
            script = children_answer({"A": 1.0, "B": 1.0}, spawn(
                {"prompt": "A", "timeout_seconds": 0}, {"prompt": "B"}))
            _, s = run_turn(script, dict(env, BUB_SUBAGENT_TIMEOUT_SECONDS="0.5"))
            bodies = {n.split('"')[1]: n.split("\n")[1] for n in notifications(s)}
            # bub.timeout.zero-is-none: the call's 0 decides (no limit); B falls to the default.
            self.assertEqual(bodies["sub-6e789e6a"], "Timed out after 0.5 seconds.")
            self.assertEqual(bodies["sub-e220a839"],
                             "Timed out after 0.5 seconds." if buggy else "answer to A")
        self.assertBug("blind_zero_timeout_default", check)

    def test_blind_exhausted_steps_spent(self):
        def check(buggy: bool, env):
            def script(agent, n, body):
                if agent == "req-1":
                    return spawn({"prompt": "A"})(n, body)
                # one reply with ten regular calls spends the child's whole grant of 10
                return 0.0, "", [("fs_read", {"path": f"missing-{i}"}) for i in range(10)]
            _, s = run_turn(script, env)
            self.assertEqual(len(child_by_prompt(s, "A")), 1)  # roku.loop.budget-zero-no-llm-call
            # roku.loop.budget-zero-fails: N is step_index, 1 after one reply with regular calls.
            self.assertEqual(notifications(s), [
                '<subagent-notification task_id="sub-e220a839" status="failed">\n'
                f"Step budget exhausted after {10 if buggy else 1} steps; goal: A\n"
                "</subagent-notification>"])
        self.assertBug("blind_exhausted_steps_spent", check)


class Cli(unittest.TestCase):
    def test_two_turns_keep_history(self):
        server = FakeServer(lambda a, n, b: (0.0, f"reply {len(b['messages'])}", []))
        try:
            with tempfile.TemporaryDirectory() as wd:
                env = dict(os.environ, OPENAI_BASE_URL=server.url, OPENAI_API_KEY="k",
                           PY_RUNTIME_MODEL="m",
                           PYTHONPATH=str(Path(__file__).resolve().parents[1]))
                env.pop("PY_RUNTIME_BUG", None)
                outs = [subprocess.run([sys.executable, "-m", "py_runtime", "--session", "s1", msg],
                                       cwd=wd, env=env, capture_output=True, text=True, timeout=60,
                                       start_new_session=True)
                        for msg in ("hello", "again")]
        finally:
            server.close()
        self.assertEqual([o.returncode for o in outs], [0, 0], [o.stderr for o in outs])
        # system + user, then system + user + assistant + user
        self.assertEqual([o.stdout for o in outs], ["reply 2\n", "reply 4\n"])
        self.assertEqual(server.requests[1]["agent"], "req-2")


if __name__ == "__main__":
    unittest.main()
