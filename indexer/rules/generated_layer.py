"""The generated operator layer: what the C++ the code generators emit into every operator's
wrapper runs (indexer/generated_layer.py reads the names from the templates and generators). A
name resolves to the index's functions: a class a variable is declared of to its constructors, a
qualified function to the functions of that qualified name, an unqualified one to the functions
of that name in the headers the templates include; each of those, and what such a constructor
calls directly (one step: a guard's constructor runs its members' constructors), is run by every
operator that has such a wrapper: a change to one is shared infrastructure (query/affected.py)."""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass

from indexer.generated_layer import TemplateName
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule, Unpatchable
from schema.model import CallEdgeRow, CallKind, column

_FUNCTION_KINDS = frozenset({"function", "method", "template", "class"})


@dataclass(frozen=True, slots=True)
class GeneratedLayerRow:
    """A C++ function every generated operator wrapper runs: named by a template or generator
    (depth 0) or called by one so named (depth 1)."""

    TABLE: typing.ClassVar[str] = "generated_layer"

    function_id: int
    source: str = column("the template or generator file whose C++ names it: tools/autograd/templates/VariableType.cpp")
    line: int = column("the line of that file")
    named: str = column("the name written there: at::AutoDispatchBelowADInplaceOrView")
    depth: int = column("0: the named function (a class's constructor); 1: one it calls")


def _resolve(name: TemplateName, rows: list[tuple], included: set[int]) -> list[int]:
    """The functions (ids, among ``rows``: id, file id, qualname) ``name`` stands for."""
    qual = f"{name.name}::{name.name.split('::')[-1]}" if name.kind == "type" else name.name
    qualified = "::" in name.name
    return [
        fid for fid, file_id, qualname in rows
        if (qualname == qual or qualname.endswith("::" + qual)) and (qualified or file_id in included)
    ]


def _included_files(paths: list[str], includes: tuple[str, ...]) -> set[int]:
    """The ids of the indexed files the templates include (by the path's tail)."""
    tails = set(includes)
    return {i for i, p in enumerate(paths) if any(p == t or p.endswith("/" + t) for t in tails)}


def layer_rows(
    names: tuple[TemplateName, ...], includes: tuple[str, ...], functions: list[tuple], paths: list[str],
    calls: list[tuple],
) -> list[tuple]:
    """The rows of the generated layer (``functions``: id, file id, qualname, name of the C++
    functions; ``paths``: file id -> path; ``calls``: caller, callee, kind of the call edges): the
    named functions, and the direct callees of the constructors of the classes the generated code
    declares variables of (a guard's constructor runs its members' constructors)."""
    by_last: dict[str, list[tuple]] = defaultdict(list)
    for fid, file_id, qualname, short in functions:
        by_last[short].append((fid, file_id, qualname))
    included = _included_files(paths, includes)
    rows: dict[int, tuple] = {}
    constructed: dict[int, tuple] = {}  # the constructors of the classes it declares variables of
    for n in names:
        for fid in _resolve(n, by_last.get(n.name.split("::")[-1], []), included):
            row = rows.setdefault(fid, (fid, n.source, n.line, n.name, 0))
            if n.kind == "type":
                constructed.setdefault(fid, row)
    for caller, callee, kind in calls:
        if caller in constructed and kind == CallKind.DIRECT and callee not in rows:
            _, source, line, name, _ = constructed[caller]
            rows[callee] = (callee, source, line, name, 1)
    return sorted(rows.values())


def link_layer(ctx: LinkContext) -> None:
    """The generated layer, from the templates' names and the C++ call edges."""
    if not ctx.templates.names:
        return
    cpp = [(r[0], r[1], r[2], r[3]) for r in ctx.func_rows if r[0] < ctx.py_first]
    paths = [f.path for f in ctx.files]
    calls = [(r[0], r[1], r[2]) for r in ctx.read(CallEdgeRow)]
    ctx.out(GeneratedLayerRow).extend(layer_rows(ctx.templates.names, ctx.templates.includes, cpp, paths, calls))


def refuse_layer_files(ctx: PatchContext) -> None:
    """A changed file holding a function of the layer may change what the layer's functions call,
    or drop one: the patch is refused (a re-link computes the layer again)."""
    layer_files = {r[0] for r in ctx.store.rows("generated_layer_files")}
    if layer_files & set(ctx.changed):
        raise Unpatchable


RULE = Rule(
    "generated layer",
    writes=(GeneratedLayerRow,),
    reads=(CallEdgeRow,),
    link={Phase.REFERENCES: link_layer},
    patch={PatchPhase.PLACE: refuse_layer_files},
    place=95,
)
