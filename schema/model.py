"""The index's data model: an Enum for every vocabulary its tables hold, and a frozen row type
per table of ``index.sql`` that more than one rule or a reader names (``tests/test_index_model.py``
checks them against it); a table only its rule writes may have its row type in the rule's module
(indexer/rules/), and ``indexer/ddl.py`` generates index.sql from both.

The Enums live in schema/kinds.py (a query imports them alone) and are re-exported here. They
are ``StrEnum``s: a member is its value (``EdgeKind.CALL == "call"``, formatted and hashed as
``"call"``), so the index and every JSON output hold the same strings as before, and a value
read back from the index compares equal to its member.

The row types name the columns; the hot path of a build keeps plain tuples in that order
(``row_tuple`` makes one from a row, ``ROW_TYPES[table]`` gives a table's type, ``RowType.TABLE``
its table's name, the key of its rows in a build, ``columns`` its column names, ``column_types``
their DuckDB types), and a reader makes typed rows of a query's tuples with ``RowType(*tuple)``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter

from schema.kinds import (  # the vocabularies of the rows' columns (importers of this module name them here too)
    BenchOpSource,
    CallKind,
    EdgeKind,
    FileStatus,
    FunctionKind,
    Lang,
    NodeKind,
    OpEdgeKind,
    Origin,
    TraceMode,
    TraceStatus,
)

# --------------------------------------------------------------------------- row types


def column(doc: str = "", key: str = "") -> typing.Any:
    """A row type's field with what its table's DDL says beside its type: ``doc`` (the column's
    comment) and ``key`` (``PRIMARY KEY``, ``UNIQUE``); indexer/ddl.py writes index.sql from them."""
    return dataclasses.field(metadata={"doc": doc, "key": key})


@dataclass(frozen=True, slots=True)
class MetaRow:
    TABLE: typing.ClassVar[str] = "meta"

    key: str = column(key="PRIMARY KEY")
    value: str | None


@dataclass(frozen=True, slots=True)
class FileRow:
    TABLE: typing.ClassVar[str] = "files"

    id: int = column(key="PRIMARY KEY")
    path: str = column("repo-relative, '/' separated", key="UNIQUE")
    sha256: str
    lang: Lang = column("cpp | cuda | objcpp | python | yaml")
    n_lines: int
    status: FileStatus = column("ok | warning | skipped")
    message: str | None = column("why, when status is not ok")
    signature: str = column("digest of the functions the file declares (not their bodies)")
    registrations: str = column(
        "digest of its stubs and registrations: while it holds, an edit of the file is patched into the index"
        " instead of re-linked"
    )
    usings: str = column("JSON list of its `using namespace` directives")
    origin: Origin = column("repo | upstream (an out-of-tree backend's PyTorch, indexed beside it)")


@dataclass(frozen=True, slots=True)
class FunctionRow:
    TABLE: typing.ClassVar[str] = "functions"

    id: int = column(
        "unique by construction; no PRIMARY KEY: its index cost a full build ~0.3 s and every patch a load of"
        " the index (so for nodes.id)"
    )
    file_id: int
    qualname: str = column("at::native::(anonymous namespace)::foo, torch.nn.functional.relu")
    name: str = column("last component: foo, relu")
    kind: FunctionKind = column(
        "function | method | template | structured_impl | structured_meta | global_kernel | macro (a function-like"
        " #define: its expansion sites call it) | registration | python | class | alias"
    )
    start_line: int
    end_line: int
    internal: bool = column("internal linkage (static, anonymous namespace, _private python): same-file callers only")
    usr: str = column("libclang USR ('' unless parsed with compile_commands.json flags)")
    least_args: int = column(
        "C++: the fewest arguments a call may pass (0 unless certain: a method defined in its class, where no other"
        " declaration adds defaults)"
    )
    most_args: int | None = column("C++: the most arguments a call may pass (NULL: no bound (a pack, '...') or unread)")


@dataclass(frozen=True, slots=True)
class CallRow:
    """Raw call sites, as written (name-level); resolved edges are in call_edges."""

    TABLE: typing.ClassVar[str] = "calls"

    caller_id: int
    callee_name: str = column("last identifier: foo")
    qualifier: str = column("what stood before it: 'at', 'at::native', 'at::_ops::sum', '.', 'torch', 'F'...")
    kind: CallKind = column("direct | member | address | python")
    line: int
    n_args: int | None = column("C++: the arguments the call passes (NULL: not certain, or no argument list)")


@dataclass(frozen=True, slots=True)
class CallEdgeRow:
    TABLE: typing.ClassVar[str] = "call_edges"

    caller_id: int
    callee_id: int
    kind: CallKind = column("direct | member | address | python | virtual (an override of the callee)")
    line: int


@dataclass(frozen=True, slots=True)
class ClassBaseRow:
    """The C++ class hierarchy (classes with bases or virtual methods), by what the text says: a
    virtual call of a method reaches its overrides in the subclasses of the receiver's class
    (call_edges kind 'virtual', reach_edges kind 'virtual_call').
    """

    TABLE: typing.ClassVar[str] = "class_bases"

    file_id: int
    qualname: str
    base: str
    line: int


@dataclass(frozen=True, slots=True)
class VirtualMethodRow:
    TABLE: typing.ClassVar[str] = "virtual_methods"

    file_id: int
    qualname: str = column("the class")
    name: str = column("a method it declares virtual or override")
    line: int = column("the class's")


@dataclass(frozen=True, slots=True)
class IncludeRow:
    TABLE: typing.ClassVar[str] = "includes"

    file_id: int
    target: str
    target_file_id: int | None


@dataclass(frozen=True, slots=True)
class OpRow:
    TABLE: typing.ClassVar[str] = "ops"

    name: str = column("name.overload ('add.Tensor', 'relu')", key="PRIMARY KEY")
    base: str = column("add, relu_ -> relu_ (in-place keeps its underscore)")
    overload: str
    namespace: str = column("aten, quantized, ...")
    schema: str
    structured: bool
    structured_delegate: str | None = column("the op whose kernel this one uses")
    variants: str = column("'function, method'")
    tags: str
    composite: str | None = column("CompositeImplicitAutograd | CompositeExplicitAutograd... | NULL")


@dataclass(frozen=True, slots=True)
class KernelRow:
    TABLE: typing.ClassVar[str] = "kernels"

    op: str
    dispatch_key: str
    kernel_name: str = column("as in the yaml: softmax_cpu_out")
    function_id: int | None = column("the indexed definition, when found")


@dataclass(frozen=True, slots=True)
class StubRow:
    TABLE: typing.ClassVar[str] = "stubs"

    stub: str = column("softmax_lastdim_kernel")
    role: str = column("declare | define")
    file_id: int
    line: int


@dataclass(frozen=True, slots=True)
class StubImplRow:
    TABLE: typing.ClassVar[str] = "stub_impls"

    stub: str
    arch: str = column("DEFAULT (cpu kernels, per CPU_CAPABILITY), AVX512, CUDA, HIP, MPS, XPU...")
    impl_name: str
    function_id: int | None
    file_id: int
    line: int


@dataclass(frozen=True, slots=True)
class LibraryImplRow:
    TABLE: typing.ClassVar[str] = "library_impls"

    namespace: str
    dispatch_key: str = column("'' for catch-all m.impl without a key")
    op: str
    kernel_name: str
    function_id: int | None
    file_id: int
    line: int


@dataclass(frozen=True, slots=True)
class OpCallRow:
    """A function (C++ or Python) that calls an operator through its API
    (at::foo, at::_ops::foo::call, tensor.foo(), torch.foo, F.foo, torch.ops.aten.foo).
    """

    TABLE: typing.ClassVar[str] = "op_calls"

    function_id: int
    op: str
    via: str
    line: int


@dataclass(frozen=True, slots=True)
class OpEdgeRow:
    """op -> op: 'caller_op' is affected when 'op' is (structured_delegate, autogen, upstream_composite)."""

    TABLE: typing.ClassVar[str] = "op_edges"

    op: str
    caller_op: str
    kind: OpEdgeKind


@dataclass(frozen=True, slots=True)
class BenchmarkTableRow:
    TABLE: typing.ClassVar[str] = "benchmarks"

    name: str = column("file stem: softmax_test", key="PRIMARY KEY")
    file: str
    framework: str = column("operator_benchmark | script")
    tests: str = column("JSON list of {name, tags, devices}")
    devices: str = column("JSON list")
    sha256: str


@dataclass(frozen=True, slots=True)
class BenchOpRow:
    TABLE: typing.ClassVar[str] = "bench_ops"

    bench: str
    op: str
    source: BenchOpSource = column("static | traced (test '' for traced: see trace_ops)")
    test: str = column("test/class name it came from ('' = whole file)")
    device: str = column("'' when unknown")
    via: str = column("how: 'torch.softmax', 'F.avg_pool2d via torch.ao...'")


@dataclass(frozen=True, slots=True)
class BenchCallRow:
    """Python functions a benchmark calls (statically), so ops reached through torch/*.py count."""

    TABLE: typing.ClassVar[str] = "bench_calls"

    bench: str
    function_id: int
    test: str


@dataclass(frozen=True, slots=True)
class TraceRow:
    """Traced truth (indexer/trace.py): per benchmark file, how tracing went; per test, what ran."""

    TABLE: typing.ClassVar[str] = "traces"

    bench: str
    file: str
    status: TraceStatus = column("ok | partial | failed")
    reason: str = column("why, when not ok")
    seconds: float
    max_rss_mb: int
    torch: str = column("torch version it was traced with")


@dataclass(frozen=True, slots=True)
class BenchTestRow:
    TABLE: typing.ClassVar[str] = "bench_tests"

    id: int = column("numbered by bench, test, module, device, mode, kernels_seen")
    bench: str
    test: str = column("the framework's test name: add_M8_N32_K256_cuda")
    module: str = column("its --operators name: add")
    class_: str = column("AddBenchmark")  # the column ``class``
    tag: str = column("short | long | ...")
    backward: bool
    device: str = column("as configured (cuda/xpu tests are traced on the CPU)")
    mode: TraceMode = column("real | meta | fake | inferred | sampled")
    kernels_seen: bool = column("its ops include those kernels call (real, or borrowed from its module's real tests)")


@dataclass(frozen=True, slots=True)
class TraceOpRow:
    """Operators a test's timed region executes (any overload): aten ops by base name, others too;
    layout: dense | quantized (run on quantized tensors: its QuantizedCPU/... kernels, not the dense ones).
    inferred: '' when the trace saw the operator run; else why it is taken to run (inside an
    upstream operator in a small CPU run; called by the repo's own kernel for the test's device).
    in_kernel: true when the operator ran only inside other operators' kernels (never called from Python
    or inside composite operators): torch.compile's graph does not hold it (a lowering of it is not run).
    """

    TABLE: typing.ClassVar[str] = "trace_ops"

    bench: str
    test: str
    namespace: str
    base: str
    layout: str
    inferred: str
    in_kernel: bool  # the operator ran only inside other operators' kernels: no compiled graph holds it


@dataclass(frozen=True, slots=True)
class TraceDtypeRow:
    """The dtypes a test's operators ran on (indexer/rules/traces.py): the torch dtypes of each call's
    tensor arguments (int32, bfloat16, quint8), per layout; the dispatch key is the layout's on the test's device.
    """

    TABLE: typing.ClassVar[str] = "trace_dtypes"

    bench: str
    test: str
    namespace: str
    base: str
    layout: str
    dtype: str  # a torch dtype of the calls' tensor arguments: int32, bfloat16, quint8


@dataclass(frozen=True, slots=True)
class PyLineSetRow:
    """Python line truth (indexer/trace_driver.py: sys.settrace per test): the lines of the benchmark
    tree's shared modules (harness, configs) and of torch's own Python that each traced test ran
    (its build and its timed region; shapes-only tests leave out fake-tensor machinery). Tests that
    ran the same lines of a file share one line set.
    """

    TABLE: typing.ClassVar[str] = "py_line_sets"

    line_set: int
    path: str
    line: int


@dataclass(frozen=True, slots=True)
class PyTestLinesRow:
    """The line set of each traced test and file (py_line_sets)."""

    TABLE: typing.ClassVar[str] = "py_test_lines"

    bench: str
    test: str
    line_set: int


@dataclass(frozen=True, slots=True)
class PyLineTextRow:
    """Per torch file the tests ran, each line's digest (crc32 of its stripped text, 31 bits) in the
    traced torch: it is not the indexed source, so a changed line is trusted only where texts match.
    """

    TABLE: typing.ClassVar[str] = "py_line_texts"

    path: str
    line: int
    digest: int  # crc32 of the traced torch's line, stripped, 31 bits


@dataclass(frozen=True, slots=True)
class NativeSampleRow:
    """Native truth (`perfq index --native`, indexer/native.py): per sampled test, the index functions
    on its perf stacks (cpu-clock samples of libtorch_cpu.so) and the share of its samples holding each.
    """

    TABLE: typing.ClassVar[str] = "native_samples"

    bench: str
    test: str
    function_id: int
    share: float = column("of the test's samples (0..1), stored from 0.01")


@dataclass(frozen=True, slots=True)
class NativeTestRow:
    """Every test sampled, with its samples in the library and those that map to index functions: a
    test none of whose frames map (a oneDNN fast path runs outside the indexed sources) was still
    observed, and a static chain its stacks never show is "static, not observed".
    """

    TABLE: typing.ClassVar[str] = "native_tests"

    bench: str
    test: str
    samples: int
    mapped: int


@dataclass(frozen=True, slots=True)
class CanarySetRow:
    TABLE: typing.ClassVar[str] = "canary_sets"

    name: str = column(key="PRIMARY KEY")
    description: str | None
    paths: str | None
    functions: str | None
    benchmarks: str | None


@dataclass(frozen=True, slots=True)
class NodeRow:
    """Precomputed reachability graph over nodes (functions, stubs, ops, benchmarks):
    'src' is affected when 'dst' changes. Queries walk it from changed functions.
    """

    TABLE: typing.ClassVar[str] = "nodes"

    id: int
    kind: NodeKind
    key: str
    label: str


@dataclass(frozen=True, slots=True)
class ReachEdgeRow:
    TABLE: typing.ClassVar[str] = "reach_edges"

    dst: int
    src: int
    kind: EdgeKind
    detail: str


@dataclass(frozen=True, slots=True)
class GraphRow:
    """The same graph packed for queries (indexer/graph.py): edges by dst as arrays, one row per part."""

    TABLE: typing.ClassVar[str] = "graph"

    part: str = column(key="PRIMARY KEY")
    data: bytes


@dataclass(frozen=True, slots=True)
class WarningRow:
    TABLE: typing.ClassVar[str] = "warnings"

    file: str | None
    phase: str
    message: str


ROW_TYPES: dict[str, type] = {  # each row type of this module by its table's name (TABLE), in index.sql's order
    row_type.TABLE: row_type
    for row_type in (
        MetaRow,
        FileRow,
        FunctionRow,
        CallRow,
        CallEdgeRow,
        IncludeRow,
        ClassBaseRow,
        VirtualMethodRow,
        OpRow,
        KernelRow,
        StubRow,
        StubImplRow,
        LibraryImplRow,
        OpCallRow,
        OpEdgeRow,
        BenchmarkTableRow,
        BenchOpRow,
        BenchCallRow,
        TraceRow,
        BenchTestRow,
        TraceOpRow,
        TraceDtypeRow,
        PyLineSetRow,
        PyTestLinesRow,
        PyLineTextRow,
        NativeSampleRow,
        NativeTestRow,
        CanarySetRow,
        NodeRow,
        ReachEdgeRow,
        GraphRow,
        WarningRow,
    )
}

_DUCKDB_TYPES: dict[type, str] = {int: "INTEGER", str: "VARCHAR", bool: "BOOLEAN", float: "DOUBLE", bytes: "BLOB"}


def column_name(field: dataclasses.Field) -> str:
    """The SQL column of a row type's field (a trailing ``_`` spells a Python keyword: ``class_``)."""
    return field.name.removesuffix("_")


@functools.cache
def columns(row_type: type) -> tuple[str, ...]:
    """The column names of ``row_type``'s table, in its field (and the table's column) order."""
    return tuple(column_name(f) for f in dataclasses.fields(row_type))


@functools.cache
def column_types(row_type: type) -> tuple[str, ...]:
    """The DuckDB types of ``row_type``'s columns (an Enum: its values' type; ``X | None``: X's)."""
    hints = typing.get_type_hints(row_type)
    return tuple(_duckdb_type(hints[f.name]) for f in dataclasses.fields(row_type))


def nullable(row_type: type) -> tuple[bool, ...]:
    """Whether each of ``row_type``'s columns may be NULL (its type is ``X | None``)."""
    hints = typing.get_type_hints(row_type)
    return tuple(type(None) in typing.get_args(hints[f.name]) for f in dataclasses.fields(row_type))


def _duckdb_type(tp: object) -> str:
    if isinstance(tp, types.UnionType):
        (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return "VARCHAR"
    return _DUCKDB_TYPES[tp]  # type: ignore[index]


@functools.cache
def _getter(row_type: type) -> attrgetter:
    return attrgetter(*(f.name for f in dataclasses.fields(row_type)))


def row_tuple(row: object) -> tuple:
    """``row`` (an instance of any row type, a rule's own included) as the tuple of its columns, in column order."""
    return _getter(type(row))(row)
