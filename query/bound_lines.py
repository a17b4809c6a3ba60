"""Python lines calling a changed C++ function through its binding: line truth for them.

A C++ function bound to a Python name (indexer/rules/py_bindings.py) is run by the Python lines
that call that name. The walk stops at the Python functions holding those calls
(``Reach.bound_callers``); a module-level alias (``has_torch_function_unary = _add_docstr(...)``)
runs at import, so its own callers' lines stand for it. Each calling line is placed in the
traced file as a changed line is (query/py_lines.py) and selects exactly the traced tests that
ran it; a line every line-traced test runs makes the change shared infrastructure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from query.py_lines import UNOBSERVED, LineHit, LinePlacer, LineTruth
from query.reach import Reach
from schema.index_store import IndexStore

TextOf = Callable[[str], bytes | None]

_ALIAS = "alias"
_ALIAS_HOPS = 3  # an alias of an alias of an alias of the bound name, at most
_LINE = re.compile(r"line (\d+)$")


@dataclass(frozen=True)
class BoundCall:
    """A Python line calling a bound C++ function the change reaches."""

    path: str
    line: int
    where: str  # the calling function's qualified name
    name: str  # the bound name as it is called


def bound_calls(store: IndexStore, walk: Reach) -> list[BoundCall]:
    """The Python lines that call the bound functions ``walk`` reached (through aliases)."""
    sites = [(src, detail.rsplit(" line ", 1)[0], detail) for src, v in walk.bound_callers.items() for _, detail in v]
    out: list[BoundCall] = []
    seen: set[int] = set()
    for _ in range(_ALIAS_HOPS + 1):
        info = store.python_functions([src for src, _, _ in sites])
        aliases: dict[int, str] = {}
        for src, name, detail in sites:
            path, qualname, kind = info.get(src, ("", "", ""))
            m = _LINE.search(detail)
            if kind == _ALIAS:
                aliases.setdefault(src, name)
            elif path and m:
                out.append(BoundCall(path, int(m.group(1)), qualname, name))
        seen |= aliases.keys()
        callers = store.python_callers(sorted(aliases))
        sites = [(src, aliases[dst], detail) for dst, src, detail in callers if src not in seen]
        if not sites:
            break
    return sorted(set(out), key=lambda c: (c.path, c.line, c.name))


def bound_truth(store: IndexStore, calls: list[BoundCall], text_of: TextOf) -> LineTruth:
    """Line truth for the calling lines: the tests that ran each (placed in the traced file);
    a file no trace records, or compile-only, runs in no test."""
    if not calls:
        return LineTruth()
    observed = store.line_covered_paths(sorted({c.path for c in calls}))
    total = store.line_traced_tests() if observed else 0
    placed: dict[str, list[tuple[BoundCall, int]]] = {}
    for path in sorted(observed):
        if not path.startswith(UNOBSERVED):
            placed[path] = _placed_in(store, path, [c for c in calls if c.path == path], text_of)
    hits: list[LineHit] = []
    unrun: list[str] = []
    every: list[str] = []
    for path, found in placed.items():
        ran_by_line = store.tests_running_each_line(path, [line for _, line in found])
        for c, line in found:
            ran = ran_by_line.get(line, {})
            if not ran:
                unrun.append(f"{path}:{c.line}")
            elif total and sum(map(len, ran.values())) >= total:
                every.append(f"{path}:{c.line}")
            where = f"{c.where} (calls {c.name})"
            hits += [LineHit(path, where, b, tuple(sorted(tests)), (c.line,)) for b, tests in sorted(ran.items())]
    return LineTruth(tuple(hits), (), frozenset(), tuple(unrun), tuple(every))


def _placed_in(store: IndexStore, path: str, calls: list[BoundCall], text_of: TextOf) -> list[tuple[BoundCall, int]]:
    """The calls of ``path`` with their lines in the traced file (those that can be placed)."""
    if not path.startswith("torch/"):
        return [(c, c.line) for c in calls]
    data = text_of(path)
    if data is None:
        return []
    rows = data.decode("utf-8", "replace").splitlines()
    placer = LinePlacer(rows, store.line_digests(path))
    found = [(c, placer.place(c.line) if 0 < c.line <= len(rows) else None) for c in calls]
    return [(c, line) for c, line in found if line is not None]


def merged(a: LineTruth, b: LineTruth) -> LineTruth:
    """The line truth of the changed Python lines and that of the bound calling lines, together."""
    return LineTruth(a.hits + b.hits, a.readers + b.readers, a.answered | b.answered, a.unrun + b.unrun,
                     a.every_test + b.every_test)
