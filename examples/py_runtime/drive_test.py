"""py_runtime under `rehearsal drive` (issue 23): the correct mode passes the scenarios that
apply to it, and each deliberate bug of the table in README.md ("Judged by rehearsal drive") is
caught by the named check. Run by scripts/python-tests with REHEARSAL_BIN set; needs the
`openai` package in the interpreter that runs it (the runtime is started with it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REHEARSAL = os.environ.get("REHEARSAL_BIN", str(HERE.parents[1] / "target" / "debug" / "rehearsal"))
CAP1 = ["--runtime-file", str(HERE / "runtime-cap1.json")]
DEFAULT = ["--runtime", "py-runtime"]

# (bug switch, scenario under examples/py_runtime/, runtime flags, what names the catch)
BUGS = [
    ("cap_off_by_one", "scenarios/cap-four-children-at-once.json", DEFAULT, "oracle.model-side.concurrency"),
    ("depth_off_by_one", "scenarios/child-cannot-spawn.json", DEFAULT, "oracle.model-side.depth"),
    ("temp_inherits_history", "scenarios/temp-child-starts-empty.json", DEFAULT, "check failed: lanes[0].replies[2].check"),
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
    # Not the fork-snapshot oracle: the late snapshot extends main's conversation, so the
    # attribution puts the fork child's first request down to main, which then seems to ask
    # without the result of the child that just ended (README.md, "Judged by rehearsal drive").
    ("fork_snapshot_late", "scenarios-cap1/queued-fork-snapshot-at-call.json", CAP1, "oracle.model-side.delivery"),
]


def drive(target: str, runtime: list[str], bug: str | None) -> subprocess.CompletedProcess[str]:
    command = ["env", f"PYTHONPATH={HERE}"]
    if bug:
        command.append(f"PY_RUNTIME_BUG={bug}")
    command += [sys.executable, "-m", "py_runtime", "--session", "{session}", "{message}"]
    args = [REHEARSAL, "drive", str(HERE / target), *runtime, "--time-scale", "0.2", "--turn-limit", "60s",
            "--color", "never", "--", *command]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


class Drive(unittest.TestCase):
    def test_correct_mode_passes_every_scenario_that_applies(self) -> None:
        for folder, runtime in (("scenarios", DEFAULT), ("scenarios-cap1", CAP1)):
            out = drive(folder, runtime, None)
            self.assertEqual(out.returncode, 0, f"{folder}:\n{out.stdout}\n{out.stderr}")
            self.assertIn("0 failed", out.stdout)

    def test_each_bug_is_caught_by_name(self) -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(lambda b: (b, drive(b[1], b[2], b[0])), BUGS))
        for (bug, scenario, _, name), out in runs:
            with self.subTest(bug=bug):
                self.assertEqual(out.returncode, 1, f"{bug} on {scenario}:\n{out.stdout}\n{out.stderr}")
                self.assertIn(name, out.stdout, f"{bug} on {scenario}:\n{out.stdout}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
