"""Calls: each call site as written (``calls``), resolved to the functions it reaches
(``call_edges``: C++ through CppCallLinker, Python through the references rule's resolver) or to
the operators it calls through their API (``op_calls``), and the functions registered lambdas
call (``m.impl("quantized::layer_norm", [](...) { ... })``)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

from indexer.facts import FileFacts, LibraryImpl, usings_of
from indexer.registrations import LAMBDA_KERNEL
from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import CallEdgeRow, CallKind, CallRow, EdgeKind, FunctionRow, Lang, OpCallRow

_MEMBER_OF = CallKind.MEMBER_OF
_MEMBER = CallKind.MEMBER
_REF = CallKind.REF
_BASE = CallKind.BASE
_PYTHON = CallKind.PYTHON
_PYTHON_CALL = EdgeKind.PYTHON_CALL
_OP_CALL = EdgeKind.OP_CALL
_PYTHON_FILE = Lang.PYTHON


def lambda_kernels(f: FileFacts, first: int, call_edges: Iterable[tuple]) -> list[tuple[int, LibraryImpl]]:
    """(function, registration) for each function a lambda registered by ``m.impl`` calls
    (``m.impl("quantized::layer_norm", [](...) { return quantized_layer_norm_impl(...); })``):
    the calls of the registration block between that ``m.impl`` and the next one. ``first``:
    the id of the file's first function; ``call_edges``: (caller, callee, kind, line)."""
    lambdas = [li for li in f.library_impls if li.kernel_name == LAMBDA_KERNEL]
    if not lambdas:
        return []
    blocks = {first + i: fn for i, fn in enumerate(f.functions) if fn.kind == "registration"}
    starts = sorted({li.line for li in f.library_impls} | {d.line for d in f.library_defs})
    out = []
    for caller, callee, _, line in call_edges:
        block = blocks.get(caller)
        if block is None or callee in blocks:
            continue
        at = bisect.bisect_right(starts, line) - 1
        if at < 0:
            continue
        out += [(callee, li) for li in lambdas if li.line == starts[at] and block.start_line <= li.line <= line]
    return out


def link_cpp_calls(ctx: LinkContext) -> None:
    """The C++ calls (CppCallLinker), and the functions registered lambdas call."""
    graph, op_node, cpp_linker = ctx.graph, ctx.op_node, ctx.cpp_linker
    calls, call_edges, op_calls = ctx.out(CallRow), ctx.out(CallEdgeRow), ctx.out(OpCallRow)
    for file_id, f in enumerate(ctx.files):
        first = ctx.fid_base[file_id]
        linked = cpp_linker.link_file(file_id, range(first, first + len(f.functions)), f.calls, usings_of(f))
        calls += linked.calls
        call_edges += linked.call_edges
        op_calls += linked.op_calls
        ctx.tables.warnings += [(f.path, "link", hub) for hub in linked.hubs]
        for dst, src, kind, detail in linked.reach:
            graph.edge(dst, src, kind, detail)
        for callee, li in lambda_kernels(f, first, linked.call_edges):
            op = li.op if li.namespace == "aten" else f"{li.namespace}::{li.op}"
            for on in cpp_linker.library_ops(li.namespace, op):
                graph.edge(callee, op_node(on), EdgeKind.LIBRARY_IMPL, li.dispatch_key or "CatchAll")


def link_python_calls(ctx: LinkContext) -> None:
    """The Python calls: to functions (a class called runs its ``__init__``), to operators,
    and base classes (``ctx.class_subs``)."""
    graph, op_node = ctx.graph, ctx.op_node
    calls, call_edges, op_calls = ctx.out(CallRow), ctx.out(CallEdgeRow), ctx.out(OpCallRow)
    py_rows, py_first, py_by_qual = ctx.py_rows, ctx.py_first, ctx.py_by_qual
    resolve_py, ops_of_python = ctx.python.function, ctx.python.ops
    ctx.class_subs = class_subs = defaultdict(list)
    for file_id, f in enumerate(ctx.all_files):
        if f.lang != _PYTHON_FILE:
            continue
        base_gid = ctx.fid_base[file_id]
        for c in f.calls:
            caller = base_gid + c.func_index
            dotted = f"{c.qualifier}.{c.callee_name}" if c.qualifier else c.callee_name
            calls.append((caller, c.callee_name, c.qualifier, c.kind, c.line))
            if c.kind == _MEMBER_OF:
                continue
            if c.kind == _REF and py_rows[caller - py_first][4] != "alias":
                continue  # named as a value in a body (isinstance, tables of overrides), not called
            target = None if c.kind == _MEMBER or dotted.startswith(".") else resolve_py(dotted)
            if c.kind == _BASE:
                if target is not None:
                    class_subs[target].append(caller)
                continue
            if target is not None and py_rows[target - py_first][4] == "class" and c.kind == _PYTHON:
                # calling a class from Python code runs its __init__ (not every method)
                target = py_by_qual.get(f"{py_rows[target - py_first][2]}.__init__")
                if target is None:
                    continue
            if target is not None and target != caller:
                call_edges.append((caller, target, _PYTHON, c.line))
                graph.edge(target, caller, _PYTHON_CALL, f"line {c.line}")
                continue
            for op in ops_of_python(dotted.lstrip("."), c.kind):
                op_calls.append((caller, op, dotted, c.line))
                graph.edge(op_node(op), caller, _OP_CALL, f"{dotted} line {c.line}")


RULE = Rule(
    "calls",
    writes=(CallRow, CallEdgeRow, OpCallRow),
    reads=(FunctionRow,),
    link={Phase.NATIVE: link_cpp_calls, Phase.PYTHON: link_python_calls},
)
