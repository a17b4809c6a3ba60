"""derivatives.yaml's entries as the link reads them: per entry, its operator, the backward
operators its formulas call and every C++ name they call (``mm_mat1_backward``, ``at::sum_to``),
and where the generated backward code finds such a name.

The formulas are C++ expressions that torchgen pastes into the generated ``XBackward0::apply``
(torch/csrc/autograd/generated/Functions.cpp, made at build time: no index holds it), inside
``namespace torch::autograd::generated`` under ``using namespace torch::autograd::generated::details``
(tools/autograd/templates/Functions.cpp). A name is looked up from there as the compiler does: the
enclosing namespaces innermost first, the using-directive's names as if declared at global scope
(``lookup_scopes``). No yaml is read here: a patch never imports yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass

# the namespace the generated backward functions are defined in, innermost first, and the
# namespace its file-scope using-directive names
GENERATED_SCOPES = ("torch::autograd::generated", "torch::autograd", "torch", "")
USING_NAMESPACE = "torch::autograd::generated::details"

# keys of an entry that hold no backward formula: its schema, its output flags, its forward-mode
# (jvp) formula (``result``: run by forward AD only) and per-dispatch-key formulas
NOT_BACKWARD = frozenset({"name", "dispatch", "output_differentiability", "result"})

_BACKWARD_CALL = re.compile(r"\b([A-Za-z_]\w*backward\w*)\s*\(")
# a call of a (qualified) name, template arguments allowed; not a member call (``grad.sum(``,
# ``p->f(``) nor the tail of a longer qualified name
_CALL = re.compile(r"(?<![\w.:>])((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*(?:<[^<>()]*>)?\s*\(")
_NOT_CALLS = frozenset(
    {
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "decltype",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
        "dynamic_cast",
        "alignof",
        "noexcept",
    }
)


@dataclass(frozen=True)
class Derivative:
    """One derivatives.yaml entry: its operator as the entry names it (``addmm``, ``add.Tensor``),
    the backward operators its formulas call (names with ``backward``, followed as operators) and the
    names its backward formulas call, as written (``mm_mat1_backward``, ``at::sum_to``)."""

    op: str
    backward_ops: tuple[str, ...]
    calls: tuple[str, ...] = ()


def derivative(entry: dict) -> Derivative | None:
    """The Derivative of one parsed entry (None: no ``name``)."""
    name = entry.get("name")
    if not isinstance(name, str):
        return None
    every = " ".join(str(v) for k, v in entry.items() if k not in ("name", "dispatch"))
    backward = " ".join(str(v) for k, v in entry.items() if k not in NOT_BACKWARD)
    return Derivative(
        name.split("(", 1)[0].strip(), tuple(sorted(set(_BACKWARD_CALL.findall(every)))), formula_calls(backward)
    )


def formula_calls(text: str) -> tuple[str, ...]:
    """The names ``text`` (a formula) calls as functions, as written, each once, sorted; not the
    standard library's (``std::sqrt(2 * M_PI)``: what the index holds in ``std`` are c10 types'
    overloads, BFloat16-math.h's ``std::sqrt<T>``, which no formula's arguments select)."""
    return tuple(sorted({n for n in _CALL.findall(text) if n not in _NOT_CALLS and not n.startswith("std::")}))


def lookup_scopes(written: str) -> list[tuple[str, ...]]:
    """The qualified names ``written`` may name from inside the generated backward code, per
    scope in the compiler's lookup order (the first scope that declares it wins): the enclosing
    namespaces innermost first; at global scope, the using-directive's namespace too."""
    return [
        (f"{scope}::{written}",) if scope else (written, f"{USING_NAMESPACE}::{written}") for scope in GENERATED_SCOPES
    ]


def resolve(written: str, by_qualname: dict[str, list[int]]) -> list[int]:
    """The functions (ids from ``by_qualname``: qualified name -> ids) ``written`` names from the
    generated backward code: those of the first scope that has any, none when none does (a name
    the index does not define: an operator's generated API, a method, a type)."""
    for names in lookup_scopes(written):
        found = [f for name in names for f in by_qualname.get(name, ())]
        if found:
            return sorted(found)
    return []


def plain_qualname(qualname: str) -> str:
    """A function's qualified name as a call names it: a template's parameters dropped
    (``details::mul_tensor_backward<T>`` is called ``mul_tensor_backward(...)``)."""
    return qualname.split("<", 1)[0] if qualname.endswith(">") else qualname


def candidate_names(calls: set[str]) -> set[str]:
    """Every qualified name ``calls`` (names as written) may resolve to."""
    return {name for written in calls for names in lookup_scopes(written) for name in names}
