"""py_runtime tested in its own pytest suite against `rehearsal serve`, with pytest-rehearsal
(issue 42). Needs `pip install ./python/pytest-rehearsal` and the `openai` package in the
interpreter that runs pytest (py_runtime is started with it), and the rehearsal binary
($REHEARSAL_BIN, or `rehearsal` on PATH):

    REHEARSAL_BIN=target/release/rehearsal python -m pytest examples/py_runtime/pytest

The correct mode passes. With a bug of BUGS.md switched on, its scenario fails, naming the
check (depth_off_by_one fails all three: every child is offered `subagent`):

    PY_RUNTIME_BUG=budget_refund        ... grants-never-refunded: oracle.model-side.budget
    PY_RUNTIME_BUG=timeout_text_float   ... timeout-prints-whole-seconds: oracle.model-side.timeouts
    PY_RUNTIME_BUG=depth_off_by_one     ... child-cannot-spawn: oracle.model-side.depth
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUNTIME_DIR = Path(__file__).resolve().parents[1]  # examples/py_runtime
SCENARIOS = RUNTIME_DIR / "scenarios"

# The runtime description `rehearsal drive --runtime py-runtime` uses: serve reads requests in
# its dialect (Bub's), judges the run by its limits (a step budget of 60, not the bub preset's
# 30), and hands its environment over in `served.env` (PY_RUNTIME_STEP_BUDGET=60 among it).
RUNTIME = "py-runtime"


@pytest.mark.parametrize(
    "scenario",
    [
        "grants-never-refunded",  # bug budget_refund: oracle.model-side.budget
        "timeout-prints-whole-seconds",  # bug timeout_text_float: oracle.model-side.timeouts
        "child-cannot-spawn",  # bug depth_off_by_one: oracle.model-side.depth
    ],
)
def test_scenario(rehearsal, tmp_path: Path, scenario: str) -> None:
    served = rehearsal.serve(
        SCENARIOS / f"{scenario}.json",
        runtime=RUNTIME,
        # Virtual time (docs/clock-protocol.md): py_runtime's asyncio clock follows serve's,
        # so the scripted latencies and the 1 s timeout take no wall time, and requests that
        # race on real time (a root's next request and a new child's first) arrive in the same
        # order in every run.
        clock=True,
    )
    # The client's environment: this process's (PY_RUNTIME_BUG included, when set), the
    # served OPENAI_BASE_URL / OPENAI_API_KEY and the runtime description's settings, under
    # the clock REHEARSAL_CLOCK and the clock shim first on PYTHONPATH.
    env = served.environ(PYTHONPATH=str(RUNTIME_DIR))
    workdir = tmp_path / "work"
    workdir.mkdir()
    for message in served.turns:  # one process per turn; the session file links them
        run = subprocess.run(
            [sys.executable, "-m", "py_runtime", "--session", "s1", message],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, f"py_runtime exited {run.returncode}:\n{run.stderr}"
        served.end_turn(run.stdout)
    # Nothing more: when the test returns, the plugin ends serve, reads its verdict and checks
    # each turn's output against turns[i].expect; a broken rule fails this test.
