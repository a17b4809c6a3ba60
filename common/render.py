"""Terminal and markdown rendering helpers shared by every command's renderer."""

from __future__ import annotations

import json
import os
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
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
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


def md_escape(text: str) -> str:
    """``text`` safe inside a markdown table cell."""
    return text.replace("|", "\\|")


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
