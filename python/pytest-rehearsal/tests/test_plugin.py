"""pytest-rehearsal's own tests, through pytest's `pytester`: each writes a small test file,
runs pytest on it in a subprocess (the plugin loads through its entry point) and reads the
outcome. The runs against the real binary need $REHEARSAL_BIN (or `rehearsal` on PATH) and
are skipped, saying so, without it.

The scenario is the wire's small one (tests/wire/delegate.json of the rehearsal checkout): the
root delegates with Roku's `Agent` tool, the child answers with 30 characters, and with
`result_limit_chars` 20 the root must be handed the first 20 and the notice. The "runtime" is
a stdlib client that makes the three requests; told not to truncate, it breaks
`oracle.model-side.truncation`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from pytest_rehearsal.plugin import RehearsalError, find_binary

pytest_plugins = ["pytester"]

SCENARIO = {
    "name": "wire-delegate",
    "description": "The root delegates one task with Roku's Agent tool; the child's 30 characters reach the root cut to 20 with the notice; then the root answers.",
    "rules": {"preset": "roku", "result_limit_chars": 20},
    "lanes": [
        {
            "agent": "main",
            "replies": [
                {"text": "Delegating.", "calls": [{"tool": "Agent", "args": {"task": "Summarise the logs"}}]},
                {"text": "Done: the logs are fine."},
            ],
        },
        {"agent": "main/1", "replies": [{"text": "The logs show nothing unusual."}]},
    ],
    "turns": [{"user": "Check the logs", "expect": {"message": "Done: the logs are fine."}}],
}

# A runtime in 30 lines: the root's request, the child's, the root's again with the result.
CLIENT = r'''
import json, os, sys, urllib.request

BASE = os.environ["OPENAI_BASE_URL"]
TOOLS = [{"type": "function", "function": {"name": "Agent", "description": "Delegate a task",
                                           "parameters": {"type": "object"}}}]


def chat(messages, tools=TOOLS):
    body = json.dumps({"model": "m", "messages": messages, **({"tools": tools} if tools else {})}).encode()
    request = urllib.request.Request(BASE + "/chat/completions", data=body, headers={
        "content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)["choices"][0]["message"]


root = [{"role": "system", "content": "You are the root."}, {"role": "user", "content": sys.argv[1]}]
first = chat(root)
call = first["tool_calls"][0]
# The child: its task as its first user message, offered no tools (it is at the depth limit).
result = chat([{"role": "user", "content": json.loads(call["function"]["arguments"])["task"]}], tools=None)["content"]
if os.environ.get("CLIENT_TRUNCATE", "1") == "1" and len(result) > 20:
    result = result[:20] + "...\n[Sub-agent response truncated to 20 chars]"
root += [first, {"role": "tool", "tool_call_id": call["id"], "content": result}]
print(chat(root)["content"])
'''

# The inner test: serve, run the client once per turn, end the turn with its stdout.
# {client_env} and {output} vary per test.
INNER = '''
import subprocess, sys
from pathlib import Path

HERE = Path(__file__).parent


def test_delegate(rehearsal):
    served = rehearsal.serve(HERE / "delegate.json", runtime="roku")
    assert served.base_url.startswith("http://127.0.0.1:") and served.base_url.endswith("/v1")
    assert served.env["OPENAI_BASE_URL"] == served.base_url
    assert served.turns == ["Check the logs"]
    (HERE / "pid.txt").write_text(str(served.pid))
    for message in served.turns:
        run = subprocess.run([sys.executable, str(HERE / "client.py"), message],
                             env=served.environ({client_env}), capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        served.end_turn({output})
'''


@pytest.fixture(scope="session")
def rehearsal_bin() -> str:
    try:
        return find_binary(None)
    except RehearsalError as e:
        pytest.skip(f"needs the rehearsal binary: {e}")


@pytest.fixture
def project(pytester: pytest.Pytester, rehearsal_bin: str, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder holding the scenario and the client, with REHEARSAL_BIN set."""
    monkeypatch.setenv("REHEARSAL_BIN", rehearsal_bin)
    (pytester.path / "delegate.json").write_text(json.dumps(SCENARIO, indent=2))
    (pytester.path / "client.py").write_text(CLIENT)
    return pytester


def inner(client_env: str = "", output: str = "run.stdout") -> str:
    return INNER.replace("{client_env}", client_env).replace("{output}", output)


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether no process `pid` exists (a zombie counts as gone), waiting up to `within` s
    for init to reap an orphan."""
    deadline = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        except OSError:
            state = None
        if state is None:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        elif state == "Z":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, pgrp.
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


# ---------------------------------------------------------------------------------------------


def test_a_missing_binary_fails_the_test_saying_how_to_get_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REHEARSAL_BIN", raising=False)
    empty = pytester.mkdir("empty-bin")
    monkeypatch.setenv("PATH", str(empty))
    pytester.makepyfile(
        """
        def test_serve(rehearsal):
            rehearsal.serve("scenario.json")
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*RehearsalError: pytest-rehearsal: the rehearsal binary was not found: $REHEARSAL_BIN is not set and"
            " `rehearsal` is not on PATH. Build it with `cargo build --release` in a rehearsal checkout, which gives"
            " target/release/rehearsal, and set REHEARSAL_BIN to that path*",
        ]
    )


def test_a_binary_named_that_is_not_there_is_an_error_not_a_fallback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REHEARSAL_BIN", "/nonexistent/rehearsal")
    pytester.makepyfile(
        """
        def test_serve(rehearsal):
            rehearsal.serve("scenario.json")
        """
    )
    result = pytester.runpytest_subprocess("--rehearsal-bin", "/also/not/there")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*--rehearsal-bin is '/also/not/there', which is not an executable file*"])


def test_a_run_that_keeps_the_rules_passes(project: pytest.Pytester) -> None:
    project.makepyfile(inner())
    result = project.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1)
    # The verdict is kept beside the test's output.
    result.stdout.fnmatch_lines(["*PASS rehearsal serve*delegate.json --runtime roku: exit code 0 (passed)*"])


def test_a_broken_rule_fails_the_test_naming_the_finding(project: pytest.Pytester) -> None:
    project.makepyfile(inner(client_env='CLIENT_TRUNCATE="0"'))
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)  # the test itself, not its teardown
    result.stdout.fnmatch_lines(
        [
            "*FAIL rehearsal serve*delegate.json --runtime roku: exit code 1 (a rule was broken)",
            "*  - model-side truncation (oracle.model-side.truncation): main request #2*",
            "*stderr of rehearsal serve:*",
            "*note: the script ended after 3 requests*",
        ]
    )
    assert "ERROR" not in result.stdout.str()


def test_a_turn_output_that_misses_the_expected_message_fails_the_test(project: pytest.Pytester) -> None:
    project.makepyfile(inner(output='"Done: the logs are mostly fine.\\n"'))
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*exit code 0 (passed)*",
            '*turns[[]0[]].expect.message: expected "Done: the logs are fine.", '
            'the runtime printed "Done: the logs are mostly fine."*',
        ]
    )


def test_a_verdict_read_by_the_test_with_check_off_does_not_fail_it(project: pytest.Pytester) -> None:
    project.makepyfile(
        inner(client_env='CLIENT_TRUNCATE="0"').replace('runtime="roku")', 'runtime="roku", check=False)')
        + """
    verdict = served.finish()
    assert not verdict.passed and verdict.exit_code == 1
    assert any("oracle.model-side.truncation" in f for f in verdict.failures), verdict.failures
    assert verdict.raw[-1]["type"] == "summary" and verdict.raw[-1]["failed"] == 1
"""
    )
    result = project.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_teardown_leaves_no_process_behind(project: pytest.Pytester) -> None:
    # The runtime never calls: serve would wait for its start-up limit (120 s). The test body
    # raises; the run is still ended, judged (no request arrived) and its group killed.
    project.makepyfile(
        """
        from pathlib import Path

        def test_never_calls(rehearsal):
            served = rehearsal.serve(Path(__file__).parent / "delegate.json", runtime="roku")
            Path(__file__).with_name("pid.txt").write_text(str(served.pid))
            assert served.running
            raise RuntimeError("the runtime crashed before its first request")
        """
    )
    started = time.monotonic()
    result = project.runpytest_subprocess("-rA")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*RuntimeError: the runtime crashed before its first request*",
            "*FAIL rehearsal serve*exit code 4 (no request arrived*",
        ]
    )
    pid = int((project.path / "pid.txt").read_text())
    assert gone(pid), f"rehearsal serve {pid} is still running"
    assert not group_members(pid), f"processes left in group {pid}: {group_members(pid)}"
    assert time.monotonic() - started < 60, "SIGINT ends serve at once"


FAKE_SERVE = r'''#!{python}
"""A fake `rehearsal serve` that writes its ready file, starts a child in its group, and
ignores SIGINT: the plugin must still leave nothing behind."""
import json, os, signal, subprocess, sys, time

args = sys.argv[1:]
ready = args[args.index("--ready-file") + 1]
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"])
with open(ready + ".partial", "w") as f:
    json.dump({{"base_url": "http://127.0.0.1:9/v1", "env": {{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
               "OPENAI_API_KEY": "rehearsal"}}, "pid": os.getpid(), "child": child.pid}}, f)
os.rename(ready + ".partial", ready)
time.sleep(600)
'''


def test_a_serve_that_ignores_sigint_is_killed_with_its_whole_group(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = pytester.path / "fake-rehearsal"
    fake.write_text(FAKE_SERVE.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("REHEARSAL_BIN", str(fake))
    pytester.makeini("[pytest]\nrehearsal_finish_timeout = 1\n")
    pytester.makepyfile(
        """
        import json
        from pathlib import Path

        def test_hung(rehearsal):
            served = rehearsal.serve("scenario.json")
            Path(__file__).with_name("pids.json").write_text(json.dumps([served.pid, served.ready["child"]]))
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "FAIL rehearsal serve *scenario.json --runtime generic: exit code -9 (killed by SIGKILL)",
            "  - rehearsal serve did not end within 1 s of SIGINT: killed",
        ]
    )
    serve_pid, child_pid = json.loads((pytester.path / "pids.json").read_text())
    assert gone(serve_pid) and gone(child_pid), "the fake serve and its child were killed"
    assert not group_members(serve_pid)


def test_serve_exiting_before_it_is_ready_raises_with_its_stderr(project: pytest.Pytester) -> None:
    (project.path / "bad.json").write_text('{"name": "bad", "lanes": []')
    project.makepyfile(
        """
        import pytest
        from pytest_rehearsal import RehearsalError

        def test_bad(rehearsal):
            with pytest.raises(RehearsalError) as caught:
                rehearsal.serve("bad.json")
            message = str(caught.value)
            assert "exited with 2 (bad input or usage) before it was ready" in message, message
            assert "bad.json" in message and "error:" in message, message
        """
    )
    result = project.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_the_process_group_is_its_own(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import os
        from pathlib import Path

        def test_group(rehearsal):
            served = rehearsal.serve(Path(__file__).parent / "delegate.json", runtime="roku", check=False)
            assert os.getpgid(served.pid) == served.pid != os.getpgid(0)
            served.finish()
        """
    )
    result = project.runpytest_subprocess()
    result.assert_outcomes(passed=1)


# --------------------------------------------------------------------------------------------
# The pieces without a binary


def test_turn_outputs_are_judged_as_drive_judges_stdout(tmp_path: Path) -> None:
    from pytest_rehearsal.plugin import judge_turns, read_turns

    scenario = tmp_path / "two-turns.json"
    scenario.write_text(
        json.dumps(
            {
                "turns": [
                    {"user": "first", "expect": {"message": ["Done", {"repeat": "!", "count": 2}]}},
                    {"user": "second", "expect": {"message_contains": "sum 42"}},
                    {"user": "third"},
                ]
            }
        )
    )
    turns = read_turns(scenario)
    assert [t.user for t in turns] == ["first", "second", "third"]
    assert turns[0].message == "Done!!"
    assert judge_turns(turns, ["Done!!\n\n", "the sum 42 is in", "anything"]) == []
    assert judge_turns(turns, ["Done!"]) == [
        'turns[0].expect.message: expected "Done!!", the runtime printed "Done!"'
    ]
    assert judge_turns(turns, ["Done!!", "sum 41"]) == [
        'turns[1].expect.message_contains: "sum 42" is not in what the runtime printed, "sum 41"'
    ]
    assert judge_turns(turns, ["Done!!", "sum 42", "x", "y"]) == [
        "turns[3]: end_turn was called 4 times; the scenario has 3 turns"
    ]


def test_the_json_report_is_read_record_by_record() -> None:
    from pytest_rehearsal.plugin import parse_report

    stdout = "\n".join(
        json.dumps(r)
        for r in [
            {
                "type": "scenario",
                "verdict": "fail",
                "failures": [
                    {"kind": "oracle", "what": "model-side budget (oracle.model-side.budget): main ...", "lines": []},
                    {"kind": "check", "what": "check failed: lanes[0].replies[2].check", "lines": ["a", "b"]},
                ],
            },
            {"type": "summary", "passed": 0, "failed": 1, "exit_code": 1},
        ]
    )
    records, failures, summary = parse_report(stdout + "\nnot json\n")
    assert len(records) == 2 and summary == records[1]
    assert failures == [
        "model-side budget (oracle.model-side.budget): main ...",
        "[check] check failed: lanes[0].replies[2].check\n      | a\n      | b",
    ]
