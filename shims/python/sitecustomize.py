"""Activates rehearsal_clock at interpreter start-up when REHEARSAL_CLOCK is set.

Python imports the first ``sitecustomize`` on ``sys.path``; with ``PYTHONPATH=shims/python``
that is this one, so it also runs the next one on the path (a virtual environment's or the
system's), which it would otherwise hide.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_the_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or spec.loader is None:
        return
    if os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("REHEARSAL_CLOCK"):
    import rehearsal_clock

    rehearsal_clock.install_from_env()

_run_the_next_sitecustomize()
