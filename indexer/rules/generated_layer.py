"""The generated operator layer: what the C++ the code generators emit into every operator's
wrapper runs (indexer/generated_layer.py reads the names from the templates and generators). A
name resolves to the index's functions: a class a variable is declared of to its constructors, a
qualified function to the functions of that qualified name, an unqualified one to the functions
of that name in the headers the templates include; each of those, and what such a constructor
calls directly (one step: a guard's constructor runs its members' constructors), is run by every
operator that has such a wrapper: a change to one is shared infrastructure (query/affected.py)."""

from __future__ import annotations

import re
import typing
from collections import Counter, defaultdict
from dataclasses import dataclass

from indexer.build_config import BuildMacros
from indexer.generated_layer import WILDCARD, TemplateName
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule, Unpatchable
from schema.model import CallEdgeRow, CallKind, column

_FUNCTION_KINDS = frozenset({"function", "method", "template", "class"})
# a device backend's generated registration file is compiled when the build defines one of these
_DEVICE_MACROS = {"cuda": ("USE_CUDA", "USE_ROCM"), "xpu": ("USE_XPU",), "mps": ("USE_MPS",)}


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


def _wildcard(name: str, backends: frozenset[str]) -> re.Pattern[str]:
    """A qualified name's pattern whose placeholders stand for one of ``backends`` each."""
    fill = "(?:" + "|".join(sorted(map(re.escape, backends))) + ")"
    return re.compile("(?:.*::)?" + fill.join(map(re.escape, name.split(WILDCARD))))


def _resolve_wildcard(name: TemplateName, by_last: dict[str, list[tuple]], backends: frozenset[str]) -> list[int]:
    """The functions a name with placeholders (``at::detail::empty_strided_{}``) stands for: the
    placeholder is the generated file's backend (``RegisterCPU.cpp``), one the target build has."""
    if not backends:
        return []
    last = _wildcard(name.name.split("::")[-1], backends)
    whole = _wildcard(name.name, backends)
    return [fid for short, rows in by_last.items() if last.fullmatch(short)
            for fid, _, qualname in rows if whole.fullmatch(qualname)]


def build_backends(build: BuildMacros | None) -> frozenset[str]:
    """The backends the target build compiles (a generated ``Register{Key}.cpp`` of each): the CPU,
    and a device whose ``USE_`` macro the build defines (a CPU wheel leaves USE_CUDA, USE_XPU out)."""
    defined = build.defined if build is not None else {}
    return frozenset({"cpu"} | {b for b, macros in _DEVICE_MACROS.items() if any(defined.get(m) for m in macros)})


def _included_files(paths: list[str], includes: tuple[str, ...]) -> set[int]:
    """The ids of the indexed files the templates include (by the path's tail)."""
    tails = set(includes)
    return {i for i, p in enumerate(paths) if any(p == t or p.endswith("/" + t) for t in tails)}


def layer_rows(
    names: tuple[TemplateName, ...], includes: tuple[str, ...], functions: list[tuple], paths: list[str],
    calls: list[tuple], backends: frozenset[str] = frozenset({"cpu"}),
) -> list[tuple]:
    """The rows of the generated layer (``functions``: id, file id, qualname, name of the C++
    functions; ``paths``: file id -> path; ``calls``: caller, callee, kind of the call edges;
    ``backends``: what a placeholder of a backend's name stands for): the named functions, and the
    direct callees of the constructors of the classes the generated code declares variables of (a
    guard's constructor runs its members' constructors) and of the backend's helpers a name with a
    placeholder calls (``at::detail::empty_strided_cpu``: the allocator it picks)."""
    by_last: dict[str, list[tuple]] = defaultdict(list)
    for fid, file_id, qualname, short in functions:
        by_last[short].append((fid, file_id, qualname))
    included = _included_files(paths, includes)
    rows: dict[int, tuple] = {}
    expanded: dict[int, tuple] = {}  # the constructors and backend helpers whose direct callees run too
    for n in names:
        wildcard = WILDCARD in n.name
        found = (_resolve_wildcard(n, by_last, backends) if wildcard
                 else _resolve(n, by_last.get(n.name.split("::")[-1], []), included))
        for fid in found:
            row = rows.setdefault(fid, (fid, n.source, n.line, n.name, 0))
            if n.kind == "type" or wildcard:
                expanded.setdefault(fid, row)
    qualname = {fid: q for fid, _, q, _ in functions}
    direct = [(caller, callee) for caller, callee, kind in calls if caller in expanded and kind == CallKind.DIRECT]
    overloads = Counter((caller, qualname.get(callee)) for caller, callee in direct)
    for caller, callee in direct:
        _, source, line, name, _ = expanded[caller]
        # a helper's call the linker resolved to several overloads (``DispatchKeySet cpu_ks(key)``:
        # every constructor of the class) is left out: which of them runs is not known
        if callee not in rows and not (WILDCARD in name and overloads[caller, qualname.get(callee)] > 1):
            rows[callee] = (callee, source, line, name, 1)
    return sorted(rows.values())


def link_layer(ctx: LinkContext) -> None:
    """The generated layer, from the templates' names and the C++ call edges."""
    if not ctx.templates.names:
        return
    cpp = [(r[0], r[1], r[2], r[3]) for r in ctx.func_rows if r[0] < ctx.py_first]
    paths = [f.path for f in ctx.files]
    calls = [(r[0], r[1], r[2]) for r in ctx.read(CallEdgeRow)]
    rows = layer_rows(ctx.templates.names, ctx.templates.includes, cpp, paths, calls, build_backends(ctx.build))
    ctx.out(GeneratedLayerRow).extend(rows)


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
