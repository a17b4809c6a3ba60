"""Calls through names a C++ file defines for itself, which a call site's text does not show:
a type alias of a functor (``using Functor = GatherFunctor<T, V>; Functor f(args);`` calls
GatherFunctor's constructor) and a function-like macro of the file (``LAUNCH(4);`` runs the
calls its body makes)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from indexer.facts import Call
from indexer.source_text import at_line_start, at_word_start
from schema.model import CallKind

# in comment- and string-blanked text
# searched with at_word_start / at_line_start: a leading \b or ^ would make the engine try the
# whole pattern at every offset (18x slower on a kernel file)
_USING = re.compile(r"using\s+(\w+)\s*=\s*(?:typename\s+)?((?:\w+\s*::\s*)*)(\w+)\s*[<;]")
_TYPEDEF = re.compile(r"typedef\s+(?:typename\s+)?((?:\w+\s*::\s*)*)(\w+)\s*(?:<[^;{}]*>)?\s*(\w+)\s*;")
_DEFINE = re.compile(r"#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)")
_BODY_CALL = re.compile(r"((?:\w+\s*::\s*)*)(\w+)\s*(?:<[^;{}()]*>)?\s*\(")
_PASTED = re.compile(r"\w*(?:\s*##\s*\w*)+")  # op##_ : a name made at expansion
_SPACES = re.compile(r"\s+")
_MACRO_DEPTH = 3  # macros whose bodies use macros of the file


def _aliases(code: str, line_of: Callable[[int], int]) -> dict[str, list[tuple[int, str, str]]]:
    """alias -> (line, qualifier, named type) of each declaration, in text order."""
    out: dict[str, list[tuple[int, str, str]]] = {}
    for m in at_word_start(_USING, code):
        out.setdefault(m.group(1), []).append((line_of(m.start()), m.group(2), m.group(3)))
    for m in at_word_start(_TYPEDEF, code):
        out.setdefault(m.group(3), []).append((line_of(m.start()), m.group(1), m.group(2)))
    return out


def _macros(code: str) -> dict[str, list[tuple[str, str]]]:
    """function-like macro -> the (qualifier, name) its body calls."""
    out: dict[str, list[tuple[str, str]]] = {}
    for m in at_line_start(_DEFINE, code):
        params = {p.strip() for p in m.group(2).split(",")}
        body = _PASTED.sub(" ", m.group(3))
        out[m.group(1)] = [
            (_SPACES.sub("", c.group(1)).rstrip(":"), c.group(2))
            for c in _BODY_CALL.finditer(body)
            if c.group(2) not in params and not body[: c.start()].rstrip().endswith((".", "->"))
        ]  # direct calls only: a member call's receiver is unknown here (``.size()``)
    return out


def resolve_local_names(
    code: str, calls: list[Call], owner: list[int], line_of: Callable[[int], int], keywords: Collection[str]
) -> list[Call]:
    """``calls`` with an alias's name replaced by the type it names (the declaration nearest
    above the call, in its function or at file scope), plus the calls of the file's
    function-like macros where a function uses one (``owner``: line -> function index)."""
    aliases = _aliases(code, line_of) if ("using" in code or "typedef" in code) else {}
    macros = _macros(code) if "define" in code else {}
    if not aliases and not macros:
        return calls
    out: list[Call] = []
    for call in calls:
        if call.callee_name in aliases and not call.qualifier and call.kind == CallKind.DIRECT:
            named = _alias_at(aliases[call.callee_name], call, owner)
            if named is not None:
                call = call._replace(qualifier=named[0], callee_name=named[1])
        out.append(call)
        if call.callee_name in macros and call.kind == CallKind.DIRECT:
            out += _expanded(call, macros, keywords)
    return out


def _alias_at(declared: list[tuple[int, str, str]], call: Call, owner: list[int]) -> tuple[str, str] | None:
    """(qualifier, type) of the declaration of an alias that a call on ``call.line`` sees."""
    seen = [
        (line, qual, name)
        for line, qual, name in declared
        if line <= call.line and (owner[line] if line < len(owner) else -1) in (call.func_index, -1)
    ]
    if not seen:
        return None
    _, qual, name = seen[-1]
    return _SPACES.sub("", qual).rstrip(":"), name


def _expanded(call: Call, macros: dict[str, list[tuple[str, str]]], keywords: Collection[str]) -> list[Call]:
    out: list[Call] = []
    seen = {call.callee_name}
    frontier = [call.callee_name]
    for _ in range(_MACRO_DEPTH):
        nxt = []
        for macro in frontier:
            for qual, name in macros.get(macro, ()):
                if name in macros and name not in seen:
                    seen.add(name)
                    nxt.append(name)
                elif name not in keywords and name not in macros:
                    out.append(Call(call.func_index, name, qual, CallKind.DIRECT, call.line))
        frontier = nxt
    return list(dict.fromkeys(out))
