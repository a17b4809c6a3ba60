"""DispatchStubs and library registrations: stub declarations and their per-device impls
(``REGISTER_DISPATCH``), ``m.impl`` registrations of kernels for operators, and the stubs an
upstream PyTorch declares and calls (out of the index), linked to operators by name."""

from __future__ import annotations

from collections import defaultdict
from typing import TypeVar

from indexer.build_config import BuildMacros
from indexer.facts import FileFacts, LibraryImpl, StubImpl
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule, left_out
from indexer.stub_names import StubNames
from schema.model import EdgeKind, FunctionKind, LibraryImplRow, NodeKind, ReachEdgeRow, StubImplRow, StubRow

_STUB = NodeKind.STUB
_STUB_CALL = EdgeKind.STUB_CALL
_STUB_NAME = EdgeKind.STUB_NAME
_MACRO = FunctionKind.MACRO
_Placed = TypeVar("_Placed", StubImpl, LibraryImpl)
_LAYOUT_WORDS = (("sparse", "Sparse"), ("nested", "Nested"), ("quantized", "Quantized"))
# the macro declaring a stub (as indexer.registrations reads it): an object of a class it
# derives from the stub class template of its header
_STUB_DECLARE = "DECLARE_DISPATCH"
_CALL_OPERATOR = "operator()"
_RUNS = "every call of the stub runs its class's operator()"


def compiled(f: FileFacts, items: list[_Placed], build: BuildMacros | None) -> list[_Placed]:
    """The registrations among ``items`` (of ``f``) on lines the target build compiles (or may):
    a ``REGISTER_DISPATCH`` inside an ``#if defined(__aarch64__)`` branch registers nothing on x86-64."""
    out = left_out(f, build) if items else None
    return items if out is None else [x for x in items if out.at(x.line) is None]


def link_registrations(ctx: LinkContext) -> None:
    """DispatchStub declarations and registrations, and library registrations (``m.impl``),
    file by file (those the target build compiles)."""
    graph, op_node, cpp_linker = ctx.graph, ctx.op_node, ctx.cpp_linker
    stubs, stub_impls, library_impls = ctx.out(StubRow), ctx.out(StubImplRow), ctx.out(LibraryImplRow)
    for file_id, f in enumerate(ctx.files):
        for s in f.stubs:
            stubs.append((s.stub, s.role, file_id, s.line))
        for s in compiled(f, f.stub_impls, ctx.build):
            targets = cpp_linker.registered_targets(s.impl_name, file_id)
            impl = targets[0] if targets else None
            stub_impls.append((s.stub, s.arch, s.impl_name, impl, file_id, s.line))
            for gid in targets:
                graph.edge(gid, graph.node(_STUB, s.stub), EdgeKind.REGISTERED, s.arch)
        for li in compiled(f, f.library_impls, ctx.build):
            op = li.op if li.namespace == "aten" else f"{li.namespace}::{li.op}"
            cands = cpp_linker.library_targets(li.kernel_name, file_id)
            library_impls.append(
                (li.namespace, li.dispatch_key, op, li.kernel_name, cands[0] if cands else None, file_id, li.line)
            )
            for gid in cands:
                for on in cpp_linker.library_ops(li.namespace, op):
                    graph.edge(gid, op_node(on), EdgeKind.LIBRARY_IMPL, li.dispatch_key or "CatchAll")


def link_stubs_by_name(ctx: LinkContext) -> None:
    """Stubs whose callers are not in the index (declared and called by an upstream PyTorch
    the backend is built against): linked to operators by name."""
    graph = ctx.graph
    called = {dst for dst, _, kind, _ in ctx.read(ReachEdgeRow) if kind == _STUB_CALL}
    declared = {s.stub for f in ctx.all_files for s in f.stubs}
    registered_in: dict[str, list[str]] = defaultdict(list)
    for f in ctx.all_files:
        for s in compiled(f, f.stub_impls, ctx.build):
            registered_in[s.stub].append(f.path)
    upstream_stubs = sorted(set(registered_in) - declared)
    ops = ctx.op_by_name.values()
    stub_names = StubNames((o.name, o.base, o.composite) for o in ops) if upstream_stubs else None
    for stub in upstream_stubs:
        node = graph.node(_STUB, stub)
        if node not in called:
            layout = _layout_hint(stub, registered_in[stub])  # a sparse stub names its dense op
            for op in stub_names.ops_named_like(stub) if stub_names else ():
                graph.edge(node, ctx.op_node(op), _STUB_NAME, layout)


def link_stub_machinery(ctx: LinkContext) -> None:
    """Every call of a stub (``add_stub(kCPU, iter)``: a ``stub_call`` edge into the stub) calls
    the stub object's call operator, which its class inherits from the stub class template
    beside the stub-declaring macro (``DispatchStub<fn, T>::operator()``); that operator runs
    the dispatch machinery (choosing and loading the kernel pointer) on every call. A ``call``
    edge from each called stub to those call operators: a change to the machinery reaches the
    functions calling a stub, hence their operators, and the walk's hub rules apply as to any
    call (past a composite step, 400 callers make the operator a hub). An in-place patch keeps
    these edges while the call operator keeps its id (a patch that removes it, or adds a
    second one, leaves them as they were until the next full link)."""
    operators = stub_call_operators(ctx.func_rows)
    if not operators:
        return
    graph = ctx.graph
    called = {dst for dst, _, kind, _ in ctx.read(ReachEdgeRow) if kind == _STUB_CALL}
    # and every declared stub: an in-place patch may add the first call of one
    declared = {graph.node(_STUB, s.stub) for f in ctx.all_files for s in f.stubs if s.role == "declare"}
    for stub in sorted(called | declared):
        for fid in operators:
            graph.edge(fid, stub, EdgeKind.CALL, _RUNS)


def stub_call_operators(func_rows: list[tuple]) -> list[int]:
    """The call operators a stub call runs: those of the classes of the files that define the
    stub-declaring macro (its body derives the stub's class from their template)."""
    files = {file_id for _, file_id, _, name, kind, *_ in func_rows if name == _STUB_DECLARE and kind == _MACRO}
    return sorted(fid for fid, file_id, _, name, *_ in func_rows if file_id in files and name == _CALL_OPERATOR)


def _layout_hint(stub: str, paths: list[str]) -> str:
    """A dispatch-key-like word for the tensors a stub's kernels serve (its name, or the
    folders of the files that register it): Sparse, Nested, Quantized, else Dense."""
    text = stub.lower() + " " + " ".join(paths).lower()
    return next((key for word, key in _LAYOUT_WORDS if word in text), "Dense")


def read_stub_names(ctx: PatchContext) -> None:
    """The stubs declared or registered, as the C++ linker reads them."""
    ctx.stub_names = {r[0] for r in ctx.store.rows("stub_names")}


def registrations_into(ctx: PatchContext) -> None:
    """The DispatchStub impls and library registrations among the new functions of ``ctx.file``:
    their rows' function ids, and their edges from the stubs and operators."""
    linker, mine, node_of = ctx.cpp_linker, set(ctx.fresh_ids[ctx.file]), ctx.graph.node_of
    names = ctx.fresh_names(ctx.file)
    resolved: list[tuple] = []
    for stub, arch, impl, impl_file, line in ctx.store.rows("stub_impls"):
        if impl.split("::")[-1] not in names:
            continue
        targets = linker.registered_targets(impl, impl_file)
        resolved.append((targets[0] if targets else None, stub, arch, impl_file, line))
        ctx.graph.reach += [(f, node_of(_STUB, stub), EdgeKind.REGISTERED, arch) for f in targets if f in mine]
    ctx.set_function_ids(StubImplRow, ("stub", "arch", "file_id", "line"), resolved)
    resolved = []
    for namespace, key, op, kernel, lib_file, line in ctx.store.rows("library_impls"):
        if kernel.split("::")[-1] not in names:
            continue
        cands = linker.library_targets(kernel, lib_file)
        resolved.append((cands[0] if cands else None, lib_file, line, op))
        op_names = linker.library_ops(namespace, op)
        ctx.graph.reach += [
            (f, node_of(NodeKind.OP, o), EdgeKind.LIBRARY_IMPL, key or "CatchAll") for f in cands if f in mine
            for o in op_names
        ]
    ctx.set_function_ids(LibraryImplRow, ("file_id", "line", "op"), resolved)


RULE = Rule(
    "registrations",
    writes=(StubRow, StubImplRow, LibraryImplRow),
    reads=(ReachEdgeRow,),
    link={Phase.NATIVE: link_registrations, Phase.PYTHON: link_stubs_by_name, Phase.REFERENCES: link_stub_machinery},
    patch={PatchPhase.PREPARE: read_stub_names, PatchPhase.INTO: registrations_into},
    place=40,
)
