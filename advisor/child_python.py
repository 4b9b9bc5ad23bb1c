"""How advisor starts Python: never with the working folder on the import path.

`python -m MODULE` and `python -c CODE` put the folder they start in first on `sys.path`, before the
standard library and site-packages, so a `json.py` or `platform.py` in the folder where the user ran
advisor (or the clone's own `advisor/`, which has no `rules` or `workloads`) would be imported by the
child instead of the library's. Every Python that advisor starts imports only from the installation:

- its own children (the analysis workers of TensorBoard and `serve`, the timing workers of
  `check --workload`, the host processes of `--hosts`) run `module_command`, a bootstrap that drops
  that first entry before importing anything (what `-P` does on Python 3.11+, on every version, and
  for a `--base-python` of any version);
- the worker processes of `--jobs` are started by multiprocessing's spawn, which runs `python -c` in
  the parent's folder: they start under `safe_path()` (PYTHONSAFEPATH, Python 3.11+);
- xprof's converters run in their own private temporary folder (advisor/load/xprof_tools.py);
- Ray's workers get an empty working_dir of their own (advisor/ray_engine.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Iterator, Optional

# `-c` puts '' (the working folder) first on sys.path; the interpreter's own start-up imports (site,
# encodings) happen before that, so dropping it first thing leaves nothing imported from there.
BOOTSTRAP = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); import runpy; "
             "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def module_command(module: str, *args: str, python: Optional[str] = None) -> list[str]:
    """The command line of `python -m module args...` with the working folder off sys.path."""
    return [python or sys.executable, "-c", BOOTSTRAP, module, *args]


_env_lock = threading.Lock()


@contextlib.contextmanager
def safe_path() -> Iterator[None]:
    """Children started inside the block (by a library that runs `python -c` in this process's
    folder: multiprocessing's spawn and its resource tracker) leave that folder off their sys.path."""
    with _env_lock:
        before = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = before or "1"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PYTHONSAFEPATH", None)
