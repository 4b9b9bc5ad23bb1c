"""xprof's converters, run on a private link to the trace.

xprof writes cache files (`<module>(<id>).hlo_proto.pb`, `ALL_HOSTS.op_stats_v2.pb`) beside
the `.xplane.pb` it is given, so we hand it a file in a temporary folder, never the user's
folder: a copy of the trace cut down to its metadata plane (see xspace_slice), which is all
the HLO tools read. The copy keeps the file's name: xprof wants its stem to be the host name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Optional

from .xspace_slice import metadata_xspace

HLO_SUFFIX = ".hlo_proto.pb"


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the C++ INFO logging xprof prints on fd 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class XprofSession:
    """One trace opened in a private folder; `close()` removes the folder."""

    def __init__(self, xplane: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="advisor-xprof-"))
        self.path = self.dir / xplane.name
        try:
            self.path.write_bytes(metadata_xspace(xplane))
        except (ValueError, IndexError):
            # Not cleanly sliceable: let xprof read the whole file through a link.
            os.symlink(xplane.resolve(), self.path)
        self._hlo_ready = False

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "XprofSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def hlo_protos(self) -> dict[str, bytes]:
        """Serialized `xla.HloProto` of every program in the trace, by `name(program_id)`."""
        self._write_hlo_protos()
        return {f.name[: -len(HLO_SUFFIX)]: f.read_bytes() for f in self.dir.glob(f"*{HLO_SUFFIX}")}

    def memory_viewer(self, module_key: str) -> Optional[dict]:
        """xprof's memory-viewer JSON for one program (buffers live at its peak)."""
        from xprof.convert import raw_to_tool_data

        self._write_hlo_protos()
        with _quiet_stderr():
            data, _ = raw_to_tool_data.xspace_to_tool_data(
                [str(self.path)], "memory_viewer", {"module_name": module_key})
        if not data:
            return None
        return json.loads(data)

    def _write_hlo_protos(self) -> None:
        if self._hlo_ready:
            return
        from xprof.convert import raw_to_tool_data

        # The `tool_names` pass is what writes the per-module .hlo_proto.pb files.
        with _quiet_stderr():
            raw_to_tool_data.xspace_to_tool_names([str(self.path)])
        self._hlo_ready = True
