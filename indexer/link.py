"""Linking: per-file facts in, index tables out (a pure function).

Resolves call names to functions, kernel names to definitions, stub registrations,
library registrations, API calls to operators, Python references through imports and
re-exports, and builds the reachability graph that queries walk.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter

from indexer.benchmarks import BenchmarkFacts
from indexer.devices import device_of_key, layout_of_key, ops_of_stubs
from indexer.facts import FileFacts, LibraryImpl, registration_signature, structure_signature, usings_of
from indexer.link_cpp import HEADER_SUFFIXES, ClassHierarchy, CppCallLinker
from indexer.native_yaml import OpFacts
from indexer.py_lines import line_rows
from indexer.registrations import LAMBDA_KERNEL
from indexer.stub_names import StubNames
from indexer.trace import FileTrace, graph_ops, group_ops, kernels_seen
from schema.model import (
    BenchCallRow,
    BenchmarkTableRow,
    BenchOpRow,
    BenchOpSource,
    BenchTestRow,
    CallEdgeRow,
    CallKind,
    CallRow,
    CanarySetRow,
    ClassBaseRow,
    EdgeKind,
    FileRow,
    FileStatus,
    FunctionRow,
    GraphRow,
    IncludeRow,
    KernelRow,
    Lang,
    LibraryImplRow,
    NodeKind,
    NodeRow,
    OpCallRow,
    OpEdgeKind,
    OpEdgeRow,
    OpRow,
    Origin,
    ReachEdgeRow,
    StubImplRow,
    StubRow,
    TraceOpRow,
    TraceRow,
    VirtualMethodRow,
)
from schema.packed_graph import pack_graph

# kinds bound once: the hot loops compare them per call site or row, and an Enum member looked up on
# its class costs ~0.15 µs on Python 3.11 (a second over PyTorch's call sites)
_MEMBER_OF = CallKind.MEMBER_OF
_MEMBER = CallKind.MEMBER
_REF = CallKind.REF
_BASE = CallKind.BASE
_PYTHON = CallKind.PYTHON
_KERNEL = EdgeKind.KERNEL
_PYTHON_CALL = EdgeKind.PYTHON_CALL
_OP_CALL = EdgeKind.OP_CALL
_STUB_CALL = EdgeKind.STUB_CALL
_STUB_NAME = EdgeKind.STUB_NAME
_FUNCTION = NodeKind.FUNCTION
_PYFUNCTION = NodeKind.PYFUNCTION
_OP = NodeKind.OP
_STUB = NodeKind.STUB
_REPO = Origin.REPO
_PYTHON_FILE = Lang.PYTHON

_TORCH_OPS = re.compile(r"torch(?:\._ops)?\.ops\.(\w+)\.(\w+)(?:\.(\w+))?$")  # torch.ops.aten.add.Tensor
# Python prefixes whose attributes are ATen operators (torch.foo, F.foo, torch._C._nn.foo...)
_OP_PREFIXES = {
    "torch": "",
    "torch.Tensor": "",
    "torch._C._VariableFunctions": "",
    "torch._C._nn": "",
    "torch.nn.functional": "",
    "torch._C._TensorBase": "",
    "torch._C.TensorBase": "",
    "torch.special": "special_",
    "torch._C._special": "special_",
    "torch.linalg": "linalg_",
    "torch._C._linalg": "linalg_",
    "torch.fft": "fft_",
    "torch._C._fft": "fft_",
    "torch.nested": "nested_",
    "torch._C._nested": "nested_",
    "torch.sparse": "sparse_",
}
_HUB_METHODS = 60  # a Python class with more methods than this (torch.Tensor) does not roll up
_HUB_SUBCLASSES = 40
# methods that build, copy, convert or print a module, not run it: a benchmark that uses a
# class (runs its forward) is not affected through them
_SETUP_METHODS = frozenset(
    {
        "__init__",
        "__new__",
        "reset_parameters",
        "_reset_parameters",
        "extra_repr",
        "__repr__",
        "__str__",
        "__getstate__",
        "__setstate__",
        "__reduce__",
        "__reduce_ex__",
        "_load_from_state_dict",
        "_save_to_state_dict",
        "state_dict",
        "load_state_dict",
        "from_float",
        "from_reference",
        "to_float",
        "_get_name",
        "__deepcopy__",
    }
)  # a Python base class with more subclasses than this does not propagate


@dataclass
class Tables:
    """Rows per table (keyed by its row type's ``TABLE``: ``rows[ReachEdgeRow.TABLE]``): tuples in the
    field order of the table's row type (schema/model.py ROW_TYPES); tuples, not row instances, at
    the link's hot path."""

    rows: dict[str, list[tuple]] = field(default_factory=lambda: defaultdict(list))
    warnings: list[tuple[str, str, str]] = field(default_factory=list)


class _Graph:
    def __init__(self, tables: Tables) -> None:
        self.t = tables
        self.node_ids: dict[tuple[NodeKind, str], int] = {}
        # (dst, src) -> the device families of its kernel edges (None: an edge of another kind)
        self.seen: dict[tuple[int, int], set[str] | None] = {}

    def node(self, kind: NodeKind, key: str, label: str | None = None) -> int:
        k = (kind, key)
        nid = self.node_ids.get(k)
        if nid is None:
            nid = len(self.node_ids)
            self.node_ids[k] = nid
            self.t.rows[NodeRow.TABLE].append((nid, kind, key, label or key))
        return nid

    def edge(self, dst: int, src: int, kind: EdgeKind, detail: str = "") -> None:
        # a kernel is one edge per device family: ``CPU, CUDA: neg_out`` reaches neg.out from
        # a CUDA kernel as well as from a CPU one (the walk keeps to a change's device)
        if dst == src:
            return
        pair = (dst, src)
        family = device_of_key(detail) if kind == _KERNEL else None
        if pair in self.seen:
            families = self.seen[pair]
            if family is None or families is None or family in families:
                return
            families.add(family)
        else:
            self.seen[pair] = None if family is None else {family}
        self.t.rows[ReachEdgeRow.TABLE].append((dst, src, kind, detail))


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


def _file_rows(t: Tables, files: list[FileFacts], first_file: int, first_function: int) -> tuple[list, list[int]]:
    """Add the files rows (and warnings) of ``files``, numbered from ``first_file``; return their
    function rows, numbered from ``first_function``, and each file's first function id."""
    func_rows: list[tuple] = []
    fid_base: list[int] = []
    for file_id, f in enumerate(files, first_file):
        t.rows[FileRow.TABLE].append(
            (
                file_id,
                f.path,
                f.sha256,
                f.lang,
                f.n_lines,
                f.status,
                f.message or None,
                structure_signature(f),
                registration_signature(f),
                json.dumps(usings_of(f)),
                f.origin,
            )
        )
        if f.status != FileStatus.OK:
            t.warnings.append((f.path, "extract", f.message))
        fid_base.append(first_function + len(func_rows))
        for fn in f.functions:
            gid = first_function + len(func_rows)
            func_rows.append(
                (gid, file_id, fn.qualname, fn.name, fn.kind, fn.start_line, fn.end_line, fn.internal, fn.usr)
            )
    return func_rows, fid_base


def _op_key(namespace: str, name: str) -> str:
    return name if namespace == "aten" else f"{namespace}::{name}"


def link(
    files: list[FileFacts],
    benches: list[BenchmarkFacts],
    ops: list[OpFacts],
    canaries: list[dict],
    traces: dict[str, FileTrace] | None = None,
    derivatives: list[tuple[str, list[str]]] | None = None,
) -> Tables:
    """All index tables from the extracted facts (``traces``: benchmark file -> its traced
    tests, see indexer/trace.py; ``derivatives``: op -> the backward ops its formulas call):
    the C++ files first, then the Python files (see NativeLink)."""
    native = NativeLink([f for f in files if f.lang != _PYTHON_FILE], ops)
    return native.finish([f for f in files if f.lang == _PYTHON_FILE], benches, canaries, traces, derivatives)


class NativeLink:
    """The link in steps, one method per construct. The first step, on constructing, links what
    C++ files and operators make on their own (operators, includes, the class hierarchy, kernels,
    registrations, C++ calls), so that a build can run it while its Python files are still being
    parsed; then ``link_python`` adds the Python files, ``link_benchmarks`` the benchmarks, and
    ``pack`` returns the tables (``finish``: the three). Files are numbered C++ first; node ids
    equal function ids: the C++ functions come first, the Python ones after the nodes the first
    step made (so none moves)."""

    op_by_name: dict[str, OpFacts]
    ops_by_base: defaultdict[str, list[str]]  # op base name -> its overloads
    method_ops: defaultdict[str, list[str]]  # the same, of Tensor methods
    library_ops: dict[str, tuple[str, str]]  # ops defined by TORCH_LIBRARY -> (namespace, schema)
    # made by link_python
    all_files: list[FileFacts]  # C++ then Python, by file id
    py_first: int  # the first Python function's id
    py_rows: list[tuple]  # the Python functions' rows
    py_by_qual: dict[str, int]  # a Python function's id by its qualified name
    python: _PythonNames  # until link_benchmarks, with the two below
    class_methods: defaultdict[int, list[int]]  # a Python class -> its methods
    class_subs: defaultdict[int, list[int]]  # a Python class -> its subclasses

    def __init__(self, files: list[FileFacts], ops: list[OpFacts]) -> None:
        self.files = files
        self.t = Tables()
        self.g = _Graph(self.t)
        self.func_rows, self.fid_base = _file_rows(self.t, files, 0, 0)
        self.t.rows[FunctionRow.TABLE] = self.func_rows
        for gid, _, qualname, *_ in self.func_rows:  # node id == function id
            self.g.node(_FUNCTION, str(gid), qualname)
        self._add_operators(ops)
        include_map = self._link_includes()
        hierarchy = self._add_class_hierarchy()
        cpp_linker = self._cpp_linker(ops, include_map, hierarchy)  # freed after this step (~30 MiB on PyTorch)
        self._link_kernels(ops, cpp_linker)
        self._link_registrations(cpp_linker)
        self._link_cpp_calls(cpp_linker)

    def _op_node(self, name: str) -> int:
        """The node of operator ``name`` (made on first use)."""
        return self.g.node(_OP, name)

    def _add_operators(self, ops: list[OpFacts]) -> None:
        """The operators: native_functions.yaml's, and those TORCH_LIBRARY blocks define (rows and nodes)."""
        t = self.t
        self.op_by_name = {o.name: o for o in ops}
        self.ops_by_base = defaultdict(list)
        self.method_ops = defaultdict(list)
        for o in ops:
            self.ops_by_base[o.base].append(o.name)
            if "method" in o.variants:
                self.method_ops[o.base].append(o.name)
        self.library_ops = library_ops = {}
        for f in self.files:
            for d in f.library_defs:
                name = d.schema.split("(")[0].split("::")[-1].strip()
                library_ops.setdefault(_op_key(d.namespace, name), (d.namespace, d.schema))
        for key, (namespace, schema) in sorted(library_ops.items()):
            if key not in self.op_by_name:
                base, _, overload = key.split("::")[-1].partition(".")
                t.rows[OpRow.TABLE].append((key, base, overload, namespace, schema, False, None, "function", "", None))
        for o in ops:
            t.rows[OpRow.TABLE].append(
                (
                    o.name,
                    o.base,
                    o.overload,
                    "aten",
                    o.schema,
                    o.structured,
                    o.structured_delegate,
                    o.variants,
                    o.tags,
                    o.composite,
                )
            )
            self.g.node(_OP, o.name)

    def _link_includes(self) -> dict[int, list[int]]:
        """The includes, resolved to indexed files by path suffix (ATen/native/cpu/Loops.h);
        returns file -> the indexed files it includes."""
        files, t = self.files, self.t
        by_suffix: dict[str, list[int]] = defaultdict(list)
        for file_id, f in enumerate(files):
            parts = f.path.split("/")
            for i in range(len(parts)):
                by_suffix["/".join(parts[i:])].append(file_id)
        include_map: dict[int, list[int]] = defaultdict(list)
        for file_id, f in enumerate(files):
            if f.lang != _PYTHON_FILE:
                for target in f.includes:
                    if not target.startswith("using:"):
                        found = by_suffix.get(target, [])
                        t.rows[IncludeRow.TABLE].append((file_id, target, found[0] if len(found) == 1 else None))
                        if len(found) == 1:
                            include_map[file_id].append(found[0])
        return include_map

    def _add_class_hierarchy(self) -> ClassHierarchy:
        """The class hierarchy (where virtual calls dispatch): its rows, and the hierarchy."""
        files, t = self.files, self.t
        for file_id, f in enumerate(files):
            for c in f.classes:
                t.rows[ClassBaseRow.TABLE] += [(file_id, c.qualname, base, c.line) for base in c.bases]
                t.rows[VirtualMethodRow.TABLE] += [(file_id, c.qualname, name, c.line) for name in c.virtuals]
        return ClassHierarchy(
            (file_id, c.qualname, c.bases, c.virtuals) for file_id, f in enumerate(files) for c in f.classes
        )

    def _cpp_linker(
        self, ops: list[OpFacts], include_map: dict[int, list[int]], hierarchy: ClassHierarchy
    ) -> CppCallLinker:
        """The one set of C++ name-resolution rules (shared with the incremental patch)."""
        files = self.files
        stub_names = {s.stub for f in files for s in [*f.stubs, *f.stub_impls]}
        return CppCallLinker(
            (
                (*row[:5], row[7], True, files[row[1]].path.endswith(HEADER_SUFFIXES), row[8])
                for row in self.func_rows
            ),
            ((o.name, o.base, o.overload, o.variants) for o in ops),
            stub_names,
            self.g.node,
            {file_id: f.path for file_id, f in enumerate(files)},
            lambda: include_map,
            hierarchy,
        )

    def _link_kernels(self, ops: list[OpFacts], cpp_linker: CppCallLinker) -> None:
        """Dispatch kernel names -> definitions (structured impls by their name, meta functions),
        and the edges between operators (structured delegates, autogenerated ops)."""
        t, g, op_node = self.t, self.g, self._op_node
        meta_by_name: dict[str, list[int]] = defaultdict(list)
        for gid, _, _, name, kind, *_ in self.func_rows:
            if kind == "structured_meta":
                meta_by_name[name].append(gid)
        for o in ops:
            for key, kernel in o.kernels:
                targets = cpp_linker.kernel_targets(kernel)
                t.rows[KernelRow.TABLE].append((o.name, key, kernel, targets[0] if targets else None))
                for gid in targets:
                    g.edge(gid, op_node(o.name), _KERNEL, key)
            for gid in meta_by_name.get(o.base, []) + meta_by_name.get(f"{o.base}_{o.overload}", []):
                g.edge(gid, op_node(o.name), EdgeKind.META, "TORCH_META_FUNC")
            if o.structured_delegate:
                t.rows[OpEdgeRow.TABLE].append((o.structured_delegate, o.name, OpEdgeKind.STRUCTURED_DELEGATE))
                g.edge(op_node(o.structured_delegate), op_node(o.name), EdgeKind.STRUCTURED_DELEGATE)
            for a in o.autogen:
                t.rows[OpEdgeRow.TABLE].append((o.name, a, OpEdgeKind.AUTOGEN))
                g.edge(op_node(o.name), op_node(a), EdgeKind.AUTOGEN)

    def _link_registrations(self, cpp_linker: CppCallLinker) -> None:
        """DispatchStub declarations and registrations, and library registrations (``m.impl``),
        file by file."""
        t, g, op_node = self.t, self.g, self._op_node
        for file_id, f in enumerate(self.files):
            for s in f.stubs:
                t.rows[StubRow.TABLE].append((s.stub, s.role, file_id, s.line))
            for s in f.stub_impls:
                targets = cpp_linker.registered_targets(s.impl_name, file_id)
                impl = targets[0] if targets else None
                t.rows[StubImplRow.TABLE].append((s.stub, s.arch, s.impl_name, impl, file_id, s.line))
                for gid in targets:
                    g.edge(gid, g.node(_STUB, s.stub), EdgeKind.REGISTERED, s.arch)
            for li in f.library_impls:
                op = li.op if li.namespace == "aten" else f"{li.namespace}::{li.op}"
                cands = cpp_linker.library_targets(li.kernel_name, file_id)
                t.rows[LibraryImplRow.TABLE].append(
                    (li.namespace, li.dispatch_key, op, li.kernel_name, cands[0] if cands else None, file_id, li.line)
                )
                for gid in cands:
                    for on in cpp_linker.library_ops(li.namespace, op):
                        g.edge(gid, op_node(on), EdgeKind.LIBRARY_IMPL, li.dispatch_key or "CatchAll")

    def _link_cpp_calls(self, cpp_linker: CppCallLinker) -> None:
        """The C++ calls (CppCallLinker), and the functions registered lambdas call."""
        t, g, op_node = self.t, self.g, self._op_node
        for file_id, f in enumerate(self.files):
            first = self.fid_base[file_id]
            linked = cpp_linker.link_file(file_id, range(first, first + len(f.functions)), f.calls, usings_of(f))
            t.rows[CallRow.TABLE] += linked.calls
            t.rows[CallEdgeRow.TABLE] += linked.call_edges
            t.rows[OpCallRow.TABLE] += linked.op_calls
            t.warnings += [(f.path, "link", hub) for hub in linked.hubs]
            for dst, src, kind, detail in linked.reach:
                g.edge(dst, src, kind, detail)
            for callee, li in lambda_kernels(f, first, linked.call_edges):
                op = li.op if li.namespace == "aten" else f"{li.namespace}::{li.op}"
                for on in cpp_linker.library_ops(li.namespace, op):
                    g.edge(callee, op_node(on), EdgeKind.LIBRARY_IMPL, li.dispatch_key or "CatchAll")

    # tables whose rows so far the later steps keep as they are, in place, and only append to
    FINAL_HEADS = tuple(
        row_type.TABLE
        for row_type in (FileRow, FunctionRow, CallRow, CallEdgeRow, OpCallRow, IncludeRow, NodeRow, ReachEdgeRow)
    )

    def heads(self) -> dict[str, list[tuple]]:
        """The rows of the FINAL_HEADS tables so far: the first rows of what ``pack`` returns."""
        return {table: self.t.rows[table] for table in self.FINAL_HEADS}

    def finish(
        self,
        python_files: list[FileFacts],
        benches: list[BenchmarkFacts],
        canaries: list[dict],
        traces: dict[str, FileTrace] | None = None,
        derivatives: list[tuple[str, list[str]]] | None = None,
    ) -> Tables:
        """All index tables: the first step's and those of ``python_files`` and ``benches`` (call once)."""
        self.link_python(python_files, derivatives)
        self.link_benchmarks(benches, traces)
        return self.pack(canaries)

    def link_python(
        self, python_files: list[FileFacts], derivatives: list[tuple[str, list[str]]] | None = None
    ) -> None:
        """The Python files' functions, and what needs them numbered first: stubs linked to
        operators by name, backward formulas (``derivatives``: op -> the backward ops its
        formulas call), Python references through imports and re-exports (call once)."""
        self._add_python_files(python_files)
        self._link_stubs_by_name()
        self._link_backward_formulas(derivatives or [])
        self.python = _PythonNames(self.all_files, self.py_by_qual, self)
        self._link_python_methods()
        self._link_python_calls()
        self._link_python_subclasses()

    def _add_python_files(self, python_files: list[FileFacts]) -> None:
        """The Python files' rows, and their functions' rows and nodes, numbered from the first
        free node id (node id == function id, with no renumbering of the first step's nodes and edges)."""
        t, g = self.t, self.g
        self.all_files = files = [*self.files, *python_files]
        self.py_first = len(g.node_ids)
        self.py_rows, py_base = _file_rows(t, python_files, len(self.files), self.py_first)
        for gid, _, qualname, *_ in self.py_rows:
            if g.node(_PYFUNCTION, str(gid), qualname) != gid:
                raise AssertionError("Python functions must be numbered from the first free node id")
        self.func_rows, self.fid_base = self.func_rows + self.py_rows, self.fid_base + py_base
        t.rows[FunctionRow.TABLE] = self.func_rows
        self.py_by_qual = {
            qualname: gid for gid, file_id, qualname, *_ in self.py_rows if files[file_id].lang == _PYTHON_FILE
        }

    def _link_stubs_by_name(self) -> None:
        """Stubs whose callers are not in the index (declared and called by an upstream PyTorch
        the backend is built against): linked to operators by name."""
        t, g = self.t, self.g
        called = {dst for dst, _, kind, _ in t.rows[ReachEdgeRow.TABLE] if kind == _STUB_CALL}
        declared = {s.stub for f in self.all_files for s in f.stubs}
        registered_in: dict[str, list[str]] = defaultdict(list)
        for f in self.all_files:
            for s in f.stub_impls:
                registered_in[s.stub].append(f.path)
        upstream_stubs = sorted(set(registered_in) - declared)
        ops = self.op_by_name.values()
        stub_names = StubNames((o.name, o.base, o.composite) for o in ops) if upstream_stubs else None
        for stub in upstream_stubs:
            node = g.node(_STUB, stub)
            if node not in called:
                layout = _layout_hint(stub, registered_in[stub])  # a sparse stub names its dense op
                for op in stub_names.ops_named_like(stub) if stub_names else ():
                    g.edge(node, self._op_node(op), _STUB_NAME, layout)

    def _link_backward_formulas(self, derivatives: list[tuple[str, list[str]]]) -> None:
        """Backward formulas: an op's backward ops (followed like composite callers)."""
        op_node, ops_by_base = self._op_node, self.ops_by_base
        for name, backward_ops in derivatives:
            for target in [name] if name in self.op_by_name else ops_by_base.get(name, []):
                for backward in backward_ops:
                    for b in ops_by_base.get(backward, []):
                        self.g.edge(op_node(b), op_node(target), EdgeKind.BACKWARD, f"derivatives.yaml: {name}")

    def _link_python_methods(self) -> None:
        """Classes' methods (a class that is used runs its methods, but those that build, copy
        or print it), for classes with no more than _HUB_METHODS."""
        py_rows, py_first, fid_base = self.py_rows, self.py_first, self.fid_base
        self.class_methods = class_methods = defaultdict(list)
        for file_id, f in enumerate(self.all_files):
            if f.lang == _PYTHON_FILE:
                for c in f.calls:
                    if c.kind == _MEMBER_OF:
                        method = self.py_by_qual.get(f"{c.qualifier}.{c.callee_name}")
                        if method is not None:
                            class_methods[fid_base[file_id] + c.func_index].append(method)
        for cls, methods in class_methods.items():
            if len(methods) <= _HUB_METHODS:
                for method in methods:
                    if py_rows[method - py_first][3] not in _SETUP_METHODS:
                        self.g.edge(method, cls, EdgeKind.METHOD_OF, "")

    def _link_python_calls(self) -> None:
        """The Python calls: to functions (a class called runs its ``__init__``), to operators,
        and base classes (``class_subs``)."""
        t, g, op_node = self.t, self.g, self._op_node
        py_rows, py_first, py_by_qual = self.py_rows, self.py_first, self.py_by_qual
        resolve_py, ops_of_python = self.python.function, self.python.ops
        self.class_subs = class_subs = defaultdict(list)
        for file_id, f in enumerate(self.all_files):
            if f.lang != _PYTHON_FILE:
                continue
            base_gid = self.fid_base[file_id]
            for c in f.calls:
                caller = base_gid + c.func_index
                dotted = f"{c.qualifier}.{c.callee_name}" if c.qualifier else c.callee_name
                t.rows[CallRow.TABLE].append((caller, c.callee_name, c.qualifier, c.kind, c.line))
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
                    t.rows[CallEdgeRow.TABLE].append((caller, target, _PYTHON, c.line))
                    g.edge(target, caller, _PYTHON_CALL, f"line {c.line}")
                    continue
                for op in ops_of_python(dotted.lstrip("."), c.kind):
                    t.rows[OpCallRow.TABLE].append((caller, op, dotted, c.line))
                    g.edge(op_node(op), caller, _OP_CALL, f"{dotted} line {c.line}")

    def _link_python_subclasses(self) -> None:
        """A base class reaches its subclasses (not a base with more than _HUB_SUBCLASSES)."""
        for base_cls, subs in self.class_subs.items():
            if len(subs) <= _HUB_SUBCLASSES:
                for sub in subs:
                    self.g.edge(base_cls, sub, EdgeKind.SUBCLASS, "")

    def link_benchmarks(self, benches: list[BenchmarkFacts], traces: dict[str, FileTrace] | None = None) -> None:
        """The benchmarks: their references to functions and operators, their traces
        (``traces``: benchmark file -> its traced tests, see indexer/trace.py), the operators
        they reach through Python, their tests numbered (after link_python; call once)."""
        t = self.t
        origin_of = {gid: self.all_files[file_id].origin for gid, file_id, *_ in self.func_rows}
        device_kernels = _DeviceKernels(t, origin_of, (traces or {}).values())
        for b in benches:
            self._link_benchmark_refs(b)
            trace = (traces or {}).get(b.file)
            if trace is not None:
                _link_trace(t, b.name, trace, self.ops_by_base, self.library_ops, device_kernels)
        _python_reached_bench_ops(t, benches, self.class_methods, self.class_subs)
        t.rows.update(line_rows((b.name, traces[b.file]) for b in benches if b.file in (traces or {})))
        t.rows[BenchTestRow.TABLE] = _numbered_tests(t.rows[BenchTestRow.TABLE])
        del self.python, self.class_methods, self.class_subs  # the Python link's memos (~40 MiB on PyTorch)

    def _link_benchmark_refs(self, b: BenchmarkFacts) -> None:
        """A benchmark's row, and what its tests reference: Python functions, else operators."""
        t, g = self.t, self.g
        resolve_py, ops_of_python = self.python.function, self.python.ops
        t.rows[BenchmarkTableRow.TABLE].append(
            (b.name, b.file, b.framework, b.tests_json(), json.dumps(b.devices), b.sha256)
        )
        bnode = g.node(NodeKind.BENCHMARK, b.name)
        if b.status != "ok":
            t.warnings.append((b.file, "benchmark", b.message))
        seen: set[tuple[str, str]] = set()
        for test, dotted, kind in b.refs:
            target = None if kind == _MEMBER or dotted.startswith(".") else resolve_py(dotted)
            if target is not None:
                if (test, str(target)) not in seen:
                    seen.add((test, str(target)))
                    t.rows[BenchCallRow.TABLE].append((b.name, target, test))
                    g.edge(target, bnode, EdgeKind.BENCH_CALL, f"{test}: {dotted}")
                continue
            for op in ops_of_python(dotted.lstrip("."), kind):
                if (test, op) in seen:
                    continue
                seen.add((test, op))
                for device in b.devices:
                    t.rows[BenchOpRow.TABLE].append((b.name, op, BenchOpSource.STATIC, test, device, dotted))
                g.edge(self._op_node(op), bnode, EdgeKind.BENCH_OP, f"{test}: {dotted}")

    def pack(self, canaries: list[dict]) -> Tables:
        """All index tables: the reachability graph packed, and the canary sets (after link_benchmarks)."""
        t = self.t
        t.rows[GraphRow.TABLE] = pack_graph(t.rows[NodeRow.TABLE], t.rows[ReachEdgeRow.TABLE])
        for c in canaries:
            t.rows[CanarySetRow.TABLE].append(
                (
                    c["name"],
                    c.get("description", ""),
                    json.dumps(c.get("paths", [])),
                    json.dumps(c.get("functions", [])),
                    json.dumps(c.get("benchmarks", [])),
                )
            )
        return t


class _PythonNames:
    """Python references resolved through imports and re-exports: to an indexed function
    (``function``), or to the operators they call (``ops``: torch.add, F.relu, x.add,
    torch.ops.aten.add.Tensor). Both remember their answers (the same names are used all over)."""

    def __init__(self, files: list[FileFacts], py_by_qual: dict[str, int], link: NativeLink) -> None:
        self.py_by_qual = py_by_qual
        self.op_by_name, self.ops_by_base = link.op_by_name, link.ops_by_base
        self.method_ops, self.library_ops = link.method_ops, link.library_ops
        self.module_aliases: dict[str, dict[str, str]] = {}
        self.module_stars: dict[str, list[str]] = {}
        for f in files:
            if f.lang == _PYTHON_FILE:
                mod = f.path[:-3].replace("/", ".")
                mod = mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
                self.module_aliases[mod] = dict(a.split("=", 1) for a in f.includes if "=" in a)
                self.module_stars[mod] = [m for a, m in self.module_aliases[mod].items() if a.startswith("*")]
        self.resolved: dict[str, int | None] = {}
        self.ops_found: dict[tuple[str, str], list[str]] = {}

    def function(self, dotted: str, depth: int = 0) -> int | None:
        """The indexed Python function ``dotted`` names, through the longest prefix that is a module."""
        if dotted in self.resolved:
            return self.resolved[dotted]
        self.resolved[dotted] = None
        result = self.py_by_qual.get(dotted)
        if result is None and depth < 6:
            dot = len(dotted)
            while (dot := dotted.rfind(".", 0, dot)) > 0:  # the longest prefix that is a module
                aliases = self.module_aliases.get(dotted[:dot])
                if aliases is None:
                    continue
                head, _, rest = dotted[dot + 1 :].partition(".")
                candidates = [aliases[head]] if head in aliases else []
                if not head.startswith("_"):  # `from m import *` does not bring m's private names
                    candidates += [f"{m}.{head}" for m in self.module_stars[dotted[:dot]]]
                for target in candidates:
                    result = self.function(f"{target}.{rest}" if rest else target, depth + 1)
                    if result is not None:
                        break
                break
        self.resolved[dotted] = result
        return result

    def ops(self, dotted: str, kind: str) -> list[str]:
        """The operators a Python call or reference of ``kind`` to ``dotted`` runs."""
        found = self.ops_found.get((dotted, kind))
        if found is None:
            found = self.ops_found[(dotted, kind)] = self._ops(dotted, kind)
        return found

    def _ops(self, dotted: str, kind: str) -> list[str]:
        qual, _, name = dotted.rpartition(".")
        if kind == _MEMBER or (
            qual and qual.split(".")[0] not in self.module_aliases and "." not in qual and qual not in _OP_PREFIXES
        ):
            return self.method_ops.get(name, [])
        m = _TORCH_OPS.match(dotted)
        if m:
            ns, base, overload = m.groups()
            if ns == "aten":
                return (
                    [f"{base}.{overload}"]
                    if overload and f"{base}.{overload}" in self.op_by_name
                    else self.ops_by_base.get(base, [])
                )
            key = _op_key(ns, base)
            return [key] if key in self.library_ops else []
        if qual in _OP_PREFIXES:
            return self.ops_by_base.get(_OP_PREFIXES[qual] + name, [])
        return []


_PY_DEPTH = 4  # Python call levels below a benchmark's references that count as its own ops


def _python_reached_bench_ops(
    t: Tables, benches: list[BenchmarkFacts], class_methods: dict[int, list[int]], class_subs: dict[int, list[int]]
) -> None:
    """Add to bench_ops the operators a benchmark calls through Python (its nn modules'
    methods, torch.nn.functional helpers...), a few calls deep: what the benchmark runs
    by its own code, as opposed to everything C++ reaches below."""
    calls: dict[int, list[int]] = defaultdict(list)
    for caller, callee, kind, _ in t.rows[CallEdgeRow.TABLE]:
        if kind == _PYTHON:
            calls[caller].append(callee)
    bases: dict[int, list[int]] = defaultdict(list)
    for base, subs in class_subs.items():
        if len(subs) <= _HUB_SUBCLASSES:  # not through nn.Module and the like
            for sub in subs:
                bases[sub].append(base)
    methods = {cls: ms for cls, ms in class_methods.items() if len(ms) <= _HUB_METHODS}
    op_calls: dict[int, set[str]] = defaultdict(set)
    for fid, op, _, _ in t.rows[OpCallRow.TABLE]:
        op_calls[fid].add(op)
    names = dict((r[0], r[2]) for r in t.rows[FunctionRow.TABLE])
    devices = {b.name: b.devices for b in benches}
    direct = {(b, op, test) for b, op, _, test, _, _ in t.rows[BenchOpRow.TABLE]}
    added = []
    for bench, target, test in t.rows[BenchCallRow.TABLE]:
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
    t.rows[BenchOpRow.TABLE] += added


def _link_trace(
    t: Tables,
    bench: str,
    trace: FileTrace,
    ops_by_base: dict[str, list[str]],
    library_ops: dict[str, tuple[str, str]],
    device_kernels: _DeviceKernels,
) -> None:
    """Rows for one benchmark file's trace: the file's status, its tests, the operators each
    test executes (by namespace and base name: any overload), and per-operator bench_ops links.
    ``device_kernels``: the indexed repo's own kernels per device, and what they run."""
    t.rows[TraceRow.TABLE].append(
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
    for test in trace.tests:
        t.rows[BenchTestRow.TABLE].append(
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
            t.rows[TraceOpRow.TABLE].append((bench, name, namespace, base, layout or "dense", why, inner))
            linked.update(ops_by_base.get(base, []) if namespace == "aten" else [])
            if namespace != "aten" and qualified in library_ops:
                linked.add(qualified)
    for op in sorted(linked):
        t.rows[BenchOpRow.TABLE].append((bench, op, BenchOpSource.TRACED, "", "", "trace"))


def _numbered_tests(rows: list[tuple]) -> list[tuple]:
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

    def __init__(self, t: Tables, origin_of: dict[int, str], traces: Iterable[FileTrace]) -> None:
        self.t, self.origin_of = t, origin_of
        self.kernels: dict[tuple[str, str, str], list[int]] = defaultdict(list)  # (op base, family, layout)
        implemented: set[str] = set()  # aten ops by base name, others qualified: a kernel for any key
        for op, key, _, fid in t.rows[KernelRow.TABLE]:
            if fid is not None and origin_of.get(fid) == _REPO:
                implemented.add(op.split(".")[0])
                if device_of_key(key):
                    self.kernels[(op.split(".")[0], device_of_key(key), layout_of_key(key))].append(fid)
        for namespace, _, op, _, fid, _, _ in t.rows[LibraryImplRow.TABLE]:
            if fid is not None and origin_of.get(fid) == _REPO:
                implemented.add(op.split(".")[0] if namespace == "aten" else op)
        served = _ops_of_stubs(t)
        for stub, arch, _, fid, _, _ in t.rows[StubImplRow.TABLE]:  # a device's DispatchStub impl: its op's kernel
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
        for caller, callee, *_ in self.t.rows[CallEdgeRow.TABLE]:
            if self.origin_of.get(callee) == _REPO:
                out[caller].append(callee)
        return out

    @functools.cached_property
    def op_calls(self) -> dict[int, list[str]]:
        """function -> the operators it calls, qualified by base name (aten::index)."""
        out: dict[int, list[str]] = defaultdict(list)
        for fid, op, *_ in self.t.rows[OpCallRow.TABLE]:
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
                    qualname = self.t.rows[FunctionRow.TABLE][fid][2]
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


def _ops_of_stubs(t: Tables) -> dict[str, set[tuple[str, str]]]:
    """DispatchStub -> (operator, layout) it serves (``ops_of_stubs`` over the link's edges)."""
    named = {nid: key for nid, kind, key, _ in t.rows[NodeRow.TABLE] if kind in (_STUB, _OP)}
    kernel_of: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for op, key, _, fid in t.rows[KernelRow.TABLE]:
        if fid is not None:
            kernel_of[fid].append((op, key))
    by_name, by_call = [], []
    for dst, src, kind, detail in t.rows[ReachEdgeRow.TABLE]:
        if kind == _STUB_NAME and dst in named and src in named:
            by_name.append((named[dst], named[src], detail))
        elif kind == _STUB_CALL and dst in named:
            by_call += [(named[dst], op, key) for op, key in kernel_of.get(src, ())]
    return ops_of_stubs(by_name, by_call)


_LAYOUT_WORDS = (("sparse", "Sparse"), ("nested", "Nested"), ("quantized", "Quantized"))


def _layout_hint(stub: str, paths: list[str]) -> str:
    """A dispatch-key-like word for the tensors a stub's kernels serve (its name, or the
    folders of the files that register it): Sparse, Nested, Quantized, else Dense."""
    text = stub.lower() + " " + " ".join(paths).lower()
    return next((key for word, key in _LAYOUT_WORDS if word in text), "Dense")
