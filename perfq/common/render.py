"""Terminal and markdown rendering helpers shared by every command's renderer."""

from __future__ import annotations

import html
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfq.errors import PerfqError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

GITHUB_COMMENT_BUDGET = 60000  # characters; GitHub rejects comments over 65536


def console(stderr: bool = False) -> Console:
    """A console that never highlights or soft-wraps on its own (rich is loaded here, not by
    commands that print JSON only)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def wide_console() -> Console:
    """The stdout console; into a log or pipe wide enough for full names, unless $COLUMNS says otherwise."""
    con = console()
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        con.width = 220
    return con


_BREAKS = re.compile(r"[^_/.:,;+\-\s]*(?:[_/.:,;+\-]+\s*|\s+|$)")  # a part ends after a separator run


class Name:
    """An identifier (a test, file, operator or function name) for a table cell: when the column is
    narrower than the name, it wraps after a separator (``_ / . : , ; + -`` or a space), never in the
    middle of a word; only a single part wider than the whole column is folded. Plain text, no markup."""

    def __init__(self, text: object, style: str = "") -> None:
        self.text, self.style = plain(text), style

    def parts(self) -> list[str]:
        return [m for m in _BREAKS.findall(self.text) if m]

    def lines(self, width: int) -> list[str]:
        """The name packed into lines of at most ``width`` cells (a longer part alone on its line)."""
        from rich.cells import cell_len

        lines: list[str] = []
        for part in self.parts():
            if lines and cell_len(lines[-1] + part.rstrip()) <= width:
                lines[-1] += part
            else:
                lines.append(part)
        return [line.rstrip() for line in lines] or [""]

    def __rich_measure__(self, console: Console, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.measure import Measurement

        widest = max((cell_len(p.rstrip()) for p in self.parts()), default=0)
        return Measurement(min(widest, options.max_width), cell_len(self.text)).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: Any) -> Any:
        from rich.text import Text

        yield Text("\n".join(self.lines(options.max_width)), style=self.style, overflow="fold")


def folded_table(*columns: tuple[str, str], title: str | None = None) -> Table:
    """A borderless table for 80 columns; columns ``(name, kind)``: ``f`` folds (identifiers, lists),
    ``l``/``r`` are left/right aligned and never wrap (numbers, short words)."""
    from rich.table import Table

    t = Table(box=None, title=title, title_justify="left", pad_edge=False, padding=(0, 0, 0, 1), expand=False,
              header_style="bold")
    for name, kind in columns:
        if kind == "f":
            t.add_column(name, overflow="fold", ratio=1, min_width=8)
        else:
            t.add_column(name, justify="right" if kind == "r" else "left", no_wrap=True)
    return t


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (a document's ``to_json()`` or plain data)."""
    json.dump(finite_json(data), sys.stdout, indent=2, sort_keys=False, default=str, allow_nan=False)
    sys.stdout.write("\n")


def write_output(text: str, out: Path | None) -> None:
    """``text`` to stdout, or to ``out`` (one line on stderr says where); PerfqError when unwritable."""
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PerfqError(f"cannot write {out}: {exc.strerror or exc}") from None
    console(stderr=True).print(f"wrote {out}")


# An ANSI/VT escape sequence (CSI, OSC, or a lone ESC + one character), then any other control character.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# Markdown punctuation that can start emphasis, links, images, tables, strikethrough, headings or quotes mid-line.
_MD_PUNCTUATION = re.compile(r"([\\`*\[\]#!|~>@$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")  # add_M8_cpu stays


def plain(text: object, one_line: bool = True) -> str:
    """An untrusted string (a file, test or benchmark name, a ref, stderr) made inert for a terminal:
    escape sequences and control characters removed; newlines and tabs become spaces (``one_line``)."""
    text = _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", str(text)).replace("\r\n", "\n"))
    return " ".join(text.replace("\t", " ").splitlines()) if one_line else text.replace("\t", " ")


def md_text(text: object) -> str:
    """An untrusted string as inert markdown inline text (a table cell, a list item): one line, no HTML,
    no markdown construct (``|`` ``*`` ``_`` ``[`` ``#`` ``<``... escaped), no control character."""
    return _MD_PUNCTUATION.sub(r"\\\1", html.escape(plain(text), quote=False))


def md_code(text: object) -> str:
    """An untrusted string as an inline code span (identifiers: file, test, operator names): shown
    verbatim, one line, safe in a table cell (pipes escaped) whatever backticks it holds."""
    body = plain(text).replace("|", "\\|")
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


md_escape = md_text  # the former name (table cells)


def html_text(text: object) -> str:
    """An untrusted string as inert HTML text or attribute value (quotes escaped, control characters removed)."""
    return html.escape(plain(text, one_line=False), quote=True)


def fixed(value: float | None, unit: str = "") -> str:
    """A measurement in readable fixed notation, 4 significant digits, thousands grouped, never an
    exponent, no trailing zeros: ``63,130 us``, ``181.2 us``, ``40 us``, ``0.01234 s``; ``n/a`` for None or a
    non-finite value."""
    if value is None or not math.isfinite(value):
        return "n/a"
    digits = 0 if value == 0 else min(max(3 - math.floor(math.log10(abs(value))), 0), 9)
    text = f"{value:,.{digits}f}"
    if "." in text:  # 40.00 -> 40, 14.90 -> 14.9: no precision the value does not have
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}".strip()


def finite_json(data: Any) -> Any:
    """``data`` (plain JSON data) with every NaN or infinite float replaced by None: standard JSON only."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite_json(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite_json(v) for v in data]
    return data


def md_table(header: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """Markdown table lines; ``align`` has one letter per column: ``l`` left, ``r`` right."""
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def details(summary: str, body: Sequence[str]) -> list[str]:
    """A folded markdown block (``<details>``) around ``body`` lines."""
    return [f"<details><summary>{summary}</summary>", "", *body, "", "</details>"]


def fence(text: str, lang: str = "", limit: int = 0) -> str:
    """``text`` in a code fence (at most ``limit`` lines when > 0; inner fences defused)."""
    lines = text.rstrip("\n").splitlines()
    if limit and len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    body = "\n".join(lines).replace("```", "`\u200b``")
    return f"```{lang}\n{body}\n```"


def print_unified_diff(text: str) -> None:
    """A unified diff, coloured on a terminal, plain (never wrapped) otherwise."""
    if not sys.stdout.isatty():
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        return
    from rich.text import Text

    con = console()
    for line in text.rstrip("\n").splitlines():
        style = ("bold" if line.startswith(("+++", "---")) else "green" if line.startswith("+")
                 else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
        con.print(Text(line, style=style), soft_wrap=True)
