"""xprof's converters, run in a child process on a private copy of the trace.

xprof writes cache files (`<module>(<id>).hlo_proto.pb`, `ALL_HOSTS.op_stats_v2.pb`) beside
the `.xplane.pb` it is given, so we hand it a file in a temporary folder, never the user's
folder: a copy of the trace cut down to its metadata plane (see xspace_slice), which is all
the HLO tools read. The copy keeps the file's name: xprof wants its stem to be the host name.

The converters are C++ and abort the process on some malformed inputs (`Check failed:
Malformed shape proto`), so one child per trace runs both of them (`python -m
advisor.load.xprof_tools`); a crash there becomes one line in `XprofResult.error` and the
parent keeps whatever the child wrote before it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from .xspace_slice import metadata_xspace, program_count

HLO_SUFFIX = ".hlo_proto.pb"
_MEMORY_VIEWER = "memory_viewer.json"
_TIMEOUT_S = 600


@dataclasses.dataclass
class XprofResult:
    hlo_protos: dict[str, bytes]       # serialized `xla.HloProto` by `name(program_id)`
    memory_viewer: Optional[dict]      # xprof's memory-viewer JSON of the asked module, if it gave one
    error: Optional[str] = None        # one line: why the converters stopped early
    programs: Optional[int] = None     # programs the trace's metadata plane describes, where countable


def read_xprof(xplane: Path, module_key: Optional[str]) -> XprofResult:
    """HLO protos of every program in the trace, and the memory viewer of `module_key`.

    The temporary folder is removed on every path, the child's crash included.
    """
    folder = Path(tempfile.mkdtemp(prefix="advisor-xprof-"))
    try:
        path = folder / xplane.name
        programs = None
        try:
            sliced = metadata_xspace(xplane)
            path.write_bytes(sliced)
            programs = program_count(sliced)
        except (ValueError, IndexError):
            # Not cleanly sliceable: let xprof read the whole file through a link.
            if not path.exists():
                os.symlink(xplane.resolve(), path)
        error = _run_child(path, module_key or "")
        protos = {f.name[: -len(HLO_SUFFIX)]: f.read_bytes() for f in folder.glob(f"*{HLO_SUFFIX}")}
        viewer = None
        viewer_file = folder / _MEMORY_VIEWER
        if viewer_file.is_file():
            try:
                viewer = json.loads(viewer_file.read_text())
            except ValueError:
                error = error or "xprof's memory viewer wrote JSON that cannot be parsed"
        return XprofResult(protos, viewer if isinstance(viewer, dict) else None, error, programs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_child(path: Path, module_key: str) -> Optional[str]:
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
    try:
        proc = subprocess.run([sys.executable, "-m", __name__, str(path), module_key], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"xprof's converters did not finish within {_TIMEOUT_S} s"
    if proc.returncode == 0:
        return None
    return f"xprof's converters stopped (exit {proc.returncode}): {_reason(proc.stderr)}"


def _reason(stderr: bytes) -> str:
    """The C++ check or Python error that stopped the child, else its last line."""
    lines = [l.strip() for l in stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    for line in lines:
        if "Check failed" in line:
            return line[line.index("Check failed"):][:200]
    return lines[-1][:200] if lines else "no message"


def _child(path: str, module_key: str) -> None:
    from xprof.convert import raw_to_tool_data

    # The `tool_names` pass is what writes the per-module .hlo_proto.pb files.
    raw_to_tool_data.xspace_to_tool_names([path])
    if module_key and (Path(path).parent / f"{module_key}{HLO_SUFFIX}").is_file():
        data, _ = raw_to_tool_data.xspace_to_tool_data([path], "memory_viewer", {"module_name": module_key})
        if data:
            text = data.decode() if isinstance(data, bytes) else data
            (Path(path).parent / _MEMORY_VIEWER).write_text(text)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
