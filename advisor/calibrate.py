"""`advisor calibrate`: measure this host's peaks (a matmul and a stream benchmark) for the
efficiency view where no data sheet applies (CPU hosts, unknown devices).

The figures are stored in the user's cache folder (`$ADVISOR_CACHE_DIR`, else
`$XDG_CACHE_HOME/advisor`, else `~/.cache/advisor`), one entry per host and backend, and used by
`analyze` on traces recorded on that host and backend, labelled "measured on <host> by advisor
calibrate". Nothing is written anywhere else.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Optional

from .peaks import UserPeaks

FILE = "calibration.json"


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


def measure(size: int = 2048, dtype: str = "float32", stream_mib: int = 256, repeats: int = 5) -> dict:
    """FLOP/s of a [size,size] @ [size,size] matmul and bytes/s of a copy-and-scale of stream_mib MiB
    (read once, written once), on JAX's default device, best of `repeats`."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((size, size), dtype)
    b = jnp.ones((size, size), dtype)
    mm = jax.jit(lambda x, y: x @ y)
    t_mm = _best(lambda: mm(a, b).block_until_ready(), repeats)
    n = stream_mib * 2**20 // 4
    x = jnp.ones((n,), jnp.float32)
    scale = jax.jit(lambda v: v * 1.0001)
    t_st = _best(lambda: scale(x).block_until_ready(), repeats)
    device = jax.devices()[0]
    return {"host": socket.gethostname(), "backend": device.platform, "device_kind": device.device_kind,
            "dtype": dtype, "flops_per_s": 2 * size ** 3 / t_mm, "bytes_per_s": 2 * n * 4 / t_st,
            "matmul_size": size, "stream_bytes": 2 * n * 4, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}


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


def stored(backend: str, host: Optional[str] = None) -> Optional[UserPeaks]:
    """This host's calibrated peaks for the backend, if `advisor calibrate` stored them."""
    host = host or socket.gethostname()
    for e in _read(cache_dir() / FILE):
        if e.get("host") == host and e.get("backend") == backend and e.get("flops_per_s") and e.get("bytes_per_s"):
            source = f"measured on {host} by advisor calibrate ({e.get('measured_at', '?')}, {e.get('dtype')})"
            return UserPeaks(float(e["flops_per_s"]), float(e["bytes_per_s"]), source, source)
    return None
