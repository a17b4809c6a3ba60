"""Deleted C++ functions nothing called: no-ops. A function the change deletes that no call site
of the index names (where its file is visible, under a qualifier that can name it, passing a
number of arguments it accepts, where both counts are known), that no edge
of the index reaches (a registration, an address taken, an override) and that no registration
names ran in no test: deleting it changes no executed code (a call of it would not compile).
A deleted overload whose name is still called stays a change: which overload a call picks can
change when one disappears. A source file's own helper (``static``, ``inline`` or ``constexpr``,
or in an anonymous namespace) is seen by that file alone: only its call sites and registrations
count (r6-k02: a kernel file's ``inline int min(int, int)`` is not called by every ``min`` of the tree)."""

from __future__ import annotations

import re
from collections.abc import Callable

from indexer.cpp_arity import accepts, block_text, parameter_texts
from indexer.facts import namespace_of
from query.changes import ChangedFunction, ChangeSet, TextOf
from schema.index_store import CallSite, FunctionInFile, IndexStore

UNCALLED = "deleted, and nothing in the index calls, registers or references its name: no code ran it"
_MEMBER = (".", "->")
_CPP = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".mm")


def _owner(qualname: str, name: str) -> str:
    """The scope a call names the function by: its namespace or class, a constructor's class's scope."""
    scope = namespace_of(qualname)
    return scope.rpartition("::")[0] if scope.rpartition("::")[2] == name else scope


def may_name(site: CallSite, qualname: str, name: str, member: bool) -> bool:
    """Whether a call site of ``name`` may call the function ``qualname`` (``member``: a method):
    unqualified (argument-dependent lookup, the caller's own scope), a member call of a method,
    or a qualifier its scope ends with (``std::get`` never calls ``at::xpu::get``)."""
    qualifier = re.sub(r"<[^<>]*>", "", site.qualifier).removeprefix("::")
    if qualifier in _MEMBER:
        return member
    if not qualifier:
        return True
    return f"::{_owner(qualname, name)}".endswith(f"::{qualifier}")


def _judged(cf: ChangedFunction) -> bool:
    """A deleted C++ function called by its name: an operator (used by expressions no call site
    records) or a functor's ``operator()`` is not judged here."""
    return cf.status == "deleted" and cf.path.endswith(_CPP) and bool(cf.name) and not cf.name.startswith("operator")


def _registered(cf: ChangedFunction, registered: dict[str, set[str]]) -> bool:
    """Whether a registration may name ``cf``: one in its own file for a file-local function (a
    ``REGISTER_DISPATCH`` of a ``static`` kernel is in its translation unit), any other else."""
    files = registered.get(cf.name, set())
    return cf.path in files if cf.file_local else bool(files)


def _own_ids(cf: ChangedFunction, rows: list[FunctionInFile]) -> list[int]:
    """The index's rows of the deleted function itself (an index of the base): same name, over its lines."""
    return [r.id for r in rows if r.qualname == cf.qualname and any(r.start_line <= n <= r.end_line for n in cf.lines)]


def is_unused(
    cf: ChangedFunction, own: list[int], sites: list[CallSite], visible: set[str] | None, reached: Callable[[int], bool]
) -> bool | None:
    """True: no edge into the function itself and no C++ call site (in ``visible`` files, None: any)
    that may name it and pass a number of arguments it accepts (where both are known); None: nothing
    reaches it but a call site names it (another overload's, maybe)."""
    if any(reached(i) for i in own):
        return False
    callers = [s for s in sites if not s.path.endswith(".py") and (visible is None or s.path in visible)]
    named = any(
        may_name(s, cf.qualname, cf.name, cf.member) and accepts(*cf.arity, s.n_args)
        for s in callers if s.caller_id not in own
    )
    return None if named else True


def overload_note(cf: ChangedFunction) -> str:
    """Why a deleted function whose name is still called stays a change."""
    return (f"{cf.path}: {cf.qualname} deleted; its name {cf.name} is still called, and a call may now pick "
            "another overload: selected through the callers of the name")


SYNTHESIZED = ("deleted; its body is `!(x == y)`, which C++20 makes of every `a != b` from operator== without it "
               "(and a C++17 use would not compile): no expression runs differently")
_NOT_EQUAL = re.compile(r"\boperator\s*!=\s*\(")
_LAST_NAME = re.compile(r"(\w+)\s*$")


def synthesized_not_equal(text: str) -> bool:
    """Whether ``text`` (a deleted function's lines) defines ``operator!=(x, y)`` as ``return
    !(x == y);``: what C++20 rewrites ``a != b`` to when no ``operator!=`` is found."""
    m = _NOT_EQUAL.search(text)
    params = parameter_texts(text, m.end() - 1) if m else None
    names = [_LAST_NAME.search(p) for p in params or ()]
    if m is None or len(names) != 2 or not all(names):
        return False
    x, y = (n.group(1) for n in names if n is not None)
    body_at = text.find("{", m.end())
    body = block_text(text, body_at) if body_at >= 0 else None
    return body is not None and re.fullmatch(rf"\s*return\s*!\s*\(\s*{x}\s*==\s*{y}\s*\)\s*;\s*", body) is not None


def _deleted_text(cf: ChangedFunction, base_text: TextOf) -> str:
    """The base's lines of the deleted ``cf``."""
    data = base_text(cf.path)
    rows = data.decode(errors="replace").split("\n") if data is not None else []
    return "\n".join(rows[n - 1] for n in sorted(cf.lines) if 1 <= n <= len(rows))


def drop_synthesized_operators(cs: ChangeSet, base_text: TextOf) -> None:
    """Move the deleted ``operator!=`` that C++20 would synthesize the same from ``cs.functions``
    to ``cs.no_ops`` (an operator is used by expressions no call site records: judged by its body)."""
    same = [cf for cf in cs.functions if cf.status == "deleted" and cf.name == "operator!="
            and synthesized_not_equal(_deleted_text(cf, base_text))]
    for cf in same:
        cf.why = SYNTHESIZED
    cs.no_ops += same
    cs.functions = [cf for cf in cs.functions if cf not in same]


def drop_unused_deletions(
    store: IndexStore, cs: ChangeSet, visible_of: Callable[[list[str]], dict[str, set[str]]]
) -> None:
    """Move the deleted functions nothing called from ``cs.functions`` to ``cs.no_ops``, with why;
    note those whose name is still called. ``visible_of``: header -> the files that may see it."""
    deleted = [cf for cf in cs.functions if _judged(cf)]
    if not deleted:
        return
    names = sorted({cf.name for cf in deleted})
    sites, registered = store.call_sites_named(names), store.registered_names(names)
    rows: dict[str, list[FunctionInFile]] = {}
    for row in store.functions_in(sorted({cf.path for cf in deleted})):
        rows.setdefault(row.path, []).append(row)
    visible = visible_of(sorted({cf.path for cf in deleted if cf.path.endswith((".h", ".hh", ".hpp", ".cuh"))}))
    graph = store.graph()
    unused: set[int] = set()
    for cf in deleted:
        seen_by = {cf.path} if cf.file_local else visible.get(cf.path)  # a source file's own helper: itself
        verdict = not _registered(cf, registered) and is_unused(
            cf, _own_ids(cf, rows.get(cf.path, [])), sites.get(cf.name, []), seen_by,
            lambda i: bool(graph.into(i)))
        if verdict:
            cf.why = UNCALLED
            unused.add(id(cf))
        elif verdict is None:
            cs.notes.append(overload_note(cf))
    cs.no_ops += [cf for cf in cs.functions if id(cf) in unused]
    cs.functions = [cf for cf in cs.functions if id(cf) not in unused]
