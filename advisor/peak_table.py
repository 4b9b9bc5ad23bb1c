"""Device peaks with their sources: dense FLOP/s per matmul dtype and HBM bandwidth.

One row per device, each number beside the document it comes from (the vendor's data sheet or
product page, and its year). Dense figures only: the "with sparsity" figures of NVIDIA's data
sheets are twice these. A row's `checked` says whether the figures were read again from the
document (or a faithful copy of its table) when the table was written: the A100 and H100 rows
against copies of NVIDIA's data-sheet tables (A100: the 2021 data sheet's dense columns; H200:
NVIDIA's table gives it the H100 SXM's Tensor Core figures, with 4.8 TB/s), the TPU rows against
Google Cloud's TPU pages (v4, v5e, v5p, v6e; 2026-11 reading), MI300X's bandwidth against AMD's
page. False: taken from the data sheet as commonly quoted, not re-read (MI250X, MI325X, MI355X,
B200, L4); the source string says so, and every report prints the source.

The row is picked from the trace's device facts (name, vendor, compute capability, core count,
memory size); on TPU the trace's own peak stats are preferred. Where nothing matches (CPU, an
unknown GPU), the user gives the peaks (`--peak-flops`, `--peak-bandwidth`) or measures them
with `advisor calibrate`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

T = 1e12
TB = 1e12
GB = 1e9


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    device: str
    flops: dict[str, float]         # dtype class ("f32", "tf32", "bf16", "fp8") -> dense FLOP/s
    bytes_per_s: float              # HBM bandwidth
    source: str
    checked: bool = False
    f32_matmul: str = "f32"         # the column an f32 matmul runs at under JAX's default precision
    l2_bytes: Optional[int] = None  # last-level on-chip cache (L2): traffic that fits may never reach HBM
    l2_source: str = ""

    def cited(self) -> str:
        return self.source if self.checked else f"{self.source} (figures as quoted from it, not re-checked)"


_NV_TF32 = "tf32"       # JAX's default precision lets XLA use TF32 for f32 matmuls on Ampere and later
MB = 1000 * 1000
_AMPERE_L2 = dict(l2_bytes=40 * MB, l2_source="NVIDIA A100 Tensor Core GPU architecture whitepaper (2020): 40 MB L2")
_HOPPER_L2 = dict(l2_bytes=50 * MB, l2_source="NVIDIA H100 Tensor Core GPU architecture whitepaper (2022): 50 MB L2")
ROWS: tuple[DeviceRow, ...] = (
    DeviceRow("NVIDIA A100 40GB SXM", {"f32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T}, 1555 * GB,
              "NVIDIA A100 Tensor Core GPU data sheet (2021)", checked=True, f32_matmul=_NV_TF32, **_AMPERE_L2),
    DeviceRow("NVIDIA A100 80GB SXM", {"f32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T}, 2039 * GB,
              "NVIDIA A100 Tensor Core GPU data sheet (2021)", checked=True, f32_matmul=_NV_TF32, **_AMPERE_L2),
    DeviceRow("NVIDIA A100 80GB PCIe", {"f32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T}, 1935 * GB,
              "NVIDIA A100 Tensor Core GPU data sheet (2021)", checked=True, f32_matmul=_NV_TF32, **_AMPERE_L2),
    DeviceRow("NVIDIA H100 SXM", {"f32": 67 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp8": 1978.9 * T},
              3.35 * TB, "NVIDIA H100 Tensor Core GPU data sheet (2023), dense: half its sparsity figures",
              checked=True, f32_matmul=_NV_TF32, **_HOPPER_L2),
    DeviceRow("NVIDIA H100 PCIe", {"f32": 51 * T, "tf32": 378 * T, "bf16": 756 * T, "fp8": 1513 * T},
              2.0 * TB, "NVIDIA H100 Tensor Core GPU data sheet (2023), dense: half its sparsity figures",
              checked=True, f32_matmul=_NV_TF32, **_HOPPER_L2),
    DeviceRow("NVIDIA H200 SXM", {"f32": 67 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp8": 1978.9 * T},
              4.8 * TB, "NVIDIA H200 Tensor Core GPU data sheet (2024), dense: half its sparsity figures",
              checked=True, f32_matmul=_NV_TF32, **_HOPPER_L2),
    DeviceRow("NVIDIA B200", {"f32": 75 * T, "tf32": 1100 * T, "bf16": 2250 * T, "fp8": 4500 * T}, 8.0 * TB,
              "NVIDIA HGX B200 specifications, per GPU (2024)", f32_matmul=_NV_TF32),
    DeviceRow("NVIDIA L4", {"f32": 30.3 * T, "tf32": 60 * T, "bf16": 121 * T, "fp8": 242 * T}, 300 * GB,
              "NVIDIA L4 Tensor Core GPU data sheet (2023)", f32_matmul=_NV_TF32),
    DeviceRow("AMD Instinct MI250X (one GCD)", {"f32": 47.9 * T, "bf16": 191.5 * T}, 1.6 * TB,
              "AMD Instinct MI250X data sheet (2021), halved: JAX sees each of its two GCDs as a device"),
    DeviceRow("AMD Instinct MI300X", {"f32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp8": 2614.9 * T},
              5.3 * TB, "AMD Instinct MI300X data sheet (2023)", checked=True),
    DeviceRow("AMD Instinct MI325X", {"f32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp8": 2614.9 * T},
              6.0 * TB, "AMD Instinct MI325X data sheet (2024)"),
    DeviceRow("AMD Instinct MI355X", {"f32": 157.3 * T, "bf16": 2516.6 * T, "fp8": 5033.2 * T}, 8.0 * TB,
              "AMD Instinct MI355X data sheet (2025)"),
    DeviceRow("Google TPU v4", {"bf16": 275 * T, "f32": 275 * T}, 1200 * GB,
              "Google Cloud TPU v4 documentation (2023)", checked=True, f32_matmul="bf16"),
    DeviceRow("Google TPU v5e", {"bf16": 197 * T, "f32": 197 * T}, 819 * GB,
              "Google Cloud TPU v5e documentation (2024)", checked=True, f32_matmul="bf16"),
    DeviceRow("Google TPU v5p", {"bf16": 459 * T, "f32": 459 * T}, 2765 * GB,
              "Google Cloud TPU v5p documentation (2024)", checked=True, f32_matmul="bf16"),
    # v6e's page gives int8 (1836 TOPs), no fp8 rate: the fp8 column (int8 and fp8 operands) is that figure
    DeviceRow("Google TPU v6e", {"bf16": 918 * T, "f32": 918 * T, "fp8": 1836 * T}, 1638 * GB,
              "Google Cloud TPU v6e (Trillium) documentation (2024)", checked=True, f32_matmul="bf16"),
)
BY_NAME = {r.device: r for r in ROWS}


def dtype_class(dtype: str) -> str:
    """The peak column of a matmul operand dtype: "bf16" for bf16/f16, "fp8" for the float8s, "f32"..."""
    if dtype in ("bf16", "f16"):
        return "bf16"
    if dtype.startswith("f8"):
        return "fp8"
    if dtype in ("s8", "u8"):
        return "fp8"        # int8 runs at the fp8 rate on these parts
    return "f32"


@dataclasses.dataclass(frozen=True)
class Roof:
    """A bandwidth roof of a memory level (advisor calibrate measures one per cache level and DRAM):
    what an op whose working set fits in the level can reach."""
    level: str                          # "L2", "L3", "DRAM"
    fits_bytes: Optional[int]           # the level's size (all its instances); None: any size (DRAM)
    bytes_per_s: float

    def to_json(self) -> dict:
        return {"level": self.level, "fits_bytes": self.fits_bytes, "bytes_per_s": self.bytes_per_s}


@dataclasses.dataclass(frozen=True)
class Peak:
    """The peaks a run is measured against, and where they come from."""
    device: str
    dtype: str                          # the column used ("bf16", "tf32", ...)
    flops_per_s: Optional[float]
    bytes_per_s: Optional[float]        # the memory roof (HBM, DRAM): the one for working sets of any size
    source: str
    roofs: tuple[Roof, ...] = ()        # measured cache and DRAM roofs, smallest level first (else one roof)
    l2_bytes: Optional[int] = None      # a GPU's on-chip L2 size, where the table knows it
    l2_source: str = ""

    def bandwidth_for(self, working_set: float) -> Optional[float]:
        """The bandwidth roof of an op that moves `working_set` bytes per execution: the fastest level it
        fits in (its data can be there), DRAM's (or HBM's) for any size."""
        if not self.roofs:
            return self.bytes_per_s
        return max(r.bytes_per_s for r in self.roofs if r.fits_bytes is None or working_set <= r.fits_bytes)

    def to_json(self) -> dict:
        out = {"device": self.device, "dtype": self.dtype, "flops_per_s": self.flops_per_s,
               "bytes_per_s": self.bytes_per_s, "source": self.source, "l2_bytes": self.l2_bytes}
        if self.roofs:
            out["bandwidth_roofs"] = [r.to_json() for r in self.roofs]
        return out


def match_row(description: str, vendor: str = "", compute_capability: str = "", cores: Optional[int] = None,
              memory_bytes: Optional[int] = None, clock_mhz: Optional[float] = None) -> Optional[DeviceRow]:
    """The table's row for a device described by the trace, or None."""
    text = description.lower()
    vendor = vendor.lower()
    mem_gb = (memory_bytes or 0) / 1e9
    if "tpu" in text:
        for key, row in (("v6", "Google TPU v6e"), ("v5 lite", "Google TPU v5e"), ("v5e", "Google TPU v5e"),
                         ("v5p", "Google TPU v5p"), ("v5", "Google TPU v5p"), ("v4", "Google TPU v4")):
            if key in text:
                return BY_NAME[row]
        return None
    if vendor == "amd" or "amd" in text or "instinct" in text:
        if "mi355" in text or (compute_capability == "9.5" and cores == 256):
            return BY_NAME["AMD Instinct MI355X"]
        if "mi325" in text or (compute_capability == "9.4" and cores == 304 and mem_gb > 220):
            return BY_NAME["AMD Instinct MI325X"]
        if "mi300x" in text or (compute_capability == "9.4" and cores == 304):
            return BY_NAME["AMD Instinct MI300X"]
        if "mi250" in text or (compute_capability == "9.0" and cores == 110):
            return BY_NAME["AMD Instinct MI250X (one GCD)"]
        return None
    if vendor and vendor != "nvidia" and "nvidia" not in text:
        return None
    if "h200" in text or (compute_capability == "9.0" and cores == 132 and mem_gb > 100):
        return BY_NAME["NVIDIA H200 SXM"]
    if "h100" in text and "pcie" in text or (compute_capability == "9.0" and cores == 114):
        return BY_NAME["NVIDIA H100 PCIe"]
    if "h100" in text or (compute_capability == "9.0" and cores == 132):
        return BY_NAME["NVIDIA H100 SXM"]
    if "b200" in text or (compute_capability == "10.0" and cores == 148):
        return BY_NAME["NVIDIA B200"]
    if "l4" in text.split() or (compute_capability == "8.9" and cores == 58):
        return BY_NAME["NVIDIA L4"]
    if "a100" in text or (compute_capability == "8.0" and cores == 108):
        if "pcie" in text and ("80gb" in text or mem_gb > 50):
            return BY_NAME["NVIDIA A100 80GB PCIe"]
        return BY_NAME["NVIDIA A100 80GB SXM" if "80gb" in text or mem_gb > 50 else "NVIDIA A100 40GB SXM"]
    return None


def row_peak(row: DeviceRow, matmul_dtype: str) -> Peak:
    """The row's peaks for matmuls of this operand dtype."""
    column = dtype_class(matmul_dtype)
    if column == "f32":
        column = row.f32_matmul
    if column not in row.flops:
        column = "bf16" if "bf16" in row.flops else next(iter(row.flops))
    note = ""
    if dtype_class(matmul_dtype) == "f32" and column != "f32":
        note = f"; f32 matmuls at the {column} rate (JAX's default precision)"
    return Peak(row.device, column, row.flops[column], row.bytes_per_s, row.cited() + note,
                l2_bytes=row.l2_bytes, l2_source=row.l2_source)


@dataclasses.dataclass(frozen=True)
class UserPeaks:
    """Peaks given by the user (--peak-flops/--peak-bandwidth, the API's peak_flops=/peak_bandwidth=)
    or measured by `advisor calibrate`; each replaces the table's figure, and names its source."""
    flops_per_s: Optional[float] = None
    bytes_per_s: Optional[float] = None
    flops_source: str = "--peak-flops"
    bytes_source: str = "--peak-bandwidth"
    roofs: tuple[Roof, ...] = ()        # advisor calibrate's cache and DRAM roofs (bytes_per_s is DRAM's)

    def __bool__(self) -> bool:
        return self.flops_per_s is not None or self.bytes_per_s is not None

    def over(self, base: Optional[Peak], device: str, dtype: str) -> Peak:
        """These figures in place of the base's (the table's row, or nothing)."""
        flops, bw = self.flops_per_s, self.bytes_per_s
        sources = []
        if flops is not None:
            sources.append(f"FLOP/s: {self.flops_source}")
        elif base is not None and base.flops_per_s is not None:
            flops = base.flops_per_s
            sources.append(f"FLOP/s: {base.source}")
        if bw is not None:
            sources.append(f"bytes/s: {self.bytes_source}")
        elif base is not None and base.bytes_per_s is not None:
            bw = base.bytes_per_s
            sources.append(f"bytes/s: {base.source}")
        same = {s.split(": ", 1)[1] for s in sources}
        source = sources[0].split(": ", 1)[1] if len(same) == 1 else "; ".join(sources)
        return Peak(base.device if base else device, base.dtype if base else dtype, flops, bw, source,
                    roofs=self.roofs if self.bytes_per_s is not None else (),
                    l2_bytes=base.l2_bytes if base else None, l2_source=base.l2_source if base else "")

