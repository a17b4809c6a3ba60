"""Traces: per benchmark file, how tracing went; per test, the operators its timed region
executes (indexer/trace.py) and the dtypes it ran them on, and, for tests of another device traced on the CPU, what the
repo's own kernels for that device run inside them. The operators each benchmark's trace links
are left in ``ctx.traced_ops`` for the benchmarks rule."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from operator import itemgetter

from indexer.devices import device_of_key, layout_of_key, ops_of_stubs
from indexer.rules.base import LinkContext, Phase, Rule
from indexer.trace import FileTrace, TracedTest, borrowed_dtypes, graph_ops, group_ops, kernels_seen
from schema.model import (
    BenchTestRow,
    CallEdgeRow,
    EdgeKind,
    FunctionRow,
    KernelRow,
    LibraryImplRow,
    NodeKind,
    NodeRow,
    OpCallRow,
    Origin,
    ReachEdgeRow,
    StubImplRow,
    TraceDtypeRow,
    TraceOpRow,
    TraceRow,
)

_REPO = Origin.REPO
_STUB = NodeKind.STUB
_OP = NodeKind.OP
_STUB_CALL = EdgeKind.STUB_CALL
_STUB_NAME = EdgeKind.STUB_NAME


def link_traces(ctx: LinkContext) -> None:
    """The traced benchmarks' rows, their tests numbered, and ``ctx.traced_ops``."""
    origin_of = {gid: ctx.all_files[file_id].origin for gid, file_id, *_ in ctx.func_rows}
    device_kernels = _DeviceKernels(ctx, origin_of, ctx.traces.values())
    ctx.traced_ops = {}
    for b in ctx.benches:
        trace = ctx.traces.get(b.file)
        if trace is not None:
            ctx.traced_ops[b.name] = _link_trace(ctx, b.name, trace, ctx.ops_by_base, ctx.library_ops, device_kernels)
            ctx.out(TraceDtypeRow).extend(dtype_rows(b.name, trace.tests))
    ctx.set_rows(BenchTestRow, numbered_tests(ctx.read(BenchTestRow)))


def dtype_rows(bench: str, tests: Iterable[TracedTest]) -> list[tuple[str, str, str, str, str, str]]:
    """(bench, test, namespace, base, layout, dtype) per test, operator, layout and dtype it ran."""
    tests = list(tests)
    borrowed = borrowed_dtypes(tests)
    rows = set()
    for test in tests:
        for entry in (*test.dtypes, *sorted(borrowed.get(test.name, ()))):
            op, _, dtype = entry.rpartition("|")
            qualified, _, layout = op.partition("@")
            namespace, _, base = qualified.partition("::")
            if base and dtype:
                rows.add((bench, test.name, namespace, base, layout or "dense", dtype))
    return sorted(rows)


def _link_trace(
    ctx: LinkContext,
    bench: str,
    trace: FileTrace,
    ops_by_base: dict[str, list[str]],
    library_ops: dict[str, tuple[str, str]],
    device_kernels: _DeviceKernels,
) -> list[str]:
    """Rows for one benchmark file's trace: the file's status, its tests, the operators each
    test executes (by namespace and base name: any overload), and per-operator bench_ops links.
    ``device_kernels``: the indexed repo's own kernels per device, and what they run; returns the
    operators the benchmark's tests are linked to."""
    ctx.out(TraceRow).append(
        (bench, trace.path, trace.status.value, trace.reason, trace.seconds, trace.max_rss_mb, trace.torch)
    )
    # per test, the operators it runs -> '' when the trace saw them, else why they are taken to run
    per_test = {name: dict.fromkeys(sorted(ops), "") for name, ops in group_ops(trace.tests).items()}
    graph = graph_ops(trace.tests)
    for test in trace.tests:
        ran, family = per_test[test.name], device_of_key(test.device) or "cpu"
        # seen inside others in its small CPU run, where the device's kernel is upstream's
        for parent, child in test.nested:
            if (parent.partition("::")[2], family) not in device_kernels.own:
                ran.setdefault(child, "")
        if family != "cpu":  # traced on the CPU: what the backend's own kernels for its device run
            for child, why in device_kernels.run_by(ran, family).items():
                ran.setdefault(child, why)
    inside = kernels_seen(trace.tests)
    linked: set[str] = set()
    bench_tests, trace_ops = ctx.out(BenchTestRow), ctx.out(TraceOpRow)
    for test in trace.tests:
        bench_tests.append(
            (
                bench,
                test.name,
                test.module,
                test.cls,
                test.tag,
                test.backward,
                test.device,
                test.mode.value,
                inside[test.name],
            )
        )
    for name, ran in sorted(per_test.items()):
        for entry, why in sorted(ran.items()):
            qualified, _, layout = entry.partition("@")
            namespace, _, base = qualified.partition("::")
            inner = entry not in graph.get(name, set())
            trace_ops.append((bench, name, namespace, base, layout or "dense", why, inner))
            linked.update(ops_by_base.get(base, []) if namespace == "aten" else [])
            if namespace != "aten" and qualified in library_ops:
                linked.add(qualified)
    return sorted(linked)


def numbered_tests(rows: list[tuple]) -> list[tuple]:
    """bench_tests rows with their ids, numbered in the order hits report tests (benchmark,
    test name, then module, device, mode, kernels_seen): a query sorts by the ids it reads."""
    order = itemgetter(0, 1, 2, 6, 7, 8, 3, 4, 5)  # rows are (bench, test, module, class, tag, backward, ...)
    return [(i, *row) for i, row in enumerate(sorted(rows, key=order))]


class _DeviceKernels:
    """The indexed repo's own kernels, and the operators a device's kernels run inside them,
    where a CPU trace cannot see: those the repo's own kernel for that device calls (in its
    body or one call level down), and those an upstream implementation was seen to run in a
    small CPU run (``index`` runs ``nonzero``). Measured on torch-xpu-ops' commits: a deeper
    call tree adds more wrong benchmarks than right ones."""

    DEPTH = 2  # the kernel function and the functions it calls

    def __init__(self, ctx: LinkContext, origin_of: dict[int, str], traces: Iterable[FileTrace]) -> None:
        self.ctx, self.origin_of = ctx, origin_of
        self.kernels: dict[tuple[str, str, str], list[int]] = defaultdict(list)  # (op base, family, layout)
        implemented: set[str] = set()  # aten ops by base name, others qualified: a kernel for any key
        for op, key, _, fid in ctx.read(KernelRow):
            if fid is not None and origin_of.get(fid) == _REPO:
                implemented.add(op.split(".")[0])
                if device_of_key(key):
                    self.kernels[(op.split(".")[0], device_of_key(key), layout_of_key(key))].append(fid)
        for namespace, _, op, _, fid, _, _ in ctx.read(LibraryImplRow):
            if fid is not None and origin_of.get(fid) == _REPO:
                implemented.add(op.split(".")[0] if namespace == "aten" else op)
        served = _ops_of_stubs(ctx)
        for stub, arch, _, fid, _, _ in ctx.read(StubImplRow):  # a device's DispatchStub impl: its op's kernel
            if fid is not None and origin_of.get(fid) == _REPO and device_of_key(arch):
                for op, layout in served.get(stub, ()):  # (run by the op's upstream code: not implemented here)
                    self.kernels[(op.split(".")[0], device_of_key(arch), layout)].append(fid)
        self.own = {(base, family) for base, family, _ in self.kernels}  # (op base, device family)
        self.upstream: dict[str, set[str]] = defaultdict(set)  # parent -> children, parents not implemented here
        for trace in traces:
            for test in trace.tests:
                for parent, child in test.nested:
                    namespace, _, base = parent.partition("::")
                    if (base if namespace == "aten" else parent) not in implemented:
                        self.upstream[parent].add(child)
        self._memo: dict[tuple[str, str], dict[str, str]] = {}

    @functools.cached_property
    def callees(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for caller, callee, *_ in self.ctx.read(CallEdgeRow):
            if self.origin_of.get(callee) == _REPO:
                out[caller].append(callee)
        return out

    @functools.cached_property
    def op_calls(self) -> dict[int, list[str]]:
        """function -> the operators it calls, qualified by base name (aten::index)."""
        out: dict[int, list[str]] = defaultdict(list)
        for fid, op, *_ in self.ctx.read(OpCallRow):
            out[fid].append(op if "::" in op else "aten::" + op.split(".")[0])
        return out

    def _runs(self, entry: str, family: str) -> dict[str, str]:
        """Operators run inside the traced operator ``entry`` on ``family`` -> why."""
        found = self._memo.get((entry, family))
        if found is not None:
            return found
        name, _, layout = entry.partition("@")
        namespace, _, base = name.partition("::")
        found = {} if layout else {c: f"inside {name} in a small CPU run" for c in sorted(self.upstream.get(name, ()))}
        seen: set[int] = set()
        frontier = self.kernels.get((base, family, layout or "dense"), []) if namespace == "aten" else []
        for _ in range(self.DEPTH):
            nxt = []
            for fid in frontier:
                if fid not in seen:
                    seen.add(fid)
                    qualname = self.ctx.read(FunctionRow)[fid][2]
                    for op in self.op_calls.get(fid, ()):
                        found.setdefault(op, f"called by {qualname} ({family} kernel of {base})")
                    nxt += self.callees.get(fid, [])
            frontier = nxt
        self._memo[(entry, family)] = found
        return found

    def run_by(self, ran: dict[str, str], family: str) -> dict[str, str]:
        """What running the operators ``ran`` on ``family`` runs inside them (to a fixed point) -> why."""
        out: dict[str, str] = {}
        frontier = list(ran)
        while frontier:
            nxt = []
            for entry in frontier:
                for child, why in self._runs(entry, family).items():
                    if child not in ran and child not in out:
                        out[child] = f"{why}, which is {out[entry]}" if entry in out else why
                        nxt.append(child)
            frontier = nxt
        return out


def _ops_of_stubs(ctx: LinkContext) -> dict[str, set[tuple[str, str]]]:
    """DispatchStub -> (operator, layout) it serves (``ops_of_stubs`` over the link's edges)."""
    named = {nid: key for nid, kind, key, _ in ctx.read(NodeRow) if kind in (_STUB, _OP)}
    kernel_of: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for op, key, _, fid in ctx.read(KernelRow):
        if fid is not None:
            kernel_of[fid].append((op, key))
    by_name, by_call = [], []
    for dst, src, kind, detail in ctx.read(ReachEdgeRow):
        if kind == _STUB_NAME and dst in named and src in named:
            by_name.append((named[dst], named[src], detail))
        elif kind == _STUB_CALL and dst in named:
            by_call += [(named[dst], op, key) for op, key in kernel_of.get(src, ())]
    return ops_of_stubs(by_name, by_call)


RULE = Rule(
    "traces",
    writes=(TraceRow, BenchTestRow, TraceOpRow, TraceDtypeRow),
    reads=(FunctionRow, KernelRow, LibraryImplRow, StubImplRow, NodeRow, ReachEdgeRow, CallEdgeRow, OpCallRow),
    link={Phase.BENCHMARKS: link_traces},
    place=70,
)
