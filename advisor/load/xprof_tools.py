"""xprof's converters, run in a child process on a private copy of the trace.

xprof writes cache files (`<module>(<id>).hlo_proto.pb`, `ALL_HOSTS.op_stats_v2.pb`) beside
the `.xplane.pb` it is given, so we hand it a file in a temporary folder, never the user's
folder: a copy of the trace cut down to its metadata plane (see xspace_slice), which is all
the HLO tools read. The copy keeps the file's name: xprof wants its stem to be the host name.

The HLO itself is read here from that slice (the same bytes xprof's `tool_names` pass writes, one
file per program; skipping that pass saves the child 0.34 s on a 6 MB metadata plane): the child
runs only the memory viewer, on the step program's HLO file the parent writes for it. Where the
trace cannot be sliced, the child runs both passes over a link to the whole file.

The converters are C++ and abort the process on some malformed inputs (`Check failed:
Malformed shape proto`), so one child per trace runs them (`python -c _CHILD`, which
imports xprof and nothing of advisor: importing the advisor package would cost the child more
than the converters take on a small trace); a crash there becomes one line in
`XprofResult.error` and the parent keeps whatever the child wrote before it. The child starts
before the timeline is read and writes the HLO meanwhile; it is told the step program for the
memory viewer once known.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from .. import cleanup
from .xspace_slice import metadata_xspace, program_names, program_protos

HLO_SUFFIX = ".hlo_proto.pb"
_MEMORY_VIEWER = "memory_viewer.json"
_STDERR = "converters.stderr"
_TIMEOUT_S = 600


@dataclasses.dataclass
class XprofResult:
    hlo_protos: dict[str, bytes]       # serialized `xla.HloProto` by `name(program_id)`
    memory_viewer: Optional[dict]      # xprof's memory-viewer JSON of the asked module, if it gave one
    error: Optional[str] = None        # one line: why the converters stopped early
    programs: Optional[int] = None     # programs the trace's metadata plane describes, where countable


def read_xprof(xplane: Path, module_key: Optional[str]) -> XprofResult:
    """HLO protos of every program in the trace, and the memory viewer of `module_key`."""
    return start_xprof(xplane).finish(module_key)


def start_xprof(xplane: Path) -> "PendingXprof":
    """xprof's converters started on the trace now, in their child process, while the caller reads
    the timeline; the module for the memory viewer (the step program, found in the timeline) is
    given to `finish`."""
    return PendingXprof(xplane)


class PendingXprof:
    """The child process and its temporary folder, removed by `finish` or `cancel` on every path,
    the child's crash included."""

    def __init__(self, xplane: Path):
        self.folder = cleanup.mkdtemp("xprof")
        self.programs = None
        self.names: Optional[list[str]] = None     # the programs whose HLO the trace holds, `name(id)`
        self._sliced = b""
        self.proc = None
        self.error: Optional[str] = None
        self._asked = False
        try:
            path = self.folder / xplane.name
            try:
                sliced = metadata_xspace(xplane)
                path.write_bytes(sliced)
                self.names = program_names(sliced)
                self._sliced = sliced
                self.programs = len(self.names)
            except (ValueError, IndexError):
                # Not cleanly sliceable: let xprof read the whole file through a link.
                if not path.exists():
                    os.symlink(xplane.resolve(), path)
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
            # sliced: the parent reads the HLO from the slice and writes the step program's file for the
            # memory viewer itself (xprof's `tool_names` pass, which writes every program's, is skipped)
            names = "0" if self._sliced else "1"
            with open(self.folder / _STDERR, "wb") as err:    # a file: the child never blocks on a full pipe
                # cwd: the private folder, first on the child's sys.path (`-c` puts the cwd there)
                self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), names], env=env,
                                             cwd=self.folder, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                             stderr=err)
        except OSError as err:
            self.error = f"xprof's converters could not start: {err}"
        except BaseException:
            self.cancel()
            raise

    def protos(self, keys: set[str]) -> dict[str, bytes]:
        """The HLO of these programs, read from the trace's metadata plane here (not xprof's files,
        which the child may still be writing)."""
        return program_protos(self._sliced, keys) if self._sliced else {}

    def all_protos(self) -> Optional[dict[str, bytes]]:
        """Every program's HLO, read from the slice now (None where the trace could not be sliced: then
        the child writes them, and `finish` gives them)."""
        return program_protos(self._sliced, set(self.names or ())) if self._sliced else None

    def ask(self, module_key: Optional[str]) -> None:
        """Start the memory viewer of `module_key` (the step program) in the child, without waiting:
        the caller parses the HLO meanwhile."""
        if self._asked:
            return
        self._asked = True
        if self._sliced and module_key and self.error is None:
            data = program_protos(self._sliced, {module_key}).get(module_key)
            if data is not None:
                (self.folder / (module_key + HLO_SUFFIX)).write_bytes(data)
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(((module_key or "") + "\n").encode())
                self.proc.stdin.close()
            except OSError:     # the child already stopped: finish says why
                pass

    def finish(self, module_key: Optional[str] = None) -> XprofResult:
        try:
            self.ask(module_key)
            error = self.error or self._wait()
            folder = self.folder
            protos = self.all_protos()
            if protos is None:
                protos = {f.name[: -len(HLO_SUFFIX)]: f.read_bytes() for f in folder.glob(f"*{HLO_SUFFIX}")}
            viewer = None
            viewer_file = folder / _MEMORY_VIEWER
            if viewer_file.is_file():
                try:
                    viewer = json.loads(viewer_file.read_text())
                except ValueError:
                    error = error or "xprof's memory viewer wrote JSON that cannot be parsed"
            return XprofResult(protos, viewer if isinstance(viewer, dict) else None, error, self.programs)
        finally:
            self.cancel()

    def _wait(self) -> Optional[str]:
        try:
            self.proc.wait(timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"xprof's converters did not finish within {_TIMEOUT_S} s"
        if self.proc.returncode == 0:
            return None
        stderr = (self.folder / _STDERR).read_bytes() if (self.folder / _STDERR).is_file() else b""
        return f"xprof's converters stopped (exit {self.proc.returncode}): {_reason(stderr)}"

    def cancel(self) -> None:
        """Stop the child if it still runs, and remove the folder."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
        cleanup.remove(self.folder)


def _reason(stderr: bytes) -> str:
    """The C++ check or Python error that stopped the child, else its last line."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    for line in lines:
        if "Check failed" in line:
            return line[line.index("Check failed"):][:200]
    return lines[-1][:200] if lines else "no message"


_CHILD = f"""
import sys
from pathlib import Path
from xprof.convert import raw_to_tool_data

path = sys.argv[1]
if sys.argv[2] == "1":      # a trace the parent could not slice: the `tool_names` pass writes the HLO files
    raw_to_tool_data.xspace_to_tool_names([path])
module_key = sys.stdin.readline().strip()      # given once the parent has read the timeline
if module_key and (Path(path).parent / (module_key + {HLO_SUFFIX!r})).is_file():
    data, _ = raw_to_tool_data.xspace_to_tool_data([path], "memory_viewer", {{"module_name": module_key}})
    if data:
        text = data.decode() if isinstance(data, bytes) else data
        (Path(path).parent / {_MEMORY_VIEWER!r}).write_text(text)
"""
