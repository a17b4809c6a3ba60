"""The C++ functions derivatives.yaml's backward formulas call: ``addmm``'s ``mat1:
mm_mat1_backward(grad, mat2, ...)`` runs in the generated ``AddmmBackward0::apply`` (generated at
build time: no index holds it), so a change to ``mm_mat1_backward`` (FunctionsManual.cpp) runs in
addmm's backward. Each name a formula calls is resolved as the compiler resolves it from the
generated code (indexer/derivatives.py ``resolve``: ``torch::autograd::generated`` and its
enclosing namespaces, ``details`` through the using-directive; ``at::sum_to`` is ``at::sum_to``
only), and each function found gets an edge from the entry's operators (``EdgeKind.FORMULA``);
the functions it calls reach it through the call graph. A name no scope defines (an operator's
generated API, a method, a type) links nothing. This table keeps every (operator, name) pair, so
that a patch adding a function a formula names links it as a full link would."""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass

from indexer.derivatives import candidate_names, plain_qualname, resolve
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule
from schema.model import EdgeKind, FunctionKind, FunctionRow, NodeKind, column

# the kinds of function a formula's call can name (not a macro, a registration block, a kernel body)
CALLABLE = (FunctionKind.FUNCTION, FunctionKind.METHOD, FunctionKind.TEMPLATE)


@dataclass(frozen=True, slots=True)
class FormulaCallRow:
    """The names derivatives.yaml's backward formulas call, per operator whose backward runs them
    (the functions each resolves to are the ``formula`` reach edges into them)."""

    TABLE: typing.ClassVar[str] = "formula_calls"

    op: str = column("the operator whose backward runs the formula: addmm, add.Tensor")
    formula: str = column("the derivatives.yaml entry's name: addmm, add.Tensor")
    name: str = column("the name called, as written: mm_mat1_backward, at::sum_to")


def why(formula: str, name: str) -> str:
    """An edge's detail: which entry's formula calls what."""
    return f"derivatives.yaml: {formula}'s formula calls {name}"


def link_formula_calls(ctx: LinkContext) -> None:
    """Every (operator, name) its entry's backward formulas call, and an edge from the operator to
    each C++ function the name resolves to."""
    out = ctx.out(FormulaCallRow)
    by_qualname = _by_qualname(ctx, candidate_names({c for d in ctx.derivatives for c in d.calls}))
    for d in ctx.derivatives:
        ops = [d.op] if d.op in ctx.op_by_name else ctx.ops_by_base.get(d.op, [])
        for name in d.calls:
            functions = resolve(name, by_qualname)
            for op in ops:
                out.append((op, d.op, name))
                for f in functions:
                    ctx.graph.edge(f, ctx.op_node(op), EdgeKind.FORMULA, why(d.op, name))


def _by_qualname(ctx: LinkContext, wanted: set[str]) -> dict[str, list[int]]:
    """The C++ functions (ids) of the qualified names ``wanted``, by qualified name."""
    out: defaultdict[str, list[int]] = defaultdict(list)
    for gid, _, qualname, _, kind, *_ in ctx.func_rows:
        if kind in CALLABLE and (plain := plain_qualname(qualname)) in wanted:
            out[plain].append(gid)
    return out


def formula_calls_into(ctx: PatchContext) -> None:
    """The edges from the operators whose formulas name a new function of ``ctx.file`` (its names
    resolved again over the index's functions, the new ones included)."""
    mine = set(ctx.fresh_ids[ctx.file])
    qualnames = {plain_qualname(f.qualname) for fid, f in ctx.fresh if fid in mine}
    every = ctx.store.rows("formula_calls")
    naming = {name for name in {r[2] for r in every} if qualnames & candidate_names({name})}
    rows = [r for r in every if r[2] in naming]
    if not rows:
        return
    wanted = candidate_names(naming)
    by_qualname: defaultdict[str, list[int]] = defaultdict(list)
    last = sorted({name.split("::")[-1] for name in naming})
    for qualname, fid in ctx.store.rows("functions_named", names=last, kinds=list(CALLABLE)):
        if (plain := plain_qualname(qualname)) in wanted:
            by_qualname[plain].append(fid)
    node_of = ctx.graph.node_of
    for op, formula, name in rows:
        for f in resolve(name, by_qualname):
            if f in mine:
                ctx.graph.reach.append((f, node_of(NodeKind.OP, op), EdgeKind.FORMULA, why(formula, name)))


RULE = Rule(
    "backward formulas' functions",
    writes=(FormulaCallRow,),
    reads=(FunctionRow,),
    link={Phase.PYTHON: link_formula_calls},
    patch={PatchPhase.INTO: formula_calls_into},
    place=25,
)
