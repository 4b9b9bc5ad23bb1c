"""advisor: reads JAX/Flax profiler traces and says what is slow or heavy, and which change fixes it.

    import advisor
    report = advisor.analyze("logs/")                # Report: .runs, .to_json(), .save_html()
    with advisor.trace("logs/") as t:                # profile your own loop; t.report on exit
        with t.step(): ...
    plan = advisor.preflight(step, state, batch)     # memory from shapes: .fits, .breakdown
    advisor.verify(make_step, {"remat": True})       # a recommended change compiled on your code
"""

from .version import __version__  # noqa: E402
from .api import Plan, Report, Trace, analyze, preflight, trace  # noqa: E402  (api imports jax lazily)
from .verification import Check, verify  # noqa: E402

__all__ = ["analyze", "trace", "preflight", "verify", "Report", "Trace", "Plan", "Check", "__version__"]
