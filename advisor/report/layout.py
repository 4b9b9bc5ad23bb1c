"""How the terminal report is laid out: to the terminal's width on a terminal, as plain lines elsewhere.

On a terminal, rich wraps text at words to the terminal's width, and a table that would not fit leaves
out its optional columns (and says which), then stacks its rows, before it would cut a cell: a number
is never cut, folded or ellipsized.

Anywhere else (a pipe, a file, a CI log) every line of the report is one line: never wrapped, no
trailing spaces, no box drawing, no colour: what grep, diff and a log viewer read.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional, Sequence, TextIO, Union

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

PLAIN_WIDTH = 100_000       # "unwrapped": wider than any line of a report
GAP = 2                     # spaces between two columns
WRAP_MIN = 16               # the narrowest a name column folds to when nothing else makes room
WORD_MAX = 30               # a longer word (a path) may fold

Cell = Union[str, Text]


class _Stripped:
    """A text file that writes each line without the spaces rich pads it with."""

    def __init__(self, out: TextIO):
        self._out = out
        self._tail = ""
        self.encoding = getattr(out, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        lines = (self._tail + text).split("\n")
        self._tail = lines.pop()
        if lines:
            self._out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._tail:      # a print without a newline at its end: written when flushed
            self._out.write(self._tail.rstrip(" "))
            self._tail = ""
        self._out.flush()

    def isatty(self) -> bool:
        return False


def console(file: Optional[TextIO] = None, terminal: Optional[bool] = None, width: Optional[int] = None) -> Console:
    """The console a report is printed on: `file` (stdout by default) as a terminal of the terminal's
    width (or `width`) when it is one (or `terminal` says so), plain lines otherwise."""
    file = sys.stdout if file is None else file
    if terminal is None:
        isatty = getattr(file, "isatty", None)
        terminal = bool(isatty and isatty())
    if terminal:
        return Console(file=file, highlight=False, force_terminal=True, width=width)
    return Console(file=_Stripped(file), highlight=False, width=PLAIN_WIDTH, soft_wrap=True, force_terminal=False,
                   no_color=True)


def plain(con: Console) -> bool:
    """Whether `con` writes plain lines (not a terminal): nothing is wrapped to a width."""
    return not con.is_terminal or con.width >= PLAIN_WIDTH


@dataclasses.dataclass(frozen=True)
class Col:
    header: str
    number: bool = False        # right-aligned, never wrapped or cut
    wrap: bool = False          # text (a name) that may fold on a narrow terminal
    drop: int = 0               # > 0: may be left out on a narrow terminal, the highest first


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def table(con: Console, title: Union[str, Text, None], cols: Sequence[Col], rows: Sequence[Sequence[Cell]]) -> None:
    """A table with a title line, a header and rows, laid out for `con` (see the module docstring)."""
    cells = [[_text(c) for c in row] for row in rows]
    head = title if isinstance(title, Text) or title is None else Text(title)
    if plain(con):
        _plain(con, head, list(cols), cells)
        return
    # names kept whole (wrapped at spaces) if leaving out optional columns makes room; else folded
    for fold in (False, True):
        keep = list(range(len(cols)))
        while _min_width([cols[i] for i in keep], [[r[i] for i in keep] for r in cells], fold) > con.width:
            droppable = [i for i in keep if cols[i].drop]
            if not droppable:
                break
            keep.remove(max(droppable, key=lambda i: (cols[i].drop, i)))
        if _min_width([cols[i] for i in keep], [[r[i] for i in keep] for r in cells], fold) <= con.width:
            break
    else:
        _stacked(con, head, list(cols), cells)
        return
    left_out = [c.header for i, c in enumerate(cols) if i not in keep]
    _fitted(con, head, [cols[i] for i in keep], [[r[i] for i in keep] for r in cells])
    if left_out:
        con.print(Text(f"(left out to fit {con.width} columns: {', '.join(left_out)}; a wider terminal, or the "
                       "report piped or in a file, has them)", style="dim"))


def _widths(cols: Sequence[Col], rows: Sequence[Sequence[Text]]) -> list[int]:
    return [max([len(c.header)] + [r[i].cell_len for r in rows]) for i, c in enumerate(cols)]


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=1)


def _min_width(cols: Sequence[Col], rows: Sequence[Sequence[Text]], fold: bool = False) -> int:
    """The narrowest the table can be with every number whole: headers wrap at spaces, names wrap at
    spaces (fold: are cut down to WRAP_MIN)."""
    total = 0
    for i, c in enumerate(cols):
        values = [r[i].cell_len for r in rows]
        if c.wrap:
            need = min(max(values, default=0), WRAP_MIN) if fold else max(
                [min(_longest_word(r[i].plain), WORD_MAX) for r in rows], default=0)
        else:
            need = max(values, default=0)
        total += max(_longest_word(c.header), need)
    return total + GAP * (len(cols) - 1)


def _plain(con: Console, head: Optional[Text], cols: list[Col], rows: list[list[Text]]) -> None:
    widths = _widths(cols, rows)
    if head is not None:
        con.print(head)
    for line in [[Text(c.header, style="bold") for c in cols]] + rows:
        out = Text()
        for i, (col, cell) in enumerate(zip(cols, line)):
            pad = " " * (widths[i] - cell.cell_len)
            if i:
                out.append(" " * GAP)
            out.append_text(Text(pad) + cell if col.number else cell + Text(pad))
        con.print(out)


def _fitted(con: Console, head: Optional[Text], cols: list[Col], rows: list[list[Text]]) -> None:
    t = Table(title=head, title_justify="left", box=None, pad_edge=False, show_edge=False, padding=(0, GAP // 2),
              header_style="bold")
    for i, col in enumerate(cols):
        if col.number:      # a fixed width: rich never narrows it (the header wraps at spaces inside it)
            t.add_column(col.header, justify="right",
                         width=max([_longest_word(col.header)] + [r[i].cell_len for r in rows]))
        elif col.wrap:
            t.add_column(col.header, overflow="fold")
        else:               # a name kept whole
            t.add_column(col.header, width=max([_longest_word(col.header)] + [r[i].cell_len for r in rows]))
    for row in rows:
        t.add_row(*row)
    con.print(t)


def _stacked(con: Console, head: Optional[Text], cols: list[Col], rows: list[list[Text]]) -> None:
    """Each row on its own lines: the first cell, then one `header  value` line per other column that
    has a value (a fleet's run with no errors has no `errors` line)."""
    if head is not None:
        con.print(head)
    for row in rows:
        con.print(Text.assemble(row[0], style="bold"))
        t = Table.grid(padding=(0, GAP, 0, 0))
        t.add_column(style="dim", no_wrap=True)
        t.add_column(overflow="fold")
        for c, cell in zip(cols[1:], row[1:]):
            if cell.plain.strip():
                t.add_row(Text(c.header), cell)
        con.print(Padding(t, (0, 0, 0, 2)))


def entries(con: Console, cols: Sequence[Col], rows: Sequence[Sequence[Cell]]) -> None:
    """A list whose last column is prose (a rule's summary): a table where it fits whole (and plain
    lines off a terminal); on a narrower terminal each row as a heading line, its other cells joined,
    with the prose beneath it, indented and wrapped at spaces, never cut inside a word."""
    cells = [[_text(c) for c in row] for row in rows]
    if plain(con) or sum(_widths(cols, cells)) + GAP * (len(cols) - 1) <= con.width:
        table(con, None, cols, rows)
        return
    first = max(row[0].cell_len for row in cells)
    for row in cells:
        heading = Text.assemble((row[0].plain.ljust(first), "bold"))
        for cell in row[1:-1]:
            heading.append("  ")
            heading.append_text(cell)
        con.print(heading)
        con.print(Padding(row[-1], (0, 0, 0, 4)))


def pairs(con: Console, rows: Sequence[Sequence[Cell]], title: Optional[Text] = None) -> None:
    """Label / value lines (the summary): the value wraps at words on a terminal, never ellipsized."""
    t = Table(show_header=False, box=None, pad_edge=False, title=title, title_justify="left")
    t.add_column(style="dim", no_wrap=True)
    t.add_column(overflow="fold")
    for label, value in rows:
        t.add_row(_text(label), _text(value))
    con.print(t)


def indented(con: Console, rows: Sequence[tuple[str, Cell]], indent: int = 4, label_width: int = 10) -> None:
    """`    label:    value` lines (a finding's fix, cost, ...): on a terminal the value wraps under itself.
    A label as long as label_width widens the labels' column: a space always follows a label."""
    label_width = max([label_width, *(len(label) + 1 for label, _ in rows)])
    t = Table.grid(padding=0)
    t.add_column(no_wrap=True, width=indent + label_width)
    t.add_column(overflow="fold")
    for label, value in rows:
        t.add_row(Text(" " * indent + label), _text(value))
    con.print(t)
