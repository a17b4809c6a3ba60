"""Plain-text, markdown and JSON rendering helpers shared by every command's renderer (no rich:
the terminal helpers are in :mod:`perfq.terminal`)."""

from __future__ import annotations

import html
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

GITHUB_COMMENT_BUDGET = 60000  # characters; GitHub rejects comments over 65536


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (a document's ``to_json()`` or plain data)."""
    json.dump(finite_json(data), sys.stdout, indent=2, sort_keys=False, default=str, allow_nan=False)
    sys.stdout.write("\n")


_ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)|\x9b[0-?]*[ -/]*[@-~]")
# control characters, line separators and the bidirectional controls (embeddings, overrides such as
# U+202E, isolates, marks) that make a name read differently from what it is ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
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
