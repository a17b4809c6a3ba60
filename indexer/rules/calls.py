"""Calls: each call site as written (``calls``), resolved to the functions it reaches
(``call_edges``: C++ through CppCallLinker, Python through the references rule's resolver) or to
the operators it calls through their API (``op_calls``), and the functions registered lambdas
call (``m.impl("quantized::layer_norm", [](...) { ... })``)."""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable

from indexer.build_config import BuildMacros
from indexer.devices import device_of_key, ops_of_stubs
from indexer.facts import Call, FileFacts, LibraryImpl, usings_of
from indexer.link_cpp import LinkedCalls
from indexer.preprocessor import Region
from indexer.registrations import LAMBDA_KERNEL
from indexer.rules.base import (
    LinkContext,
    PatchContext,
    PatchPhase,
    Phase,
    Rule,
    Unpatchable,
    each_once,
    left_out,
)
from schema.model import (
    BenchTestRow,
    CallEdgeRow,
    CallKind,
    CallRow,
    EdgeKind,
    FunctionKind,
    FunctionRow,
    KernelRow,
    Lang,
    OpCallRow,
    ReachEdgeRow,
    StubImplRow,
    TraceOpRow,
)
from schema.patch_store import PatchStore

_MEMBER_OF = CallKind.MEMBER_OF
_MEMBER = CallKind.MEMBER
_REF = CallKind.REF
_BASE = CallKind.BASE
_PYTHON = CallKind.PYTHON
_ALIAS, _CLASS = FunctionKind.ALIAS, FunctionKind.CLASS
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
    blocks = {first + i: fn for i, fn in enumerate(f.functions) if fn.kind == FunctionKind.REGISTRATION}
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


def compiled_calls(f: FileFacts, build: BuildMacros | None) -> tuple[list[Call], list[tuple[Call, Region]]]:
    """The call sites of ``f`` the target build compiles, and those on lines it is known not to
    compile (an ``#if defined(__aarch64__)`` branch on x86-64), each with its region: those call
    nothing. A build-conditional line (a macro the build configuration does not know) keeps its calls."""
    out = left_out(f, build) if f.calls else None
    if out is None:
        return f.calls, []
    kept, dropped = [], []
    for c in f.calls:
        region = out.at(c.line)
        if region is None:
            kept.append(c)
        else:
            dropped.append((c, region))
    return kept, dropped


def _left_out_warning(path: str, dropped: list[tuple[Call, Region]]) -> tuple[str, str, str]:
    """The warnings row that says which call sites of ``path`` the build does not compile."""
    by_region: dict[Region, int] = defaultdict(int)
    for _, region in dropped:
        by_region[region] += 1
    where = "; ".join(f"{n} in lines {r.start}-{r.end} ({r.condition})" for r, n in by_region.items())
    return path, "link", f"{len(dropped)} call site(s) on lines the target build does not compile, not linked: {where}"


def link_cpp_calls(ctx: LinkContext) -> None:
    """The C++ calls (CppCallLinker) the target build compiles, and the functions registered lambdas call."""
    graph, op_node, cpp_linker = ctx.graph, ctx.op_node, ctx.cpp_linker
    calls, call_edges, op_calls = ctx.out(CallRow), ctx.out(CallEdgeRow), ctx.out(OpCallRow)
    for file_id, f in enumerate(ctx.files):
        first = ctx.fid_base[file_id]
        compiled, dropped = compiled_calls(f, ctx.build)
        if dropped:
            ctx.tables.warnings.append(_left_out_warning(f.path, dropped))
        linked = cpp_linker.link_file(
            file_id, range(first, first + len(f.functions)), compiled, usings_of(f), f.functions)
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
            calls.append((caller, c.callee_name, c.qualifier, c.kind, c.line, None))
            if c.kind == _MEMBER_OF:
                continue
            if c.kind == _REF and py_rows[caller - py_first][4] != _ALIAS:
                continue  # named as a value in a body (isinstance, tables of overrides), not called
            target = None if c.kind == _MEMBER or dotted.startswith(".") else resolve_py(dotted)
            if c.kind == _BASE:
                if target is not None:
                    class_subs[target].append(caller)
                continue
            if target is not None and py_rows[target - py_first][4] == _CLASS and c.kind == _PYTHON:
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


_LINKED = ("linked_calls", "linked_call_edges", "linked_op_calls", "linked_reach_edges")  # schema/patch.sql
_CALLER_AT = (0, 0, 0, 1)  # the caller's place in a row of each


def relink_calls(ctx: PatchContext) -> None:
    """The changed files' calls linked again: rows of functions whose linked calls differ
    replace theirs; a function that stays as it was keeps its rows."""
    for file_id, (facts, _) in ctx.changed.items():
        compiled, _ = compiled_calls(facts, ctx.build)
        linked = ctx.cpp_linker.link_file(file_id, ctx.ids[file_id], compiled, usings_of(facts), facts.functions)
        linked = _new_rows(ctx, linked, ctx.extents[file_id])
        ctx.insert(CallRow, linked.calls)
        ctx.insert(CallEdgeRow, linked.call_edges)
        ctx.insert(OpCallRow, linked.op_calls)
        ctx.graph.reach += linked.reach


def _new_rows(ctx: PatchContext, linked: LinkedCalls, extents: dict[int, tuple[int, int]]) -> LinkedCalls:
    """The rows of ``linked`` (a changed file's calls, linked again) the index lacks: those of new
    functions and of functions whose rows differ from the indexed ones, whose indexed rows are
    removed (``extents``: the functions that stay, by id)."""
    new = (linked.calls, linked.call_edges, linked.op_calls, each_once(linked.reach))  # as the index holds them
    old = [ctx.store.rows(name, ids=list(extents)) if extents else [] for name in _LINKED]
    changed = {
        fid
        for n, o, at in zip(new, old, _CALLER_AT, strict=True)
        for fid, _ in _by_caller(n, at).items() ^ _by_caller(o, at).items()
        if fid in extents
    }
    ids = sorted(changed)
    if _runs_inside_device_kernels(ctx.store, ids):
        raise Unpatchable  # what the link inferred those kernels to run is inferred again
    if ids:
        ctx.write(CallRow, "unlink_calls", ids=ids)
        ctx.graph.remove_call_edges(ids)
    kept = [
        [row for row in n if row[at] not in extents or row[at] in changed]
        for n, at in zip(new, _CALLER_AT, strict=True)
    ]
    return LinkedCalls(*kept)


def _by_caller(rows: list[tuple], at: int) -> dict[int, tuple]:
    """``rows`` by their caller (at ``at``), each caller's sorted."""
    out: dict[int, list[tuple]] = {}
    for row in rows:
        out.setdefault(row[at], []).append(row)
    return {fid: tuple(sorted(group)) for fid, group in out.items()}


def _runs_inside_device_kernels(store: PatchStore, changed: list[int]) -> bool:
    """Do functions ``changed`` belong to a device's kernel or DispatchStub impl (are one, or
    called by one) for an operator that traced tests of that device (traced on the CPU) run?
    The link inferred from those kernels' calls what such tests run."""
    if not changed:
        return False
    impls = store.rows("stub_impls_around", ids=changed)
    stubs = sorted({stub for stub, _ in impls})
    named = store.rows("stubs_named_ops", stubs=stubs) if stubs else []
    served = ops_of_stubs(named, store.rows("stubs_called_by_kernels", stubs=stubs) if stubs else [])
    kernels = store.rows("kernels_around", ids=changed)
    kernels += [(arch, op) for stub, arch in impls for op, _ in served.get(stub, ())]
    around = {(device_of_key(key), op.split(".")[0]) for key, op in kernels}
    around = {(family, base) for family, base in around if family not in ("", "cpu")}
    if not around:
        return False
    running = store.rows("devices_running", bases=sorted({base for _, base in around}))
    return any((device_of_key(device), base) in around for device, base in running)


def calls_into(ctx: PatchContext) -> None:
    """The calls from other files into the new functions of ``ctx.file``, resolved as the link
    resolves them."""
    linker, mine = ctx.cpp_linker, set(ctx.fresh_ids[ctx.file])
    call_edges: list[tuple] = []
    linked: set[tuple[int, int]] = set()
    for caller, name, qual, kind, line, n_args, caller_file, usings in ctx.store.rows(
        "calls_named", names=ctx.fresh_names(ctx.file), outside_file=ctx.file
    ):
        call = Call(0, name, qual, kind, line, n_args)
        for callee, edge_kind in linker.function_targets(caller_file, caller, call, tuple(json.loads(usings))):
            for target in [callee, *linker.invoked(callee)]:  # a functor's construction reaches its operator()
                if target in mine and (caller, target) not in linked:
                    linked.add((caller, target))
                    call_edges.append((caller, target, edge_kind, line))
                    virtual = target == callee and edge_kind == CallKind.VIRTUAL
                    ctx.graph.reach.append(linker.reach_edge(target, caller, virtual, line))
    ctx.insert(CallEdgeRow, call_edges)


RULE = Rule(
    "calls",
    writes=(CallRow, CallEdgeRow, OpCallRow),
    reads=(FunctionRow, KernelRow, StubImplRow, ReachEdgeRow, TraceOpRow, BenchTestRow),
    link={Phase.NATIVE: link_cpp_calls, Phase.PYTHON: link_python_calls},
    patch={PatchPhase.RELINK: relink_calls, PatchPhase.INTO: calls_into},
    place=60,
)
