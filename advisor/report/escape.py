"""Where outside text (names from a trace, file names, config values) becomes output: one function per
target format. Renderers take every string they did not write themselves through the function of
their format; nothing else turns data into markup.

visible(s)     control characters, bidi overrides and undecodable bytes shown as `\\x1b`-style escapes
terminal(s)    a rich Text of visible(s): no markup is parsed from it, no escape reaches the terminal
gh_data(s)     a GitHub workflow command's message (%, CR, LF encoded as GitHub's toolkit does)
gh_property(s) a workflow command's property value (also `:` and `,`)
markdown(s)    one line of GitHub-flavoured Markdown (step summary): every ASCII punctuation escaped
xml(s)         text XML 1.0 allows (JUnit): the characters it forbids shown as escapes
mathtext(s)    a matplotlib label: every `$` escaped, so no mathtext is parsed (it crashes on bad TeX)
html(s)        HTML text or attribute value
"""

from __future__ import annotations

import contextlib
import html as _html
import os
import re
import secrets
import string
import sys

from rich.text import Text

# C0 (newline and tab included: a name is one line), DEL, C1, the bidi controls that reorder what
# a reader sees (Trojan Source), line and paragraph separators, and lone surrogates (bytes a file
# name held that are not UTF-8: os.fsdecode keeps them as U+DC80..U+DCFF)
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _show(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"   # the byte the file name held
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def visible(s) -> str:
    """s as a string with nothing a terminal or a reader would act on or not see."""
    s = s if isinstance(s, str) else str(s)
    return _INVISIBLE.sub(_show, s)


def terminal(s, style: str = "") -> Text:
    """A rich Text: printed as is (`[bold]` stays text), control characters shown as escapes."""
    return Text(visible(s), style=style)


def gh_data(s) -> str:
    """The message of `::error ...::message`: %, CR and LF percent-encoded (actions/toolkit escapeData).
    Other control characters are shown as escapes first, so the line stays one line in the log."""
    s = str(s)
    return _INVISIBLE.sub(lambda m: m.group() if m.group() in "\r\n" else _show(m), s) \
        .replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_property(s) -> str:
    """A property value (`file=`, `title=`): data escaping plus `:` and `,` (actions/toolkit escapeProperty)."""
    return gh_data(s).replace(":", "%3A").replace(",", "%2C")


_MD_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")


def markdown(s) -> str:
    """One line of Markdown text: backslash before every ASCII punctuation character (CommonMark
    allows it before any), so no emphasis, link, HTML, heading, table cell (`|`), autolink, mention
    or emoji code forms; newlines shown as `\\n`."""
    return _MD_PUNCT.sub(r"\\\1", visible(s))


def markdown_code(s) -> str:
    """A code span for a name: backquotes in the name widen the fence; `|` escaped for GFM tables."""
    s = visible(s)
    run = max((len(r) for r in re.findall("`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s.replace('|', chr(92) + '|')}{pad}{fence}"


# XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml(s) -> str:
    """Text that XML 1.0 allows (ElementTree escapes <, & and quotes itself but writes the rest as is)."""
    return _NOT_XML.sub(_show, visible(s))


def mathtext(s) -> str:
    """A matplotlib label shown as written: with every `$` escaped matplotlib finds no math and
    unescapes them (a `$x^$` in a name otherwise raises while the chart is drawn)."""
    return visible(s).replace("$", r"\$")


def html(s) -> str:
    return _html.escape(visible(s))


def sarif_text(s) -> str:
    """A SARIF plain-text message: `[text](n)` there is an embedded link (SARIF 2.1.0 §3.11.6), so
    literal brackets, and the backslashes before them, are backslash-escaped."""
    return re.sub(r"(\\*)([\[\]])", lambda m: m.group(1) * 2 + "\\" + m.group(2), visible(s))


@contextlib.contextmanager
def github_commands_off(stream=None):
    """Under GitHub Actions, what is printed inside the block cannot issue workflow commands: it is
    framed by `::stop-commands::TOKEN` and `::TOKEN::` (GitHub's own way to print untrusted text).
    Elsewhere it does nothing."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        yield
        return
    stream = stream or sys.stdout
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}", file=stream, flush=True)
    try:
        yield
    finally:
        print(f"::{token}::", file=stream, flush=True)
