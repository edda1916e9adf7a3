"""py_runtime under `rehearsal drive` (issue 23): the correct mode passes the scenarios that
apply to it, and each deliberate bug of the table in README.md ("Judged by rehearsal drive") is
caught by the named check, with its scenario as written and with a lenient copy of it. Run by
scripts/python-tests with REHEARSAL_BIN set; needs the `openai` package in the interpreter that
runs it (the runtime is started with it). scripts/py-runtime-repeat runs the correct mode many
times on demand (`repeat_correct_mode`).

On virtual time (`rehearsal drive --clock`, issue 24; class `Clocked`): the timeout and cap
scenarios pass under the clock shim with the same verdict, trace and clock transcript in every
run (REHEARSAL_CLOCK_RUNS runs each, default 3; 20 for the figure in docs/clock-protocol.md),
and the `timeout_from_queue` bug is caught at the exact virtual instant of the early timeout.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REHEARSAL = os.environ.get("REHEARSAL_BIN", str(HERE.parents[1] / "target" / "debug" / "rehearsal"))
CAP1 = ["--runtime-file", str(HERE / "runtime-cap1.json")]
DEFAULT = ["--runtime", "py-runtime"]

# The folders the correct mode passes, with the runtime flags each needs.
FOLDERS = [("scenarios", DEFAULT), ("scenarios-cap1", CAP1)]
# The correct mode is driven this many times in a row in CI: a flaky pass shows as a failure.
CORRECT_RUNS = 3

# (bug switch, scenario under examples/py_runtime/, runtime flags, what names the catch)
BUGS = [
    ("cap_off_by_one", "scenarios/cap-four-children-at-once.json", DEFAULT, "oracle.model-side.concurrency"),
    ("depth_off_by_one", "scenarios/child-cannot-spawn.json", DEFAULT, "oracle.model-side.depth"),
    ("lifo_queue", "scenarios-cap1/queue-first-in-first-out.json", CAP1, "oracle.model-side.concurrency"),
    ("truncate_off_by_one", "scenarios-cap1/result-of-exactly-the-limit-unchanged.json", CAP1,
     "oracle.model-side.truncation"),
    ("truncate_bytes", "scenarios-cap1/result-of-exactly-the-limit-unchanged.json", CAP1,
     "oracle.model-side.truncation"),
    ("timeout_text_float", "scenarios/timeout-prints-whole-seconds.json", DEFAULT, "oracle.model-side.timeouts"),
    ("wait_then_notify", "scenarios/wait-read-result-not-notified.json", DEFAULT, "oracle.model-side.delivery"),
    ("delivery_spawn_order", "scenarios/notifications-in-completion-order.json", DEFAULT, "oracle.model-side.delivery"),
    ("budget_refund", "scenarios/grants-never-refunded.json", DEFAULT, "oracle.model-side.budget"),
    ("timeout_from_queue", "scenarios-cap1/queued-child-timeout-from-start.json", CAP1, "oracle.model-side.timeouts"),
    ("fork_splice", "scenarios/fork-child-leaves-nothing-in-the-parent.json", DEFAULT, "oracle.model-side.isolation"),
    # The next four depart at a child's first request: caught once the attribution takes a
    # request whose last user message is a waiting call's prompt (or holds it) for that child.
    ("fork_snapshot_late", "scenarios-cap1/queued-fork-snapshot-at-call.json", CAP1,
     "oracle.model-side.fork-snapshot"),
    # B's start departs (A's prompt and reply before its own), which fork-snapshot judges;
    # nothing follows B's prompt, so isolation has nothing to judge.
    ("siblings_share_fork", "scenarios-cap1/fork-siblings-start-apart.json", CAP1, "oracle.model-side.fork-snapshot"),
    ("temp_inherits_history", "scenarios/temp-child-starts-empty.json", DEFAULT, "oracle.model-side.isolation"),
    ("prompt_template", "scenarios/temp-child-first-message-is-its-prompt.json", DEFAULT,
     "oracle.model-side.isolation"),
]
OWN_ERROR = "rehearsal's own attribution error, not the runtime's"


def lenient(scenario: Path, folder: Path) -> Path:
    """A copy of `scenario` in `folder` whose script forgives counts: every agent's last reply
    `repeatable`, every child's reply `optional` (docs/scenarios.md, "Order-robust replies").

    A catch that stands under it does not rest on a lane running out or a reply left unused."""
    data = json.loads(scenario.read_text(encoding="utf-8"))
    for lane in data["lanes"]:
        replies = lane["replies"]
        if lane.get("agent") != "main":
            for reply in replies:
                reply["optional"] = True
        replies[-1]["repeatable"] = True
    data.pop("$schema", None)  # relative to the scenario's folder; rehearsal ignores it anyway
    data["name"] += "-lenient"
    out = folder / f"{scenario.parent.name}-{scenario.name}"
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return out


@dataclass
class Counts:
    """What drive's ground-truth note counts, summed over notes."""

    right: int = 0
    wrong: int = 0
    unattributed: int = 0
    unlabelled: int = 0
    silent_guesses: int = 0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def __str__(self) -> str:
        return (f"{self.right} requests attributed right, {self.wrong} wrong, {self.unattributed} unattributed, "
                f"{self.unlabelled} unlabelled, {self.silent_guesses} silent guesses")


GROUND_TRUTH = re.compile(
    r"attribution against the runtime's \S+ header: (\d+) requests? right, (\d+) wrong, (\d+) unattributed, "
    r"(\d+) unlabelled")
# Later in the same note, after any other counts drive adds (", 2 silent guesses").
SILENT_GUESSES = re.compile(r", (\d+) silent guess(?:es)?\b")


def ground_truth(stderr: str) -> Counts:
    """The counts drive printed on stderr, one note per scenario; a note without the silent
    guesses (a drive that does not count them yet) counts 0 of them."""
    total = Counts()
    for line in stderr.splitlines():
        if "attribution against the runtime's" not in line:
            continue
        match = GROUND_TRUTH.search(line)
        silent = SILENT_GUESSES.search(line)
        # A note this parser cannot read must not count as zero of everything.
        if match is None or ("silent" in line and silent is None):
            raise ValueError(f"drive's ground-truth note is not in the form drive_test.py reads: {line}")
        total += Counts(*(int(g) for g in match.groups()), int(silent.group(1)) if silent else 0)
    return total


def drive(target: str, runtime: list[str], bug: str | None) -> subprocess.CompletedProcess[str]:
    command = ["env", f"PYTHONPATH={HERE}"]
    if bug:
        command.append(f"PY_RUNTIME_BUG={bug}")
    command += [sys.executable, "-m", "py_runtime", "--session", "{session}", "{message}"]
    args = [REHEARSAL, "drive", str(HERE / target), *runtime, "--time-scale", "0.2", "--turn-limit", "60s",
            "--color", "never", "--", *command]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


# The timeout and cap scenarios run under the clock, with the runtime flags each needs.
CLOCKED = [
    ("scenarios/timeout-prints-whole-seconds.json", DEFAULT),
    ("scenarios/cap-four-children-at-once.json", DEFAULT),
    ("scenarios-cap1/queue-first-in-first-out.json", CAP1),
    ("scenarios-cap1/queued-child-timeout-from-start.json", CAP1),
    ("scenarios-cap1/queued-child-timeout-at-the-instant.json", CAP1),
]
CLOCK_RUNS = int(os.environ.get("REHEARSAL_CLOCK_RUNS", "3"))


def drive_clocked(target: str, runtime: list[str], bug: str | None) -> subprocess.CompletedProcess[str]:
    """`rehearsal drive --clock --trace`: drive puts the clock shim before this PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(HERE))
    env.pop("PY_RUNTIME_BUG", None)
    if bug:
        env["PY_RUNTIME_BUG"] = bug
    command = [sys.executable, "-m", "py_runtime", "--session", "{session}", "{message}"]
    args = [REHEARSAL, "drive", str(HERE / target), *runtime, "--clock", "--trace", "--turn-limit", "60s",
            "--color", "never", "--", *command]
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)


class Clocked(unittest.TestCase):
    def test_timeout_and_cap_scenarios_pass_with_identical_traces_in_every_run(self) -> None:
        jobs = [(target, runtime) for target, runtime in CLOCKED for _ in range(CLOCK_RUNS)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(lambda job: (job[0], drive_clocked(job[0], job[1], None)), jobs))
        for target, _ in CLOCKED:
            outs = [out for t, out in runs if t == target]
            with self.subTest(scenario=target):
                first = outs[0]
                self.assertEqual(first.returncode, 0, f"{target}:\n{first.stdout}\n{first.stderr}")
                self.assertIn("ms virtual", first.stdout)
                self.assertIn("clock ", first.stdout, "--trace shows the clock's transcript")
                for i, out in enumerate(outs[1:], start=2):
                    self.assertEqual(out.stdout, first.stdout, f"{target}: run {i} of {len(outs)} differs")

    def test_a_command_that_hides_the_shim_is_told_why_the_clock_cannot_follow_it(self) -> None:
        # `env PYTHONPATH=...` in the command replaces the PYTHONPATH drive led with the shim:
        # the runtime asks the model but never greets the clock, and the verdict says so.
        command = ["env", f"PYTHONPATH={HERE}", sys.executable, "-m", "py_runtime", "--session", "{session}",
                   "{message}"]
        args = [REHEARSAL, "drive", str(HERE / "scenarios/temp-child-starts-empty.json"), *DEFAULT, "--clock",
                "--turn-limit", "5s", "--color", "never", "--", *command]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 1, f"{out.stdout}\n{out.stderr}")
        self.assertIn("but never said hello to the clock", out.stdout)
        self.assertIn("a command that sets PYTHONPATH itself hides it", out.stdout)

    def test_timer_from_queueing_is_caught_at_the_exact_virtual_instant(self) -> None:
        out = drive_clocked("scenarios-cap1/queued-child-timeout-at-the-instant.json", CAP1, "timeout_from_queue")
        self.assertEqual(out.returncode, 1, f"{out.stdout}\n{out.stderr}")
        self.assertIn("oracle.model-side.timeouts", out.stdout)
        self.assertIn("the parent hears at 1s that a child timed out, before its limit of 1 s from its first request"
                      " at 800ms", out.stdout)
        # B's request (0.8 s) is given up on at 1.000 s virtual, 200 ms later: the server saw it.
        self.assertIn("1000 ms virtual  exchange 3  main/2  gave up: the client closed its connection after 200 ms",
                      out.stdout)


class Drive(unittest.TestCase):
    def test_correct_mode_passes_every_scenario_that_applies_three_times_in_a_row(self) -> None:
        total = Counts()
        for run in range(1, CORRECT_RUNS + 1):
            for folder, runtime in FOLDERS:
                out = drive(folder, runtime, None)
                where = f"{folder}, run {run} of {CORRECT_RUNS}"
                self.assertEqual(out.returncode, 0, f"{where}:\n{out.stdout}\n{out.stderr}")
                self.assertIn("0 failed", out.stdout)
                counts = ground_truth(out.stderr)
                self.assertEqual(counts.wrong, 0, f"{where}: every request attributed as labelled\n{out.stderr}")
                self.assertEqual(counts.unattributed, 0, f"{where}: every request attributed\n{out.stderr}")
                self.assertEqual(counts.unlabelled, 0, f"{where}: the runtime labels every request\n{out.stderr}")
                self.assertEqual(counts.silent_guesses, 0, f"{where}: no attribution guessed\n{out.stderr}")
                total += counts
        self.assertGreater(total.right, 0, "the runtime labels its requests")
        print(f"\ncorrect mode, {CORRECT_RUNS} runs: {total}", file=sys.stderr)

    def test_each_bug_is_caught_by_name_with_its_script_strict_and_lenient(self) -> None:
        with tempfile.TemporaryDirectory(prefix="py-runtime-lenient-") as tmp:
            jobs = [(bug, "strict", HERE / scenario, runtime, name) for bug, scenario, runtime, name in BUGS]
            jobs += [(bug, "lenient", lenient(HERE / scenario, Path(tmp)), runtime, name)
                     for bug, scenario, runtime, name in BUGS]
            with ThreadPoolExecutor(max_workers=2) as pool:
                runs = list(pool.map(lambda j: (j, drive(str(j[2]), j[3], j[0])), jobs))
        total = Counts()
        for (bug, script, scenario, _, name), out in runs:
            with self.subTest(bug=bug, script=script):
                where = f"{bug} on {scenario.name} ({script} script)"
                self.assertEqual(out.returncode, 1, f"{where}:\n{out.stdout}\n{out.stderr}")
                self.assertIn(name, out.stdout, f"{where}:\n{out.stdout}")
                self.assertNotIn(OWN_ERROR, out.stdout, f"{where}: a catch stands on a right attribution")
            total += ground_truth(out.stderr)
        print(f"\nbug switches, strict and lenient scripts: {total}", file=sys.stderr)
        self.assertGreater(total.right, 0, "drive printed its ground-truth notes")
        self.assertEqual(total.wrong, 0, "no request of a bug's run is misattributed")
        self.assertEqual(total.silent_guesses, 0, "no request of a bug's run is attributed by a silent guess")


def repeat_correct_mode(runs: int) -> int:
    """The correct mode over FOLDERS, `runs` times on real time (`drive`) and `runs` times on
    virtual time (`drive_clocked`), one drive at a time so that none loads the machine for
    another. Prints each failed drive with the command that replays it, then per mode the
    drives and scenarios passed and failed and the ground-truth totals. Returns the exit code:
    0 when every drive passed. Run by scripts/py-runtime-repeat."""
    summary = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) internal errors?)?", re.MULTILINE)
    any_failed = False
    for mode, run in (("real time (--time-scale 0.2)", drive), ("virtual time (--clock)", drive_clocked)):
        drives_passed = drives_failed = scenarios_passed = scenarios_failed = 0
        total = Counts()
        for i in range(1, runs + 1):
            for folder, runtime in FOLDERS:
                out = run(folder, runtime, None)
                total += ground_truth(out.stderr)
                counted = summary.findall(out.stdout)
                if counted:
                    passed, failed, internal = counted[-1]
                    scenarios_passed += int(passed)
                    scenarios_failed += int(failed) + int(internal or 0)
                if out.returncode == 0:
                    drives_passed += 1
                    continue
                drives_failed += 1
                print(f"{mode}: run {i} of {runs}, {folder}: exit {out.returncode}", flush=True)
                for line in out.stdout.splitlines():
                    if line.startswith("FAIL") or line.startswith("  - "):
                        print(f"  {line}")
                print(f"  replay: PYTHONPATH={shlex.quote(str(HERE))} {shlex.join(out.args)}", flush=True)
        any_failed |= drives_failed > 0
        print(f"{mode}: {drives_passed} drives passed, {drives_failed} failed "
              f"({scenarios_passed} scenario runs passed, {scenarios_failed} failed); {total}", flush=True)
    return 1 if any_failed else 0


if __name__ == "__main__":
    unittest.main(verbosity=2)
