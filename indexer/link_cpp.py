"""Resolving the call sites of one C++ file: to functions (by name, with C++ lookup
rules approximated), to DispatchStubs, and to operators through their C++ API.

Shared by the full link and by the incremental patch, so both produce the same edges.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from typing import NamedTuple

from indexer.cpp_arity import accepts
from indexer.facts import GLOBAL_SCOPE, Call, Function, namespace_of
from schema.model import CallKind, EdgeKind, FunctionKind, NodeKind

# kinds bound once: the hot loops compare them per call site, and an Enum member looked up on
# its class costs ~0.15 µs on Python 3.11 (a second over PyTorch's call sites)
_MEMBER = CallKind.MEMBER
_DIRECT = CallKind.DIRECT
_ADDRESS = CallKind.ADDRESS
_VALUE = CallKind.VALUE
_RESOLVED = CallKind.RESOLVED
_VIRTUAL = CallKind.VIRTUAL
_METHOD = FunctionKind.METHOD
_MACRO = FunctionKind.MACRO
_TEMPLATE_ARG = CallKind.TEMPLATE_ARG
_CALL = EdgeKind.CALL
_STUB_CALL = EdgeKind.STUB_CALL
_OP_CALL = EdgeKind.OP_CALL
_OP = NodeKind.OP
_STUB = NodeKind.STUB

_ATEN_API_NAMESPACES = {
    "",
    "at",
    "torch",
    "at::cpu",
    "at::cuda",
    "at::meta",
    "at::redispatch",
    "at::compositeexplicitautograd",
    "at::compositeimplicitautograd",
    "at::compositeexplicitautogradnonfunctional",
}
HEADER_SUFFIXES = (".h", ".hpp", ".cuh")
_AMBIGUOUS = 12  # more same-named candidates than this: only same-file / same-namespace ones
# x.get(), x.size(): a method name many classes share says little without types (the
# overrides of one virtual are fewer); both bounds count distinct qualified names
_AMBIGUOUS_METHOD = 6
POLICY_METHODS = 8  # a class given as a template argument with more methods is a type, not a policy
# a structured kernel's TORCH_META_FUNC / TORCH_IMPL_FUNC body is a method of a generated
# class deriving from MetaBase, or TensorIteratorBase (``structured_inherits``): its
# unqualified calls (``build_unary_op(...)``, ``device_type()``) find their members
_STRUCTURED_KINDS = frozenset({FunctionKind.STRUCTURED_META, FunctionKind.STRUCTURED_IMPL})
_STRUCTURED_BASES = frozenset({"at::TensorIteratorBase", "at::impl::MetaBase"})
# a virtual call whose overrides span more classes than this is a hub (an interface most of a
# library implements): it is not followed, and the link says so
VIRTUAL_HUB = 12
_WORDS = re.compile(r"\w+")
_ANY_ARGS = re.compile(r"<[^<>]*>")


# the declared types of a receiver whose member calls can be Tensor methods: a tensor (a type
# named so, not a template like cute's Tensor<Engine, Layout>) or a holder of one
_TENSORS = frozenset({"Tensor", "TensorBase", "Variable", "OptionalTensorRef"})
_HOLDERS = frozenset({"optional", "MaybeOwned", "ExclusivelyOwned", "reference_wrapper", "intrusive_ptr"})
_TENSOR_WORD = re.compile(r"\bTensor\b")


@lru_cache(maxsize=4096)
def may_be_tensor(qualifier: str) -> bool:
    """Whether a member call with ``qualifier`` ('.' and its receiver's declared type, read by
    the extractor: '.at::Tensor', '.Device', '.' unknown) may be a Tensor method call."""
    receiver = qualifier[1:]
    if receiver in ("", "auto") or receiver.startswith("decltype"):
        return True
    outer, _, args = receiver.partition("<")
    outer = outer.rpartition("::")[2]
    if outer in _HOLDERS:
        return bool(_TENSOR_WORD.search(args))
    return not args and (outer in _TENSORS or outer.endswith("Tensor"))


@lru_cache(maxsize=65536)
def visible_scopes(namespace: str, usings: tuple[str, ...]) -> frozenset[str]:
    """Namespaces an unqualified call from a function in ``namespace`` can find names in:
    every enclosing scope, the global one, and those of ``using namespace`` directives."""
    parts = namespace.split("::") if namespace else []
    scopes = {"::".join(parts[:i]) for i in range(len(parts) + 1)}
    for ns in usings:
        ns = ns.lstrip(":")
        scopes.add(ns)
        for prefix in list(scopes):
            if prefix:
                scopes.add(f"{prefix}::{ns}")
    # inline namespaces that ATen uses everywhere
    scopes |= {f"{s}::CPU_CAPABILITY" for s in list(scopes) if s}
    scopes |= {f"{s}::(anonymous namespace)" for s in list(scopes) if s}
    return frozenset(scopes)


_FROM_ARGS = re.compile(r"<.*")


def _strip_args(name: str) -> str:
    return _FROM_ARGS.sub("", name)


_TEMPLATE_ARGS = re.compile(r"<([^<>]*)>")


@cache  # asked once per qualified call site, of a few thousand template callers
def template_params(qualname: str) -> frozenset[str]:
    """The template parameters a function's qualified name spells (its own and its classes'):
    'ns::Foo<T>::run<out_ndims, F>' -> {T, out_ndims, F}."""
    return frozenset(arg.strip().split(" ")[-1] for args in _TEMPLATE_ARGS.findall(qualname) for arg in args.split(","))


def _through_param(caller_qualname: str, qual: str, kind: CallKind) -> bool:
    """Is a call qualified by one of its caller's template parameters (``F::f()`` in a template of F)?"""
    return bool(qual) and kind != _MEMBER and qual.split("::")[-1] in template_params(caller_qualname)


def _class_of(qualname: str) -> str:
    """'at::native::xpu::Functor<T>::operator()' -> 'at::native::xpu::Functor' (template arguments dropped)."""
    return _strip_args(namespace_of(qualname))


def call_names(name: str, qualname: str) -> set[str]:
    """The names calls reach a function by: its own, and for an operator() its class's (a
    functor constructed without a constructor of its own)."""
    if name != "operator()":
        return {name}
    return {name, _class_of(qualname).rpartition("::")[2]}


def _unit_of(path: str) -> tuple[str, str]:
    """(directory name, stem without -inl/_inl): the files of one C++ unit
    (``core/ivalue.h``, ``core/ivalue_inl.h``; ``nn/modules/rnn.h``, ``nn/modules/rnn.cpp``)."""
    directory, _, name = path.rpartition("/")
    stem = name.rpartition(".")[0] or name
    for suffix in ("-inl", "_inl"):
        stem = stem.removesuffix(suffix)
    return directory.rpartition("/")[2], stem


def short_class(name: str) -> str:
    """'at::native::Foo<T>' -> 'Foo'."""
    return class_key(name).rpartition("::")[2]


def class_key(name: str) -> str:
    """A class's name without template arguments: 'ns::Foo<T>::Inner<U>' -> 'ns::Foo::Inner'."""
    while "<" in name:
        stripped = _ANY_ARGS.sub("", name)
        if stripped == name:
            return _strip_args(name)
        name = stripped
    return name


@dataclass
class LinkedCalls:
    """Rows produced for one file's call sites."""

    calls: list[tuple] = field(default_factory=list)  # (caller, name, qualifier, kind, line)
    call_edges: list[tuple] = field(default_factory=list)  # (caller, callee, kind, line)
    op_calls: list[tuple] = field(default_factory=list)  # (caller, op, via, line)
    reach: list[tuple] = field(default_factory=list)  # (dst node, src node, kind, detail)
    hubs: list[str] = field(default_factory=list)  # virtual calls not followed: too many overrides


class _LookedUp(NamedTuple):
    """The functions a qualified or member call of one name can reach (``CppCallLinker._lookup``),
    split for a call from any file: those of external linkage (each file may call them), their
    number of distinct qualified names, and by file, the internal ones and all of them."""

    listed: list[int]
    external: list[int]
    external_set: frozenset[int]
    internal: dict[int, list[int]]  # file -> its internal functions of the list
    by_file: dict[int, list[int]]  # file -> its functions of the list
    external_names: int


class ClassHierarchy:
    """Classes by qualified name (template arguments dropped): their bases, subclasses and
    virtual methods, for resolving a virtual call to the overrides of its method in the
    subclasses of the receiver's class. A name as written (a base, a receiver's type) is looked
    up from the scope it is written in outwards, as C++ does; one found in no enclosing scope
    is every class of that name."""

    def __init__(self, classes: Iterable[tuple[int, str, Sequence[str], Sequence[str]]]) -> None:
        # (file id, qualified name, bases as written, methods declared virtual or override)
        rows = [(file_id, class_key(qualname), bases, virtuals) for file_id, qualname, bases, virtuals in classes]
        self.by_short: dict[str, set[str]] = defaultdict(set)
        self.files: dict[str, set[int]] = defaultdict(set)
        self.virtuals: dict[str, set[str]] = defaultdict(set)
        self.declaring: dict[str, set[str]] = defaultdict(set)  # method -> classes declaring it virtual
        for file_id, key, _, virtuals in rows:
            self.by_short[key.rpartition("::")[2]].add(key)
            self.files[key].add(file_id)
            for name in virtuals:
                self.virtuals[key].add(name)
                self.declaring[name].add(key)
        self.parents: dict[str, set[str]] = defaultdict(set)
        self.children: dict[str, set[str]] = defaultdict(set)
        for _, key, bases, _ in rows:
            for base in bases:
                for parent in self.resolve(base, namespace_of(key)):
                    if parent != key:
                        self.parents[key].add(parent)
                        self.children[parent].add(key)
        self._subtrees: dict[str, frozenset[str]] = {}

    def resolve(self, written: str, scope: str) -> set[str]:
        """The classes a name written in ``scope`` (a namespace or class) names."""
        written = class_key(written).lstrip(":")
        candidates = self.by_short.get(written.rpartition("::")[2])
        if not candidates:
            return set()
        parts = scope.split("::") if scope else []
        for i in range(len(parts), -1, -1):
            key = "::".join([*parts[:i], written])
            if key in candidates:
                return {key}
        return {c for c in candidates if c == written or c.endswith("::" + written)}

    def classes_of_method(self, method_class: str) -> set[str]:
        """The classes a method defined as ``method_class::m`` belongs to (by its short name
        when its qualified one is not a recorded class: a definition written from elsewhere)."""
        key = class_key(method_class)
        return {key} if key in self.files else self.by_short.get(key.rpartition("::")[2], set())

    def is_virtual(self, cls: str, name: str) -> bool:
        """Whether ``name`` is virtual in ``cls``: declared so there or in one of its bases."""
        seen, stack = {cls}, [cls]
        while stack:
            c = stack.pop()
            if name in self.virtuals.get(c, ()):
                return True
            for p in self.parents.get(c, ()):
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False

    def subtree(self, cls: str) -> frozenset[str]:
        """``cls`` and every class deriving from it, directly or not."""
        found = self._subtrees.get(cls)
        if found is None:
            seen, stack = {cls}, [cls]
            while stack:
                for c in self.children.get(stack.pop(), ()):
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
            found = self._subtrees[cls] = frozenset(seen)
        return found


def redefined_macros(ids: Sequence[int], functions: Sequence[Function]) -> dict[str, dict[int, int]]:
    """The function-like macros a file defines more than once (``#undef`` and ``#define`` again):
    name -> each definition's id -> its first line."""
    lines: dict[str, dict[int, int]] = defaultdict(dict)
    for fid, f in zip(ids, functions, strict=False):
        if f.kind == _MACRO:
            lines[f.name][fid] = f.start_line
    return {name: starts for name, starts in lines.items() if len(starts) > 1}


def in_force(targets: list[tuple[int, CallKind]], starts: Mapping[int, int], line: int) -> list[tuple[int, CallKind]]:
    """``targets`` of an expansion at ``line`` without the file's definitions of the macro that
    are not in force there: only the last ``#define`` before it (a valid file ``#undef``s the
    others before defining it again; none before it: the file's are not defined yet)."""
    before = [fid for fid, start in starts.items() if start < line]
    last = max(before, key=starts.__getitem__) if before else None
    return [(f, k) for f, k in targets if f not in starts or f == last]


class CppCallLinker:
    """Name tables of every indexed function and operator, and the resolution rules."""

    def __init__(
        self,
        # (id, file_id, qualname, name, kind, internal, is_cpp, in_header, usr[, least_args, most_args])
        functions: Iterable[tuple],
        ops: Iterable[tuple[str, str, str, str]],  # (name, base, overload, variants)
        stub_names: set[str],
        node_of: Callable[[NodeKind, str], int],
        paths: Mapping[int, str] | None = None,  # file id -> path
        # reads file id -> the indexed files it includes (called when a method call first needs it)
        includes: Callable[[], Mapping[int, Iterable[int]]] | None = None,
        hierarchy: ClassHierarchy | None = None,
    ) -> None:
        self._read_includes = includes
        self.hierarchy = hierarchy or ClassHierarchy(())
        self._visible_units: dict[int, int] = {}  # file -> the units it sees, as bits (visible_units)
        self._unit_index: dict[tuple[str, str] | None, int] = {}  # a unit's bit in those sets
        self.rows: dict[int, tuple] = {}
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.by_usr: dict[str, list[int]] = defaultdict(list)
        self.name_of: dict[int, str] = {}
        self.raw_internal: dict[int, bool] = {}
        # the argument counts a function accepts, where the text bounds them (indexer/cpp_arity.py)
        self.arity: dict[int, tuple[int, int | None]] = {}
        for fid, file_id, qualname, name, kind, internal, is_cpp, in_header, usr, *arity in functions:
            # static / anonymous-namespace functions of a header are seen by every includer
            self.rows[fid] = (file_id, qualname, kind, internal and not in_header, namespace_of(qualname))
            self.name_of[fid] = name
            self.raw_internal[fid] = internal
            if arity and (arity[0] or arity[1] is not None):
                self.arity[fid] = (arity[0], arity[1])
            if is_cpp:
                self.by_name[name].append(fid)
                if usr:
                    self.by_usr[usr].append(fid)
        for fids in self.by_name.values():
            fids.sort()  # the first target is the lowest id, in a full link and in a patch alike
        # a functor's constructor -> its operator(): constructing one is how SYCL and std
        # algorithms are handed the code they run
        self.call_operator: dict[str, list[int]] = defaultdict(list)
        # and a functor without a constructor of its own (``Functor kfn{args}``): its name -> its operator()
        self.functors: dict[str, list[int]] = defaultdict(list)
        for fid in self.by_name.get("operator()", ()):
            cls = _class_of(self.rows[fid][1])
            self.call_operator[cls].append(fid)
            self.functors[cls.rpartition("::")[2]].append(fid)
        # a policy class (no operator()) by its name -> its methods: a template given it calls
        # its static members (``launch<scalar_t, DistsZero<scalar_t>>``: ``F::inc(...)``); made
        # when a template argument first needs it
        self._policies: dict[str, list[int]] | None = None
        # a dispatch kernel renamed by reordering its words (arange_out_xpu -> arange_xpu_out)
        self.by_words: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for name, fids in self.by_name.items():
            if "_" in name:
                self.by_words[tuple(sorted(name.split("_")))].extend(fids)
        self.aten_api: dict[str, list[str]] = defaultdict(list)
        self.ops_by_base: dict[str, list[str]] = defaultdict(list)
        self.method_ops: dict[str, list[str]] = defaultdict(list)
        self.ops_struct: dict[str, str] = {}
        for name, base, overload, variants in ops:
            self.ops_by_base[base].append(name)
            self.aten_api[base].append(name)
            self.aten_api[f"{base}_symint"].append(name)
            if "out" in overload:
                for suffix in ("_out", "_outf", "_symint_out", "_symint_outf"):
                    self.aten_api[base + suffix].append(name)
            if "method" in variants:
                self.method_ops[base].append(name)
            self.ops_struct[name.replace(".", "_")] = name
        self.stub_names = stub_names
        # the names a call site of an operator or a stub has (_operator_and_stub_edges)
        self._op_or_stub_names = frozenset(stub_names).union(self.method_ops, self.aten_api, ("call", "redispatch"))
        self.node_of = node_of
        self._invoked: dict[int, list[int]] = {}
        self._methods: dict[int, str] = {}
        self._units = {file_id: _unit_of(path) for file_id, path in (paths or {}).items()}
        # within one file, name resolution depends on the caller only through its scope, its
        # kind and itself (a function never calls itself here): memoised by the rest, file by file
        self._memo: dict[tuple, tuple[frozenset[int], list[int]]] = {}
        # a caller's (namespace, qualified name's scope, kind) as a number, for those memo keys
        self._scope_ids: dict[tuple[str, str, str], int] = {}
        self._scope_of: dict[int, int] = {}
        self._lookups: dict[tuple[str, str, bool], list[int]] = {}  # by (name, last qualifier, member call)
        self._looked_up_parts: dict[tuple[str, str, bool], _LookedUp] = {}  # the same, split (_looked_up)
        self.hubs: list[str] = []  # virtual calls left out since the last link_file
        self._hub_names: set[str] = set()
        self._virtual_memo: dict[tuple, list[int] | None] = {}
        # (file, method) -> the classes declaring the method virtual that the file sees
        self._seen_roots: dict[tuple[int, str], set[str]] = {}
        self._overrides_memo: dict[tuple[str, frozenset[str]], list[int]] = {}  # by (method, root classes)

    def kernel_targets(self, kernel_name: str) -> list[int]:
        """Definitions of a native_functions.yaml dispatch kernel name (TORCH_IMPL_FUNC
        definitions carry the kernel's name), not meta functions."""
        if not kernel_name:
            return []
        name = kernel_name.split("::")[-1]
        found = self.by_name.get(name) or self.by_words.get(tuple(sorted(name.split("_"))), [])
        # the dispatcher's registrations call at::native::<name>: a same-named helper of another
        # namespace or class (xpu::pstl::sort, CPUGeneratorImpl::clone) is not the kernel
        scope = kernel_name.rpartition("::")[0] if "::" in kernel_name else "at::native"
        return [f for f in found if namespace_of(self.rows[f][1]) == scope]

    def registered_targets(self, impl_name: str, file_id: int) -> list[int]:
        """Definitions a REGISTER_*_DISPATCH in ``file_id`` names: its own file's first."""
        cands = [
            f
            for f in self.by_name.get(impl_name.split("::")[-1], ())
            if self.rows[f][0] == file_id or not self.raw_internal[f]
        ]
        return [f for f in cands if self.rows[f][0] == file_id] or cands

    def library_targets(self, kernel_name: str, file_id: int) -> list[int]:
        """Definitions an m.impl in ``file_id`` names (qualified names must match)."""
        return [
            f
            for f in self.by_name.get(kernel_name.split("::")[-1], ())
            if self.rows[f][1].endswith(kernel_name) and (self.rows[f][0] == file_id or not self.raw_internal[f])
        ]

    def bound_targets(self, symbol: str, file_id: int) -> list[int]:
        """Definitions a Python binding in ``file_id`` names (``THPModule_foo`` of a method table,
        ``&Class::method`` of a pybind11 ``def``), as the linker resolves a name: the qualified
        name must match to its end, a function of internal linkage only from its own file, the
        binding file's own definition first, then those of the files it includes (its units);
        a name still naming functions of more than one qualified name past that binds none."""
        found = [
            f
            for f in self.by_name.get(symbol.rpartition("::")[2], ())
            if (self.rows[f][1] == symbol or self.rows[f][1].endswith(f"::{symbol}"))
            and (self.rows[f][0] == file_id or not self.raw_internal[f])
        ]
        own = [f for f in found if self.rows[f][0] == file_id]
        if own or len(found) <= 1:
            return own or found
        if self._read_includes is not None and self._units:
            units, unit_bit = self.visible_units(file_id), self.unit_bit
            found = [f for f in found if units & unit_bit(self.rows[f][0])] or found
        return found if len({self.rows[f][1] for f in found}) == 1 else []

    def library_ops(self, namespace: str, op: str) -> list[str]:
        """Operators an m.impl registers: every overload of an aten name without one."""
        return self.ops_by_base.get(op.split(".")[0], [op]) if namespace == "aten" and "." not in op else [op]

    def _op_call(self, out: LinkedCalls, caller: int, op: str, via: str, line: int) -> None:
        out.op_calls.append((caller, op, via, line))
        out.reach.append((self.node_of(_OP, op), caller, _OP_CALL, f"{via} line {line}"))

    def link_file(
        self, file_id: int, ids: Sequence[int], calls: Iterable[Call], usings: tuple[str, ...],
        functions: Sequence[Function] = (),
    ) -> LinkedCalls:
        """Rows for the call sites of one file whose functions have ids ``ids`` (in the order
        of its facts, ``functions``: an expansion of a macro the file defines more than once
        calls the definition in force at its line)."""
        out = LinkedCalls()
        redefined = redefined_macros(ids, functions)
        self._memo.clear()
        self._virtual_memo.clear()
        self._seen_roots.clear()
        linked: set[tuple[int, int]] = set()
        calls = list(calls)
        # a file parsed with its compile flags: clang resolved its calls (by USR); names
        # are then only used for stubs, operators, and callees clang could not find here
        exact = frozenset((c.func_index, c.callee_name, c.line) for c in calls if c.kind == _RESOLVED)
        # a caller's second call of the same name reaches the same functions, already linked
        # from its first (unless clang resolved some of its calls: they are told apart by line)
        sites: set[tuple] = set()
        # bound once: this loop runs for every call site of the tree (~360k in PyTorch)
        rows_calls, call_edges, reach = out.calls, out.call_edges, out.reach
        op_or_stub, invoked, function_targets = self._op_or_stub_names, self._invoked, self.function_targets
        for c in calls:
            func_index, name, qual, kind, line, n_args = c
            caller = ids[func_index]
            if kind != _RESOLVED:
                rows_calls.append((caller, name, qual, kind, line, n_args))
                if name in op_or_stub:  # else no operator or stub is called
                    self._operator_and_stub_edges(c, caller, out)
            site = (func_index, name, qual, kind, line if exact or name in redefined else 0, n_args)
            if site in sites:
                continue
            sites.add(site)
            targets = function_targets(file_id, caller, c, usings, exact)
            if name in redefined and self.rows[caller][2] != _MACRO:  # (a macro's own expansions: where it is expanded)
                targets = in_force(targets, redefined[name], line)
            for callee, edge_kind in targets:
                also = invoked.get(callee)
                if also is None:
                    also = self.invoked(callee)
                for target in [callee, *also] if also else (callee,):
                    if target != caller and (caller, target) not in linked:
                        linked.add((caller, target))
                        call_edges.append((caller, target, edge_kind, line))
                        if edge_kind == _VIRTUAL and target == callee:
                            reach.append(self.reach_edge(target, caller, True, line))
                        else:
                            reach.append((target, caller, _CALL, f"line {line}"))
        out.hubs, self.hubs = self.hubs, []
        return out

    def _lookup(self, name: str, last_qual: str, member: bool) -> list[int]:
        """The functions named ``name`` that a call qualified by ``last_qual`` (a member call:
        methods only) can reach, whatever its file; kept for every file."""
        key = (name, last_qual, member)
        found = self._lookups.get(key)
        if found is None:
            found = self._lookups[key] = [
                fid
                for fid in self.by_name[name]
                if (not member or self.rows[fid][2] == _METHOD)
                and (not last_qual or f"{last_qual}::" in self.rows[fid][1] or f"{last_qual}<" in self.rows[fid][1])
            ]
        return found

    def _looked_up(self, name: str, last_qual: str, member: bool) -> _LookedUp:
        """``_lookup``'s functions split for a call from any file (kept for every file)."""
        key = (name, last_qual, member)
        found = self._looked_up_parts.get(key)
        if found is None:
            rows = self.rows
            listed = self._lookup(name, last_qual, member)
            external = [f for f in listed if not rows[f][3]]
            internal: dict[int, list[int]] = defaultdict(list)
            by_file: dict[int, list[int]] = defaultdict(list)
            for f in listed:
                by_file[rows[f][0]].append(f)
                if rows[f][3]:
                    internal[rows[f][0]].append(f)
            found = self._looked_up_parts[key] = _LookedUp(
                listed, external, frozenset(external), dict(internal), dict(by_file),
                len({rows[f][1] for f in external}),
            )
        return found

    def _resolve_looked_up(
        self, file_id: int, excluded: int, name: str, last_qual: str, kind: CallKind, caller: int
    ) -> tuple[list[int], list[int]]:
        """``_resolve`` for a qualified or member call: the functions ``_lookup`` finds that
        ``file_id`` can call (internal linkage: its own only), by the same rules as an
        unqualified call's after the lookup, the parts that do not depend on the calling file
        made once per looked-up name (``_looked_up``)."""
        rows = self.rows
        member = kind == _MEMBER
        parts = self._looked_up(name, last_qual, member)
        targets, n_names = parts.external, parts.external_names
        if file_id in parts.internal or excluded in parts.external_set:
            targets = [f for f in parts.listed if f != excluded and (not rows[f][3] or rows[f][0] == file_id)]
            n_names = -1
        same_file = parts.by_file.get(file_id, ())
        if len(targets) > 1:
            narrowed = self._own_class_definitions(targets, file_id, caller, [f for f in same_file if f != excluded])
            if narrowed is not targets:
                targets, n_names = narrowed, -1
        kept = targets
        if n_names < 0:
            n_names = len({rows[f][1] for f in targets})
        if n_names > (_AMBIGUOUS_METHOD if member else _AMBIGUOUS):
            # a very common name: keep the same file and the caller's namespace; for a method
            # (x.get(), x.size()) the namespace says nothing about x's class: the same file only
            # (a function of the caller's file is never dropped from ``targets`` above)
            if member:
                kept = [f for f in same_file if f != excluded]
            else:
                scope = rows[caller][1].rsplit("::", 1)[0]
                kept = [f for f in targets if rows[f][0] == file_id or rows[f][1].startswith(scope + "::")]
        if member and kept and self._read_includes is not None and self._units:
            units = self.visible_units(file_id)  # calling a method needs its class's definition
            unit_bit = self.unit_bit
            seen = [f for f in kept if units & unit_bit(rows[f][0])]
            kept = seen if seen or len(kept) == 1 else kept  # none seen: overrides of a virtual, maybe
        return targets, kept

    def visible_units(self, file_id: int) -> int:
        """The C++ units (a header with its .cpp) of ``file_id`` and the indexed files it
        includes, directly or not: where the class of a method it calls on an object can be
        defined (a method defined out of line in ``X.cpp`` is visible where ``X.h`` is). A set
        of units as bits (``unit_bit``), made for every file the walk reaches at once: the
        files of one cycle of includes see the same units, and a file sees those of the files
        it includes (Tarjan's walk over the include graph)."""
        found = self._visible_units.get(file_id)
        if found is not None:
            return found
        closed, includes, unit_bit = self._visible_units, self.includes, self.unit_bit
        index = {file_id: 0}
        low = {file_id: 0}
        bits = {file_id: unit_bit(file_id)}  # each open file's units and those of the files it reached
        stack, on_stack = [file_id], {file_id}
        walk = [(file_id, iter(includes.get(file_id, ())))]
        while walk:
            f, edges = walk[-1]
            for inc in edges:
                done = closed.get(inc)
                if done is not None:
                    bits[f] |= done
                elif inc not in index:
                    index[inc] = low[inc] = len(index)
                    bits[inc] = unit_bit(inc)
                    stack.append(inc)
                    on_stack.add(inc)
                    walk.append((inc, iter(includes.get(inc, ()))))
                    break
                elif inc in on_stack:  # in the cycle of f: its units join f's when the cycle closes
                    low[f] = min(low[f], index[inc])
            else:
                walk.pop()
                if low[f] == index[f]:  # f's cycle closes: its files see the same units
                    cycle, seen = [], 0
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        cycle.append(member)
                        seen |= bits[member]
                        if member == f:
                            break
                    for member in cycle:
                        closed[member] = seen
                if walk:
                    parent = walk[-1][0]
                    low[parent] = min(low[parent], low[f])
                    if f in closed:
                        bits[parent] |= closed[f]
        return closed[file_id]

    def unit_bit(self, file_id: int) -> int:
        """The bit of ``file_id``'s unit in a set of units (``visible_units``)."""
        unit = self._units.get(file_id)
        at = self._unit_index.get(unit)
        if at is None:
            at = self._unit_index[unit] = len(self._unit_index)
        return 1 << at

    @cached_property
    def includes(self) -> Mapping[int, Iterable[int]]:
        return self._read_includes() if self._read_includes is not None else {}

    def _own_class_definitions(
        self, targets: list[int], file_id: int, caller: int, same_file: list[int] | None = None
    ) -> list[int]:
        """``targets`` without the methods of the calling method's own class that its file
        defines and another file defines again under the same qualified name, unless that
        file is the caller's companion (``ivalue.h``/``ivalue_inl.h``, ``rnn.h``/``rnn.cpp``):
        a class defined once per CPU architecture (``Vectorized<T>`` in every vec*/ header) or
        per backend calls, in each of its files, its own definitions."""
        own_class = self._method_key(caller).rpartition("::")[0]
        if not own_class or not self._units:
            return targets
        local = {
            key
            for f in (targets if same_file is None else same_file)  # same_file: those of targets in file_id
            if self.rows[f][0] == file_id and (key := self._method_key(f)).rpartition("::")[0] == own_class
        }
        if not local:
            return targets
        unit = self._units.get(file_id)
        return [f for f in targets if self._method_key(f) not in local or self._units.get(self.rows[f][0]) == unit]

    def _class_scope(self, targets: list[int], caller: int, name: str) -> list[int]:
        """C++ lookup of an unqualified call: in a method (a structured kernel's body is one of
        a class deriving from its structured base), its own class's members hide other
        functions of the name; in a free function, another class's method (not a constructor)
        cannot be called without an object."""
        classes = self._classes_of(caller)
        if classes:
            members = [f for f in targets if self._method_key(f).rpartition("::")[0] in classes]
            return members or targets
        free = [f for f in targets if not (key := self._method_key(f)) or key.split("::")[-2:] == [name, name]]
        return free or targets

    def _classes_of(self, caller: int) -> Collection[str]:
        """The classes whose members ``caller``'s unqualified calls find first: a method's
        own, a structured kernel body's structured bases, none for a free function."""
        own_class = self._method_key(caller).rpartition("::")[0]
        if own_class:
            return (own_class,)
        return _STRUCTURED_BASES if self.rows[caller][2] in _STRUCTURED_KINDS else ()

    def _method_key(self, fid: int) -> str:
        """A method's qualified name without template arguments, '' for other functions."""
        key = self._methods.get(fid)
        if key is None:
            _, qualname, kind, _, _ = self.rows[fid]
            key = self._methods[fid] = _strip_args(_ANY_ARGS.sub("", qualname)) if kind == _METHOD else ""
        return key

    def call_names(self, fid: int) -> set[str]:
        """The names calls reach ``fid`` by (see ``call_names``)."""
        return call_names(self.name_of[fid], self.rows[fid][1])

    def invoked(self, fid: int) -> list[int]:
        """The operator() of the class whose constructor ``fid`` is (constructing a functor
        hands it the code it runs), else []."""
        found = self._invoked.get(fid)
        if found is None:
            qualname = self.rows[fid][1]
            cls = _class_of(qualname)
            ctor = _strip_args(qualname.rpartition("::")[2]) == _strip_args(cls.rpartition("::")[2])
            found = self._invoked[fid] = self.call_operator.get(cls, []) if ctor else []
        return found

    def _operator_and_stub_edges(self, c: Call, caller: int, out: LinkedCalls) -> None:
        name, qual, kind = c.callee_name, c.qualifier, c.kind
        if kind == _TEMPLATE_ARG:  # a type, not a call of an operator or a stub
            return
        if name in self.stub_names and kind != _MEMBER:
            out.reach.append((self.node_of(_STUB, name), caller, _STUB_CALL, f"line {c.line}"))
            return
        if qual.startswith("at::_ops::") and name in ("call", "redispatch"):
            op = self.ops_struct.get(qual[len("at::_ops::") :])
            if op:
                self._op_call(out, caller, op, "at::_ops", c.line)
            return
        if kind == _MEMBER and may_be_tensor(qual):
            for op in self.method_ops.get(name, ()):
                self._op_call(out, caller, op, f".{name}()", c.line)
        elif qual in _ATEN_API_NAMESPACES and name in self.aten_api:
            for op in self.aten_api[name]:
                self._op_call(out, caller, op, f"{qual or 'at'}::{name}", c.line)

    def function_targets(
        self, file_id: int, caller: int, c: Call, usings: tuple[str, ...], exact: frozenset = frozenset()
    ) -> list[tuple[int, CallKind]]:
        """(function, edge kind) the call site ``c`` of ``caller`` resolves to."""
        name, qual, kind = c.callee_name, c.qualifier, c.kind
        if kind == _RESOLVED:
            return [(f, _RESOLVED) for f in self.by_usr.get(qual, ()) if f != caller]
        if kind == _TEMPLATE_ARG:  # impl_<ExponentialStub>(...): the template calls the functor it is given
            if name in self.functors:
                found = self._functor_targets(file_id, caller, name, qual, usings)
            else:
                found = self._policy_targets(file_id, caller, name, qual, usings)
            return [(f, _TEMPLATE_ARG) for f in found]
        if name in self.stub_names and kind != _MEMBER:
            return []
        if kind == _VALUE:
            kind = _ADDRESS  # a function passed by name: like &name
        if qual.startswith("at::_ops::") and name in ("call", "redispatch"):
            return []
        if kind == _MEMBER and name in self.method_ops and may_be_tensor(qual):
            return []  # tensor.foo(): the operator, not every C++ method named foo
        if kind != _MEMBER and qual == "at" and name in self.aten_api:
            return []
        if exact and (c.func_index, name, c.line) in exact:
            return []  # clang resolved this call: no name-based guesses
        targets = self._targets(file_id, caller, name, qual, kind, usings)
        by_count = c.n_args is not None and kind in (_DIRECT, _MEMBER) and bool(self.arity)
        if by_count:
            targets = self.accepting(targets, c.n_args)
        if not targets and kind == _DIRECT and name in self.functors:  # (its construction's arguments are not its own)
            targets = self._functor_targets(file_id, caller, name, qual, usings)
        found = [(f, kind) for f in targets]
        if name in self.hierarchy.declaring and kind in ("member", "direct"):
            overrides = self.virtual_targets(file_id, caller, name, qual, kind)
            if overrides is not None and by_count:
                overrides = self.accepting(overrides, c.n_args)
            if overrides is not None and kind == "member":
                return [(f, CallKind.VIRTUAL) for f in overrides]  # the hierarchy, not every method of the name
            found += [(f, CallKind.VIRTUAL) for f in overrides or () if f not in targets]
        return found

    def accepting(self, fids: list[int], n_args: int | None) -> list[int]:
        """Those of ``fids`` a call passing ``n_args`` arguments can call: a definition whose
        argument counts are bounded and leave ``n_args`` out is another overload's, not this call's."""
        arity = self.arity
        if n_args is None or not any(f in arity for f in fids):
            return fids
        return [f for f in fids if f not in arity or accepts(*arity[f], n_args)]

    def virtual_targets(self, file_id: int, caller: int, name: str, qual: str, kind: str) -> list[int] | None:
        """The overrides a virtual call of ``name`` can dispatch to: its definitions in the
        receiver's class and those deriving from it (``x->m()``: the declared type's; unknown:
        the classes declaring ``m`` virtual that the caller's file sees; ``m()`` in a method:
        its own class's). None when the call is not a virtual one, or dispatches to more than
        VIRTUAL_HUB classes: a hub, not followed (noted in ``hubs``)."""
        caller_class = self._method_key(caller).rpartition("::")[0]
        key = (file_id, caller_class, self.rows[caller][4], name, qual, kind)
        if key not in self._virtual_memo:  # a file's calls of one method on one receiver type: one lookup
            self._virtual_memo[key] = self._dispatch(file_id, caller, caller_class, name, qual, kind)
        found = self._virtual_memo[key]
        return None if found is None else [f for f in found if f != caller]

    def _dispatch(
        self, file_id: int, caller: int, caller_class: str, name: str, qual: str, kind: str
    ) -> list[int] | None:
        """virtual_targets for a call from ``caller`` (its class ``caller_class``), ``caller`` not left out."""
        h = self.hierarchy
        if kind == "member":
            receiver = qual[1:]
            if receiver and receiver != "auto" and not receiver.startswith("decltype"):
                scope = caller_class or self.rows[caller][4]
                roots = {
                    c for w in _WORDS.findall(receiver) if w in h.by_short
                    for c in h.resolve(w, scope) if h.is_virtual(c, name)
                }
            else:  # the same for every call of the name from the file
                roots = self._seen_roots.get((file_id, name))
                if roots is None:
                    roots = {c for c in h.declaring[name] if self._sees(file_id, h.files[c])}
                    self._seen_roots[(file_id, name)] = roots
        elif not qual and caller_class:
            roots = {c for c in h.classes_of_method(caller_class) if h.is_virtual(c, name)}
        else:
            return None  # Base::m() names its definition; a free function's m() is no method call
        if not roots:
            return None
        rows = self.rows
        targets = [f for f in self._overrides(name, frozenset(roots)) if not rows[f][3] or rows[f][0] == file_id]
        overriding = {self._method_key(f).rpartition("::")[0] for f in targets}
        if len(overriding) > VIRTUAL_HUB:
            if name not in self._hub_names:  # said once per method name
                self._hub_names.add(name)
                self.hubs.append(
                    f"virtual call {name}() (first in {rows[caller][1]}): {len(overriding)} classes override it,"
                    " a hub: not followed"
                )
            return None
        return targets

    def _overrides(self, name: str, roots: frozenset[str]) -> list[int]:
        """The methods named ``name`` of the classes ``roots`` and those deriving from them, from
        any file (kept for every file)."""
        found = self._overrides_memo.get((name, roots))
        if found is None:
            h = self.hierarchy
            classes = frozenset().union(*(h.subtree(r) for r in roots))
            found = self._overrides_memo[(name, roots)] = [
                f for f in self._lookup(name, "", True)
                if h.classes_of_method(self._method_key(f).rpartition("::")[0]) & classes
            ]
        return found

    def _sees(self, file_id: int, files: Collection[int]) -> bool:
        """Whether ``file_id`` sees a class defined in ``files`` (its own, or a unit it includes)."""
        if file_id in files or self._read_includes is None or not self._units:
            return True
        units = self.visible_units(file_id)
        return any(units & self.unit_bit(f) for f in files if f in self._units)

    def reach_edge(self, target: int, caller: int, virtual: bool, line: int) -> tuple:
        """The reachability edge of a call edge: a virtual call (to an override) names the override's class."""
        if virtual:
            cls = short_class(self._method_key(target).rpartition("::")[0])
            return (target, caller, EdgeKind.VIRTUAL_CALL, f"virtual call, override in {cls} (line {line})")
        return (target, caller, _CALL, f"line {line}")

    def _policy_methods(self) -> dict[str, list[int]]:
        """Classes without an operator(), a constructor or a virtual method, and with at most
        POLICY_METHODS methods (traits and policy classes, not types such as Vectorized, nor
        the objects ``make_intrusive<PerTensorAffineQuantizer>`` builds), by short name -> their
        methods."""
        by_class: dict[str, list[int]] = defaultdict(list)
        for fids in self.by_name.values():  # the C++ functions
            for fid in fids:
                _, qualname, kind, _, _ = self.rows[fid]
                if kind == _METHOD:
                    by_class[_class_of(qualname)].append(fid)
        out: dict[str, list[int]] = defaultdict(list)
        for cls, fids in by_class.items():
            short = cls.rpartition("::")[2]
            if cls in self.call_operator or len(fids) > POLICY_METHODS or "::operator " in cls:
                continue  # (a conversion operator's name, 'X::operator std::optional<T>', is no class)
            names = {self.name_of[f] for f in fids}
            if short in names or f"~{short}" in names or any(self.hierarchy.is_virtual(cls, n) for n in names):
                continue  # an object's class: constructed, not a policy whose members a template calls
            out[short].extend(sorted(fids))
        return out

    def _policy_targets(self, file_id: int, caller: int, name: str, qual: str, usings: tuple[str, ...]) -> list[int]:
        """The methods of the policy classes named ``name`` that ``caller`` can see: those of
        its file, else of its namespaces (a class of another translation unit's anonymous
        namespace is not seen)."""
        if self._policies is None:
            self._policies = self._policy_methods()
        scopes = visible_scopes(self.rows[caller][4], usings)
        last_qual = qual.split("::")[-1]
        out = []
        for fid in self._policies.get(name, ()):
            cand_file, qualname, _, internal, cand_ns = self.rows[fid]
            if cand_file != file_id and (internal or (qual and f"{last_qual}::{name}" not in qualname)):
                continue
            if not qual and cand_file != file_id and namespace_of(cand_ns) not in scopes:
                continue
            out.append(fid)
        same_file = [f for f in out if self.rows[f][0] == file_id]
        return same_file or (out if len({_class_of(self.rows[f][1]) for f in out}) == 1 else [])

    def _functor_targets(self, file_id: int, caller: int, name: str, qual: str, usings: tuple[str, ...]) -> list[int]:
        """The operator() of the classes named ``name`` that a construction ``name(...)`` /
        ``name{...}`` in ``caller`` can see (the class has no constructor of its own)."""
        scopes = visible_scopes(self.rows[caller][4], usings)
        last_qual = qual.split("::")[-1]
        out = []
        for fid in self.functors[name]:
            cand_file, qualname, _, internal, cand_ns = self.rows[fid]
            class_ns = namespace_of(cand_ns)
            if internal and cand_file != file_id:
                continue
            if qual and f"{last_qual}::{name}" not in qualname:
                continue
            if not qual and cand_file != file_id and class_ns not in scopes:
                continue
            out.append(fid)
        return out if len(out) <= _AMBIGUOUS else [f for f in out if self.rows[f][0] == file_id]

    def _targets(
        self, file_id: int, caller: int, name: str, qual: str, kind: CallKind, usings: tuple[str, ...]
    ) -> list[int]:
        if name not in self.by_name:
            return []
        scope = self._scope_of.get(caller)
        if scope is None:
            _, caller_qualname, caller_kind, _, caller_ns = self.rows[caller]
            scope = self._scope_of[caller] = self._scope_ids.setdefault(
                (caller_ns, caller_qualname.rsplit("::", 1)[0], caller_kind), len(self._scope_ids)
            )
        by_param = bool(qual) and kind != _MEMBER and _through_param(self.rows[caller][1], qual, kind)
        key = (file_id, scope, name, qual, kind, usings, by_param)
        memo = self._memo.get(key)
        if memo is None:
            found = self._resolve(file_id, -1, name, qual, kind, usings, caller)
            memo = self._memo[key] = (frozenset(found[0]), found[1])
        if caller in memo[0]:  # the memo is for callers that are not candidates themselves
            return self._resolve(file_id, caller, name, qual, kind, usings, caller)[1]
        return memo[1]

    def _resolve(
        self, file_id: int, excluded: int, name: str, qual: str, kind: CallKind, usings: tuple[str, ...], caller: int
    ) -> tuple[list[int], list[int]]:
        """(candidates by the lookup rules, those kept after the ambiguity rule) for a call
        from ``caller`` (its scope), ``excluded`` left out."""
        last_qual = qual.split("::")[-1] if qual and kind != _MEMBER else ""
        rows = self.rows
        by_param = _through_param(rows[caller][1], qual, kind)
        if by_param:  # a member of whichever class F is, in the caller's top namespace
            top = rows[caller][1].split("::", 1)[0]
            targets = [
                f for f in self._lookup(name, "", True)
                if f != excluded and (not rows[f][3] or rows[f][0] == file_id) and rows[f][1].split("::", 1)[0] == top
            ]
        elif qual == GLOBAL_SCOPE:  # ``::name(...)``: a function of the global namespace, no other
            targets = [
                f for f in self.by_name[name]
                if f != excluded and not rows[f][4] and (not rows[f][3] or rows[f][0] == file_id)
            ]
        elif qual or kind == _MEMBER:  # internal linkage: same translation unit only
            return self._resolve_looked_up(file_id, excluded, name, last_qual, kind, caller)
        else:  # unqualified: the same file, else (not &name) the enclosing and used namespaces
            scopes = visible_scopes(rows[caller][4], usings) if kind != _ADDRESS else frozenset()
            if rows[caller][2] in _STRUCTURED_KINDS:
                scopes |= _STRUCTURED_BASES
            targets = [
                f for f in self.by_name[name]
                if f != excluded and (rows[f][0] == file_id or (not rows[f][3] and rows[f][4] in scopes))
            ]
        if len(targets) > 1:
            targets = self._own_class_definitions(targets, file_id, caller)
        if len(targets) > 1 and kind == _DIRECT and not qual:
            targets = self._class_scope(targets, caller, name)
        kept = targets
        if len({self.rows[f][1] for f in targets}) > (_AMBIGUOUS_METHOD if kind == _MEMBER else _AMBIGUOUS):
            # a very common name: keep the same file and the caller's namespace; for a method
            # (x.get(), x.size()) the namespace says nothing about x's class: the same file only
            scope = self.rows[caller][1].rsplit("::", 1)[0]
            kept = [
                fid
                for fid in targets
                if self.rows[fid][0] == file_id
                or (kind != _MEMBER and self.rows[fid][1].startswith(scope + "::"))
            ]
        if (kind == _MEMBER or by_param) and kept and self._read_includes is not None and self._units:
            units = self.visible_units(file_id)  # calling a method needs its class's definition
            unit_bit = self.unit_bit
            seen = [f for f in kept if units & unit_bit(rows[f][0])]
            kept = seen if seen or len(kept) == 1 else kept  # none seen: overrides of a virtual, maybe
        return targets, kept
