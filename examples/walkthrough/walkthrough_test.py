"""The walkthrough of docs/runtimes.md ("Walkthrough: describing a fourth framework", issue 39)
holds: every file it quotes is quoted byte for byte, and the agno team of examples/walkthrough,
driven with exactly those files, passes every scenario with every request attributed as the
runtime labels it.

Run by scripts/python-tests with REHEARSAL_BIN set; stdlib only. The runtime runs in a venv of
its own (WALKTHROUGH_VENV, default target/walkthrough-venv) made from PyPI with the pinned
requirements.txt by a Python >= 3.11 found by version (WALKTHROUGH_PYTHON to choose one); with
no such Python the drive is skipped, loudly. WALKTHROUGH_RUNS: how many times the folder is
driven (default 3: a flaky pass shows as a failure).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOC = ROOT / "docs" / "runtimes.md"
SECTION = "## Walkthrough: describing a fourth framework"
REHEARSAL = os.environ.get("REHEARSAL_BIN", str(ROOT / "target" / "debug" / "rehearsal"))
VENV = Path(os.environ.get("WALKTHROUGH_VENV", str(ROOT / "target" / "walkthrough-venv")))
RUNS = int(os.environ.get("WALKTHROUGH_RUNS", "3"))
PINNED_AGNO = "3.1.10"

# `<!-- file: PATH -->` quotes the whole file PATH; `<!-- excerpt: PATH -->` a run of its lines.
QUOTE = re.compile(r"<!-- (file|excerpt): (\S+) -->\n```[^\n]*\n(.*?)^```\n", re.DOTALL | re.MULTILINE)


def quotes() -> list[tuple[str, str, str]]:
    """(kind, path, text) of each marked block of the walkthrough section."""
    doc = DOC.read_text(encoding="utf-8")
    start = doc.index(SECTION)
    return [(m.group(1), m.group(2), m.group(3)) for m in QUOTE.finditer(doc, start)]


class Doc(unittest.TestCase):
    def test_every_quoted_file_is_quoted_byte_for_byte(self) -> None:
        found = quotes()
        self.assertTrue(found, f"no marked block in {DOC.name}'s walkthrough")
        for kind, path, text in found:
            with self.subTest(path=path, kind=kind):
                actual = (ROOT / path).read_text(encoding="utf-8")
                if kind == "file":
                    self.assertEqual(text, actual, f"{path}: the doc's block differs from the file")
                else:
                    self.assertIn(text, actual, f"{path}: the doc's excerpt is not in the file")

    def test_the_dialect_the_description_and_a_scenario_are_quoted_whole(self) -> None:
        whole = {path for kind, path, _ in quotes() if kind == "file"}
        self.assertIn("examples/walkthrough/dialect.json", whole)
        self.assertIn("examples/walkthrough/runtime.json", whole)
        self.assertTrue(any(p.startswith("examples/walkthrough/scenarios/") for p in whole), whole)


def find_python() -> str | None:
    """A Python >= 3.11 by version: WALKTHROUGH_PYTHON, pyenv's 3.12 (the pins were frozen with
    it), pyenv's newest, then python3.12, 3.13, 3.11, python3 on PATH. Never a fixed path."""
    chosen = os.environ.get("WALKTHROUGH_PYTHON")
    if chosen:
        return chosen
    candidates: list[str] = []
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        names = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        versions = []
        for name in names:
            m = re.fullmatch(r"3\.(\d+)\.(\d+)", name)
            if m and int(m.group(1)) >= 11:
                versions.append((int(m.group(1)) != 12, -int(m.group(1)), -int(m.group(2)), name))
        candidates += [f"{root}/versions/{v[-1]}/bin/python3" for v in sorted(versions)]
    candidates += [c for c in ("python3.12", "python3.13", "python3.11", "python3") if shutil.which(c)]
    for c in candidates:
        ok = subprocess.run([c, "-c", "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)"],
                            capture_output=True)
        if ok.returncode == 0:
            return c
    return None


def agno_version(python: Path) -> str | None:
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('agno'))"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def make_venv() -> Path | None:
    """VENV with exactly requirements.txt and examples/walkthrough on its path; None: no Python."""
    python = VENV / "bin" / "python"
    if not python.exists() or agno_version(python) != PINNED_AGNO:
        base = find_python()
        if base is None:
            return None
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(HERE / "requirements.txt")], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "walkthrough_example.pth").write_text(f"{HERE}\n", encoding="utf-8")
    return python


GROUND_TRUTH = re.compile(
    r"^note: (\S+): attribution against the runtime's X-Rehearsal-Agent header: (\d+) requests? right, "
    r"(\d+) wrong, (\d+) unattributed, (\d+) unlabelled, .*?(\d+) silent guess(?:es)?$", re.MULTILINE)


class Drive(unittest.TestCase):
    def test_every_scenario_passes_with_every_request_attributed(self) -> None:
        python = make_venv()
        if python is None:
            message = "examples/walkthrough: NO PYTHON >= 3.11 FOUND; the agno team was NOT driven"
            print(f"\n{'!' * len(message)}\n{message}\n{'!' * len(message)}", file=sys.stderr)
            self.skipTest(message)
        scenarios = sorted(p.stem for p in (HERE / "scenarios").glob("*.json"))
        self.assertGreaterEqual(len(scenarios), 2)
        # The command of the walkthrough, run from the repository's root.
        args = [REHEARSAL, "drive", "examples/walkthrough/scenarios",
                "--runtime-file", "examples/walkthrough/runtime.json", "--color", "never",
                "--", str(python), "-m", "agno_team", "{message}"]
        for run in range(1, RUNS + 1):
            out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
            where = f"run {run} of {RUNS}:\n{out.stdout}\n{out.stderr}"
            self.assertEqual(out.returncode, 0, where)
            self.assertIn(f"{len(scenarios)} passed, 0 failed", out.stdout, where)
            for name in scenarios:
                self.assertRegex(out.stdout, rf"(?m)^PASS {re.escape(name)} ", where)
            notes = {m.group(1): [int(g) for g in m.groups()[1:]] for m in GROUND_TRUTH.finditer(out.stderr)}
            self.assertEqual(sorted(notes), scenarios, f"one ground-truth note per scenario; {where}")
            for name, (right, wrong, unattributed, unlabelled, silent) in notes.items():
                self.assertGreater(right, 0, f"{name}: {where}")
                self.assertEqual((wrong, unattributed, unlabelled, silent), (0, 0, 0, 0), f"{name}: {where}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
