"""Which instantiations of a function template a change reaches, when the change only wraps
existing statements in ``if constexpr (P)`` or ``if constexpr (!P)`` on a ``bool`` template
parameter ``P``: the instantiations for which the condition holds run the same code; only the
others change, and a source file's template is instantiated by its own call sites. Pure text
analysis: tokens and source rows in, no I/O."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import NamedTuple

from indexer.facts import Function
from indexer.source_text import angle_argument_spans


class ConstexprGuard(NamedTuple):
    """Statements wrapped in ``if constexpr (P)`` (``holds`` True) or ``(!P)`` (``holds`` False)."""

    param: str
    holds: bool

    def text(self) -> str:
        return f"if constexpr ({'' if self.holds else '!'}{self.param})"


class CallSite(NamedTuple):
    """A call of the template whose ``bool`` argument is ``value`` (None: not told by the text)."""

    line: int
    value: bool | None


_BOOLS = {"true": True, "false": False}


def constexpr_guard(old: Sequence[str], new: Sequence[str]) -> ConstexprGuard | None:
    """The guard when ``new`` is ``old`` with statements wrapped in one ``if constexpr`` form:
    every insertion a wrapper's head or its closing brace, each wrapper's body balanced, nothing
    else changed (else None)."""
    if new.count("constexpr") <= old.count("constexpr"):
        return None  # no wrapper added (the diff below is the cost of a 500-file query: 1 s of its 2.5)
    guards: set[ConstexprGuard] = set()
    opened: list[int] = []  # where each open wrapper's body starts in ``new``
    for op, _a0, _a1, b0, b1 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op != "insert":
            return None
        i = b0
        while i < b1:
            head = _guard_at(new, i)
            if head is not None and head[1] <= b1:
                guards.add(head[0])
                i = head[1]
                opened.append(i)
            elif new[i] == "}" and opened and _closes(new, opened[-1], i):
                opened.pop()
                i += 1
            else:
                return None
    return guards.pop() if len(guards) == 1 and not opened else None


def _closes(tokens: Sequence[str], body: int, at: int) -> bool:
    """Whether the ``}`` at ``at`` closes the block whose body starts at ``body``: it is the
    block's matching brace, or one of a run of ``}`` right after it (the diff may take either
    of two adjacent closing braces as the inserted one)."""
    depth = 0
    for i in range(body, at + 1):
        if tokens[i] == "}" and depth == 0:
            return all(t == "}" for t in tokens[i : at + 1])
        depth += {"{": 1, "}": -1}.get(tokens[i], 0)
    return False


def _guard_at(tokens: Sequence[str], i: int) -> tuple[ConstexprGuard, int] | None:
    """``if constexpr ( [!] P ) {`` at ``i``: its guard and the index after its ``{``."""
    if list(tokens[i : i + 3]) != ["if", "constexpr", "("]:
        return None
    negated = i + 3 < len(tokens) and tokens[i + 3] == "!"
    at = i + 3 + negated
    name = tokens[at] if at < len(tokens) else ""
    if list(tokens[at + 1 : at + 3]) != [")", "{"] or not re.fullmatch(r"[A-Za-z_]\w*", name):
        return None
    return ConstexprGuard(tokens[at], not negated), at + 3


def bool_parameter(rows: Sequence[str], func: Function, param: str) -> tuple[int, bool | None] | None:
    """The position of ``bool param`` in the ``template <...>`` head of ``func`` and its default
    value (None: no default); None when the head does not declare it."""
    name_row = next((n for n in range(func.start_line, func.end_line + 1)
                     if re.search(rf"\b{re.escape(func.name)}\s*\(", rows[n - 1])), func.start_line)
    text = "\n".join(rows[max(0, name_row - 16) : name_row])
    at = text.rfind("template")
    params = _angle_args(text, text.find("<", at)) if at >= 0 else None
    for index, p in enumerate(params or []):
        m = re.fullmatch(rf"bool\s+{re.escape(param)}\s*(?:=\s*(\w+))?", p.strip())
        if m:
            return index, _BOOLS.get(m.group(1)) if m.group(1) else None
    return None


def call_sites(rows: Sequence[str], func: Function, index: int, default: bool | None) -> list[CallSite]:
    """Each call of ``func`` in ``rows`` (``name<...>(`` or ``name(``, outside its own head) with
    the value its template argument at ``index`` gives the parameter (the default when fewer, or
    none, are written)."""
    text = "\n".join(rows)
    out: list[CallSite] = []
    for m in re.finditer(rf"\b{re.escape(func.name)}\s*([<(])", text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(1) == "(":
            if not func.start_line <= line <= func.end_line or _opens_body(rows, line, func):
                out.append(CallSite(line, default))
            continue
        args = _angle_args(text, m.end() - 1)
        if args is not None:
            out.append(CallSite(line, _BOOLS.get(args[index].strip()) if index < len(args) else default))
    return out


def _opens_body(rows: Sequence[str], line: int, func: Function) -> bool:
    """Whether ``line`` of ``func`` comes after its body's first ``{`` (a call in its own body)."""
    opening = next((n for n in range(func.start_line, func.end_line + 1) if "{" in rows[n - 1]), func.end_line)
    return line > opening


def _angle_args(text: str, open_at: int) -> list[str] | None:
    """The top-level arguments of the ``<...>`` opened at ``open_at`` (None: not closed)."""
    spans = angle_argument_spans(text, open_at)
    return None if spans is None else [text[start:end] for start, end in spans]
