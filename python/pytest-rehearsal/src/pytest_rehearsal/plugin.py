"""The `rehearsal` fixture: `rehearsal serve SCENARIO` as the model of one test.

`rehearsal.serve(path)` starts `rehearsal serve` in its own process group, waits for its
ready file and hands back a `Served`: the base URL and the environment a client needs, the
scenario's user turns, and `end_turn(output)` to record what the runtime answered. When the
test's body has run, every run still going is ended (SIGINT to its process group), its JSON
verdict is read, each recorded turn output is checked against the scenario's
`turns[i].expect.message` / `message_contains`, and the test fails when anything did not
pass. The process group is killed at teardown whatever happened.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BIN_ENV = "REHEARSAL_BIN"

# What serve's exit code means (`rehearsal serve --help`).
EXIT_MEANINGS = {
    0: "passed",
    1: "a rule was broken",
    2: "bad input or usage",
    3: "internal error",
    4: "no request arrived: the runtime never called the server",
}

# Lines of serve's stderr quoted in a failure message.
STDERR_TAIL = 20


class RehearsalError(Exception):
    """`rehearsal serve` could not be found, started, or did not become ready."""


# ---------------------------------------------------------------------------------------------
# Options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rehearsal", "rehearsal: a scripted model for agent runtimes")
    group.addoption(
        "--rehearsal-bin",
        action="store",
        default=None,
        metavar="PATH",
        help="the rehearsal binary (default: $REHEARSAL_BIN, then the ini option rehearsal_bin, "
        "then `rehearsal` on PATH)",
    )
    parser.addini(
        "rehearsal_bin",
        "the rehearsal binary, relative to the rootdir (used when neither --rehearsal-bin nor "
        "$REHEARSAL_BIN is given)",
        default=None,
    )
    parser.addini(
        "rehearsal_startup_timeout",
        "seconds to wait for `rehearsal serve` to write its ready file (default 60)",
        default="60",
    )
    parser.addini(
        "rehearsal_finish_timeout",
        "seconds to wait for `rehearsal serve` to print its verdict after SIGINT (default 30)",
        default="30",
    )


HOW_TO_GET_IT = (
    "Build it with `cargo build --release` in a rehearsal checkout, which gives "
    "target/release/rehearsal, and set REHEARSAL_BIN to that path "
    "(or pass --rehearsal-bin PATH, or put `rehearsal` on PATH)."
)


def find_binary(config: pytest.Config | None = None) -> str:
    """The rehearsal binary: --rehearsal-bin, $REHEARSAL_BIN, the ini option rehearsal_bin,
    then `rehearsal` on PATH. Raises RehearsalError, saying how to get it, when none is there."""
    __tracebackhide__ = True
    candidates: list[tuple[str, str, Path | None]] = []
    if config is not None:
        cli = config.getoption("rehearsal_bin", default=None)
        if cli:
            candidates.append(("--rehearsal-bin", cli, None))
    env = os.environ.get(BIN_ENV)
    if env:
        candidates.append((f"${BIN_ENV}", env, None))
    if config is not None:
        ini = config.getini("rehearsal_bin")
        if ini:
            candidates.append(("the ini option rehearsal_bin", str(ini), Path(config.rootpath)))
    for source, value, root in candidates:
        # The first one given is the one meant: a wrong path is an error, not a fallback.
        if os.sep not in value and (os.altsep is None or os.altsep not in value):
            found = shutil.which(value)
            if found:
                return found
        else:
            path = Path(value).expanduser()
            if root is not None and not path.is_absolute():
                path = root / path
            if path.is_file() and os.access(path, os.X_OK):
                return str(path.resolve())
        raise RehearsalError(f"pytest-rehearsal: {source} is {value!r}, which is not an executable file. {HOW_TO_GET_IT}")
    found = shutil.which("rehearsal")
    if found:
        return found
    raise RehearsalError(
        f"pytest-rehearsal: the rehearsal binary was not found: ${BIN_ENV} is not set and "
        f"`rehearsal` is not on PATH. {HOW_TO_GET_IT}"
    )


# ---------------------------------------------------------------------------------------------
# The scenario's turns


def render_text(text: Any) -> str:
    """Scenario text as rehearsal renders it: a string, {"repeat": s, "count": n}, or a list
    of those, joined."""
    if isinstance(text, str):
        return text
    if isinstance(text, list):
        return "".join(render_text(part) for part in text)
    if isinstance(text, dict) and "repeat" in text:
        return str(text["repeat"]) * int(text.get("count", 1))
    return str(text)


@dataclass(frozen=True)
class Turn:
    """One of the scenario's user turns and what its final message must be."""

    user: str
    message: str | None = None
    message_contains: str | None = None


def read_turns(scenario: Path) -> list[Turn]:
    """The scenario file's `turns`; empty when the file cannot be read (serve reports why)."""
    try:
        data = json.loads(scenario.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    turns = []
    for turn in data.get("turns", []) if isinstance(data, dict) else []:
        if not isinstance(turn, dict):
            continue
        expect = turn.get("expect") or {}
        message = expect.get("message")
        contains = expect.get("message_contains")
        turns.append(
            Turn(
                user=str(turn.get("user", "")),
                message=None if message is None else render_text(message),
                message_contains=None if contains is None else render_text(contains),
            )
        )
    return turns


def quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def judge_turns(turns: list[Turn], outputs: list[str]) -> list[str]:
    """Each recorded output against its turn's expectations, as `rehearsal drive` judges a
    runtime's stdout: trailing line breaks stripped, `message` exact, `message_contains` a
    substring."""
    failures = []
    for i, output in enumerate(outputs):
        if i >= len(turns):
            failures.append(
                f"turns[{i}]: end_turn was called {len(outputs)} times; the scenario has {len(turns)} turns"
            )
            break
        turn = turns[i]
        said = output.rstrip("\r\n")
        if turn.message is not None and said != turn.message:
            failures.append(
                f"turns[{i}].expect.message: expected {quoted(turn.message)}, the runtime printed {quoted(said)}"
            )
        if turn.message_contains is not None and turn.message_contains not in said:
            failures.append(
                f"turns[{i}].expect.message_contains: {quoted(turn.message_contains)} is not in what "
                f"the runtime printed, {quoted(said)}"
            )
    return failures


# ---------------------------------------------------------------------------------------------
# The verdict


@dataclass
class Verdict:
    """How a served run ended: serve's verdict, plus the recorded turn outputs judged here."""

    passed: bool
    # One entry per failure: serve's (`what`, with its detail lines indented under it), then
    # the turn outputs' (`turns[i].expect.message: expected …, the runtime printed …`).
    failures: list[str]
    # The JSON records serve printed (`{"type": "scenario", ...}`, `{"type": "summary", ...}`).
    raw: list[dict[str, Any]]
    # serve's exit code (negative: killed by that signal).
    exit_code: int | None
    stderr: str
    stdout: str = ""
    # The turn-output failures alone (also in `failures`).
    turn_failures: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed


def parse_report(stdout: str) -> tuple[list[dict[str, Any]], list[str], dict[str, Any] | None]:
    """serve's JSON lines (`--format json`): the records, the failures they name, and the
    summary record. A scenario record holds `failures: [{kind, what, lines, ...}]`; a file
    that could not be used is `verdict: "bad_input"` with `error.text`; a usage error is
    `{"type": "usage_error", "message": ...}`; the last record is the summary
    (`{"type": "summary", "passed", "failed", ..., "exit_code"}`)."""
    records: list[dict[str, Any]] = []
    failures: list[str] = []
    summary = None
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        records.append(record)
        kind = record.get("type")
        if kind == "scenario":
            for failure in record.get("failures") or []:
                text = str(failure.get("what", failure))
                if failure.get("kind") and failure.get("kind") not in ("oracle",):
                    text = f"[{failure['kind']}] {text}"
                for detail in failure.get("lines") or []:
                    text += f"\n      | {detail}"
                failures.append(text)
            if record.get("verdict") == "bad_input":
                error = record.get("error") or {}
                failures.append(f"bad input: {error.get('text') or error.get('message') or error}")
            elif record.get("verdict") == "internal_error" and not record.get("failures"):
                failures.append("internal error")
        elif kind == "usage_error":
            failures.append(f"usage error: {record.get('message')}")
        elif kind == "summary":
            summary = record
    return records, failures, summary


def exit_meaning(code: int | None) -> str:
    """What serve's exit code says."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code == 101:
        return "rehearsal panicked"
    return EXIT_MEANINGS.get(code, "an exit code rehearsal does not document")


def _stderr_errors(stderr: str) -> list[str]:
    return [line[len("error:") :].strip() for line in stderr.splitlines() if line.startswith("error:")]


def _tail(text: str, n: int = STDERR_TAIL) -> list[str]:
    """The last n lines; when there are more, the first 5 too (a panic's message comes before
    its backtrace)."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= n:
        return lines
    return lines[:5] + [f"... ({len(lines) - n} lines)"] + lines[5 - n :]


# ---------------------------------------------------------------------------------------------
# A served run


class Served:
    """One `rehearsal serve` run. Made by `rehearsal.serve(...)`."""

    def __init__(
        self,
        *,
        binary: str,
        scenario: Path,
        runtime: str,
        clock: bool,
        extra_args: Iterable[str],
        startup_timeout: float,
        finish_timeout: float,
        check: bool,
        cwd: str | os.PathLike[str] | None,
    ) -> None:
        __tracebackhide__ = True
        self.scenario = scenario
        self.runtime = runtime
        self.clock = clock
        self.check = check
        self.finish_timeout = finish_timeout
        self.turn_specs = read_turns(scenario)
        self.turns = [t.user for t in self.turn_specs]
        self.outputs: list[str] = []
        self._verdict: Verdict | None = None
        self._serve_verdict: Verdict | None = None
        self._killed = False
        self._judged = False
        self._dir = Path(tempfile.mkdtemp(prefix="pytest-rehearsal-"))
        self.ready_file = self._dir / "ready.json"
        self._stdout_path = self._dir / "stdout.jsonl"
        self._stderr_path = self._dir / "stderr.txt"
        self.command = [
            binary,
            "serve",
            str(scenario),
            "--runtime",
            runtime,
            "--format",
            "json",
            "--color",
            "never",
            "--ready-file",
            str(self.ready_file),
        ]
        if clock:
            self.command.append("--clock")
        self.command += [str(a) for a in extra_args]
        try:
            with open(self._stdout_path, "wb") as out, open(self._stderr_path, "wb") as err:
                self.process = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    cwd=cwd,
                )
        except OSError as e:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise RehearsalError(f"{self._what()}: cannot start {binary}: {e}") from None
        self.pgid = self.process.pid  # start_new_session: the child leads its own group
        try:
            self.ready = self._wait_ready(startup_timeout)
        except BaseException:
            self._cleanup()
            raise
        self.base_url: str = self.ready["base_url"]
        self.env: dict[str, str] = {str(k): str(v) for k, v in (self.ready.get("env") or {}).items()}
        self.pid: int = int(self.ready.get("pid") or self.process.pid)

    # -- start-up -----------------------------------------------------------------------------

    def _wait_ready(self, timeout: float) -> dict[str, Any]:
        __tracebackhide__ = True
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            if self.ready_file.exists():
                try:
                    ready = json.loads(self.ready_file.read_text(encoding="utf-8"))
                except ValueError as e:  # written atomically, so this is not a half file
                    raise RehearsalError(f"{self._what()}: the ready file is not JSON: {e}") from None
                if not isinstance(ready, dict) or "base_url" not in ready:
                    raise RehearsalError(f"{self._what()}: the ready file has no base_url: {ready!r}")
                return ready
            code = self.process.poll()
            if code is not None:
                self._judged = True  # nothing to judge: the error below says why
                raise RehearsalError(
                    f"{self._what()} exited with {code} ({exit_meaning(code)}) before it was ready"
                    + self._stderr_block()
                )
            if time.monotonic() >= deadline:
                self._judged = True
                raise RehearsalError(
                    f"{self._what()} did not write its ready file within {timeout:g} s" + self._stderr_block()
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    # -- the test's side ----------------------------------------------------------------------

    @property
    def turn(self) -> int:
        """The index of the turn whose output end_turn records next."""
        return len(self.outputs)

    def end_turn(self, output: str | bytes) -> None:
        """Records what the runtime answered for the current turn (its stdout); checked
        against `turns[i].expect.message` / `message_contains` when the test ends."""
        if isinstance(output, bytes):
            output = output.decode("utf-8", errors="replace")
        self.outputs.append(output)
        if self._verdict is not None:
            self._verdict = self._combined()

    def environ(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """A whole environment for the runtime's process: `base` (default os.environ), then
        `self.env`, then `extra`. PYTHONPATH is joined, not replaced: serve's (the clock shim
        first, under --clock), then extra's, then base's."""
        env = dict(os.environ if base is None else base)
        paths: list[str] = []
        for source in (self.env, extra, env):
            paths += [p for p in str(source.get("PYTHONPATH", "")).split(os.pathsep) if p]
        env.update(self.env)
        env.update(extra)
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        return env

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def finish(self) -> Verdict:
        """Ends the run if it is still going (SIGINT to its process group, a bounded wait,
        then SIGKILL) and returns the verdict: serve's, with the recorded turn outputs judged."""
        __tracebackhide__ = True
        if self._serve_verdict is None:
            self._serve_verdict = self._stop_and_read()
        self._verdict = self._combined()
        return self._verdict

    @property
    def verdict(self) -> Verdict | None:
        """The verdict once finished, else None."""
        return self._verdict

    # -- ending -------------------------------------------------------------------------------

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _stop_and_read(self) -> Verdict:
        notes: list[str] = []
        if self.process.poll() is None:
            self._signal_group(signal.SIGINT)
            try:
                self.process.wait(timeout=self.finish_timeout)
            except subprocess.TimeoutExpired:
                notes.append(f"rehearsal serve did not end within {self.finish_timeout:g} s of SIGINT: killed")
                self._signal_group(signal.SIGKILL)
                self.process.wait()
        self._kill()
        stdout = self._read(self._stdout_path)
        stderr = self._read(self._stderr_path)
        code = self.process.returncode
        raw, failures, summary = parse_report(stdout)
        failures = notes + failures
        if code != 0 and not failures:
            # No JSON verdict (exit 4: no request arrived; a signal): stderr says why.
            failures = _stderr_errors(stderr) or [
                f"rehearsal serve exited with {code} ({exit_meaning(code)})"
            ]
        passed = code == 0 and summary is not None and summary.get("exit_code") == 0 and not failures
        if code == 0 and summary is None and not failures:
            failures.append("rehearsal serve printed no summary record")
        return Verdict(passed=passed, failures=failures, raw=raw, exit_code=code, stderr=stderr, stdout=stdout)

    def _combined(self) -> Verdict:
        assert self._serve_verdict is not None
        served = self._serve_verdict
        turn_failures = judge_turns(self.turn_specs, self.outputs)
        return Verdict(
            passed=served.passed and not turn_failures,
            failures=served.failures + turn_failures,
            raw=served.raw,
            exit_code=served.exit_code,
            stderr=served.stderr,
            stdout=served.stdout,
            turn_failures=turn_failures,
        )

    def _kill(self) -> None:
        """SIGKILL to the whole process group, reaped; always safe to call again."""
        if self._killed:
            return
        self._signal_group(signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that SIGKILL does not end
            pass
        self._killed = True

    def _cleanup(self) -> None:
        self._kill()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- reporting ----------------------------------------------------------------------------

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _what(self) -> str:
        return f"rehearsal serve {self.scenario} --runtime {self.runtime}"

    def _stderr_block(self, stderr: str | None = None) -> str:
        text = self._read(self._stderr_path) if stderr is None else stderr
        tail = _tail(text)
        if not tail:
            return "\nstderr: (empty)"
        return "\nstderr of rehearsal serve:\n" + "\n".join(f"  {line}" for line in tail)

    def report(self) -> str:
        """The verdict told for a failure message: a line per failure, the exit code and the
        tail of serve's stderr."""
        verdict = self._verdict
        if verdict is None:
            return f"{self._what()}: not finished"
        code = verdict.exit_code
        meaning = exit_meaning(code)
        word = "PASS" if verdict.passed else "FAIL"
        lines = [f"{word} {self._what()}: exit code {code} ({meaning})"]
        lines += [f"  - {failure}" for failure in verdict.failures]
        if verdict.turn_failures and verdict.exit_code == 0:
            lines.append("  (serve passed the requests; the turn outputs above did not meet the scenario)")
        return "\n".join(lines) + self._stderr_block(verdict.stderr)

    def __repr__(self) -> str:
        return f"<Served {self.scenario} at {getattr(self, 'base_url', '?')}>"


# ---------------------------------------------------------------------------------------------
# The fixture


class Rehearsal:
    """The factory the `rehearsal` fixture returns."""

    def __init__(self, config: pytest.Config | None) -> None:
        self._config = config
        self.runs: list[Served] = []
        self.startup_timeout = _float_ini(config, "rehearsal_startup_timeout", 60.0)
        self.finish_timeout = _float_ini(config, "rehearsal_finish_timeout", 30.0)

    @property
    def binary(self) -> str:
        __tracebackhide__ = True
        return find_binary(self._config)

    def serve(
        self,
        scenario_path: str | os.PathLike[str],
        runtime: str = "generic",
        clock: bool = False,
        extra_args: Iterable[str] = (),
        *,
        startup_timeout: float | None = None,
        check: bool = True,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Served:
        """Starts `rehearsal serve SCENARIO --runtime RUNTIME --format json --color never
        --ready-file F [--clock] [extra_args...]` and returns once it listens.

        With check=False the test is not failed by this run's verdict: the test reads
        `served.finish()` itself (to assert that a bug is caught, say)."""
        __tracebackhide__ = True
        scenario = Path(scenario_path)
        if not scenario.is_absolute():
            scenario = Path(cwd or os.getcwd()) / scenario
        served = Served(
            binary=self.binary,
            scenario=scenario,
            runtime=runtime,
            clock=clock,
            extra_args=extra_args,
            startup_timeout=self.startup_timeout if startup_timeout is None else startup_timeout,
            finish_timeout=self.finish_timeout,
            check=check,
            cwd=cwd,
        )
        self.runs.append(served)
        return served

    def _judge(self) -> list[str]:
        """Finishes every run not yet judged; the failure reports of those that failed."""
        reports = []
        for served in self.runs:
            if served._judged:
                continue
            served._judged = True
            verdict = served.finish()
            if served.check and not verdict.passed:
                reports.append(served.report())
        return reports

    def _close(self) -> None:
        for served in self.runs:
            served._cleanup()


def _float_ini(config: pytest.Config | None, name: str, default: float) -> float:
    if config is None:
        return default
    try:
        return float(config.getini(name))
    except (ValueError, TypeError):
        return default


_KEY = pytest.StashKey[Rehearsal]()


@pytest.fixture
def rehearsal(request: pytest.FixtureRequest) -> Any:
    """A factory of served scenarios: `served = rehearsal.serve(path, runtime="generic",
    clock=False, extra_args=())`. The test fails when a run's verdict did not pass or a
    recorded turn output does not meet the scenario; every serve process group is killed at
    teardown."""
    factory = Rehearsal(request.config)
    request.node.stash[_KEY] = factory
    try:
        yield factory
        # Runs the body's end did not judge (started after it, by another fixture's teardown).
        reports = factory._judge()
        if reports:
            pytest.fail("\n\n".join(reports), pytrace=False)
    finally:
        factory._close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """When the test's body has run, its runs are finished and judged, so that a broken rule
    fails the test itself (not its teardown)."""
    outcome = yield
    factory = item.stash.get(_KEY, None)
    if factory is None or not factory.runs:
        return
    failed_already = outcome.excinfo is not None
    reports = factory._judge()
    for served in factory.runs:
        # The verdict beside the test's output, unless the failure message below is it.
        if served.verdict is not None and (failed_already or served.verdict.passed or not served.check):
            item.add_report_section("call", f"rehearsal {served.scenario.name}", served.report())
    if reports and not failed_already:
        exc = pytest.fail.Exception("\n\n".join(reports), pytrace=False)
        if hasattr(outcome, "force_exception"):
            outcome.force_exception(exc)
        else:  # pluggy < 1.1
            raise exc
