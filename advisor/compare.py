"""Compare two runs: step time (with its measured spread), peak memory, op time by category,
and findings added or removed. Also the metrics a baseline file records."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Optional

from . import op_diff
from .op_diff import OpDiff


@dataclasses.dataclass
class Metrics:
    """What a run measured, in the shape a baseline file stores."""
    backend: str
    device: str
    step_times_ms: list[float]
    peak_memory_bytes: Optional[int]
    category_ms_per_step: dict[str, float]
    findings: dict[str, str]            # rule id -> severity
    titles: dict[str, str] = dataclasses.field(default_factory=dict)
    mfu: Optional[float] = None         # summary.efficiency.mfu; None where no peak is known
    mfu_peak: str = ""                  # the peak MFU is measured against, and its source
    ops: Optional[dict] = None          # the op_table view's JSON; None: not recorded (an older baseline)
    recorded_with: dict = dataclasses.field(default_factory=dict)   # summary.recorded_with: versions, XLA_FLAGS

    @property
    def step_time_ms(self) -> Optional[float]:
        return statistics.median(self.step_times_ms) if self.step_times_ms else None

    @property
    def spread(self) -> float:
        """Relative spread of the step times: (max - min) / median, 0 with fewer than two steps."""
        if len(self.step_times_ms) < 2 or not self.step_time_ms:
            return 0.0
        return (max(self.step_times_ms) - min(self.step_times_ms)) / self.step_time_ms

    def to_json(self) -> dict:
        return {"backend": self.backend, "device": self.device, "step_times_ms": self.step_times_ms,
                "step_time_ms": self.step_time_ms, "peak_memory_bytes": self.peak_memory_bytes,
                "category_ms_per_step": self.category_ms_per_step, "findings": self.findings,
                "titles": self.titles, "mfu": self.mfu, "mfu_peak": self.mfu_peak,
                "recorded_with": self.recorded_with,
                **({"ops": self.ops} if self.ops is not None else {})}

    @classmethod
    def from_json(cls, doc: dict) -> "Metrics":
        """Raises TypeError naming the key whose value is not what a baseline holds."""
        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
        for key, ok in (("backend", lambda v: isinstance(v, str)), ("device", lambda v: isinstance(v, str)),
                        ("step_times_ms", lambda v: isinstance(v, list) and all(map(number, v))),
                        ("peak_memory_bytes", lambda v: v is None or number(v)),
                        ("category_ms_per_step", lambda v: isinstance(v, dict) and all(map(number, v.values()))),
                        ("findings", lambda v: isinstance(v, dict)), ("titles", lambda v: isinstance(v, dict)),
                        ("mfu", lambda v: v is None or (number(v) and v <= 1)),
                        ("mfu_peak", lambda v: isinstance(v, str)),
                        ("recorded_with", lambda v: isinstance(v, dict)),
                        ("ops", lambda v: isinstance(v, dict) and isinstance(v.get("ops"), list)
                         and all(map(_op_entry, v["ops"])))):
            if key in doc and not ok(doc[key]):
                raise TypeError(f"metrics.{key} is {str(doc[key])[:60]!r}, not what a baseline holds")
        return cls(backend=doc["backend"], device=doc["device"], step_times_ms=list(doc["step_times_ms"]),
                   peak_memory_bytes=doc.get("peak_memory_bytes"),
                   category_ms_per_step=dict(doc.get("category_ms_per_step", {})),
                   findings=dict(doc.get("findings", {})), titles=dict(doc.get("titles", {})),
                   mfu=doc.get("mfu"), mfu_peak=doc.get("mfu_peak", ""), ops=doc.get("ops"),
                   recorded_with=dict(doc.get("recorded_with", {})))


def _op_entry(e) -> bool:
    """An entry of a recorded op table (views/op_table.py), as op_diff reads it."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    return (isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("source"), (str, type(None)))
            and number(e.get("ms_per_step")) and number(e.get("peak_bytes"))
            and isinstance(e.get("instructions"), list) and all(isinstance(i, str) for i in e["instructions"]))


def metrics(document: dict) -> Metrics:
    """What a run's result document (Analysis.document()) measured, in the shape a baseline stores."""
    run, step_time = document["run"], document["views"]["step_time"]
    eff = run["summary"].get("efficiency") or {}
    peak = eff.get("peak") or {}
    return Metrics(
        mfu=eff.get("mfu"),
        mfu_peak=f"{peak.get('device')} {peak.get('dtype')} ({peak.get('source')})" if peak else "",
        backend=run["backend"],
        device=run["device"],
        step_times_ms=list(step_time["step_times_ms"]),     # the slowest host's, per step
        peak_memory_bytes=run["summary"]["peak_memory_bytes"],
        category_ms_per_step=dict(step_time["category_ms_per_step"]),
        findings={f["rule"]: f["severity"] for f in run["findings"]},
        titles={f["rule"]: f["title"] for f in run["findings"]},
        ops=document["views"].get("op_table"),
        recorded_with=dict(run["summary"].get("recorded_with") or {}),
    )


@dataclasses.dataclass
class Comparison:
    base: Metrics
    new: Metrics
    step_time_ratio: Optional[float]
    noise: float                        # relative step-time spread the runs themselves show
    peak_memory_ratio: Optional[float]
    category_ratios: dict[str, Optional[float]]
    findings_added: list[str]
    findings_removed: list[str]
    base_run: Optional[dict] = None     # run_label.run_info of each side: the workload and its settings
    new_run: Optional[dict] = None
    ops: Optional[OpDiff] = None        # which ops changed (advisor/op_diff.py)

    def step_time_regressed(self, threshold: float) -> bool:
        """Slower by more than `threshold` beyond the measured noise."""
        return self.step_time_ratio is not None and self.step_time_ratio - 1 > threshold + self.noise

    def step_time_improved(self, threshold: float = 0.0) -> bool:
        return self.step_time_ratio is not None and 1 - self.step_time_ratio > threshold + self.noise

    def step_time_verdict(self) -> str:
        """What the step-time ratio means against the runs' own noise (the CLI's and the web's line)."""
        ratio = f"x{self.step_time_ratio:.3f}" if self.step_time_ratio is not None else "n/a"
        if self.step_time_regressed(0.0):
            return f"step time: slower beyond the measured noise ({ratio}, noise {self.noise:.0%})"
        if self.step_time_improved():
            return f"step time: faster beyond the measured noise ({ratio}, noise {self.noise:.0%})"
        if self.step_time_ratio is None:
            return "step time: unknown in one of the runs, not compared"
        return f"step time: within the measured noise ({ratio}, noise {self.noise:.0%})"

    def runs_text(self) -> list[str]:
        """`base: transformer (tiny) model.remat=none`, `new: ...`, then the settings that changed."""
        from .run_label import changes, label, recording_changes

        out = [f"{side}: {label(info)}" for side, info in (("base", self.base_run), ("new", self.new_run)) if info]
        diff = changes(self.base_run, self.new_run)
        recorded = recording_changes(self.base.recorded_with, self.new.recorded_with)
        if diff:
            out.append("changed: " + "; ".join(diff))
        elif self.base_run and self.new_run:
            out.append("changed: no setting of the workload (the same configuration on both sides)" if recorded
                       else "changed: no setting (the same configuration on both sides)")
        if recorded:
            out.append("recorded differently: " + "; ".join(recorded))
        return out

    @property
    def mfu_ratio(self) -> Optional[float]:
        """New MFU over base; None where either side has no peak to measure MFU against."""
        return self.new.mfu / self.base.mfu if self.base.mfu and self.new.mfu is not None else None

    def mfu_peaks(self) -> str:
        """The peak (or peaks) MFU is measured against on the two sides, with their sources; "" for none."""
        return "; ".join(sorted({self.base.mfu_peak, self.new.mfu_peak} - {""}))

    def memory_regressed(self, threshold: float) -> bool:
        return self.peak_memory_ratio is not None and self.peak_memory_ratio - 1 > threshold

    def to_json(self) -> dict[str, Any]:
        def without_ops(m: Metrics) -> dict:     # each side's whole op table: `ops` holds what changed
            return {k: v for k, v in m.to_json().items() if k != "ops"}
        return {
            "base": without_ops(self.base), "new": without_ops(self.new),
            "step_time_ratio": _r(self.step_time_ratio), "step_time_noise": round(self.noise, 4),
            "peak_memory_ratio": _r(self.peak_memory_ratio),
            "category_ratios": {k: _r(v) for k, v in self.category_ratios.items()},
            "findings_added": self.findings_added, "findings_removed": self.findings_removed,
            "step_time_verdict": self.step_time_verdict(),
            "base_run": _label(self.base_run), "new_run": _label(self.new_run),
            "config_changes": _changes(self.base_run, self.new_run),
            "recording_changes": _recording_changes(self.base, self.new),
            **({"ops": self.ops.to_json()} if self.ops is not None else {}),
        }


def _label(info: Optional[dict]) -> Optional[str]:
    from .run_label import label
    return label(info) or None


def _changes(base: Optional[dict], new: Optional[dict]) -> list[str]:
    from .run_label import changes
    return changes(base, new)


def _recording_changes(base: Metrics, new: Metrics) -> list[str]:
    from .run_label import recording_changes
    return recording_changes(base.recorded_with, new.recorded_with)


def _r(x: Optional[float]) -> Optional[float]:
    return round(x, 4) if x is not None else None


def _ratio(new, base) -> Optional[float]:
    return new / base if new is not None and base else None


def compare(base: Metrics, new: Metrics, base_run: Optional[dict] = None,
            new_run: Optional[dict] = None) -> Comparison:
    """base_run/new_run: run_label.run_info of each side, where known (what ran, for the labels)."""
    cats = sorted(set(base.category_ms_per_step) | set(new.category_ms_per_step))
    return Comparison(
        base_run=base_run, new_run=new_run,
        base=base, new=new,
        step_time_ratio=_ratio(new.step_time_ms, base.step_time_ms),
        noise=max(base.spread, new.spread),
        peak_memory_ratio=_ratio(new.peak_memory_bytes, base.peak_memory_bytes),
        category_ratios={k: _ratio(new.category_ms_per_step.get(k), base.category_ms_per_step.get(k)) for k in cats},
        findings_added=sorted(set(new.findings) - set(base.findings)),
        findings_removed=sorted(set(base.findings) - set(new.findings)),
        ops=op_diff.diff(base.ops, new.ops),
    )


def match_runs(base: list[dict], new: list[dict], base_root, new_root) -> list[tuple[str, dict, dict]]:
    """Pairs of runs' result documents with the same name: the folder under each root that holds the trace."""
    if len(base) == 1 and len(new) == 1:
        return [("", base[0], new[0])]
    b, n = _by_name(base, base_root), _by_name(new, new_root)
    return [(name, b[name], n[name]) for name in sorted(set(b) & set(n))]


def _by_name(documents: list[dict], root) -> dict[str, dict]:
    from pathlib import Path, PurePosixPath

    from .locate import file_url_path, is_url

    root = str(root)
    remote = is_url(root) and file_url_path(root) is None
    out = {}
    for a in documents:
        if remote:      # gs://..., memory://...: the run's URL starts with the one given
            rel = PurePosixPath(a["run"]["path"][len(root.rstrip("/")):].lstrip("/"))
        else:
            local = file_url_path(root) if is_url(root) else Path(root)
            rel = Path(a["run"]["path"]).resolve().relative_to(local.resolve())
        parts = rel.parts
        cut = parts.index("plugins") if "plugins" in parts else len(parts) - 1
        name = "/".join(parts[:cut]) or rel.stem
        out[name if name not in out else f"{name}/{parts[-2]}"] = a
    return out
