"""Every op read, as columns in blocks: in memory up to a budget, then in a temporary file.

A trace of any size holds more ops than memory should: a 10 GB trace has about 60 million.
The aggregates over them (per-op totals, program executions, device activity per step) are
taken block by block, so only the blocks at hand are in memory. The file is unlinked from the
start (`tempfile.TemporaryFile`): it goes away with the process, whatever ends it.
"""

from __future__ import annotations

import tempfile
from collections import deque
from typing import Iterator, Optional

import numpy as np

# start, end and self time (ns); op key (an index into the accumulator's pairs); place (program
# execution on a device, an index into its places)
COLUMNS = (np.float64, np.float64, np.float64, np.int64, np.int64)
OP_BYTES = sum(np.dtype(t).itemsize for t in COLUMNS)
_BEFORE = [sum(np.dtype(t).itemsize for t in COLUMNS[:k]) for k in range(len(COLUMNS))]   # bytes per op before column k
BLOCK_OPS = 1 << 16                 # ops a line gathers before they become a block
MEMORY_BUDGET = 16 << 20            # bytes of op columns kept in memory; the oldest blocks beyond go to disk


class Block:
    """One line's ops over a stretch of its time, sorted by start."""
    __slots__ = ("device", "line", "n", "first", "last", "data", "offset")

    def __init__(self, columns: tuple, device: str, line: int):
        self.device, self.line, self.n = device, line, len(columns[0])
        self.first, self.last = float(columns[0][0]), float(columns[0][-1])     # earliest and latest start
        self.data: Optional[tuple] = columns          # None once it is on disk, at offset
        self.offset = -1


def _own(column: np.ndarray, dtype) -> np.ndarray:
    """The column as an array of its own: a view would keep the array it was cut from alive."""
    column = np.ascontiguousarray(column, dtype=dtype)
    return column.copy() if column.base is not None else column


class OpStore:
    def __init__(self, budget: Optional[int] = None):
        self.blocks: list[Block] = []
        self.budget = MEMORY_BUDGET if budget is None else budget
        self._file = None
        self._in_memory: deque[Block] = deque()
        self._held = 0

    @property
    def spilled_bytes(self) -> int:
        return sum(b.n for b in self.blocks if b.data is None) * OP_BYTES

    def add(self, columns: tuple, device: str, line: int) -> None:
        """A line's ops (columns in the order of COLUMNS), sorted by start here if they are not."""
        if not len(columns[0]):
            return
        if np.any(columns[0][1:] < columns[0][:-1]):     # blocks are searched by start
            order = np.argsort(columns[0], kind="stable")
            columns = tuple(c[order] for c in columns)
        block = Block(tuple(_own(c, t) for c, t in zip(columns, COLUMNS)), device, line)
        self.blocks.append(block)
        self._in_memory.append(block)
        self._held += block.n * OP_BYTES
        while self._held > self.budget and self._in_memory:
            self._spill(self._in_memory.popleft())

    def _spill(self, block: Block) -> None:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="advisor-ops-")
            self._file.seek(0, 2)
            offset = self._file.tell()
            for column in block.data:
                self._file.write(memoryview(column).cast("B"))
            self._file.flush()          # a full disk shows here, not when the block is read back
        except OSError:         # no room on disk: keep the ops in memory rather than fail
            self.budget = float("inf")
            return
        block.offset, block.data = offset, None
        self._held -= block.n * OP_BYTES

    def read(self, block: Block, window: Optional[tuple[float, float]] = None) -> tuple:
        """A block's columns; within window, its ops that start in it (from disk, only those are read)."""
        if block.data is not None:
            columns = block.data
            if window is not None and (block.first < window[0] or block.last >= window[1]):
                lo, hi = np.searchsorted(columns[0], window, side="left")
                columns = tuple(c[lo:hi] for c in columns)
            return columns
        starts = self._read_column(block, 0, 0, block.n)
        lo, hi = (0, block.n) if window is None else np.searchsorted(starts, window, side="left").tolist()
        return (starts[lo:hi].copy() if hi - lo < block.n else starts,
                *(self._read_column(block, k, lo, hi) for k in range(1, len(COLUMNS))))

    def _read_column(self, block: Block, k: int, lo: int, hi: int) -> np.ndarray:
        column = np.empty(hi - lo, dtype=COLUMNS[k])
        if not len(column):
            return column
        self._file.seek(block.offset + block.n * _BEFORE[k] + lo * column.itemsize)
        self._file.readinto(memoryview(column).cast("B"))
        return column

    def columns(self, window: Optional[tuple[float, float]] = None) -> Iterator[tuple[Block, tuple]]:
        """Each block's columns in the order added: within window, only its ops that start in it."""
        for block in self.blocks:
            if window is not None and (block.last < window[0] or block.first >= window[1]):
                continue
            yield block, self.read(block, window)

    def take_line(self, line: int) -> list[tuple]:
        """The blocks of a line, removed from the store (a line read again as a whole)."""
        mine = [b for b in self.blocks if b.line == line]
        if not mine:
            return []
        out = [self.read(b) for b in mine]
        self.blocks = [b for b in self.blocks if b.line != line]
        for b in mine:
            if b.data is not None:
                self._in_memory.remove(b)
                self._held -= b.n * OP_BYTES
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
