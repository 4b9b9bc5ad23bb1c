"""advisor: reads JAX/Flax profiler traces and says what is slow or heavy, and which change fixes it.

    import advisor
    report = advisor.analyze("logs/")                # Report: .runs, .to_json(), .save_html()
    with advisor.trace("logs/") as t:                # profile your own loop; t.report on exit
        with t.step(): ...
    plan = advisor.preflight(step, state, batch)     # memory from shapes: .fits, .breakdown
    advisor.verify(make_step, {"remat": True})       # a recommended change compiled on your code
"""

from pathlib import Path as _Path

from . import clone_folders as _clone_folders

_clone_folders.install(_Path(__file__).resolve().parent)   # `python -m advisor` in a clone's root

from .api import Plan, Report, Trace, analyze, preflight, trace  # noqa: E402  (api imports jax lazily)
from .version import __version__  # noqa: E402


def __getattr__(name: str):
    # verify compiles programs with jax: its module is read when asked for, not by every `advisor analyze`
    if name in ("Check", "verify"):
        from . import verification
        return getattr(verification, name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")

__all__ = ["analyze", "trace", "preflight", "verify", "Report", "Trace", "Plan", "Check", "__version__"]
