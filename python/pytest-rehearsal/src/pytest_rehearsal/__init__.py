"""pytest-rehearsal: test an agent runtime against `rehearsal serve` in one fixture.

The plugin (registered through the `pytest11` entry point) provides the `rehearsal` fixture;
see `pytest_rehearsal.plugin` and the package README.
"""

from .plugin import RehearsalError, Served, Turn, Verdict, find_binary, judge_turns, parse_report

__all__ = ["RehearsalError", "Served", "Turn", "Verdict", "find_binary", "judge_turns", "parse_report"]
__version__ = "0.1.0"
