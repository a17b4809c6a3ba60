"""What an index rule is, and what the link and the patch hand each rule (their contexts).

A rule is one construct family of the index: the tables it writes (each table is written by
exactly one rule, ``tests/test_index_rules.py``), the tables it reads, what it links at each
phase of a full build and what it patches at each phase of an in-place patch. The link
(indexer/link.py) and the patch (indexer/incremental.py) run their phases in order and, inside a
phase, the rules in the order of ``indexer.rules.RULES``; rules share what they make through the
context, never by importing each other.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from indexer.build_config import BuildMacros, file_kind
from indexer.derivatives import Derivative
from indexer.devices import device_of_key
from indexer.facts import FileFacts, Function
from indexer.generated_layer import TemplateNames
from indexer.link_cpp import HEADER_SUFFIXES, ClassHierarchy, CppCallLinker
from indexer.preprocessor import DIRECTIVES, Directive, LineStates, states_of
from schema.model import EdgeKind, NodeKind, NodeRow, ReachEdgeRow
from schema.packed_graph import Edge
from schema.patch_store import PatchStore

if TYPE_CHECKING:  # the yaml reader's types only: a patch never imports yaml
    from indexer.native_yaml import OpFacts

_KERNEL = EdgeKind.KERNEL
HUB_METHODS = 60  # a Python class with more methods than this (torch.Tensor) does not roll up
HUB_SUBCLASSES = 40  # a Python base class with more subclasses than this does not propagate


class Phase(IntEnum):
    """The phases of a full link, in order: what is known when each runs."""

    DECLARE = 1  # the C++ files and the operators, as declared: files, functions, ops, classes
    NATIVE = 2  # C++ names resolved: kernels, registrations, C++ calls
    PYTHON = 3  # the Python files numbered after the native nodes, their names resolved
    REFERENCES = 4  # every call linked: what is reached through them (Python subclasses)
    BENCHMARKS = 5  # the benchmarks and their traces
    PACK = 6  # the graph packed, the canary sets


class PatchPhase(IntEnum):
    """The phases of an in-place patch of a few changed C++ files, in order."""

    PLACE = 1  # the changed files' functions: kept ids, removed ones (with all that refers to them), fresh ids
    PREPARE = 2  # what the C++ linker reads, from the index
    RELINK = 3  # the changed files' calls linked again
    INTO = 4  # the edges into the fresh functions, from the index's other rows
    RECORD = 5  # the graph's new rows, the changed files' rows


@dataclass(frozen=True)
class Rule:
    """One construct family of the index. ``writes``: the row types of the tables it fills
    (no other rule writes them); ``reads``: those of other rules it reads; ``link``: its step
    at each phase of a full build; ``patch``: its step at each phase of an in-place patch;
    ``place``: where it runs inside a phase, among the other rules (lower first; their places
    leave gaps, so a new rule is placed without renumbering the others)."""

    name: str
    writes: tuple[type, ...]
    reads: tuple[type, ...]
    link: Mapping[Phase, Callable[[LinkContext], None]]
    patch: Mapping[PatchPhase, Callable[[PatchContext], None]] = field(default_factory=dict)
    place: int = 0


def left_out(f: FileFacts, build: BuildMacros | None) -> LineStates | None:
    """The regions of ``f`` the target build is known not to compile (its directives, cached with
    its facts, against ``build``'s macros), None when there are none or the build is not known."""
    found = f.constructs.get(DIRECTIVES)
    if build is None or not found:
        return None
    out = states_of([Directive(*d) for d in found], f.n_lines, build, file_kind(f.path)).left_out()
    return out if out.regions else None


@dataclass
class Tables:
    """Rows per table (keyed by its row type's ``TABLE``): tuples in the field order of the
    table's row type (schema/model.py ROW_TYPES); tuples, not row instances, at the link's hot
    path. ``warnings``: (file, phase, message) of the build's warnings table."""

    rows: dict[str, list[tuple]] = field(default_factory=lambda: defaultdict(list))
    warnings: list[tuple[str, str, str]] = field(default_factory=list)


class Graph:
    """The reachability graph as rules add to it (nodes made on first use; an edge once per
    (dst, src), a kernel edge once per device family). Its tables are the graph rule's: other
    rules add through this, never to the rows."""

    def __init__(self, tables: Tables) -> None:
        self.nodes = tables.rows[NodeRow.TABLE]
        self.edges = tables.rows[ReachEdgeRow.TABLE]
        self.node_ids: dict[tuple[NodeKind, str], int] = {}
        # (dst, src) -> the device families of its kernel edges (None: an edge of another kind)
        self.seen: dict[tuple[int, int], set[str] | None] = {}

    def node(self, kind: NodeKind, key: str, label: str | None = None) -> int:
        k = (kind, key)
        nid = self.node_ids.get(k)
        if nid is None:
            nid = len(self.node_ids)
            self.node_ids[k] = nid
            self.nodes.append((nid, kind, key, label or key))
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
        self.edges.append((dst, src, kind, detail))


def op_key(namespace: str, name: str) -> str:
    """An operator's name in the index: aten's bare, others qualified (``quantized::add``)."""
    return name if namespace == "aten" else f"{namespace}::{name}"


class LinkContext:
    """What the rules of one full link share: the facts they link, the tables (each written
    through ``out`` by the rule that declares it), the graph, and what earlier rules made
    (typed below; set by the rule named beside each)."""

    # made by the files rule
    func_rows: list[tuple]  # every function's row (node id == function id)
    fid_base: list[int]  # each file's first function id
    all_files: list[FileFacts]  # C++ then Python, by file id
    py_first: int  # the first Python function's id
    py_rows: list[tuple]  # the Python functions' rows
    py_by_qual: dict[str, int]  # a Python function's id by its qualified name
    include_map: dict[int, list[int]]  # file -> the indexed files it includes
    # made by the ops rule
    op_by_name: dict[str, OpFacts]
    ops_by_base: defaultdict[str, list[str]]  # op base name -> its overloads
    method_ops: defaultdict[str, list[str]]  # the same, of Tensor methods
    library_ops: dict[str, tuple[str, str]]  # ops defined by TORCH_LIBRARY -> (namespace, schema)
    # made by the classes rule
    hierarchy: ClassHierarchy
    # made by the python bindings rule: a Python name -> the C++ functions bound to it
    bound: dict[str, list[int]]
    # made by the python references rule (until the benchmarks phase ends)
    python: PythonResolver
    class_methods: defaultdict[int, list[int]]  # a Python class -> its methods
    # made by the calls rule
    class_subs: defaultdict[int, list[int]]  # a Python class -> its subclasses
    # made by the traces rule: benchmark -> the operators its trace links
    traced_ops: dict[str, list[str]]

    def __init__(self, files: list[FileFacts], ops: list[OpFacts], build: BuildMacros | None = None) -> None:
        self.files = files  # the C++ files (the Python ones come with the python phase)
        self.ops = ops
        self.build = build  # the target build's macros (None: every #if branch kept)
        self.python_files: list[FileFacts] = []
        self.derivatives: list[Derivative] = []
        self.templates = TemplateNames((), ())  # the names the code generators' C++ uses
        self.benches: list = []
        self.traces: dict = {}
        self.canaries: list[dict] = []
        self.tables = Tables()
        self.graph = Graph(self.tables)
        self._writes: frozenset[str] = frozenset()
        self._reads: frozenset[str] | None = None  # None: no rule's step is running

    def run(self, rule: Rule, phase: Phase) -> None:
        """Run ``rule``'s step of ``phase`` (if it has one), writing only its own tables and
        reading only those and the ones it declares (``Rule.reads``)."""
        step = rule.link.get(phase)
        if step is not None:
            self._writes = frozenset(row_type.TABLE for row_type in rule.writes)
            self._reads = self._writes | {row_type.TABLE for row_type in rule.reads}
            try:
                step(self)
            finally:
                self._writes, self._reads = frozenset(), None

    def out(self, row_type: type) -> list[tuple]:
        """The rows of ``row_type``'s table, for the rule that writes it to add to."""
        if row_type.TABLE not in self._writes:
            raise AssertionError(f"{row_type.TABLE} is not written by the running rule")
        return self.tables.rows[row_type.TABLE]

    def set_rows(self, row_type: type, rows: list[tuple]) -> None:
        """Replace the rows of ``row_type``'s table (by the rule that writes it)."""
        self.out(row_type)
        self.tables.rows[row_type.TABLE] = rows

    def read(self, row_type: type) -> list[tuple]:
        """The rows of ``row_type``'s table so far (in a rule's step: one it writes or declares it reads)."""
        if self._reads is not None and row_type.TABLE not in self._reads:
            raise AssertionError(f"{row_type.TABLE} is not read by the running rule (Rule.reads)")
        return self.tables.rows[row_type.TABLE]

    def op_node(self, name: str) -> int:
        """The node of operator ``name`` (made on first use)."""
        return self.graph.node(NodeKind.OP, name)

    @functools.cached_property
    def cpp_linker(self) -> CppCallLinker:
        """The one set of C++ name-resolution rules (shared with the incremental patch); dropped
        after the native phase (~30 MiB on PyTorch)."""
        files = self.files
        stub_names = {s.stub for f in files for s in [*f.stubs, *f.stub_impls]}
        return CppCallLinker(
            (
                (*row[:5], row[7], True, files[row[1]].path.endswith(HEADER_SUFFIXES), *row[8:11])
                for row in self.func_rows
            ),
            ((o.name, o.base, o.overload, o.variants) for o in self.ops),
            stub_names,
            self.graph.node,
            {file_id: f.path for file_id, f in enumerate(files)},
            lambda: self.include_map,
            self.hierarchy,
        )


class PythonResolver:
    """What the Python references rule answers for the others: the indexed Python function a
    dotted name is (``function``), and the operators a call or reference of it runs (``ops``)."""

    def function(self, dotted: str, depth: int = 0) -> int | None:
        raise NotImplementedError

    def ops(self, dotted: str, kind: str) -> list[str]:
        raise NotImplementedError

    def native_module(self, qualifier: str) -> bool:
        """Is ``qualifier`` a module of an indexed package with no Python source (an extension
        module, ``torch._C``): the functions it holds are bound from C++."""
        raise NotImplementedError


class Unpatchable(Exception):
    """The change needs a full re-link."""


def each_once(edges: list[tuple]) -> list[tuple]:
    """Reachability ``edges`` as the index holds them: no loop, the first of each (dst, src)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for edge in edges:
        if edge[0] != edge[1] and edge[:2] not in seen:
            seen.add(edge[:2])
            out.append(edge)
    return out


class PatchGraph:
    """The reachability graph as a patch changes it: the edges and nodes removed and added (the
    graph rule's tables; other rules add through this, never to the rows)."""

    def __init__(self, store: PatchStore) -> None:
        self.store = store
        self.removed: list[Edge] = []
        self.dropped: list[tuple[int, str]] = []  # (id, kind) of the nodes removed
        self.reach: list[tuple] = []  # the edges added, in the order rules add them
        self.added: list[tuple] = []  # those edges each once, as the graph rule records them
        self.fresh_nodes: list[tuple[int, str, str]] = []  # (id, kind, key) of the fresh functions' nodes
        self.new_nodes: list[tuple] = []  # (id, kind, key, label) of the operator and stub nodes made
        self.node_ids: dict[tuple[NodeKind, str], int] = {}  # the operator and stub nodes
        self.next_node = 0

    def remove_call_edges(self, ids: list[int]) -> None:
        """Remove the edges of the calls functions ``ids`` make (linked again by the calls rule)."""
        self.removed += self.store.rows("unlink_reach_edges", ids=ids)

    def node_of(self, kind: NodeKind, key: str) -> int:
        """The node of an operator or stub (made on first use)."""
        nid = self.node_ids.get((kind, key))
        if nid is None:
            nid = self.node_ids[(kind, key)] = self.next_node
            self.next_node += 1
            self.new_nodes.append((nid, kind, key, key))
        return nid


class PatchContext:
    """What the rules of one in-place patch share: the store of the index copy, the changed
    files (file id -> their facts, whether their functions changed), the graph's delta, and what
    earlier rules made (typed below; set by the rule named beside each)."""

    # made by the files rule
    ids: dict[int, list[int]]  # file -> its functions' ids, in the order of its facts
    fresh_ids: dict[int, list[int]]  # file -> the ids of its new functions
    extents: dict[int, dict[int, tuple[int, int]]]  # file -> indexed extents of the functions that stay
    fresh: list[tuple[int, Function]]  # (id, facts) of every new function
    linker_rows: list[tuple]  # the functions the C++ linker needs, as its rows
    include_graph: Callable[[], dict[int, list[int]]]  # file id -> the indexed files it includes
    # made by the ops rule
    aten_ops: list[tuple]
    # made by the classes rule
    classes: list[tuple[int, str, tuple[str, ...], tuple[str, ...]]]
    # made by the registrations rule
    stub_names: set[str]

    def __init__(
        self, store: PatchStore, changed: dict[int, tuple[FileFacts, bool]], build: BuildMacros | None = None
    ) -> None:
        self.store = store
        self.changed = changed
        self.build = build  # the target build's macros, the link's (the index's inputs name them)
        self.graph = PatchGraph(store)
        self.file = -1  # the changed file the into phase is at
        self._writes: frozenset[str] = frozenset()

    def run(self, rule: Rule, phase: PatchPhase) -> None:
        """Run ``rule``'s step of ``phase`` (if it has one), writing only its own tables."""
        step = rule.patch.get(phase)
        if step is not None:
            self._writes = frozenset(row_type.TABLE for row_type in rule.writes)
            step(self)
            self._writes = frozenset()

    def _own(self, row_type: type) -> str:
        if row_type.TABLE not in self._writes:
            raise AssertionError(f"{row_type.TABLE} is not written by the running rule")
        return row_type.TABLE

    def insert(self, row_type: type, rows: list[tuple]) -> None:
        """Insert ``rows`` into ``row_type``'s table (by the rule that writes it)."""
        self._own(row_type)
        self.store.insert(row_type, rows)

    def write(self, row_type: type, statement: str, **params: object) -> list[tuple]:
        """Run the named statement ``statement`` (schema/patch.sql), which writes ``row_type``'s
        table (by the rule that writes it)."""
        self._own(row_type)
        return self.store.rows(statement, **params)

    def replace_file_rows(self, row_type: type, rows: list[tuple]) -> None:
        """Replace the changed files' rows of ``row_type``'s table (one with a ``file_id`` column) by
        ``rows`` (by the rule that writes it)."""
        self._own(row_type)
        self.store.replace_file_rows(row_type, sorted(self.changed), rows)

    def set_function_ids(self, row_type: type, keys: tuple[str, ...], rows: list[tuple]) -> None:
        """Set the function ids of ``row_type``'s rows named by ``keys`` (PatchStore.set_function_ids)."""
        self._own(row_type)
        self.store.set_function_ids(row_type, keys, rows)

    def fresh_names(self, file_id: int) -> list[str]:
        """The names calls reach the new functions of a changed file by."""
        linker = self.cpp_linker
        return sorted({name for f in self.fresh_ids[file_id] for name in linker.call_names(f)})

    @functools.cached_property
    def cpp_linker(self) -> CppCallLinker:
        """The C++ name-resolution rules of the full link, over the functions the patch needs."""
        file_ids = {row[1] for row in self.linker_rows} | set(self.changed) | {row[0] for row in self.classes}
        return CppCallLinker(
            self.linker_rows,
            self.aten_ops,
            self.stub_names,
            self.graph.node_of,
            dict(self.store.rows("paths", ids=sorted(file_ids))),
            self.include_graph,
            ClassHierarchy(self.classes),
        )
