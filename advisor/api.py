"""advisor's Python API: `analyze` a trace, `trace` a block of your own training loop, `preflight`
a step's memory from shapes. The command line is built on these.

Importing this module is light: jax is imported inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from .job import Analysis, RunFailure
from .load.host_lines import TOOL_WAIT

Size = Union[int, str, None]


@dataclasses.dataclass
class Report:
    """What `analyze` (or `trace`) found: one Analysis per run, the runs that could not be read, warnings."""
    runs: list[Analysis]
    failed: list[RunFailure]
    read_from: str
    command: str = "analyze"

    @property
    def warnings(self) -> list[str]:
        return json_doc_warnings(self)

    def to_dict(self) -> dict:
        import json
        return json.loads(self.to_json())

    def documents(self) -> list[dict]:
        """Each run's result document, what every report renders (Analysis.document())."""
        return [a.document() for a in self.runs]

    def render(self, fmt: str) -> str:
        """The report in a format of `advisor analyze` that is one text (advisor/report/formats.py's list:
        text, json, html): what `advisor analyze --format FMT` gives (text as `--output` writes it, without
        colour); AdvisorError for another format."""
        from .errors import AdvisorError
        from .report.formats import FORMATS

        whole = {f.name: f.runs for f in FORMATS if f.runs}
        if fmt not in whole:
            raise AdvisorError(f"Report.render: no format {fmt!r}; one of {', '.join(whole)}")
        return whole[fmt](self.documents(), [f.to_json() for f in self.failed], self.read_from, self.command)

    def to_json(self) -> str:
        """Exactly the document `advisor analyze --format json` prints."""
        return self.render("json")

    def to_text(self) -> str:
        """The CLI's text report, as `advisor analyze PATH --output report.txt` writes it (no colour)."""
        return self.render("text")

    def __str__(self) -> str:
        """print(report) prints the text report; repr(report) stays one line."""
        return self.to_text()

    def to_html(self) -> str:
        return self.render("html")

    def save_html(self, path: Union[str, Path]) -> Path:
        """Raises AdvisorError for a path that is one of the traces read, or inside their run folders."""
        from .outputs import refuse_overwrite, write_text
        path = Path(path)
        refuse_overwrite({"save_html": path}, [a.profile.path for a in self.runs])
        write_text(path, self.to_html())
        return path

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_pandas(self) -> dict:
        """{"findings": DataFrame, "ops": DataFrame}: one row per finding, one per op (time per op in ms)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Report.to_pandas needs pandas: pip install pandas "
                              "(in advisor's clone: pip install -e '.[pandas]')") from None
        findings, ops = [], []
        for a in self.runs:
            for f in a.findings:
                e = f.recommendation.expected
                findings.append({"run": a.profile.path, "rule": f.rule, "severity": f.severity, "title": f.title,
                                 "source": f.source, "recommendation": f.recommendation.text,
                                 "expected_metric": e.metric, "expected_saving": e.saving, "expected_unit": e.unit,
                                 "cost": f.recommendation.cost})
            for op in a.profile.ops:
                ops.append({"run": a.profile.path, "module": op.module, "op": op.name, "device": op.device,
                            "self_time_ms": op.self_ns / 1e6, "count": op.count})
        return {"findings": pd.DataFrame(findings, columns=[
                    "run", "rule", "severity", "title", "source", "recommendation", "expected_metric",
                    "expected_saving", "expected_unit", "cost"]),
                "ops": pd.DataFrame(ops, columns=["run", "module", "op", "device", "self_time_ms", "count"])}

    def __repr__(self) -> str:
        n = sum(len(a.findings) for a in self.runs)
        return (f"<advisor.Report of {self.read_from}: {len(self.runs)} run(s), {n} finding(s), "
                f"{len(self.failed)} failed>")


def json_doc_warnings(report: Report) -> list[str]:
    return [w for a in report.runs for w in a.to_json()["warnings"]] + \
        [f"{f.path}: not analyzed: {f.reason}" for f in report.failed]


def analyze(path: Union[str, Path], select: Optional[Iterable[str]] = None, ignore: Iterable[str] = (),
            options: Optional[dict[str, dict[str, Any]]] = None, device_memory: Size = None,
            progress: Callable[[str], None] = lambda msg: None, jobs: Optional[int] = None,
            engine: str = "process", ray_address: Optional[str] = None,
            steps: Union[str, slice, None] = None, peak_flops: Union[float, str, None] = None,
            peak_bandwidth: Union[float, str, None] = None, peaks=None, mesh=None) -> Report:
    """Diagnose the traces under `path` (a logdir, a run folder or one .xplane.pb; a path or an fsspec
    URL such as gs://bucket/logdir, s3://..., file://...).

    select/ignore: rule ids, a list or a string in the grammar of every set ("a+b", "none"; select=None:
    every rule, select=[] or "none": no rule); options: {rule_id: {key: value}} thresholds;
    device_memory: the capacity (bytes or "24GB") where the trace does not record it;
    jobs: runs analyzed at once, each in a worker process (None or 1: in this process, one after the
    other; a script that passes jobs > 1 needs the usual `if __name__ == "__main__":` guard, as workers
    are started by spawn);
    engine: "process" (worker processes on this machine) or "ray" (one Ray task per host file, on the
    cluster at ray_address, else a local Ray started for the call). The results are the same.
    steps: "A:B" (or a slice) analyzes only the steps numbered A to B-1 (the CLI's --steps).
    peak_flops, peak_bandwidth: the device's peak matmul FLOP/s and memory bytes/s (numbers, or text such
    as "989T", "3.35TB/s"), in place of the device table's (needed on CPU: see `advisor calibrate`);
    peaks: an advisor.peak_table.UserPeaks instead (the command line's).
    mesh: the device mesh's axes, major first: a jax.sharding.Mesh, {"data": 2, "pipe": 2}, or
    "data=2,pipe=2" (the CLI's --mesh); names the axes of summary.parallelism (else inferred).
    Raises advisor.errors.AdvisorError on bad input (a path with no run, an unknown rule or option).
    """
    from .engine import analyze_all
    from .user_input import API
    from .user_input import job as user_job

    job = user_job(select, ignore, options or {}, device_memory=device_memory, steps=steps, peak_flops=peak_flops,
                   peak_bandwidth=peak_bandwidth, peaks=peaks, mesh=mesh, names=API)
    analyses, failed = analyze_all(path, job, jobs=1 if jobs is None else jobs, engine=engine,
                                   ray_address=ray_address, progress=progress)
    return Report(analyses, failed, str(path))


class Trace:
    """`with advisor.trace("logs/") as t:` profiles the block with jax.profiler; `t.step()` marks one
    training step; on exit the trace is closed, the device memory profile and the machine it ran on
    (advisor_run.json: advisor calibrate's figures apply to this run there only) saved beside it, and
    `t.report` holds the analysis. An exception inside the block is re-raised after the trace is closed.
    `mesh` (a jax.sharding.Mesh, {name: size} or "data=2,pipe=2"): its axis names are recorded beside
    the trace (advisor_run.json) and name the axes of the report's parallelism section."""

    def __init__(self, logdir: Union[str, Path], mesh=None, **analyze_kwargs):
        self.logdir = Path(logdir)
        from .user_input import parse_mesh_setting
        self.mesh = parse_mesh_setting(mesh, "mesh")
        self.analyze_kwargs = analyze_kwargs
        self.run_dir: Optional[Path] = None
        self.report: Optional[Report] = None
        self.error: Optional[str] = None     # why no report was made, when none was
        self._steps = 0
        self._private: Optional[Path] = None

    def step(self):
        """A step annotation numbered for you; on leaving it, waits for the step's device work."""
        import contextlib

        import jax

        n = self._steps
        self._steps += 1

        @contextlib.contextmanager
        def annotate():
            with jax.profiler.StepTraceAnnotation("train", step_num=n):
                yield n
                # the step's device work counts in its step; named, so the report does not take this
                # wait of advisor's for a sync of the program's
                with jax.profiler.TraceAnnotation(TOOL_WAIT):
                    jax.block_until_ready(jax.live_arrays())
        return annotate()

    def __enter__(self) -> "Trace":
        import jax

        from .runner import _private_logdir

        self._private = _private_logdir(self.logdir)
        jax.profiler.start_trace(str(self._private))
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        import jax

        from .cleanup import untrack
        from .locate import MEMORY_PROFILE
        from .runner import _claim_run_dir

        try:
            with jax.profiler.TraceAnnotation(TOOL_WAIT):
                jax.block_until_ready(jax.live_arrays())
        finally:
            jax.profiler.stop_trace()
        if exc_type is not None and not issubclass(exc_type, Exception):
            # Ctrl-C (or SystemExit) in the block: the profiler is stopped, its partial trace removed
            from .cleanup import remove
            remove(self._private)
            self.error = f"interrupted ({exc_type.__name__}): no trace kept"
            return False
        try:
            self.run_dir = _claim_run_dir(self._private, self.logdir / "plugins" / "profile")
            try:
                from .locate import RUN_METADATA
                jax.profiler.save_device_memory_profile(str(self.run_dir / MEMORY_PROFILE))
                import json

                from .hardware import this_host
                from .runner import recording
                # the machine (advisor calibrate's figures apply to the run there only), the versions and
                # XLA_FLAGS it ran with, and the mesh given
                meta = {"host": this_host(), **recording(),
                        **({"mesh": [list(a) for a in self.mesh]} if self.mesh else {})}
                (self.run_dir / RUN_METADATA).write_text(json.dumps(meta))
            finally:
                untrack(self.run_dir)     # the user's trace: kept whatever happens next
            self.report = analyze(self.run_dir, **self.analyze_kwargs)
        except Exception as err:  # noqa: BLE001 - the user's own exception matters more than ours
            if exc_type is None:
                raise
            self.error = f"{type(err).__name__}: {err}"
        return False


def trace(logdir: Union[str, Path] = "advisor_traces", mesh=None, **analyze_kwargs) -> Trace:
    """Profile a block of your own training loop; `mesh` (a jax.sharding.Mesh) is recorded beside the
    trace to name the parallelism section's axes; `analyze_kwargs` go to `advisor.analyze`."""
    return Trace(logdir, mesh, **analyze_kwargs)


@dataclasses.dataclass
class Plan:
    """What a compiled function needs in memory, against the capacity; nothing was run."""
    fits: bool
    required_bytes: int
    capacity_bytes: int
    capacity_source: str
    breakdown: dict[str, int]        # arguments, outputs, temporaries, aliased (bytes)
    donation: Optional[dict] = None  # {"argnums", "saving_bytes", "text"} where donating would save memory

    def __repr__(self) -> str:
        from .units import mib
        verdict = "fits" if self.fits else "does NOT fit"
        out = (f"<advisor.Plan: {verdict}: needs {mib(self.required_bytes)} of {mib(self.capacity_bytes)} "
               f"({self.capacity_source}); " + ", ".join(f"{k} {mib(v)}" for k, v in self.breakdown.items()))
        return out + (f"; {self.donation['text']}>" if self.donation else ">")


def _abstract(x):
    import jax

    if isinstance(x, jax.ShapeDtypeStruct) or not (hasattr(x, "shape") and hasattr(x, "dtype")):
        return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def preflight(fn: Callable, *args, memory_limit: Size = None, **kwargs) -> Plan:
    """Compile `fn(*args, **kwargs)` from shapes only and compare what it needs with the capacity.

    fn: jitted or not (a jitted one keeps its donate_argnums); args: arrays or jax.ShapeDtypeStruct
    pytrees; memory_limit: bytes or "16GB" (default: the device's limit, or free host memory on CPU).
    """
    import jax

    from .units import mib
    from .workload_memory import device_capacity

    shapes, kw_shapes = jax.tree_util.tree_map(_abstract, (args, kwargs))
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    lowered = jitted.lower(*shapes, **kw_shapes)
    ma = lowered.compile().memory_analysis()
    breakdown = {"arguments": int(ma.argument_size_in_bytes), "outputs": int(ma.output_size_in_bytes),
                 "temporaries": int(ma.temp_size_in_bytes), "aliased": int(ma.alias_size_in_bytes)}
    required = breakdown["arguments"] + breakdown["outputs"] + breakdown["temporaries"] - breakdown["aliased"]
    from .settings import parse_size_setting
    limit = parse_size_setting(memory_limit, "memory_limit")
    capacity, source = device_capacity(limit)
    if limit:
        source = "memory_limit"
    donation = _donation_hint(lowered, shapes, jax.eval_shape(jitted, *shapes, **kw_shapes))
    if donation:
        donation["text"] = (f"arguments {donation['argnums']} are returned updated but not donated: "
                            f"jax.jit(step, donate_argnums={tuple(donation['argnums'])}) would reuse their "
                            f"buffers for the outputs, saving about {mib(donation['saving_bytes'])}; cost: the "
                            "donated inputs cannot be used after the call")
    return Plan(required <= capacity, required, capacity, source, breakdown, donation)


def _donation_hint(lowered, shapes, out_shape) -> Optional[dict]:
    """Positional arguments whose every array comes back in the outputs (same shape and dtype),
    none of them donated: a train step's state."""
    import jax

    leaves = lambda t: [x for x in jax.tree_util.tree_leaves(t) if hasattr(x, "shape")]  # noqa: E731
    outputs: dict[tuple, int] = {}
    for x in leaves(out_shape):
        outputs[(tuple(x.shape), str(x.dtype))] = outputs.get((tuple(x.shape), str(x.dtype)), 0) + 1
    try:
        arg_info = lowered.args_info[0]
    except Exception:  # noqa: BLE001 - older jax: no args_info; no hint rather than a wrong one
        return None
    argnums, saving = [], 0
    for i, arg in enumerate(shapes):
        arrays = leaves(arg)
        if not arrays or any(getattr(a, "donated", False) for a in jax.tree_util.tree_leaves(arg_info[i])):
            continue
        left = dict(outputs)
        for x in arrays:
            key = (tuple(x.shape), str(x.dtype))
            if not left.get(key):
                break
            left[key] -= 1
        else:
            nbytes = sum(int(x.size) * x.dtype.itemsize for x in arrays)
            if nbytes:
                argnums.append(i)
                saving += nbytes
                outputs = left
    return {"argnums": argnums, "saving_bytes": saving} if argnums else None
