"""Changed C++ lines outside any function body, told apart before they fall back to the whole
file: lines without code (comments, blank), ``#include`` lines, and lines of a class's
definition (its fields, its ``template <...>`` head), which belong to the class's methods."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfq.indexer.facts import FileFacts
from perfq.indexer.source_text import LineIndex, blank_strings, strip_c_comments

_INCLUDE = re.compile(r"^\s*#\s*include\b")
_CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?(?::[^{]*)?$")


@dataclass
class LooseLines:
    members: dict[str, list[int]] = field(default_factory=dict)  # method qualname -> lines of its class
    includes: list[int] = field(default_factory=list)
    comments: list[int] = field(default_factory=list)  # no code on the line
    other: list[int] = field(default_factory=list)  # still outside: globals, macros, declarations


def sort_loose(text: str, lines: list[int], facts: FileFacts) -> LooseLines:
    """Where the changed ``lines`` (outside function bodies) of a C++ ``text`` belong."""
    code = blank_strings(strip_c_comments(text))
    index = LineIndex(code)
    rows = code.split("\n")
    classes = _class_spans(code)
    out = LooseLines()
    for line in lines:
        row = rows[line - 1] if 0 < line <= len(rows) else ""
        if not row.strip():
            out.comments.append(line)
            continue
        if _INCLUDE.match(row):
            out.includes.append(line)
            continue
        offset = index.offset_of(line)
        inside = [(start, name) for start, end, name in classes if start <= offset <= end]
        methods = _methods(facts, max(inside)[1]) if inside else []
        for qualname in methods:
            out.members.setdefault(qualname, []).append(line)
        if not methods:
            out.other.append(line)
    return out


def _class_spans(code: str) -> list[tuple[int, int, str]]:
    """(head start, closing brace, name) of every class, struct or union definition: the head
    runs from the end of the statement before it (its ``template <...>`` included)."""
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    statement_start = 0
    for m in re.finditer(r"[{};]", code):
        ch, at = m.group(0), m.start()
        if ch == "{":
            head = code[statement_start:at]
            named = _CLASS_HEAD.search(" ".join(head.split()))
            stack.append((statement_start, named.group(1) if named and "(" not in head else ""))
        elif ch == "}" and stack:
            start, name = stack.pop()
            if name:
                spans.append((start, at, name))
        statement_start = at + 1
    return spans


def _methods(facts: FileFacts, name: str) -> list[str]:
    """Qualified names of the methods of class ``name`` that ``facts`` defines."""
    member = re.compile(rf"(?:^|::){re.escape(name)}(?:<[^:]*>)?::[^:]+$")
    return [f.qualname for f in facts.functions if member.search(f.qualname)]
