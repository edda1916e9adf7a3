"""The agent loop and Bub's background `subagent` family, written from docs/rules/.

Clause ids from docs/rules/ are quoted in comments where a line implements one. What this
module deliberately does not do: profiles (no profile files are read, so every `agent` name
is unknown), skills (the runtime has none), steering, the foreground `Agent` tool (off under
the `bub` preset), and an approval gate (every call is approved, `roku.approval.auto`).
Time is the wall clock of asyncio: the runtime is tested from outside, not simulated.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAMILY = ("subagent", "subagent.wait", "subagent.send", "subagent.cancel")
TERMINAL = ("final_answer", "ask_user", "fail")
DEPTH_ERROR = "[Sub-agent error] Sub-agents cannot spawn further sub-agents."
WAIT_DEFAULT_SECONDS = 60.0
TIMEOUT_CLAMP_SECONDS = 1_000_000_000.0


def bug(name: str) -> bool:
    """True when the deliberate rule bug `name` is switched on (see BUGS.md)."""
    return name in {b.strip() for b in os.environ.get("PY_RUNTIME_BUG", "").split(",")}


def in_use_statuses() -> tuple[str, ...]:
    """bub.session.named-one-at-a-time: the task statuses that hold a named session."""
    if bug("blind_named_busy_running_only"):
        return ("running",)  # breaks it: a queued task is not seen as holding its session
    return ("queued", "running")


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return int(raw)


def _env_float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return float(raw)


@dataclass
class Rules:
    """The `bub` preset's knobs (core.md section 2); env vars may override a few."""

    root_step_budget: int = 30
    recovery_budget: int = 5
    depth_limit: int = 1
    child_step_cap: int = 10
    spawn_cost: int = 1
    result_limit_chars: int | None = None
    subagent_default_timeout: float | None = None
    max_concurrency: int = 4
    unknown_tool_message: str = "Unknown tool name: {name}."

    @classmethod
    def from_env(cls) -> "Rules":
        r = cls()
        r.max_concurrency = _env_int("BUB_SUBAGENT_MAX_CONCURRENCY", r.max_concurrency)
        r.subagent_default_timeout = _env_float(
            "BUB_SUBAGENT_TIMEOUT_SECONDS", r.subagent_default_timeout
        )
        r.result_limit_chars = _env_int("PY_RUNTIME_RESULT_LIMIT_CHARS", r.result_limit_chars)
        r.root_step_budget = _env_int("PY_RUNTIME_STEP_BUDGET", r.root_step_budget)
        r.depth_limit = _env_int("PY_RUNTIME_DEPTH_LIMIT", r.depth_limit)
        if r.max_concurrency < 1 or r.root_step_budget < 1:
            raise ValueError("max_concurrency and root_step_budget must be at least 1")
        if r.result_limit_chars is not None and r.result_limit_chars < 1:
            raise ValueError("PY_RUNTIME_RESULT_LIMIT_CHARS must be at least 1")
        return r


def seconds_text(s: float) -> str:
    """core.time.seconds-format: whole seconds when whole, else the shortest decimal."""
    if bug("timeout_text_float"):
        return f"{float(s)}"
    if float(s).is_integer():
        return str(int(s))
    return repr(float(s))


def truncate(text: str, limit: int | None) -> str:
    """roku.truncation.*: cut to `limit` Unicode scalar values and add the notice."""
    if limit is None:
        return text
    if bug("truncate_bytes"):
        raw = text.encode("utf-8")
        if len(raw) <= limit:
            return text
        return raw[:limit].decode("utf-8", "ignore") + f"...\n[Sub-agent response truncated to {limit} chars]"
    too_long = len(text) >= limit if bug("truncate_off_by_one") else len(text) > limit
    if not too_long:
        return text
    return text[:limit] + f"...\n[Sub-agent response truncated to {limit} chars]"


def splitmix64_top32(state: int) -> tuple[int, int]:
    """One SplitMix64 draw: returns (new state, top 32 bits of the output)."""
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return state, z >> 32


def fn(name: str, desc: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


S = {"type": "string"}
CATALOG = [fn("fs_read", "Read a text file of the working directory.", {"path": S}, ["path"])]
PSEUDO = {
    "final_answer": fn("final_answer", "End with this answer.", {"message": S}, ["message"]),
    "ask_user": fn("ask_user", "Ask the user a question.", {"question": S}, ["question"]),
    "fail": fn("fail", "End with a failure.", {"reason": S}, ["reason"]),
}
LIST = {"type": "array", "items": S}
FAMILY_SPECS = [
    fn(
        "subagent",
        "Start a child agent in the background; returns a task id at once.",
        {
            "prompt": S, "agent": S, "session": S, "model": S, "reasoning_effort": S,
            "allowed_tools": LIST, "allowed_skills": LIST, "timeout_seconds": {"type": "number"},
        },
        ["prompt"],
    ),
    fn("subagent.wait", "Wait for results of background tasks.",
       {"task_ids": LIST, "timeout_seconds": {"type": "number"}}, []),
    fn("subagent.send", "Send a message to a task, or continue a finished named one.",
       {"task_id": S, "message": S}, ["task_id", "message"]),
    fn("subagent.cancel", "Stop a task.", {"task_id": S}, ["task_id"]),
]


def norm_name(n: str) -> str:
    """bub.spawn.name-matching: trimmed, caseless, `.` and `_` the same."""
    return n.strip().lower().replace(".", "_")


def as_number(v: Any) -> float | None:
    """bub.timeout.invalid-ignored: negative, non-finite or non-numbers count as not given."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not math.isfinite(v) or v < 0:
        return None
    return float(v)


@dataclass
class Outcome:
    kind: str  # "final", "fail", "ask"
    message: str

    @property
    def is_error(self) -> bool:
        return self.kind == "fail"


@dataclass
class Task:
    task_id: str
    prompt: str
    mode: str  # "temp", "fork" or "named"
    session: str
    grant: int
    limit: float | None
    spawn_seq: int
    start_history: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    model: str | None
    status: str = "queued"
    queued_at: float = 0.0
    inbox: list[str] = field(default_factory=list)
    handle: asyncio.Task | None = None


@dataclass
class Result:
    task: Task
    status: str
    body: str
    order: int
    read: bool = False
    # When the task ended, on the event loop's clock: tasks that end in the same instant (the
    # same virtual time under rehearsal's clock) are ties, taken in spawn order
    # (bub.delivery.tie-spawn-order), whichever the loop happened to read first.
    ended_at: float = 0.0


class Runtime:
    """One user session: the root loop, its background tasks and their results."""

    def __init__(self, client: Any, model: str, rules: Rules, state: dict[str, Any], workdir: Path):
        self.client = client
        self.model = model
        self.rules = rules
        self.state = state
        self.workdir = workdir
        self.system_prompt = os.environ.get("PY_RUNTIME_SYSTEM_PROMPT", "You are a helpful agent.")
        self.tasks: dict[str, Task] = {}
        self.queue: deque[Task] = deque()
        self.running: list[Task] = []
        self.results: list[Result] = []
        self.arrived = asyncio.Event()
        self.end_counter = 0
        self.request_id = f"req-{state.get('turn', 0) + 1}"
        self.restore_tasks()

    # --- tasks of earlier turns ----------------------------------------------------
    def restore_tasks(self) -> None:
        """Tasks of earlier turns (one process per turn) stay known to wait, send and cancel."""
        by_name = {t["function"]["name"]: t for t in CATALOG + [PSEUDO["final_answer"], PSEUDO["fail"]]}
        for d in self.state.get("tasks", []):
            t = Task(d["task_id"], d["prompt"], d["mode"], d["session"], 0, d["limit"],
                     len(self.tasks), [], [by_name[n] for n in d["tools"] if n in by_name],
                     d["model"], status=d["status"])
            self.tasks[t.task_id] = t
            if d["had_result"]:
                self.end_counter += 1
                self.results.append(Result(t, d["status"], "", self.end_counter, read=True))

    def save_tasks(self) -> None:
        self.state["tasks"] = [
            {"task_id": t.task_id, "prompt": t.prompt, "mode": t.mode, "session": t.session,
             "limit": t.limit, "tools": [x["function"]["name"] for x in t.tools], "model": t.model,
             "status": t.status, "had_result": any(r.task is t for r in self.results)}
            for t in self.tasks.values()]

    # --- ids -----------------------------------------------------------------------
    def new_task_id(self) -> str:
        """bub.task-id.seeded: SplitMix64 over a counter starting at the seed, redrawn on collision."""
        used = set(self.state.setdefault("used_ids", []))
        st = self.state.setdefault("rng_state", int(os.environ.get("PY_RUNTIME_SEED", "0")))
        while True:
            st, top = splitmix64_top32(st)
            tid = f"sub-{top:08x}"
            if tid not in used:
                break
        self.state["rng_state"] = st
        self.state["used_ids"].append(tid)
        return tid

    # --- the model -----------------------------------------------------------------
    async def ask_model(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                        request_id: str, model: str | None = None, agent: str = "root") -> dict[str, Any]:
        """One streamed Chat Completions request; returns the assembled assistant message.

        `X-Rehearsal-Agent` names the sending agent as this runtime knows it (`root`, or a
        child's task id): the ground truth rehearsal measures its attribution against, which
        it never reads to attribute."""
        stream = await self.client.chat.completions.create(
            model=model or self.model,
            messages=messages,
            tools=tools,
            stream=True,
            extra_headers={"x-request-id": request_id, "X-Rehearsal-Agent": agent},
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            msg["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(calls.items())
            ]
        return msg

    # --- the loop ------------------------------------------------------------------
    async def run_loop(self, history: list[dict[str, Any]], goal: str, budget: list[int],
                       depth: int, tools: list[dict[str, Any]], request_id: str,
                       task: Task | None = None, model: str | None = None) -> Outcome:
        """One agent's loop (roku.md section 1). `budget` is a one-item list so a caller sees it."""
        step_index = 0
        initial_budget = budget[0]  # only read by the blind_exhausted_steps_spent bug
        recovery = self.rules.recovery_budget
        is_root = task is None
        names = {t["function"]["name"] for t in tools}
        while True:
            # roku.loop.budget-zero-fails, bub.turn.budget-checked-before-intake
            if budget[0] <= 0:
                if bug("blind_exhausted_steps_spent"):
                    # breaks roku.loop.budget-zero-fails: N is the steps spent, not step_index.
                    step_index = initial_budget - budget[0]
                return Outcome("fail", f"Step budget exhausted after {step_index} steps; goal: {goal}")
            if is_root:
                self.take_in_results(history)
            elif task.inbox:
                # bub.send.to-active-task: the child reads sent messages before its next step.
                history.extend({"role": "user", "content": m} for m in task.inbox)
                task.inbox.clear()
            try:
                reply = await self.ask_model(
                    [{"role": "system", "content": self.system_prompt}] + history,
                    tools, request_id, model, agent=task.task_id if task is not None else "root")
            except asyncio.CancelledError:
                raise
            except Exception:
                return Outcome("fail", f"LLM call failed for goal: {goal}")  # roku.loop.llm-error-fails
            history.append(reply)  # roku.loop.assistant-appended
            calls = reply.get("tool_calls") or []
            if not calls:
                budget[0] -= 1
                text = reply["content"] or "Runtime loop completed."
                if is_root and await self.hold(budget):
                    continue
                return Outcome("final", text)
            terminal = next((c for c in calls if c["function"]["name"] in TERMINAL
                             and c["function"]["name"] in names), None)
            if terminal is not None:
                args = parse_args(terminal)
                name = terminal["function"]["name"]
                # Every call needs a tool message for the API to accept the next request;
                # the rules say none runs, so each is answered as not run.
                for c in calls:
                    history.append(tool_msg(c, "not run: the reply ended the loop"))
                if name == "ask_user":
                    return Outcome("ask", str(args.get("question", "")))
                budget[0] = max(0, budget[0] - 1)
                if name == "fail":
                    return Outcome("fail", str(args.get("reason", "LLM reported failure.")))
                if is_root and await self.hold(budget):  # bub.turn.held-final-answer
                    continue
                return Outcome("final", str(args.get("message", "")))
            regular = False
            if is_root:
                # core.instant.ties-together: a cancel, send or spawn in the instant a child
                # ends finds it ended (found by `rehearsal fuzz --runtime`, issue 41).
                await self.settle()
            for c in calls:  # roku.calls.serial-in-order
                name = c["function"]["name"]
                # core.depth.subagent-root-only: a root not offered the family (depth limit 0)
                # that calls `subagent` anyway meets the depth guard, not the unknown-tool answer.
                if name in FAMILY and (name in names or (is_root and name == "subagent")):
                    history.append(tool_msg(c, await self.family_call(c, budget, depth, history)))
                    continue
                regular = True
                budget[0] = max(0, budget[0] - 1)  # roku.calls.catalog-cost, budget-saturates
                if name in names:
                    out, err = self.catalog_call(name, parse_args(c))
                else:
                    out, err = self.rules.unknown_tool_message.replace("{name}", name), True
                if err:
                    recovery = max(0, recovery - 1)
                history.append(tool_msg(c, out))
                if budget[0] == 0 or recovery == 0:  # roku.nudge.after-regular-call
                    history.append({"role": "user", "content":
                                    f"System: step budget exhausted (remaining: {budget[0]}, "
                                    f"recovery: {recovery}). Please call final_answer or fail now."})
            if regular:
                step_index += 1  # roku.step.index-regular-only

    def catalog_call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        path = str(args.get("path", ""))
        target = (self.workdir / path).resolve()
        if self.workdir.resolve() not in target.parents or not target.is_file():
            return f"error: no such file: {path}", True
        return target.read_text(encoding="utf-8", errors="replace"), False

    # --- held turn and delivery ----------------------------------------------------
    def unfinished(self) -> int:
        n = sum(1 for t in self.tasks.values() if t.status in ("queued", "running"))
        return n + sum(1 for r in self.results if not r.read)

    async def hold(self, budget: list[int]) -> bool:
        """bub.turn.held-while-children: wait for a result instead of ending the turn."""
        if budget[0] <= 0 or self.unfinished() == 0:  # bub.turn.no-step-left-not-held
            return False
        if any(not r.read for r in self.results):
            return True
        self.arrived.clear()
        await self.arrived.wait()
        await self.settle()
        return True

    async def settle(self) -> None:
        """core.instant.ties-together: let children ending in this instant record theirs before
        results are taken in. A reply released with the one just read may take several turns of
        the event loop to be read (one turn was not enough: `rehearsal fuzz --runtime` found
        it, issue 41), so this waits until the loop has turned 20 times with no new result."""
        seen, quiet = len(self.results), 0
        while quiet < 20:
            await asyncio.sleep(0)
            seen, quiet = (len(self.results), 0) if len(self.results) != seen else (seen, quiet + 1)

    def take_in_results(self, history: list[dict[str, Any]]) -> None:
        """bub.delivery.before-next-step, completion order (ties in spawn order)."""
        ready = [r for r in self.results if not r.read]
        if bug("delivery_spawn_order"):
            ready.sort(key=lambda r: r.task.spawn_seq)
        else:
            ready.sort(key=lambda r: (r.ended_at, r.task.spawn_seq))
        for r in ready:
            r.read = True
            history.extend(getattr(r.task, "spliced", []))  # only the fork_splice bug sets it
            history.append({"role": "user", "content": notification(r)})

    # --- the family ----------------------------------------------------------------
    async def family_call(self, call: dict[str, Any], budget: list[int], depth: int,
                          history: list[dict[str, Any]]) -> str:
        name = call["function"]["name"]
        args = parse_args(call)
        if name == "subagent":
            return self.spawn(args, budget, depth, history)
        tid = str(args.get("task_id", "")).strip()  # bub.task-id.trimmed
        task = self.tasks.get(tid)
        if (name == "subagent.send" and task is not None and task.mode == "named"
                and task.status not in ("queued", "running")):
            return self.continue_named(task, str(args.get("message", "")), budget)
        budget[0] = max(0, budget[0] - 1)  # core.cost.family-calls-one
        if name == "subagent.wait":
            return await self.wait(args)
        if task is None:
            return f"unknown task id: '{tid}'"
        if name == "subagent.cancel":
            if task.status not in ("queued", "running"):
                return f"task {tid} has already finished"
            self.cancel(task)
            return json.dumps({"task_id": tid, "status": "cancelled"}, separators=(",", ":"))
        message = str(args.get("message", ""))
        if not message.strip():
            return "error: empty message"
        if task.status in ("queued", "running"):
            task.inbox.append(message)
            return json.dumps({"task_id": tid, "status": task.status}, separators=(",", ":"))
        return f"task {tid} has finished and its session was discarded"

    def spawn(self, args: dict[str, Any], budget: list[int], depth: int,
              history: list[dict[str, Any]]) -> str:
        rules = self.rules
        budget[0] = max(0, budget[0] - rules.spawn_cost)  # core.budget.spawn-cost-even-refused
        too_deep = depth > rules.depth_limit if bug("depth_off_by_one") else depth >= rules.depth_limit
        if too_deep:
            return DEPTH_ERROR
        prompt = args.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return "error: empty prompt"
        if args.get("agent") not in (None, ""):
            return f"unknown agent profile: '{args['agent']}'"
        tools = self.child_tools(args.get("allowed_tools"))
        if isinstance(tools, str):
            return tools
        skills = split_names(args.get("allowed_skills"))
        if skills:
            return "unknown skill name(s): " + ", ".join(f"'{s}'" for s in sorted(skills))
        mode_arg = args.get("session", "temp")
        mode_arg = "temp" if mode_arg in (None, "") else str(mode_arg)
        if mode_arg not in ("temp", "fork", "inherit"):
            # bub.session.named-one-at-a-time
            busy = next((t for t in self.tasks.values() if t.session == mode_arg
                         and t.mode == "named" and t.status in in_use_statuses()), None)
            if busy is not None:
                return f"session '{mode_arg}' is in use by task {busy.task_id}"
        grant = min(budget[0], rules.child_step_cap)  # core.budget.pre-deduction-both-families
        budget[0] -= grant
        tid = self.new_task_id()
        if mode_arg == "temp":
            mode, session = "temp", f"temp/{tid}"
        elif mode_arg in ("fork", "inherit"):
            mode, session = "fork", f"fork/{tid}"
        else:
            mode, session = "named", mode_arg
        if mode == "fork":
            start = [] if bug("fork_snapshot_late") else fork_snapshot(history)
        elif mode == "temp" and bug("temp_inherits_history"):
            start = [dict(m) for m in history]
        else:
            start = []
        limit = as_number(args.get("timeout_seconds"))
        if bug("blind_zero_timeout_default"):
            # breaks bub.timeout.zero-is-none: a call's 0 is falsy, so the default applies.
            limit = limit or rules.subagent_default_timeout
        if limit is None:
            limit = rules.subagent_default_timeout  # bub.timeout.precedence
        if limit is not None:
            limit = min(limit, TIMEOUT_CLAMP_SECONDS)
            if limit == 0:
                limit = None  # bub.timeout.zero-is-none
        task = Task(tid, prompt.strip(), mode, session, grant, limit, len(self.tasks), start,
                    tools, args.get("model") or None)
        task.history_ref = history  # only read by the fork_snapshot_late and fork_splice bugs
        if mode == "fork" and bug("siblings_share_fork"):
            # breaks bub.session.fork-snapshot: a fork child of the same reply as an earlier one
            # continues that sibling's conversation instead of starting from its own copy.
            calling = calling_message(history)
            task.shares_with = next((t for t in self.tasks.values() if t.mode == "fork"
                                     and getattr(t, "calling", None) is calling), None)
            task.calling = calling
        task.parent_budget = budget  # only written by the budget_refund bug
        self.tasks[tid] = task
        task.queued_at = asyncio.get_running_loop().time()
        self.queue.append(task)
        self.fill_slots()
        return json.dumps({"task_id": tid, "status": task.status, "session": session},
                          separators=(",", ":"))

    def continue_named(self, task: Task, message: str, budget: list[int]) -> str:
        """bub.send.continue-named: a new run of a finished named task, counted as a spawn."""
        budget[0] = max(0, budget[0] - self.rules.spawn_cost)  # core.cost.family-calls-one
        if not message.strip():
            return "error: empty message"
        busy = next((t for t in self.tasks.values() if t.session == task.session
                     and t.mode == "named" and t.status in in_use_statuses()), None)
        if busy is not None:
            return f"session '{task.session}' is in use by task {busy.task_id}"
        task.grant = min(budget[0], self.rules.child_step_cap)  # core.budget.continuation-fresh-grant
        budget[0] -= task.grant
        task.prompt = message  # bub.send.continue-keeps-launch: tools, model, limit stay
        task.status = "queued"
        task.parent_budget = budget
        task.queued_at = asyncio.get_running_loop().time()
        self.queue.append(task)
        self.fill_slots()
        return json.dumps({"task_id": task.task_id, "status": task.status, "session": task.session},
                          separators=(",", ":"))

    def child_tools(self, allowed: Any) -> list[dict[str, Any]] | str:
        """bub.child.tools-*: the parent's catalog narrowed by `allowed_tools`, then final_answer and fail."""
        catalog = list(CATALOG)
        names = split_names(allowed)
        if names:
            known = {norm_name(t["function"]["name"]): t for t in catalog}
            bad = sorted(n.strip() for n in names
                         if norm_name(n) not in known and norm_name(n) not in ("final_answer", "fail"))
            if bad:
                return "unknown tool name(s): " + ", ".join(f"'{b}'" for b in bad)
            wanted = {norm_name(n) for n in names}
            catalog = [t for t in catalog if norm_name(t["function"]["name"]) in wanted]
        tools = catalog + [PSEUDO["final_answer"], PSEUDO["fail"]]
        if bug("depth_off_by_one"):
            tools += FAMILY_SPECS
        return tools

    def fill_slots(self) -> None:
        """bub.cap.max-running, fifo-queue, slot-refilled-at-once."""
        cap = self.rules.max_concurrency + (1 if bug("cap_off_by_one") else 0)
        while self.queue and len(self.running) < cap:
            task = self.queue.pop() if bug("lifo_queue") else self.queue.popleft()
            task.status = "running"
            self.running.append(task)
            task.handle = asyncio.create_task(self.run_task(task))

    async def run_task(self, task: Task) -> None:
        if task.mode == "fork" and bug("fork_snapshot_late"):
            task.start_history = [dict(m) for m in task.history_ref]  # the parent as it is now
        first = task.prompt
        if task.mode == "temp" and bug("prompt_template"):
            # breaks bub.session.temp-empty: the first request holds a wrapping, not the prompt only.
            first = f"Task from your parent:\n{task.prompt}\nReply when done."
        sibling = getattr(task, "shares_with", None)
        if sibling is not None and getattr(sibling, "conversation", None) is not None:
            history = sibling.conversation  # the siblings_share_fork bug: one list for both
            history.append({"role": "user", "content": first})
        else:
            history = task.start_history + [{"role": "user", "content": first}]
        task.conversation = history
        if task.mode == "named":
            history = [dict(m) for m in self.state.setdefault("sessions", {}).get(task.session, [])] + history
        budget = [task.grant]
        task.child_budget = budget
        loop = self.run_loop(history, task.prompt, budget, 1, task.tools,
                             f"{self.request_id}-{task.task_id}", task, task.model)
        limit = task.limit
        if limit is not None and bug("timeout_from_queue"):
            waited = asyncio.get_running_loop().time() - task.queued_at
            limit = max(0.0, limit - waited)
        try:
            if limit is None:
                out = await loop
            else:
                out = await asyncio.wait_for(loop, limit)  # bub.timeout.from-start
            status = "failed" if out.is_error else "completed"
            body = truncate(out.message, self.rules.result_limit_chars)
            if task.mode == "named":  # bub.session.named-recorded-on-end
                self.state["sessions"][task.session] = history
            if task.mode == "fork" and bug("fork_splice"):
                # breaks bub.session.fork-no-leak: the child's prompt, replies and tool results
                # are written back into the parent's conversation, right before its result when
                # the parent takes that in (take_in_results), so the place does not race.
                task.spliced = history[len(task.start_history):]
        except asyncio.TimeoutError:
            status, body = "timed_out", f"Timed out after {seconds_text(task.limit)} seconds."
        except asyncio.CancelledError:
            self.finish(task, "cancelled")
            raise
        if bug("budget_refund"):
            task.parent_budget[0] += task.child_budget[0]  # breaks core.budget.never-refunded
        self.finish(task, status)
        self.end_counter += 1
        self.results.append(Result(task, status, body, self.end_counter, ended_at=asyncio.get_running_loop().time()))
        self.arrived.set()

    def finish(self, task: Task, status: str) -> None:
        task.status = status
        if task in self.running:
            self.running.remove(task)
        self.fill_slots()

    def cancel(self, task: Task) -> None:
        """bub.cancel.stops: at once; a queued task leaves the queue."""
        if task in self.queue:
            self.queue.remove(task)
            task.status = "cancelled"
        elif task.handle is not None:
            task.handle.cancel()
            self.finish(task, "cancelled")
        if bug("blind_cancel_notified"):
            # breaks bub.cancel.no-notification: the cancel is recorded as a result like any end.
            self.end_counter += 1
            self.results.append(Result(task, "cancelled", "Cancelled.", self.end_counter,
                                       ended_at=asyncio.get_running_loop().time()))
            self.arrived.set()

    async def wait(self, args: dict[str, Any]) -> str:
        """bub.wait.*: covered tasks, a deadline, then the JSON array of bub.wait.result-shape."""
        timeout = as_number(args.get("timeout_seconds"))
        timeout = WAIT_DEFAULT_SECONDS if timeout is None else timeout
        ids = args.get("task_ids")
        if isinstance(ids, str):
            ids = [ids]  # a model may send one id as a bare string
        if ids:
            covered = []
            for raw in ids:
                t = self.tasks.get(str(raw).strip())
                if t is None:
                    return f"unknown task id: '{str(raw).strip()}'"
                if t not in covered:
                    covered.append(t)
        else:
            unread = {r.task.task_id for r in self.results if not r.read}
            covered = [t for t in self.tasks.values()
                       if t.status in ("queued", "running") or t.task_id in unread]
        deadline = asyncio.get_running_loop().time() + timeout
        while any(t.status in ("queued", "running") for t in covered):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except asyncio.TimeoutError:
                break
        await self.settle()
        cov_ids = {t.task_id for t in covered}
        read = sorted((r for r in self.results if not r.read and r.task.task_id in cov_ids),
                      key=lambda r: (r.ended_at, r.task.spawn_seq))
        out: list[dict[str, Any]] = []
        for r in read:
            if not bug("wait_then_notify"):
                r.read = True
            out.append({"task_id": r.task.task_id, "status": r.status, "result": r.body})
        read_ids = {r.task.task_id for r in read}
        for t in sorted(covered, key=lambda t: t.spawn_seq):
            if t.task_id in read_ids:
                continue
            entry: dict[str, Any] = {"task_id": t.task_id, "status": t.status}
            if any(r.task is t and r.read for r in self.results):
                entry["already_delivered"] = True
            out.append(entry)
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)

    # --- one user turn -------------------------------------------------------------
    async def turn(self, user_message: str) -> Outcome:
        history: list[dict[str, Any]] = self.state.setdefault("history", [])
        history.append({"role": "user", "content": user_message})
        # bub.turn.unfinished-next-turn: results left from the last turn follow the message.
        for p in self.state.pop("pending", []):
            history.append({"role": "user", "content": p})
        tools = CATALOG + [PSEUDO["final_answer"], PSEUDO["ask_user"], PSEUDO["fail"]]
        if self.rules.depth_limit > 0:
            tools += FAMILY_SPECS  # bub.tools.root-only
        budget = [self.rules.root_step_budget]
        outcome = await self.run_loop(history, user_message, budget, 0, tools, self.request_id)
        # A headless turn cannot leave children running after the process ends: it lets
        # them finish and keeps their unread results for the next turn.
        while any(t.status in ("queued", "running") for t in self.tasks.values()):
            self.arrived.clear()
            await self.arrived.wait()
        await self.settle()
        pending = [r for r in self.results if not r.read]
        pending.sort(key=lambda r: (r.ended_at, r.task.spawn_seq))
        self.state["pending"] = [notification(r) for r in pending]
        self.save_tasks()
        self.state["turn"] = self.state.get("turn", 0) + 1
        return outcome


def notification(r: Result) -> str:
    """bub.delivery.notification-format."""
    return (f'<subagent-notification task_id="{r.task.task_id}" status="{r.status}">\n'
            f"{r.body}\n</subagent-notification>")


def parse_args(call: dict[str, Any]) -> dict[str, Any]:
    try:
        v = json.loads(call["function"]["arguments"] or "{}")
    except json.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


def tool_msg(call: dict[str, Any], content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def split_names(v: Any) -> list[str]:
    """bub.child.allowed-tools-string: a list or one comma-separated string; blanks dropped."""
    if v is None:
        return []
    items = v.split(",") if isinstance(v, str) else [str(x) for x in v]
    return [i for i in items if i.strip()]


def fork_snapshot(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """bub.session.fork-snapshot: up to and including the assistant message that made the call."""
    last = max(i for i, m in enumerate(history) if m["role"] == "assistant")
    return [dict(m) for m in history[: last + 1]]


def calling_message(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message that made the call being run: the last one of the caller's history."""
    return next(m for m in reversed(history) if m["role"] == "assistant")
