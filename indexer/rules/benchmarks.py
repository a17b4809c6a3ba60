"""Benchmarks: a row per benchmark file, what its tests reference (Python functions, else
operators; a node per benchmark), the operators its trace links (the traces rule's
``ctx.traced_ops``), and those it reaches through Python a few calls deep."""

from __future__ import annotations

import json
from collections import defaultdict

from indexer.benchmarks import BenchmarkFacts
from indexer.rules.base import HUB_METHODS, HUB_SUBCLASSES, LinkContext, Phase, Rule
from schema.model import (
    BenchCallRow,
    BenchmarkTableRow,
    BenchOpRow,
    BenchOpSource,
    CallEdgeRow,
    CallKind,
    EdgeKind,
    FunctionRow,
    NodeKind,
    OpCallRow,
)

_MEMBER = CallKind.MEMBER
_PYTHON = CallKind.PYTHON


def link_benchmarks(ctx: LinkContext) -> None:
    """Each benchmark's references and traced operators, then what its Python reaches; drops
    the Python resolver's memos after (~40 MiB on PyTorch)."""
    for b in ctx.benches:
        _link_benchmark_refs(ctx, b)
        ctx.out(BenchOpRow).extend(
            (b.name, op, BenchOpSource.TRACED, "", "", "trace") for op in ctx.traced_ops.get(b.name, ())
        )
    _python_reached_bench_ops(ctx)
    del ctx.python, ctx.class_methods, ctx.class_subs


def _link_benchmark_refs(ctx: LinkContext, b: BenchmarkFacts) -> None:
    """A benchmark's row, and what its tests reference: Python functions, else operators."""
    g = ctx.graph
    resolve_py, ops_of_python = ctx.python.function, ctx.python.ops
    bench_calls, bench_ops = ctx.out(BenchCallRow), ctx.out(BenchOpRow)
    ctx.out(BenchmarkTableRow).append(
        (b.name, b.file, b.framework, b.tests_json(), json.dumps(b.devices), b.sha256)
    )
    bnode = g.node(NodeKind.BENCHMARK, b.name)
    if b.status != "ok":
        ctx.tables.warnings.append((b.file, "benchmark", b.message))
    seen: set[tuple[str, str]] = set()
    for test, dotted, kind in b.refs:
        target = None if kind == _MEMBER or dotted.startswith(".") else resolve_py(dotted)
        if target is not None:
            if (test, str(target)) not in seen:
                seen.add((test, str(target)))
                bench_calls.append((b.name, target, test))
                g.edge(target, bnode, EdgeKind.BENCH_CALL, f"{test}: {dotted}")
            continue
        for op in ops_of_python(dotted.lstrip("."), kind):
            if (test, op) in seen:
                continue
            seen.add((test, op))
            for device in b.devices:
                bench_ops.append((b.name, op, BenchOpSource.STATIC, test, device, dotted))
            g.edge(ctx.op_node(op), bnode, EdgeKind.BENCH_OP, f"{test}: {dotted}")


_PY_DEPTH = 4  # Python call levels below a benchmark's references that count as its own ops


def _python_reached_bench_ops(ctx: LinkContext) -> None:
    """Add to bench_ops the operators a benchmark calls through Python (its nn modules'
    methods, torch.nn.functional helpers...), a few calls deep: what the benchmark runs
    by its own code, as opposed to everything C++ reaches below."""
    benches, class_methods, class_subs = ctx.benches, ctx.class_methods, ctx.class_subs
    calls: dict[int, list[int]] = defaultdict(list)
    for caller, callee, kind, _ in ctx.read(CallEdgeRow):
        if kind == _PYTHON:
            calls[caller].append(callee)
    bases: dict[int, list[int]] = defaultdict(list)
    for base, subs in class_subs.items():
        if len(subs) <= HUB_SUBCLASSES:  # not through nn.Module and the like
            for sub in subs:
                bases[sub].append(base)
    methods = {cls: ms for cls, ms in class_methods.items() if len(ms) <= HUB_METHODS}
    op_calls: dict[int, set[str]] = defaultdict(set)
    for fid, op, _, _ in ctx.read(OpCallRow):
        op_calls[fid].add(op)
    names = dict((r[0], r[2]) for r in ctx.read(FunctionRow))
    devices = {b.name: b.devices for b in benches}
    direct = {(b, op, test) for b, op, _, test, _, _ in ctx.read(BenchOpRow)}
    added = []
    for bench, target, test in ctx.read(BenchCallRow):
        seen = {target}
        frontier = [target]
        for _ in range(_PY_DEPTH):
            nxt = []
            for fid in frontier:
                for callee in [*calls.get(fid, ()), *methods.get(fid, ()), *bases.get(fid, ())]:
                    if callee not in seen:
                        seen.add(callee)
                        nxt.append(callee)
            frontier = nxt
        for fid in seen:
            for op in sorted(op_calls.get(fid, ())):
                if (bench, op, test) not in direct:
                    direct.add((bench, op, test))
                    via = f"python: {names[fid]}"
                    added += [(bench, op, BenchOpSource.STATIC, test, d, via) for d in devices.get(bench, [""])]
    ctx.out(BenchOpRow).extend(added)


RULE = Rule(
    "benchmarks",
    writes=(BenchmarkTableRow, BenchCallRow, BenchOpRow),
    reads=(FunctionRow, CallEdgeRow, OpCallRow),
    link={Phase.BENCHMARKS: link_benchmarks},
    place=90,
)
