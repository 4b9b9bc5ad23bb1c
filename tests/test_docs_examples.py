"""Every example in README.md and docs/*.md runs, and prints what the page says it prints.

Shell blocks: each `$ advisor ...` line is run in-process (as `advisor` in the repository root) and
its output (stdout, then stderr, then `exit code: N` where the page shows one) compared with the
lines under it, modulo trailing spaces. Python blocks are executed, in a temporary folder where
`fixtures/` points at the committed fixtures. A block that cannot run here says why, on the line
before it: `<!-- example: not run: REASON -->`, or `<!-- example: output not compared: REASON -->`
for one that runs but whose output depends on the machine. Shell lines other than `$ advisor`
must be in a block that says so.

`ADVISOR_DOCS_UPDATE=1 pytest tests/test_docs_examples.py` writes what the commands print back
into the pages. docs/rules.md is generated from the rules' docstrings (`python -m advisor.docs`),
whose examples are fragments of a model, not programs; it is left out.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, cli

PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "rules.md")
MARKER = re.compile(r"<!--\s*example:\s*(not run|output not compared):\s*(.+?)\s*-->")
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
UPDATE = os.environ.get("ADVISOR_DOCS_UPDATE") == "1"


@dataclasses.dataclass
class Block:
    page: Path
    line: int            # 1-based line of the opening fence
    lang: str
    lines: list[str]
    marker: str = ""     # "not run" / "output not compared" / ""
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    out, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.search(prev)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == m.group(1))   # the same fence closes
        out.append(Block(page, i + 1, m.group(2), lines[i + 1:end], *(mark.groups() if mark else ("", ""))))
        i = end + 1
    return out


def shell_blocks():
    for page in PAGES:
        for b in blocks(page):
            if b.lang in ("", "text", "bash", "console", "shell", "sh") \
                    and any(line.startswith("$ ") for line in b.lines):
                yield pytest.param(b, id=b.id)


def python_blocks():
    for page in PAGES:
        for b in blocks(page):
            if b.lang == "python":
                yield pytest.param(b, id=b.id)


def commands(block: Block) -> list[tuple[str, list[str], int]]:
    """(command, expected output lines, index of the command line in the block)."""
    out, current = [], None
    for k, line in enumerate(block.lines):
        if line.startswith("$ "):
            current = (line[2:], [], k)
            out.append(current)
        elif current is not None:
            current[1].append(line)
    return out


def run(command: str) -> list[str]:
    argv = shlex.split(command, comments=True)
    assert argv[0] == "advisor", f"only `$ advisor ...` lines run; mark the block: {command}"
    proc = cli(*argv[1:], cwd=ROOT)
    text = proc.stdout + proc.stderr
    return [line.rstrip() for line in text.splitlines()], proc.returncode


def matches(expected: list[str], got: list[str]) -> bool:
    """The lines are the same; a line `...` in the page stands for any lines the page leaves out."""
    parts, at = [[]], 0
    for line in expected:
        if line == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return expected == got
    if got[:len(parts[0])] != parts[0] or (parts[-1] and got[len(got) - len(parts[-1]):] != parts[-1]):
        return False
    at = len(parts[0])
    for part in parts[1:-1]:      # each middle part, in order
        while at <= len(got) - len(part) and got[at:at + len(part)] != part:
            at += 1
        if at > len(got) - len(part):
            return False
        at += len(part)
    return at <= len(got) - len(parts[-1])


@pytest.mark.parametrize("block", list(shell_blocks()))
def test_shell_example(block):
    if block.marker == "not run":
        pytest.skip(block.reason)
    updated = list(block.lines)
    for command, expected, at in reversed(commands(block)):
        got, code = run(command)
        if any(line.startswith("exit code: ") for line in expected):
            got.append(f"exit code: {code}")
        if block.marker == "output not compared":
            continue
        if UPDATE and "..." not in expected:
            updated[at + 1:at + 1 + len(expected)] = got
            continue
        assert matches([line.rstrip() for line in expected], got), f"{block.id}: `{command}` prints:\n" + "\n".join(got)
    if UPDATE and updated != block.lines:
        # the page as it is now (blocks above may have grown): the block with the same first command
        now = next(b for b in blocks(block.page) if b.lines[:1] == block.lines[:1])
        text = block.page.read_text(encoding="utf-8").splitlines()
        text[now.line:now.line + len(now.lines)] = updated
        block.page.write_text("\n".join(text) + "\n", encoding="utf-8")


@pytest.mark.parametrize("block", list(python_blocks()))
def test_python_example(block, tmp_path, monkeypatch):
    if block.marker == "not run":
        pytest.skip(block.reason)
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    code = compile("\n".join(block.lines) + "\n", f"{block.id}", "exec")
    exec(code, {"__name__": "__docs__"})   # noqa: S102 - the page's own example


def test_every_page_is_read():
    assert any(p.name == "README.md" for p in PAGES) and len(PAGES) >= 5
    assert list(shell_blocks()) and list(python_blocks())


def test_the_commands_a_page_gives_to_type_write_only_under_ignored_folders():
    """Following docs/tensorboard.md in a clone left an untracked runs/ folder: every relative folder
    that a page's commands write (a logdir) or serve is one that .gitignore ignores."""
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    written = re.compile(r"(?:--logdir[ =]|advisor serve )([^\s`'\")]+)")
    found = []
    for page in PAGES:
        for b in blocks(page):
            if b.lang in ("", "bash", "console", "shell", "sh"):
                for line in b.lines:
                    found += [(b.id, m.group(1)) for m in written.finditer(line)
                              if not m.group(1).startswith(("/", "~", "$", "-")) and not m.group(1).isupper()]
    assert any(where.startswith("tensorboard.md") for where, _ in found)
    assert [(where, path) for where, path in found if path.split("/")[0] not in ignored] == []
