"""Terminal helpers shared by every command's renderer: rich consoles, tables that fold names at
80 columns, coloured diffs (rich is loaded when a console is made, not by commands that print JSON only)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import PerfqError
from common.render import plain

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


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
