"""Plain fact records produced by the extractors (picklable, no behaviour)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from schema.kinds import CallKind, FileStatus, FunctionKind, Lang, Origin


class Function(NamedTuple):
    qualname: str
    name: str
    kind: FunctionKind
    start_line: int
    end_line: int
    internal: bool
    usr: str = ""  # libclang's unified symbol resolution, when parsed with real compile flags
    least_args: int = 0  # the fewest arguments a call may pass (0 unless certain: indexer/cpp_arity.py)
    most_args: int | None = None  # the most (None: no bound, or not known)


GLOBAL_SCOPE = "::"  # the qualifier of a call written ``::name(...)``: the global namespace only


class Call(NamedTuple):
    func_index: int  # index into FileFacts.functions
    callee_name: str
    qualifier: str  # as written (``at::native``), GLOBAL_SCOPE, '.' for a member call
    kind: CallKind  # read from the facts cache: its value, a str equal to the member
    line: int
    n_args: int | None = None  # the arguments the call passes (None: not certain, or no call's list)


class ClassFact(NamedTuple):
    """A class (or struct) definition: its bases as written (template arguments dropped) and
    the methods it declares ``virtual`` or ``override`` (names only)."""

    qualname: str  # at::native::Foo, with its enclosing namespaces and classes
    bases: tuple[str, ...]
    virtuals: tuple[str, ...]
    line: int


def class_fact(qualname: str, bases: list[str], virtuals: list[str], line: int) -> ClassFact:
    """A ClassFact from its decoded fields (JSON lists)."""
    return ClassFact(qualname, tuple(bases), tuple(virtuals), line)


@dataclass
class StubFact:
    stub: str
    role: str  # declare | define
    line: int


@dataclass
class StubImpl:
    stub: str
    arch: str
    impl_name: str
    line: int


@dataclass
class LibraryImpl:
    namespace: str
    dispatch_key: str
    op: str
    kernel_name: str
    line: int


@dataclass
class LibraryDef:
    namespace: str
    schema: str
    line: int


@dataclass
class FileFacts:
    path: str
    lang: Lang
    sha256: str
    n_lines: int
    status: FileStatus = FileStatus.OK
    message: str = ""
    functions: list[Function] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    stubs: list[StubFact] = field(default_factory=list)
    stub_impls: list[StubImpl] = field(default_factory=list)
    library_impls: list[LibraryImpl] = field(default_factory=list)
    library_defs: list[LibraryDef] = field(default_factory=list)
    origin: Origin = Origin.REPO
    classes: list[ClassFact] = field(default_factory=list)
    # the facts of constructs whose rule module declares its own table, by the rule's name: tuples of
    # JSON values (the facts cache stores them as lists), so a new construct's extractor part adds its
    # facts here and its rule reads them, with no field of this class and no cache record of its own;
    # also a file's preprocessor directives (indexer/preprocessor.py DIRECTIVES), which the link
    # evaluates against the target build's macros (a change of them needs no new facts)
    constructs: dict[str, list[tuple]] = field(default_factory=dict)


def structure_signature(facts: FileFacts) -> str:
    """A digest of the functions ``facts`` declares (names, kinds, linkage, the argument counts
    they accept, order), not of their lines or bodies."""
    # the kind's value: fresh facts hold FunctionKind members, cached ones (and earlier builds) the str
    parts = [(f.qualname, f.name, str(f.kind), f.internal, f.least_args, f.most_args) for f in facts.functions]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def registration_signature(facts: FileFacts) -> str:
    """A digest of the stubs and registrations ``facts`` declares, its includes (where its
    method calls resolve), and its status: what an in-place patch does not redo."""
    parts = (
        [(s.stub, s.role) for s in facts.stubs],
        [(s.stub, s.arch, s.impl_name) for s in facts.stub_impls],
        [(x.namespace, x.dispatch_key, x.op, x.kernel_name) for x in facts.library_impls],
        [(d.namespace, d.schema) for d in facts.library_defs],
        str(facts.status),  # the value: the digests of earlier builds hold its repr as a str
        [i for i in facts.includes if not i.startswith("using:")],
        # the class hierarchy: where virtual calls dispatch (a patch keeps the indexed one)
        [(c.qualname, tuple(c.bases), tuple(c.virtuals)) for c in facts.classes],
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def usings_of(facts: FileFacts) -> tuple[str, ...]:
    """The namespaces of the file's ``using namespace`` directives."""
    return tuple(i[6:] for i in facts.includes if i.startswith("using:"))


def namespace_of(qualname: str) -> str:
    """'at::native::(anonymous namespace)::foo<T>' -> 'at::native::(anonymous namespace)'."""
    return re.sub(r"<[^<>]*>", "", qualname).rpartition("::")[0] if "::" in qualname else ""


def scope_name(qualname: str) -> str:
    """'ns::Functor<T>::operator()' -> 'Functor': the innermost class (or namespace) of a function."""
    return namespace_of(qualname).rpartition("::")[2]
