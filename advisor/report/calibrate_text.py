"""What `advisor calibrate` prints: the matmul rate, each bandwidth roof, where they are stored."""

from __future__ import annotations

from typing import Callable

from ..hardware import describe
from ..units import size as size_text
from .efficiency_text import rate


def render(entry: dict, path, dtype: str, size: int, echo: Callable[[str], None]) -> None:
    echo(f"{entry['host']} ({describe(entry['hardware'])}; {entry['backend']}, {entry['device_kind']}): "
         f"matmul {rate(entry['flops_per_s'])} ({dtype}, {size}x{size})")
    for r in entry["roofs"]:
        fits = f"ops whose data fits in {size_text(r['fits_bytes'])}" if r["fits_bytes"] else \
            f"any size; measured moving {size_text(entry['stream_bytes'])} a pass"
        raised = (f"; measured {rate(r['measured_bytes_per_s'], 'B/s')}, below the next level's, so taken as "
                  "that: data that fits here fits there too" if r.get("measured_bytes_per_s") else "")
        echo(f"  {r['level']:<5} {rate(r['bytes_per_s'], 'B/s')} ({fits}{raised})")
    echo(f"stored in {path}; analyze uses them for traces whose run records this machine ({entry['host']}, "
         f"{entry['backend']})")
