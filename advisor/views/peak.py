"""The device's peaks every utilization divides by (`views.peak.of(profile)`), and where they come
from: the user's (--peak-flops/--peak-bandwidth), else the trace's own peak stats (TPU) or the
device table's row (advisor/peak_table.py), else advisor calibrate's figures for the machine the run
records; where there are none, why. The efficiency section and every rule read these, so a rule's
share of a peak is the efficiency section's.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..model import Profile
from ..peak_table import DeviceRow, Peak, UserPeaks, dtype_class, match_row, row_peak
from . import ops
from .bound import cached, settings


@dataclasses.dataclass(frozen=True)
class Peaks:
    backend: str
    device: str                     # the trace's device (a CPU trace: the machine the user's figures are for)
    row: Optional[DeviceRow]        # the device table's row for the trace's device
    stats: Optional[tuple[str, Optional[float], Optional[float]]]   # the trace's own peak stats: device, FLOP/s, B/s
    user: Optional[UserPeaks]       # the user's figures, or advisor calibrate's where nothing else is known
    unused: str = ""                # why a calibration of a host of the trace's name is not used
    step_dtype: str = ""            # the operand dtype of most of the step's matmul FLOPs ("" without matmuls)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        peak, why = self.step
        return {"peak": peak.to_json() if peak else None, "why": why or None}

    def at(self, dtype: str) -> tuple[Optional[Peak], str]:
        """The peaks for matmuls of this operand dtype and, when there are none, why."""
        dtype = dtype or "f32"
        if self.stats:
            base = Peak(self.stats[0], dtype_class(dtype), self.stats[1], self.stats[2],
                        "the trace's own device peak stats")
        else:
            base = row_peak(self.row, dtype) if self.row else None
        if self.user:
            return self.user.over(base, self.device, dtype_class(dtype)), ""
        if base is not None:
            return base, ""
        if self.unused:
            return None, f"no peak: {self.unused}"
        if self.backend == "cpu":
            return None, ("no peak for a CPU host: pass --peak-flops and --peak-bandwidth, or measure this host "
                          "with `advisor calibrate`")
        return None, (f"no peak known for {self.device or 'this device'}: pass --peak-flops and "
                      "--peak-bandwidth")

    @property
    def step(self) -> tuple[Optional[Peak], str]:
        """The peaks for the step's matmuls: what MFU and every share of a peak divide by."""
        return self.at(self.step_dtype)


def of(profile: Profile) -> Peaks:
    return cached(profile, "peak", _build)


def _build(profile: Profile) -> Peaks:
    bound = settings(profile)
    row, stats = None, None
    active = profile.active_devices or profile.devices
    if active:
        d = active[0]
        row = match_row(d.description, d.vendor, d.compute_capability, d.core_count, d.memory_bytes, d.clock_mhz)
        if d.peak_flops_per_s or d.peak_bytes_per_s:
            stats = (d.description, d.peak_flops_per_s, d.peak_bytes_per_s)
    elif profile.backend != "cpu":
        row = match_row(profile.device_name)
    known = row is not None or stats is not None
    user = bound.peaks or (None if known else bound.calibration)
    rows = ops.of(profile)
    return Peaks(backend=profile.backend,
                 device=bound.this_host if profile.backend == "cpu" else profile.device_name,
                 row=row, stats=stats, user=user,
                 unused="" if bound.peaks or known else bound.calibration_unused,
                 step_dtype=ops.matmul_dtype(rows.rows) if rows else "")
