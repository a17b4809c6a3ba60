"""The index's vocabularies: an Enum for every set of values its tables hold (a file's language,
a node's or an edge's kind, a trace's status...), apart from the row types of schema/model.py,
which re-exports them: a query names these without building every table's row type (32 frozen
dataclasses, ~25 ms of a one-file ``perfq affected``).

They are ``StrEnum``s: a member is its value (``EdgeKind.CALL == "call"``, formatted and hashed
as ``"call"``), so the index and every JSON output hold the same strings, and a value read back
from the index compares equal to its member.
"""

from __future__ import annotations

from enum import StrEnum


class Lang(StrEnum):
    """A file's language (``files.lang``)."""

    CPP = "cpp"
    CUDA = "cuda"
    OBJCPP = "objcpp"
    PYTHON = "python"
    YAML = "yaml"
    UNKNOWN = "unknown"  # a file whose extraction failed before its kind was known


class FileStatus(StrEnum):
    """How extracting a file went (``files.status``)."""

    OK = "ok"
    WARNING = "warning"
    SKIPPED = "skipped"


class Origin(StrEnum):
    """Where a file comes from (``files.origin``)."""

    REPO = "repo"
    UPSTREAM = "upstream"  # an out-of-tree backend's PyTorch, indexed beside it


class CallKind(StrEnum):
    """How a call site or reference is written (``calls.kind``, ``call_edges.kind``)."""

    DIRECT = "direct"  # foo(), at::foo()
    MEMBER = "member"  # x.foo(), x->foo(); in Python '.foo' called on a value
    ADDRESS = "address"  # &foo, a function named as a value in C++
    VALUE = "value"  # a C++ function passed by name (extraction only: linked as ADDRESS)
    RESOLVED = "resolved"  # a C++ call clang resolved (parsed with compile flags; qualifier: the callee's USR)
    TEMPLATE_ARG = "template_arg"  # a functor given as a template argument: impl_<ExponentialStub>(...)
    PYTHON = "python"  # a Python call of a dotted name
    REF = "ref"  # a Python dotted name used as a value
    NAME = "name"  # a bare Python name used as a value (extraction only: resolved into REF)
    BASE = "base"  # a Python class's base class
    MEMBER_OF = "member_of"  # a Python class -> one of its methods
    VIRTUAL = "virtual"  # a C++ call of a virtual method linked to an override (call_edges only)


class FunctionKind(StrEnum):
    """What a function of the index is (``functions.kind``): how the extractors found it."""

    FUNCTION = "function"  # a C++ function
    METHOD = "method"  # a C++ method, a constructor (in its class or qualified by it)
    TEMPLATE = "template"  # a C++ function template
    STRUCTURED_IMPL = "structured_impl"  # TORCH_IMPL_FUNC(op): a structured kernel's body
    STRUCTURED_META = "structured_meta"  # TORCH_META_FUNC(op), TORCH_PRECOMPUTE_META_FUNC(op)
    GLOBAL_KERNEL = "global_kernel"  # a CUDA __global__ kernel
    MACRO = "macro"  # a function-like #define: its expansion sites call it
    REGISTRATION = "registration"  # a TORCH_LIBRARY(_IMPL) block: its calls are its m.impl registrations
    PYTHON = "python"  # a Python function or method
    CLASS = "class"  # a Python class: its calls are its bases and methods
    ALIAS = "alias"  # a module-level Python `name = <expr>`: references what expr names


class NodeKind(StrEnum):
    """A node of the reachability graph (``nodes.kind``)."""

    FUNCTION = "function"  # a C++ function (key: its function id)
    PYFUNCTION = "pyfunction"  # a Python function, class or alias (key: its function id)
    STUB = "stub"  # a DispatchStub
    OP = "op"  # an operator, name.overload
    BENCHMARK = "benchmark"  # a benchmark file, by stem


class EdgeKind(StrEnum):
    """An edge of the reachability graph (``reach_edges.kind``): ``src`` is affected when ``dst`` changes."""

    CALL = "call"  # a C++ call
    VIRTUAL_CALL = "virtual_call"  # a C++ call of a virtual method, to an override (detail: which)
    STUB_CALL = "stub_call"  # a C++ call of a DispatchStub
    OP_CALL = "op_call"  # a call of an operator through its API
    PYTHON_CALL = "python_call"
    PYTHON_BINDING = "python_binding"  # Python code calls the C++ function bound to a name (detail: the name, line)
    KERNEL = "kernel"  # a dispatch kernel of an operator (detail: its dispatch key)
    META = "meta"  # a structured kernel's TORCH_META_FUNC
    REGISTERED = "registered"  # a DispatchStub's registered impl (detail: its arch)
    LIBRARY_IMPL = "library_impl"  # a TORCH_LIBRARY m.impl (detail: its dispatch key)
    STRUCTURED_DELEGATE = "structured_delegate"
    AUTOGEN = "autogen"
    STUB_NAME = "stub_name"  # a stub whose callers are upstream, linked to operators by its name
    # an upstream CompositeImplicitAutograd op whose C++ the index does not hold, seen running the op
    # inside it in a small CPU run (item -> _local_scalar_dense): a composite step, as its C++ call would be
    UPSTREAM_COMPOSITE = "upstream_composite"
    BACKWARD = "backward"  # an op's derivatives.yaml formula calls the backward op
    FORMULA = "formula"  # an op's derivatives.yaml formula calls the C++ function: its backward runs it
    METHOD_OF = "method_of"  # a Python method -> its class
    SUBCLASS = "subclass"  # a Python base class -> a subclass
    BENCH_CALL = "bench_call"  # a benchmark calls a Python function
    BENCH_OP = "bench_op"  # a benchmark calls an operator


class OpEdgeKind(StrEnum):
    """Why ``op_edges.caller_op`` is affected when ``op`` is."""

    STRUCTURED_DELEGATE = "structured_delegate"
    AUTOGEN = "autogen"
    UPSTREAM_COMPOSITE = "upstream_composite"  # see EdgeKind.UPSTREAM_COMPOSITE


class BenchOpSource(StrEnum):
    """How a benchmark is known to run an operator (``bench_ops.source``)."""

    STATIC = "static"
    TRACED = "traced"


class TraceStatus(StrEnum):
    """How tracing a benchmark file went (``traces.status``)."""

    ok = "ok"
    partial = "partial"  # some configs failed
    failed = "failed"


class TraceMode(StrEnum):
    """How a test was traced (``bench_tests.mode``)."""

    real = "real"  # ran on the CPU: operators called inside kernels are seen too
    meta = "meta"  # ran on the meta device (shapes only): the operators it dispatches
    fake = "fake"  # ran under FakeTensorMode: the operators it dispatches
    inferred = "inferred"  # could not run fake: the operators of the real tests of its module
    sampled = "sampled"  # not run: the operators of the traced configs of its group (same benchmark,
    # device and attributes but sizes), which agreed
