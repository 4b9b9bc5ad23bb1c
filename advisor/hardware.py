"""What identifies the machine a run was recorded on, beyond its name: the CPU model, its cores and
memory. advisor's own runs record it (advisor_run.json's `host`), `advisor calibrate` stores it with
its figures, and a calibration applies to a trace only when both name the same hardware: two machines
named `vm` are not the same machine."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any, Optional

MEMORY_TOLERANCE = 0.02     # the memory the kernel reports moves a little between boots of one machine


def this_host() -> dict[str, Any]:
    """This machine: {"name", "cpu_model", "cores", "memory_bytes"}."""
    import psutil

    return {"name": socket.gethostname(), "cpu_model": cpu_model(), "cores": os.cpu_count(),
            "memory_bytes": int(psutil.virtual_memory().total)}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")) and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def recorded(meta: dict) -> Optional[dict[str, Any]]:
    """The hardware a run's metadata (advisor_run.json) records, or None where it records none."""
    host = meta.get("host") if isinstance(meta, dict) else None
    if not isinstance(host, dict) or not all(k in host for k in ("name", "cpu_model", "cores", "memory_bytes")):
        return None
    return host


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two records name the same machine: its name, CPU model, cores and memory."""
    try:
        memory = abs(float(a["memory_bytes"]) - float(b["memory_bytes"])) <= MEMORY_TOLERANCE * float(b["memory_bytes"])
        return (a["name"], a["cpu_model"], int(a["cores"])) == (b["name"], b["cpu_model"], int(b["cores"])) and memory
    except (KeyError, TypeError, ValueError):
        return False


def describe(h: dict[str, Any]) -> str:
    try:
        return f"{h['cpu_model']}, {h['cores']} cores, {float(h['memory_bytes']) / 2**30:.1f} GiB"
    except (KeyError, TypeError, ValueError):
        return "hardware not recorded"
