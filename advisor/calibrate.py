"""`advisor calibrate`: measure this host's peaks (a matmul, and a stream at working sets that fit each
cache level and one that does not) for the efficiency view where no data sheet applies (CPU hosts,
unknown devices).

A CPU roofline needs more than one bandwidth roof: an op whose data fits in a cache streams it far
faster than DRAM (on the 2-core development VM: 160-250 GB/s in cache, 9-12 GB/s from DRAM), and
against the DRAM figure alone most of a step's ops would read above 100% of the peak. So each cache
level (its size from /sys/devices/system/cpu/cpu0/cache) gets a roof measured at half its size, DRAM
one measured at `stream_mib`, and an op is judged against the fastest roof of a level its working set
(the bytes one execution moves) fits in.

The figures are stored in the user's cache folder (`$ADVISOR_CACHE_DIR`, else `$XDG_CACHE_HOME/advisor`,
else `~/.cache/advisor`), one entry per host and backend, with what identifies the machine (its name,
CPU model, cores and memory: advisor/hardware.py). `analyze` uses them for a trace whose run records
the same hardware (advisor's own runs do), labelled "measured on <host> by advisor calibrate"; never for
a trace that does not say where it was recorded, nor for one recorded on another machine of the same
name. Nothing is written anywhere else.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

from . import hardware
from .peak_table import Roof, UserPeaks

FILE = "calibration.json"
STREAM_BYTES = 256 * 2**20      # bytes one cache-level benchmark call moves (repeats of its working set)
MIN_WORKING_SET = 16 * 2**10
_SYSFS = Path("/sys/devices/system/cpu")


def cache_dir() -> Path:
    if os.environ.get("ADVISOR_CACHE_DIR"):
        return Path(os.environ["ADVISOR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "advisor"


def _best(fn, repeats: int) -> float:
    """The shortest of `repeats` timed runs (seconds): the least disturbed by neighbours."""
    fn()    # compile and warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cache_levels(root: Path = _SYSFS) -> list[tuple[str, int]]:
    """This CPU's data caches, smallest first: (name such as "L2", bytes over all its instances), from
    sysfs; [] where the system does not say (then only the DRAM roof is measured)."""
    cpus = len([p for p in root.glob("cpu[0-9]*") if p.name[3:].isdigit()]) or (os.cpu_count() or 1)
    levels: dict[str, int] = {}
    for index in sorted((root / "cpu0" / "cache").glob("index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = _size((index / "size").read_text().strip())
            shared = _count_cpus((index / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or size <= 0:
            continue
        name = f"L{level}" + ("d" if kind == "Data" else "")
        levels[name] = size * max(1, cpus // max(1, shared))     # the level's instances: private or shared
    return sorted(levels.items(), key=lambda kv: kv[1])


def _size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(text[:-1]) * units[text[-1].upper()] if text and text[-1].upper() in units else int(text)


def _count_cpus(text: str) -> int:
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi) - int(lo) + 1 if hi else 1
    return count


def _stream(n_floats: int, passes: int, repeats: int) -> float:
    """Bytes/s of `passes` copy-and-scale passes over n_floats float32 (each read once, written once) in
    one program, so that the call's dispatch is spread over them and the buffer is reused in place."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((n_floats,), jnp.float32)
    loop = jax.jit(lambda v: jax.lax.fori_loop(0, passes, lambda i, a: a * 1.0001 + 0.5, v))
    return 2 * n_floats * 4 * passes / _best(lambda: loop(x).block_until_ready(), repeats)


def measure(size: int = 2048, dtype: str = "float32", stream_mib: int = 256, repeats: int = 5) -> dict:
    """FLOP/s of a [size,size] @ [size,size] matmul, and bytes/s of a stream at half of each cache
    level's size and at stream_mib MiB (DRAM), on JAX's default device, each the best of `repeats`."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((size, size), dtype)
    b = jnp.ones((size, size), dtype)
    mm = jax.jit(lambda x, y: x @ y)
    t_mm = _best(lambda: mm(a, b).block_until_ready(), repeats)
    device = jax.devices()[0]
    roofs = []
    levels = cache_levels() if device.platform == "cpu" else []    # a GPU's caches are not in sysfs
    # the DRAM stream: stream_mib MiB read and written each pass, and never less than 4 times the largest cache
    n = max(stream_mib * 2**20, 4 * max((size for _, size in levels), default=0)) // 4
    if levels:
        for name, level_bytes in levels:
            working_set = max(MIN_WORKING_SET, level_bytes // 2)    # bytes a pass reads and writes
            roofs.append({"level": name, "fits_bytes": level_bytes,
                          "bytes_per_s": _stream(working_set // 8, max(2, STREAM_BYTES // working_set), repeats)})
    dram_rate = _stream(n, 3, repeats)
    roofs.append({"level": "DRAM", "fits_bytes": None, "bytes_per_s": dram_rate})
    ordered(roofs)
    return {"host": hardware.this_host()["name"], "hardware": hardware.this_host(), "backend": device.platform,
            "device_kind": device.device_kind, "dtype": dtype, "flops_per_s": 2 * size ** 3 / t_mm,
            "bytes_per_s": dram_rate, "roofs": roofs, "matmul_size": size, "stream_bytes": 2 * n * 4,
            "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}


def ordered(roofs: list[dict]) -> list[dict]:
    """Roofs that never fall as the working set shrinks: data that fits in a smaller cache fits in the
    larger ones too, so a level measured slower than the next (a noisy run: L2 112 GB/s below L3's
    148) takes the next one's figure, and keeps what was measured under `measured_bytes_per_s`."""
    for smaller, larger in reversed(list(zip(roofs, roofs[1:]))):
        if smaller["bytes_per_s"] < larger["bytes_per_s"]:
            smaller["measured_bytes_per_s"] = smaller["bytes_per_s"]
            smaller["bytes_per_s"] = larger["bytes_per_s"]
    return roofs


def save(entry: dict) -> Path:
    path = cache_dir() / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = _read(path)
    entries = [e for e in entries if (e.get("host"), e.get("backend")) != (entry["host"], entry["backend"])]
    entries.append(entry)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    tmp.replace(path)
    return path


def _read(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _peaks(e: dict) -> UserPeaks:
    source = f"measured on {e['host']} by advisor calibrate ({e.get('measured_at', '?')}, {e.get('dtype')})"
    roofs = []
    for r in e.get("roofs") or []:
        try:
            roofs.append(Roof(str(r["level"]), None if r.get("fits_bytes") is None else int(r["fits_bytes"]),
                              float(r["bytes_per_s"])))
        except (KeyError, TypeError, ValueError):
            return UserPeaks(float(e["flops_per_s"]), float(e["bytes_per_s"]), source, source)
    return UserPeaks(float(e["flops_per_s"]), float(e["bytes_per_s"]), source, source, tuple(roofs))


def stored(backend: str, host: Optional[dict] = None) -> Optional[UserPeaks]:
    """The calibrated peaks of the machine `host` describes (advisor/hardware.py; default this one) for
    the backend, if `advisor calibrate` stored them there."""
    host = host or hardware.this_host()
    for e in _read(cache_dir() / FILE):
        if (e.get("backend") == backend and e.get("flops_per_s") and e.get("bytes_per_s")
                and hardware.same(dict(e.get("hardware") or {}, name=e.get("host")), host)):
            return _peaks(e)
    return None


def for_trace(backend: str, host_name: str, meta: dict) -> tuple[Optional[UserPeaks], str]:
    """The calibrated peaks for a trace of host `host_name` whose run metadata is `meta`, or None and,
    where a calibration of a host of that name exists but is not used, why."""
    recorded = hardware.recorded(meta)
    name = recorded["name"] if recorded else host_name
    same_name = [e for e in _read(cache_dir() / FILE) if e.get("host") == name and e.get("backend") == backend
                 and e.get("flops_per_s") and e.get("bytes_per_s")]
    if not same_name:
        return None, ""
    e = same_name[0]
    mine = dict(e.get("hardware") or {}, name=e.get("host"))
    if recorded is None:
        return None, (f"advisor calibrate measured a host named {name} ({hardware.describe(mine)}), but this trace "
                      "does not record the machine it was recorded on (runs of advisor run-workload and advisor.trace "
                      "do), so those figures are not used; if it was recorded there, pass --peak-flops "
                      f"{e['flops_per_s'] / 1e9:.0f}G --peak-bandwidth {e['bytes_per_s'] / 1e9:.1f}GB/s "
                      "(the DRAM roof)")
    if not hardware.same(mine, recorded):
        return None, (f"advisor calibrate measured {name} as {hardware.describe(mine)}, and this trace was recorded "
                      f"on {hardware.describe(recorded)}: another machine of that name, so those figures are not used")
    return _peaks(e), ""
