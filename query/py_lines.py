"""Python line truth: a changed Python line selects exactly the traced tests that ran it.

The index holds, per traced test, the lines it ran of the benchmark tree's shared modules
(harness, configs) and of torch's own Python (``py_line_sets``, from indexer/trace_driver.py).
A changed file whose lines the traces recorded is answered here when every changed line can be
placed: its statement's lines ran in some tests (those are selected) or in none (nothing runs
it). A line at module level of a benchmark-tree module (a shared config) changes the names it
assigns, and selects the benchmark files that read them. torch's files in the index are the
checkout's sources while the traced torch is the installed one: a line is placed only where its
text matches a line of the traced file (at its number, else at the one place its text and its
neighbours' match); a file with a line that cannot be placed is left to the static walk.
"""

from __future__ import annotations

import ast
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.diff import FileChange, Hunk
from query.changes import ChangeSet
from schema.index_store import IndexStore

TextOf = Callable[[str | None], bytes | None]

# torch's Python that runs under torch.compile or in shapes-only machinery: the tracer records
# no test there (it does not compile, and drops fake-tensor machinery), so no line truth
UNOBSERVED = ("torch/_decomp/", "torch/_refs/", "torch/_prims", "torch/_inductor/", "torch/_dynamo/",
               "torch/_subclasses/", "torch/_meta_registrations.py", "torch/_library/", "torch/fx/")
_NEIGHBOURS = 3  # lines each side compared to place a line whose number moved in the traced torch


@dataclass(frozen=True)
class LineHit:
    """Tests of one benchmark that ran changed lines of ``path`` (``lines``: the base's lines)."""

    path: str
    where: str  # the enclosing function's qualname, or the module-level name that changed
    bench: str
    tests: tuple[str, ...]
    lines: tuple[int, ...]


@dataclass(frozen=True)
class NameReaders:
    """Benchmark files that read a changed module-level name of a shared benchmark module."""

    path: str
    name: str
    readers: tuple[str, ...]  # benchmark files


@dataclass(frozen=True)
class LineTruth:
    hits: tuple[LineHit, ...] = ()
    readers: tuple[NameReaders, ...] = ()
    answered: frozenset[str] = frozenset()  # changed files answered by line truth
    unrun: tuple[str, ...] = ()  # 'path:line' changed lines no traced test runs
    every_test: tuple[str, ...] = ()  # 'path:line' changed lines every line-traced test runs

    def warnings(self) -> list[str]:
        """What the answer says about changed lines no traced test runs."""
        if not self.unrun:
            return []
        more = f" and {len(self.unrun) - 3} more" if len(self.unrun) > 3 else ""
        where = ", ".join(self.unrun[:3]) + more
        return [f"no traced test runs {where} (Python line coverage): nothing selected for it"]


@dataclass(frozen=True)
class _Placed:
    """A changed statement of the base: the traced lines that stand for it, and where it is."""

    lines: tuple[int, ...]  # in the traced file
    where: str
    module_names: tuple[str, ...] = ()  # a module-level statement of a benchmark module: the names it sets


def line_truth(
    store: IndexStore, changes: list[FileChange], base_text: TextOf, cs: ChangeSet, sources: dict[str, bytes]
) -> LineTruth:
    """Line truth for the Python files of ``changes`` the traces recorded; ``sources``: the
    benchmark tree's files (path -> text), read for the names a shared module's change sets."""
    code_changed = {cf.path for cf in cs.functions} | {p for p, _, _ in cs.file_level} | set(cs.benchmark_modules)
    candidates = [fc for fc in changes if fc.old_path and fc.new_path and fc.old_path.endswith(".py")
                  and not fc.old_path.startswith(UNOBSERVED) and fc.path in code_changed]
    observed = store.line_covered_paths([fc.old_path for fc in candidates if fc.old_path])
    hits: list[LineHit] = []
    readers: list[NameReaders] = []
    answered: set[str] = set()
    unrun: list[str] = []
    every: list[str] = []
    total = store.line_traced_tests() if observed else 0
    benchmark_module = set(cs.benchmark_modules)
    for fc in candidates:
        path = fc.old_path or ""
        data = base_text(path)
        if path not in observed or data is None:
            continue
        placed = _place(path, data.decode("utf-8", "replace"), fc, path in benchmark_module, store)
        if placed is None:
            continue
        answered.add(fc.path)
        for p in placed:
            if p.module_names:
                readers += [NameReaders(path, name, tuple(sorted(_readers(name, path, sources))))
                            for name in p.module_names]
                continue
            ran = store.tests_running_lines(path, list(p.lines))
            if not ran:
                unrun.append(f"{path}:{p.lines[0]}")
            elif total and sum(map(len, ran.values())) >= total:
                every.append(f"{path}:{p.lines[0]}")
            hits += [LineHit(path, p.where, b, tuple(sorted(tests)), p.lines) for b, tests in sorted(ran.items())]
    return LineTruth(tuple(hits), tuple(readers), frozenset(answered), tuple(unrun), tuple(every))


def without_answered(cs: ChangeSet, truth: LineTruth) -> None:
    """Leave the files line truth answered out of ``cs``'s static starts."""
    done = truth.answered
    cs.functions = [cf for cf in cs.functions if cf.path not in done]
    cs.file_level = [entry for entry in cs.file_level if entry[0] not in done]
    cs.benchmark_modules = [path for path in cs.benchmark_modules if path not in done]


# --------------------------------------------------------------------------- placing lines


def _place(path: str, text: str, fc: FileChange, shared_module: bool, store: IndexStore) -> list[_Placed] | None:
    """The changed statements of the base ``text``, placed in the traced file; None when one of
    them cannot be (a module-level line of torch, a text the traced torch does not have)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    rows = text.splitlines()
    placer = LinePlacer(rows, store.line_digests(path)) if path.startswith("torch/") else None
    out: list[_Placed] = []
    for line in sorted(n for n in _touched(fc, rows) if _code(rows, n)):
        found = _statement(tree, line)
        if found is None:
            continue  # a blank or comment line between statements: nothing runs it
        stmt, where, top = found
        if top:
            if not shared_module:
                return None  # runs at import, in every process: no test tells
            out.append(_Placed((), where, _assigned(stmt)))
            continue
        span = range(_first_line(stmt), _header_end(stmt) + 1)
        lines = [n for n in span if _code(rows, n)]
        if placer is not None:
            mapped = [placer.place(n) for n in lines]
            if not mapped or None in mapped:
                return None
            lines = [m for m in mapped if m is not None]
        out.append(_Placed(tuple(lines), where))
    return out


def _touched(fc: FileChange, rows: list[str]) -> set[int]:
    """The base's lines a change touches: those it removes, and around each pure insertion the
    code lines it runs beside (``_beside``)."""
    out: set[int] = set()
    for hunk in fc.hunks:
        removed = _removed(hunk)
        out |= removed or _beside(hunk, rows)
    return out


def _removed(hunk: Hunk) -> set[int]:
    """The base's lines a hunk removes."""
    out, old = set(), hunk.source_start
    for d in hunk.lines:
        if d.kind == "-":
            out.add(old)
        if d.kind != "+":
            old += 1
    return out


def _beside(hunk: Hunk, rows: list[str]) -> set[int]:
    """The base's code lines a pure insertion runs beside: before and after each run of inserted
    lines, past blanks and comments, except one less indented than the run (the header of the
    block it opens, ``def f():``, ``else:``; the statement after the block it ends): that one runs
    whether or not the block does (a ``def`` line at import)."""
    out: set[int] = set()
    old = hunk.source_start + (hunk.source_length == 0)  # -U0: the insertion follows source_start
    run: list[str] = []
    for d in (*hunk.lines, None):
        if d is not None and d.kind == "+":
            run += [d.text] if _code([d.text], 1) else []
            continue
        if run:
            near = {n for n in (_code_near(rows, old - 1, -1), _code_near(rows, old, 1)) if n}
            depth = min(map(_indent, run))
            out |= {n for n in near if _indent(rows[n - 1]) >= depth} or near
            run = []
        old += 1
    return out


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _code(rows: list[str], n: int) -> bool:
    text = rows[n - 1].strip() if 0 < n <= len(rows) else ""
    return bool(text) and not text.startswith("#")


def _code_near(rows: list[str], n: int, step: int) -> int:
    while 0 < n <= len(rows):
        if _code(rows, n):
            return n
        n += step
    return 0


def _statement(tree: ast.Module, line: int) -> tuple[ast.stmt, str, bool] | None:
    """The innermost statement holding ``line``, the qualname of its function (or the module
    level name), and whether it is a module- or class-level statement (runs at import)."""
    body: list[ast.stmt] = tree.body
    names: list[str] = []
    found: tuple[ast.stmt, str, bool] | None = None
    in_function = False
    while True:
        stmt = next((s for s in body if _first_line(s) <= line <= (s.end_lineno or s.lineno)), None)
        if stmt is None:
            return found
        found = (stmt, ".".join(names) or "<module>", not in_function)
        if _header_end(stmt) >= line or not _children(stmt):
            return found
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function = True
            names.append(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            names.append(stmt.name)
        body = [s for block in _children(stmt) for s in block]


def _children(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(stmt, name, None) for name in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(stmt, "handlers", ())] + [c.body for c in getattr(stmt, "cases", ())]
    return [b for b in blocks if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", ())
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def _header_end(stmt: ast.stmt) -> int:
    """A compound statement's last header line (before its body); a simple one's last line."""
    blocks = _children(stmt)
    return blocks[0][0].lineno - 1 if blocks else (stmt.end_lineno or stmt.lineno)


def _assigned(stmt: ast.stmt) -> tuple[str, ...]:
    """The module-level names a statement sets."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return (stmt.name,)
    targets: Iterable[ast.expr] = ()
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    return tuple(sorted({n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}))


def _digest(text: str) -> int:
    return zlib.crc32(text.strip().encode()) & 0x7FFFFFFF


def traced_line(n: int, rows: list[str], digests: dict[int, int]) -> int | None:
    """The traced file's line for the base's line ``n`` (see ``LinePlacer``)."""
    return LinePlacer(rows, digests).place(n)


class LinePlacer:
    """Places the base's lines in the traced file: the same number when the texts match,
    else the one line of that text whose neighbours match best (None: not found, or a tie).
    Built once per file: the traced lines are looked up by their text's digest."""

    def __init__(self, rows: list[str], digests: dict[int, int]) -> None:
        self.rows, self.digests = rows, digests
        self.lines_of: dict[int, list[int]] = {}
        for m, d in digests.items():
            self.lines_of.setdefault(d, []).append(m)

    def place(self, n: int) -> int | None:
        rows, digests = self.rows, self.digests
        want = _digest(rows[n - 1])
        if digests.get(n) == want:
            return n
        around = [(k, _digest(rows[n + k - 1])) for k in range(-_NEIGHBOURS, _NEIGHBOURS + 1)
                  if k and 0 < n + k <= len(rows)]
        scored = sorted(
            ((sum(digests.get(m + k) == d for k, d in around), m) for m in self.lines_of.get(want, ())),
            reverse=True,
        )
        if not scored or scored[0][0] < 2 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
            return None
        return scored[0][1]


# --------------------------------------------------------------------------- module-level names


def _readers(name: str, module: str, sources: dict[str, bytes]) -> set[str]:
    """Files of the benchmark tree (other than ``module``) whose code uses ``name``: an attribute
    of a module (``configs.NAME``) or a name imported from one."""
    out = set()
    for path, data in sources.items():
        if path == module or not path.endswith(".py") or name.encode() not in data:
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            out.add(path)  # cannot tell: keep it
            continue
        if any((isinstance(n, ast.Attribute) and n.attr == name) or (isinstance(n, ast.alias) and n.name == name)
               for n in ast.walk(tree)):
            out.add(path)
    return out
