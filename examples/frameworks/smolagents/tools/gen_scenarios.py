"""Writes conformance/smolagents/*.json from smolagents' own prompt templates (run from the repository root
with the venv's python: the wrap texts are rendered by smolagents 1.26.0 itself)."""
import json, os, yaml, importlib.resources
from smolagents.agents import populate_template

T = yaml.safe_load(importlib.resources.files("smolagents.prompts").joinpath("toolcalling_agent.yaml").read_text())
OUT = "conformance/smolagents"
RETRY = "\nNow let's retry: take care not to repeat previous errors! If you have retried several times, try a completely different approach.\n"

def wrap(name, task):
    return "New task:\n" + populate_template(T["managed_agent"]["task"], variables=dict(name=name, task=task))

def report(name, answer):
    return populate_template(T["managed_agent"]["report"], variables=dict(name=name, final_answer=answer))

def fa(answer, **extra):
    return {"calls": [{"tool": "final_answer", "args": {"answer": answer}}], **extra}

def call(tool, **args):
    return {"tool": tool, "args": args}

def scenario(name, description, lanes, user, expect, **extra):
    s = {"$schema": "../../docs/scenario.schema.json", "name": name, "description": description,
         "rules": {"preset": "bub"},
         "tools": [{"name": n, "description": d} for n, d in [
             ("python_interpreter", "smolagents' PythonInterpreterTool; the runtime runs it itself")]],
         "lanes": lanes, "turns": [{"user": user, "expect": expect}]}
    s.update(extra)
    with open(os.path.join(OUT if not name.startswith("same-member") else "examples/frameworks/smolagents/race", name + ".json"), "w") as f:
        f.write(json.dumps(s, indent=2, ensure_ascii=False) + "\n")

ROOT_TOOLS = ["python_interpreter", "final_answer", "researcher", "reviewer"]

# --- the managed agent's task
task = "Count the vowels in the word banana."
scenario("managed-agent-task-is-wrapped",
    "smolagents.managed.task-template: a managed agent's run starts from one user message, `New task:` and the managed_agent.task template around the call's task, its own name in it.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task)]}, fa("Three vowels.")]},
     {"task_contains": task, "replies": [fa("There are three vowels.", check={"messages": 1, "first_message": wrap("researcher", task)})]}],
    "How many vowels are in banana?", {"message": "Three vowels."})

task = "Describe the weather in the city you are given."
scenario("additional-args-follow-the-wrapped-task",
    "smolagents.managed.additional-args: a call's additional_args are written after the wrapped task, as the text run() appends, in Python's repr.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task, additional_args={"city": "Lyon"})]}, fa("Mild.")]},
     {"task_contains": task, "replies": [fa("Mild in Lyon.", check={"messages": 1, "first_message": wrap("researcher", task) +
        "\nYou have been provided with these additional arguments, that you can access directly using the keys as variables:\n{'city': 'Lyon'}."})]}],
    "What is the weather like in Lyon?", {"message": "Mild."})

task = "Probe, then report CHILD-FINAL."
scenario("manager-reads-the-report-only",
    "smolagents.managed.report: the manager reads the managed agent's final answer inside the report template, as an Observation, and none of the managed agent's narration, calls or tool output.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task)]},
        fa("Report read.", check={"last_message": "Observation:\n" + report("researcher", "CHILD-FINAL"), "absent": ["CHILD-NARRATION", "child-probe-output"]})]},
     {"task_contains": task, "replies": [
        {"text": "CHILD-NARRATION", "calls": [call("python_interpreter", code="print('child-probe-output')")]},
        fa("CHILD-FINAL")]}],
    "Ask the researcher for a report.", {"message": "Report read."})

task = "Review the draft, then report REVIEW-FINAL."
scenario("run-summary-follows-the-report",
    "smolagents.managed.run-summary: with provide_run_summary=True the report is followed by a summary of the managed agent's work: its memory in summary mode (its task, calls and observations, not its own text), each message's content as Python's str of its parts.",
    [{"agent": "main", "replies": [{"calls": [call("reviewer", task=task)]},
        fa("Review read.", check={"contains": [
            "Observation:\n" + report("reviewer", "REVIEW-FINAL") + "\n\nFor more detail, find below a summary of this agent's work:\n<summary_of_work>\n"
            + "\n" + str([{"type": "text", "text": wrap("reviewer", task)}]) + "\n---"
            + "\n" + str([{"type": "text", "text": "Calling tools:\n[{'id': 'call_2', 'type': 'function', 'function': {'name': 'final_answer', 'arguments': {'answer': 'REVIEW-FINAL'}}}]"}]) + "\n---"
            + "\n" + str([{"type": "text", "text": "Observation:\nREVIEW-FINAL"}]) + "\n---"
            + "\n</summary_of_work>"],
            "absent": ["REVIEW-NARRATION"]})]},
     {"task_contains": task, "replies": [fa("REVIEW-FINAL") | {"text": "REVIEW-NARRATION"}]}],
    "Ask the reviewer for a review.", {"message": "Review read."})

scenario("second-call-starts-fresh",
    "smolagents.managed.fresh-memory: each call of a managed agent runs it with reset=True: the second call's first request holds its own wrapped task alone, nothing of the first call.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task="FIRST job: answer ANSWER-ONE.")]},
                                   {"calls": [call("researcher", task="SECOND job: answer ANSWER-TWO.")]}, fa("One and two.")]},
     {"task_contains": "FIRST job", "replies": [fa("ANSWER-ONE")]},
     {"task_contains": "SECOND job", "replies": [fa("ANSWER-TWO", check={"messages": 1, "first_message": wrap("researcher", "SECOND job: answer ANSWER-TWO."), "absent": ["FIRST job", "ANSWER-ONE"]})]}],
    "Ask the researcher twice.", {"message": "One and two."})

task = "List what you can use."
scenario("managed-agent-offered-its-own-tools",
    "smolagents.managed.own-tools: the manager is offered its tools, final_answer and its managed agents; a managed agent only its own tools and final_answer, none of its manager's team.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task), call("reviewer", task=task + " (review)")], "check": {"tools": ROOT_TOOLS}}, fa("Listed.")]},
     {"task_contains": task + " (review)", "replies": [fa("final_answer only", check={"tools": ["final_answer"]})]},
     {"agent": "main/1", "replies": [fa("python and final_answer", check={"tools": ["python_interpreter", "final_answer"]})]}],
    "What can the team members use?", {"message": "Listed."})

task = "Delegate this to the researcher yourself."
scenario("managed-agent-calling-a-team-member-is-refused",
    "smolagents.nesting.not-offered-not-run: a managed agent's call of a team member it does not manage is not run: it is answered with the unknown-tool error, and no grandchild asks.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task)]}, fa("Refused as expected.")]},
     {"task_contains": task, "replies": [
        {"calls": [call("researcher", task="GRANDCHILD: answer.")]},
        fa("I could not delegate.", check={"contains": ["Error:\nUnknown tool researcher, should be one of: python_interpreter, final_answer." + RETRY]})]}],
    "Try to make the researcher delegate.", {"message": "Refused as expected."})

scenario("text-reply-does-not-end-the-run",
    "smolagents.steps.tool-call-required: a reply without a tool call does not end a ToolCallingAgent's run: it is a step that failed to parse, and the agent asks again with the error.",
    [{"agent": "main", "replies": [{"text": "Just text, no call."},
        fa("Now with the tool.", check={"nth_message": {"n": 2, "text": "Just text, no call."},
            "last_message": "Error:\nError while parsing tool call from model output: The model output does not contain any JSON blob." + RETRY})]}],
    "Answer without a tool first.", {"message": "Now with the tool."})

scenario("history-is-re-rendered-as-text",
    "smolagents.history.rendered: an agent's earlier replies come back as assistant text (its text, then `Calling tools:` and the calls as a Python list) and their results as one user `Observation:` message; no message carries tool_calls or the tool role.",
    [{"agent": "main", "replies": [
        {"text": "NOTE-ONE", "calls": [call("python_interpreter", code="print('a')")]},
        {"calls": [call("python_interpreter", code="print('b')"), call("python_interpreter", code="print('c')")]},
        fa("Rendered.", check={"messages": 5,
            "nth_message": {"n": 2, "text": "NOTE-ONE\nCalling tools:\n[{'id': 'call_1', 'type': 'function', 'function': {'name': 'python_interpreter', 'arguments': {'code': \"print('a')\"}}}]"},
            "last_message": "Observation:\nStdout:\nb\n\nOutput: None\nStdout:\nc\n\nOutput: None"})]}],
    "Run three snippets.", {"message": "Rendered."})

scenario("two-team-members-of-one-reply-run-together",
    "smolagents.parallel.one-reply: the calls of one reply run at the same time in threads; their results come back in one Observation message, in call-id order.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task="PAR research: answer R."), call("reviewer", task="PAR review: answer V.")]},
        fa("Both in.", check={"contains": ["Observation:\n" + report("researcher", "R-DONE") + "\n" + report("reviewer", "V-DONE")]})]},
     {"task_contains": "PAR research", "replies": [fa("R-DONE", latency_ms=800)]},
     {"task_contains": "PAR review", "replies": [fa("V-DONE", latency_ms=800)]}],
    "Ask both at once.", {"message": "Both in."})

task = "Fail at your first model call."
scenario("child-model-error-reaches-manager",
    "smolagents.error.member-error: a managed agent whose model call fails raises; the manager reads the team-member error (`Error executing request to team member ...`) and goes on.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task)]},
        fa("The researcher failed.", check={"contains": ["Error executing request to team member 'researcher' with arguments {'task': '" + task + "'}: Error while generating output:\n", "Please try again or request to another team member"]})]},
     {"task_contains": task, "replies": [{"error": "scripted bad request", "error_status": 400}]}],
    "Ask the researcher, who fails.", {"message": "The researcher failed."})

scenario("root-model-error-exits-1",
    "smolagents.error.manager-error: when the manager's own model call fails, run() raises AgentGenerationError: the entry point prints no answer and exits non-zero.",
    [{"agent": "main", "replies": [{"error": "scripted bad request", "error_status": 400}]}],
    "Fail at once.", {"status": "error"})

# max_steps: smolagents' default of 20 steps per agent, then one call without tools for a final answer.
POST = "Based on the above, please provide an answer to the following user task:\n"
task = "Keep probing until you are stopped."
scenario("managed-agent-max-steps-then-one-final-call",
    "smolagents.steps.max-steps, smolagents.steps.final-call: a managed agent that has not answered after max_steps steps (20 by default) makes one more request, without tools, under the final_answer prompts; its text is the answer its manager reads.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task=task)]},
        fa("Stopped child read.", check={"last_message": "Observation:\n" + report("researcher", "FORCED-FINAL")})]},
     {"task_contains": task, "replies": [
        {"calls": [call("python_interpreter", code="print('probe')")], "repeatable": True, "when": {"absent": [POST]}},
        {"text": "FORCED-FINAL", "when": {"contains": [POST]},
         "check": {"messages": 41, "tools": [], "system_contains": [T["final_answer"]["pre_messages"]],
                   "last_message": "Observation:\nStdout:\nprobe\n\nOutput: None\n" + POST + wrap("researcher", task)[len("New task:\n"):]}}]}],
    "Let the researcher run out of steps.", {"message": "Stopped child read."})

scenario("manager-max-steps-then-one-final-call",
    "smolagents.steps.max-steps, smolagents.steps.final-call: the manager, after max_steps steps (20 by default) without a final answer, makes one more request without tools; its text is the run's output.",
    [{"agent": "main", "replies": [
        {"calls": [call("python_interpreter", code="print('step')")], "repeatable": True, "when": {"absent": [POST]}},
        {"text": "MANAGER-FORCED-FINAL", "when": {"contains": [POST]},
         "check": {"messages": 41, "tools": [], "last_message": "Observation:\nStdout:\nstep\n\nOutput: None\n" + POST + "Run until stopped."}}]}],
    "Run until stopped.", {"message": "MANAGER-FORCED-FINAL"})

scenario("same-member-twice-in-one-reply-stays-apart",
    "smolagents.managed.fresh-memory, smolagents.parallel.one-reply: two calls of one managed agent in one reply run at the same time; each run must hold its own task and steps only.",
    [{"agent": "main", "replies": [{"calls": [call("researcher", task="TWIN-A: probe, then answer A."), call("researcher", task="TWIN-B: probe, then answer B.")]},
        fa("Twins done.", check={"contains": [report("researcher", "A-DONE"), report("researcher", "B-DONE")]})]},
     {"task_contains": "TWIN-A", "replies": [
        {"calls": [call("python_interpreter", code="print('probe-A')")], "latency_ms": 300},
        fa("A-DONE", check={"absent": ["TWIN-B", "probe-B"]}, latency_ms=300)]},
     {"task_contains": "TWIN-B", "replies": [
        {"calls": [call("python_interpreter", code="print('probe-B')")], "latency_ms": 300},
        fa("B-DONE", check={"absent": ["TWIN-A", "probe-A"]}, latency_ms=300)]}],
    "Ask the researcher two things at once.", {"message": "Twins done."})
