"""Python bindings: C++ functions bound to a Python name (an entry of a CPython ``PyMethodDef`` table,
``{"_has_torch_function_unary", THPModule_has_torch_function_unary, METH_O, nullptr}``; a pybind11
``m.def("name", &fn)``) are called by the Python code that calls that name in an extension module
(``torch._C._has_torch_function_unary(x)``, or a name imported or aliased from one, as
torch/overrides.py re-exports it). The table ``py_bindings`` holds each file's bindings as written;
the link resolves each bound function as the C++ linker resolves a name and adds an edge
(``python_binding``) from each Python caller of the name to it, so a change to the C++ function
reaches the Python lines that call it."""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass

from indexer.facts import FileFacts
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule, Unpatchable
from schema.model import CallKind, EdgeKind, FunctionKind, FunctionRow, Lang, column

_PYTHON_FILE = Lang.PYTHON
_CALLED = (CallKind.PYTHON, CallKind.REF)
_ALIAS = FunctionKind.ALIAS


@dataclass(frozen=True, slots=True)
class PyBindingRow:
    """C++ functions a file binds to Python names (entries of CPython ``PyMethodDef`` tables,
    pybind11 ``def``s): Python code calling the name in an extension module calls the function."""

    TABLE: typing.ClassVar[str] = "py_bindings"

    file_id: int
    line: int = column("the line of the table entry or ``def``")
    name: str = column("the Python name: '_has_torch_function_unary'")
    symbol: str = column("the C++ function as written there: 'THPModule_has_torch_function_unary', 'Cls::method'")


def _rows(file_id: int, facts: FileFacts) -> list[tuple]:
    """The rows of one file's bindings (the extractor's facts: line, Python name, C++ function)."""
    return [(file_id, line, name, symbol) for line, name, symbol in facts.constructs.get(PyBindingRow.TABLE, ())]


def declare(ctx: LinkContext) -> None:
    """The bindings of every C++ file (file id: its place among them, as the files rule numbers them)."""
    out = ctx.out(PyBindingRow)
    for file_id, facts in enumerate(ctx.files):
        out += _rows(file_id, facts)


def resolve(ctx: LinkContext) -> None:
    """Each bound Python name -> the C++ function its bindings name (``ctx.bound``); a name bound
    to functions of more than one qualified name (``get`` of every pybind11 type class,
    ``__enter__``) tells nothing of which a call runs, and binds none."""
    linker = ctx.cpp_linker
    bound: defaultdict[str, set[int]] = defaultdict(set)
    for file_id, _, name, symbol in ctx.read(PyBindingRow):
        bound[name].update(linker.bound_targets(symbol, file_id))
    ctx.bound = {
        name: sorted(fids) for name, fids in bound.items() if len({linker.rows[f][1] for f in fids}) == 1
    }


def link_callers(ctx: LinkContext) -> None:
    """An edge from each Python function calling a bound name of an extension module to the
    function bound to it; and from each module-level alias naming one (``has_torch_function_unary
    = _add_docstr(_has_torch_function_unary, ...)``: calling the alias calls it), not from one
    calling one (that runs once, at import)."""
    bound, python, py_rows, py_first = ctx.bound, ctx.python, ctx.py_rows, ctx.py_first
    for file_id, f in enumerate(ctx.all_files):
        if f.lang != _PYTHON_FILE:
            continue
        first = ctx.fid_base[file_id]
        for c in f.calls:
            targets = bound.get(c.callee_name)
            if not targets or c.kind not in _CALLED or not c.qualifier or not python.native_module(c.qualifier):
                continue
            caller = first + c.func_index
            if (c.kind == CallKind.REF) != (py_rows[caller - py_first][4] == _ALIAS):
                continue  # a value named in a body (not called); a call at import, in a module-level alias
            for target in targets:
                ctx.graph.edge(target, caller, EdgeKind.PYTHON_BINDING, f"{c.qualifier}.{c.callee_name} line {c.line}")


def _written(rows: list[tuple]) -> set[tuple[str, str]]:
    return {(name, symbol) for *_, name, symbol in rows}


def check(ctx: PatchContext) -> None:
    """A patch keeps the links of bindings that stay as they were: a changed file whose bindings
    differ, or a new function some binding may name, needs a full link."""
    ids = sorted(ctx.changed)
    new = [row for file_id, (facts, _) in ctx.changed.items() for row in _rows(file_id, facts)]
    if _written(new) != _written(ctx.store.rows("py_bindings_of_files", ids=ids)):
        raise Unpatchable
    fresh = {fn.name for _, fn in ctx.fresh}
    if not fresh:
        return
    symbols = ctx.store.rows("py_bindings_named", names=sorted(fresh))
    qualnames = {fn.qualname for _, fn in ctx.fresh}
    if any(q == s or q.endswith(f"::{s}") for (s,) in symbols for q in qualnames):
        raise Unpatchable


def record(ctx: PatchContext) -> None:
    """The changed files' bindings, in place of the indexed ones (their lines may have moved)."""
    rows = [row for file_id, (facts, _) in ctx.changed.items() for row in _rows(file_id, facts)]
    ctx.replace_file_rows(PyBindingRow, rows)


RULE = Rule(
    "python bindings",
    writes=(PyBindingRow,),
    reads=(FunctionRow,),
    link={Phase.DECLARE: declare, Phase.NATIVE: resolve, Phase.PYTHON: link_callers},
    patch={PatchPhase.PREPARE: check, PatchPhase.RECORD: record},
    place=65,
)
