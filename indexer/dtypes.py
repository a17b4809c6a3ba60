"""Dtypes a kernel line runs for, and dtype classes of traced operator calls.

A kernel's lines inside an ``AT_DISPATCH_*`` call's lambda are instantiated only for that
macro's dtypes, and those under an ``if (isReducedFloatingType(dtype))``-style condition run
only for its dtypes: a change there is seen only by tests that run the operator on one of them.
The tracer records each operator call's dtype as torch names it (``int32``, ``bfloat16``);
both meet in a ``DtypeClass``. Pure text analysis: no parser, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum


class DtypeClass(StrEnum):
    floating = "floating"  # float, double
    reduced = "reduced-floating"  # half, bfloat16
    integral = "integral"
    bool = "bool"
    complex = "complex"
    quantized = "quantized"
    float8 = "float8"


DtypeScope = frozenset[DtypeClass] | None  # None: every dtype (no dispatch construct around it)

_EXACT = {
    "float32": DtypeClass.floating, "float64": DtypeClass.floating,
    "float16": DtypeClass.reduced, "bfloat16": DtypeClass.reduced, "bool": DtypeClass.bool,
}


def dtype_class(torch_name: str) -> DtypeClass | None:
    """The class of a torch dtype name (``int32``, ``bfloat16``, ``quint8``); None when unknown."""
    if torch_name in _EXACT:
        return _EXACT[torch_name]
    for prefix, klass in (("complex", DtypeClass.complex), ("qint", DtypeClass.quantized),
                          ("quint", DtypeClass.quantized), ("float8", DtypeClass.float8),
                          ("int", DtypeClass.integral), ("uint", DtypeClass.integral)):
        if torch_name.startswith(prefix):
            return klass
    return None


# --------------------------------------------------------------------------- static scopes

_FLOATING, _REDUCED, _INTEGRAL = DtypeClass.floating, DtypeClass.reduced, DtypeClass.integral
# words of an AT_DISPATCH_* macro's name (and of the AT_*_TYPES lists AT_DISPATCH_V2 takes)
_TYPE_LISTS = (
    ("REDUCED_FLOATING", {_REDUCED}),
    ("FLOATING_AND_COMPLEX", {_FLOATING, DtypeClass.complex}),
    ("ALL_TYPES_AND_COMPLEX", {_FLOATING, _INTEGRAL, DtypeClass.complex}),
    ("FLOAT8", {DtypeClass.float8}),
    ("FLOATING", {_FLOATING}),
    ("INTEGRAL", {_INTEGRAL}),
    ("UNSIGNED", {_INTEGRAL}),
    ("ALL_TYPES", {_FLOATING, _INTEGRAL}),
    ("COMPLEX", {DtypeClass.complex}),
    ("QINT", {DtypeClass.quantized}),
    ("BOOL", {DtypeClass.bool}),
    ("HALF", {_REDUCED}),  # AT_DISPATCH_FLOATING_TYPES_AND_HALF
    ("BFLOAT16", {_REDUCED}),
)
_SCALAR_TYPES = {  # kHalf, at::kBFloat16, ScalarType::Bool... (the dtypes an _AND<n> macro adds)
    "Half": _REDUCED, "BFloat16": _REDUCED, "Bool": DtypeClass.bool, "ComplexHalf": DtypeClass.complex,
    "ComplexFloat": DtypeClass.complex, "ComplexDouble": DtypeClass.complex, "Float": _FLOATING,
    "Double": _FLOATING, "Byte": _INTEGRAL, "Char": _INTEGRAL, "Short": _INTEGRAL, "Int": _INTEGRAL,
    "Long": _INTEGRAL, "UInt16": _INTEGRAL, "UInt32": _INTEGRAL, "UInt64": _INTEGRAL,
}
_DISPATCH = re.compile(r"\bAT_DISPATCH_(\w+)\s*\(")
_SCALAR = re.compile(
    r"\b(?:k|ScalarType::)(Half|BFloat16|Bool|Complex\w+|Float8\w*|Float|Double|Byte|Char|Short|Int|Long|UInt\d+)\b"
)
_LIST = re.compile(r"\bAT_(\w*TYPES\w*)")
# if-conditions that hold for one dtype class only (a dtype compared to a constant, or a predicate)
_CONDITIONS = (
    (re.compile(r"\bisReducedFloatingType\s*\("), {_REDUCED}),
    (re.compile(r"\bisIntegralType\s*\("), {_INTEGRAL}),
    (re.compile(r"\bisComplexType\s*\("), {DtypeClass.complex}),
    (re.compile(r"\bisFloat8Type\s*\("), {DtypeClass.float8}),
    (re.compile(r"\bisQIntType\s*\("), {DtypeClass.quantized}),
)
_EQUALS = re.compile(r"==\s*(?:at::|c10::)?(?:k|ScalarType::)(Half|BFloat16|Bool|Float|Double|Long|Int)\b")
_IF = re.compile(r"\bif\s*\(")


def _list_classes(words: str) -> set[DtypeClass]:
    """The classes an AT_DISPATCH_* name's (or an AT_*_TYPES list's) words name."""
    classes: set[DtypeClass] = set()
    for word, named in _TYPE_LISTS:  # longest words first: each part of the name counts once
        if word in words:
            classes |= named
            words = words.replace(word, "", 1)
    return classes


def _macro_classes(name: str, args: str) -> set[DtypeClass]:
    """The dtypes an ``AT_DISPATCH_<name>(args)`` call instantiates its lambda for (its name's
    lists, the scalar types its ``_AND<n>`` arguments add, AT_DISPATCH_V2's type lists)."""
    top = _top_level(args)
    classes = _list_classes(name) if name != "V2" else set()
    for m in _LIST.finditer(top):
        classes |= _list_classes(m.group(1))
    for m in _SCALAR.finditer(top):
        word = m.group(1)
        classes.add(DtypeClass.float8 if word.startswith("Float8") else _SCALAR_TYPES.get(word, _FLOATING))
    return classes


def _top_level(args: str) -> str:
    """``args`` without the bodies in braces (a lambda's code is not the macro's dtype list)."""
    out, depth = [], 0
    for ch in args:
        depth += ch == "{"
        if depth == 0:
            out.append(ch)
        depth -= ch == "}" and depth > 0
    return "".join(out)


def _close(text: str, at: int, opening: str, closing: str) -> int:
    """Index of the bracket closing the one at ``at`` (strings and comments skipped); len when none."""
    depth, i, n = 0, at, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _string_end(text, i)
        elif text.startswith("//", i):
            i = text.find("\n", i) if text.find("\n", i) >= 0 else n
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 1 if text.find("*/", i) >= 0 else n
        elif ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n


def _string_end(text: str, at: int) -> int:
    quote, i = text[at], at + 1
    while i < len(text) and text[i] != quote and text[i] != "\n":
        i += 2 if text[i] == "\\" else 1
    return i


def _regions(text: str) -> list[tuple[int, int, frozenset[DtypeClass]]]:
    """(start, end, dtypes) offsets of the code that runs for some dtypes only: the arguments
    of AT_DISPATCH_* calls, and the blocks of ifs whose condition names one dtype class."""
    out = []
    for m in _DISPATCH.finditer(text):
        end = _close(text, m.end() - 1, "(", ")")
        classes = _macro_classes(m.group(1), text[m.end() : end])
        if classes:
            out.append((m.end(), end, frozenset(classes)))
    for m in _IF.finditer(text):
        cond_end = _close(text, m.end() - 1, "(", ")")
        classes = _condition_classes(text[m.end() : cond_end])
        brace = text.find("{", cond_end)
        if classes and brace >= 0 and not text[cond_end + 1 : brace].strip():
            out.append((brace, _close(text, brace, "{", "}"), frozenset(classes)))
    return out


def _condition_classes(cond: str) -> set[DtypeClass]:
    """The dtype classes an if-condition holds for, when it tests one (a single test, or tests
    joined by ||); empty when it tests something else, or negates or combines with &&."""
    if "!" in cond.replace("!=", "") or "&&" in cond or "!=" in cond:
        return set()
    found: set[DtypeClass] = set()
    for pattern, classes in _CONDITIONS:
        if pattern.search(cond):
            found |= classes
    for m in _EQUALS.finditer(cond):
        found.add(_SCALAR_TYPES[m.group(1)])
    return found


def line_offsets(text: str) -> list[int]:
    """Offset of the start of each line (1-based line ``n`` starts at ``offsets[n - 1]``)."""
    offsets = [0]
    offsets += [m.end() for m in re.finditer("\n", text)]
    return offsets


def lines_scope(text: str, lines: Iterable[int]) -> DtypeScope:
    """The dtypes every one of ``lines`` (1-based) of ``text`` runs for: the intersection of
    the dispatch regions around each, united over the lines; None when a line is in none."""
    regions = _regions(text)
    offsets = line_offsets(text)
    scope: set[DtypeClass] = set()
    for line in lines:
        if not 1 <= line <= len(offsets):
            return None
        start = offsets[line - 1]
        end = offsets[line] - 1 if line < len(offsets) else len(text)
        around = [classes for a, b, classes in regions if a <= start and end <= b + 1]
        if not around:
            return None
        scope |= frozenset.intersection(*around)
    return frozenset(scope) if scope else None


def merge_scopes(scopes: Iterable[DtypeScope]) -> DtypeScope:
    """The dtypes a change of several functions runs for: their union (None wins)."""
    out: set[DtypeClass] = set()
    for scope in scopes:
        if scope is None:
            return None
        out |= scope
    return frozenset(out)


def scope_text(scope: DtypeScope) -> str:
    """'floating', 'integral, bool'; 'any dtype' for None."""
    return "any dtype" if scope is None else ", ".join(sorted(c.value for c in scope))
