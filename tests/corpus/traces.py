"""Where the corpus traces are, and a readable copy of one (large ones are stored xz-compressed)."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "corpus"


def materialize(name: str, dest: Path) -> Path:
    """Copy fixtures/corpus/NAME under `dest`, decompressing any `.xplane.pb.xz`; returns the logdir."""
    logdir = Path(dest) / name
    shutil.copytree(FIXTURES / name, logdir)
    for packed in logdir.rglob("*.xplane.pb.xz"):
        packed.with_name(packed.name[:-3]).write_bytes(lzma.decompress(packed.read_bytes()))
        packed.unlink()
    return logdir


if __name__ == "__main__":
    import sys
    import tempfile

    # python tests/corpus/traces.py NAME [DEST]: a readable copy to point `advisor analyze` at
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="corpus-"))
    print(materialize(sys.argv[1], dest))
