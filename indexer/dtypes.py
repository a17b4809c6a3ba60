"""Dtypes a kernel line runs for, and dtype classes of traced operator calls.

A kernel's lines inside an ``AT_DISPATCH_*`` call's lambda are instantiated only for that
macro's dtypes, and those under an ``if (isReducedFloatingType(dtype))``-style condition run
only for its dtypes: a change there is seen only by tests that run the operator on one of them.
The tracer records each operator call's dtype as torch names it (``int32``, ``bfloat16``);
both meet in a ``DtypeClass``. Pure text analysis: no parser, no I/O.
"""

from __future__ import annotations

import bisect
import itertools
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
# The one vocabulary of ATen's dispatch macros (the index's dtype scopes and the query's "a
# dispatch list only gains dtypes" both read it): each dtype list by the word that names it in
# AT_DISPATCH_<word>_TYPES / AT_<word>_TYPES (and the _AND_<word> a macro's name adds), as
# ScalarType names, and the class of each ScalarType.
DISPATCH_LISTS: dict[str, tuple[str, ...]] = {
    "FLOATING": ("Double", "Float"),
    "INTEGRAL": ("Byte", "Char", "Short", "Int", "Long"),
    "ALL": ("Double", "Float", "Byte", "Char", "Short", "Int", "Long"),
    "COMPLEX": ("ComplexFloat", "ComplexDouble"),
    "REDUCED_FLOATING": ("Half", "BFloat16"),
    "QINT": ("QInt8", "QUInt8", "QInt32"),
    "BIT": ("Bits1x8", "Bits2x4", "Bits4x2", "Bits8", "Bits16"),
    "FLOAT8": ("Float8_e5m2", "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz"),
    "BAREBONES_UNSIGNED": ("UInt16", "UInt32", "UInt64"),
    "BOOL": ("Bool",),
    "HALF": ("Half",),
    "BFLOAT16": ("BFloat16",),
}
# AT_DISPATCH_V2's AT_EXPAND(...) groups, each a union of the lists above
V2_LISTS: dict[str, tuple[str, ...]] = {
    "AT_FLOATING_TYPES": DISPATCH_LISTS["FLOATING"], "AT_INTEGRAL_TYPES": DISPATCH_LISTS["INTEGRAL"],
    "AT_ALL_TYPES": DISPATCH_LISTS["ALL"], "AT_COMPLEX_TYPES": DISPATCH_LISTS["COMPLEX"],
    "AT_ALL_TYPES_AND_COMPLEX": DISPATCH_LISTS["ALL"] + DISPATCH_LISTS["COMPLEX"],
    "AT_FLOATING_AND_COMPLEX_TYPES": DISPATCH_LISTS["FLOATING"] + DISPATCH_LISTS["COMPLEX"],
    "AT_QINT_TYPES": DISPATCH_LISTS["QINT"], "AT_FLOAT8_TYPES": DISPATCH_LISTS["FLOAT8"],
    "AT_BAREBONES_UNSIGNED_TYPES": DISPATCH_LISTS["BAREBONES_UNSIGNED"],
    "AT_INTEGRAL_TYPES_V2": DISPATCH_LISTS["INTEGRAL"] + DISPATCH_LISTS["BAREBONES_UNSIGNED"],
}
_SCALAR_TYPES = {  # kHalf, at::kBFloat16, ScalarType::Bool... (also the dtypes an _AND<n> macro adds)
    "Half": _REDUCED, "BFloat16": _REDUCED, "Bool": DtypeClass.bool, "ComplexHalf": DtypeClass.complex,
    "ComplexFloat": DtypeClass.complex, "ComplexDouble": DtypeClass.complex, "Float": _FLOATING,
    "Double": _FLOATING, "Byte": _INTEGRAL, "Char": _INTEGRAL, "Short": _INTEGRAL, "Int": _INTEGRAL,
    "Long": _INTEGRAL, "UInt16": _INTEGRAL, "UInt32": _INTEGRAL, "UInt64": _INTEGRAL,
    **dict.fromkeys(DISPATCH_LISTS["QINT"], DtypeClass.quantized),
    **dict.fromkeys(DISPATCH_LISTS["FLOAT8"], DtypeClass.float8),
}


def dtype_class_of_scalar_type(name: str) -> DtypeClass | None:
    """The class of a ScalarType name (``Half``, ``QInt8``); None for those no class holds (``Bits8``)."""
    return _SCALAR_TYPES.get(name)


# C++ element types whose ``is_same`` test holds for one dtype class only. Not ``float``: the
# accumulate type of Half and BFloat16 is float too, so a test of it may hold for three dtypes.
_ELEMENT_TYPES = {"bool": DtypeClass.bool, "double": _FLOATING, "Half": _REDUCED, "half": _REDUCED,
                  "BFloat16": _REDUCED, "complex": DtypeClass.complex}


def element_type_class(cpp_type: str) -> DtypeClass | None:
    """The class of a C++ element type an ``is_same`` test names (``bool``, ``at::Half``,
    ``c10::complex<float>``); None for the others (``float``, ``int64_t``, a template parameter)."""
    name = re.sub(r"<.*", "", cpp_type).rpartition("::")[2].strip()
    return _ELEMENT_TYPES.get(name)


def _classes(*lists: str) -> set[DtypeClass]:
    return {_SCALAR_TYPES[d] for name in lists for d in DISPATCH_LISTS[name] if d in _SCALAR_TYPES}


# words of an AT_DISPATCH_* macro's name (and of the AT_*_TYPES lists AT_DISPATCH_V2 takes), longest first
_TYPE_LISTS = (
    ("REDUCED_FLOATING", _classes("REDUCED_FLOATING")),
    ("FLOATING_AND_COMPLEX", _classes("FLOATING", "COMPLEX")),
    ("ALL_TYPES_AND_COMPLEX", _classes("ALL", "COMPLEX")),
    ("FLOAT8", _classes("FLOAT8")),
    ("FLOATING", _classes("FLOATING")),
    ("INTEGRAL", _classes("INTEGRAL")),
    ("UNSIGNED", _classes("BAREBONES_UNSIGNED")),
    ("ALL_TYPES", _classes("ALL")),
    ("COMPLEX", _classes("COMPLEX")),
    ("QINT", _classes("QINT")),
    ("BOOL", _classes("BOOL")),
    ("HALF", _classes("HALF")),  # AT_DISPATCH_FLOATING_TYPES_AND_HALF
    ("BFLOAT16", _classes("BFLOAT16")),
)
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
_EQUALS = re.compile(r"==\s*(?:at::|c10::)?(?:k|ScalarType::)(\w+)")
# the compile-time form of an element type test: ``std::is_same_v<T, bool>``, ``is_same<T, at::Half>::value``
_SAME = re.compile(r"\bis_same(?:_v)?\s*<\s*(\w+)\s*,\s*((?:\w+\s*::\s*)*\w+(?:\s*<[^<>]*>)?)\s*>")
_IF = re.compile(r"\bif\s*\(")
_DTYPE_TEST = re.compile(r"\bis\w+Type\s*\(|==\s*(?:at::|c10::)?(?:k|ScalarType::)[A-Z]|\bis_same(?:_v)?\s*<")
_CONDITION_CHARS = 300  # how far past `if (` a dtype test may start
_ANY_CONSTRUCT = re.compile(r"\bAT_DISPATCH_\w+\s*\(|" + _DTYPE_TEST.pattern)


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


_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|[(){}]", re.S)
_TOP = re.compile(r"^[A-Za-z_]", re.M)  # a line starting with a name at column 0: a definition's start
_MACRO_BEFORE = re.compile(r"\bAT_DISPATCH_(\w+)\s*$")
_IF_BEFORE = re.compile(r"\bif(?:\s+constexpr)?\s*$")


def _open_brackets(text: str, start: int, offset: int) -> list[int]:
    """Offsets of the brackets opened between ``start`` and ``offset`` and still open there
    (strings and comments skipped): the constructs around ``offset``."""
    stack: list[int] = []
    for m in _TOKEN.finditer(text, start, offset):
        ch = m.group()
        if ch in "({":
            stack.append(m.start())
        elif ch in ")}" and stack:
            stack.pop()
    return stack


def _closing(text: str, at: int) -> int:
    """Offset of the bracket closing the one at ``at`` (len(text) when none)."""
    depth = 0
    for m in _TOKEN.finditer(text, at):
        ch = m.group()
        depth += ch in "({"
        depth -= ch in ")}"
        if depth == 0:
            return m.start()
    return len(text)


def _construct_classes(text: str, at: int) -> set[DtypeClass] | None:
    """The dtypes the code inside the bracket at ``at`` runs for: an AT_DISPATCH_* call's
    arguments, or the block of an if testing the dtype; None when it is neither."""
    head = text[max(0, at - 120) : at]
    if text[at] == "(":
        macro = _MACRO_BEFORE.search(head)
        if macro is None:
            return None
        return _macro_classes(macro.group(1), text[at + 1 : _closing(text, at)]) or None
    before = head.rstrip()
    if not before.endswith(")"):
        return None
    close = max(0, at - 120) + len(before) - 1
    depth, i = 0, close
    while i > max(0, close - _CONDITION_CHARS):
        depth += (text[i] == ")") - (text[i] == "(")
        if depth == 0:
            break
        i -= 1
    if depth != 0 or not _IF_BEFORE.search(text[max(0, i - 20) : i]):
        return None
    return _condition_classes(text[i + 1 : close]) or None


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
        if m.group(1) not in _SCALAR_TYPES:
            return set()  # a ScalarType no class holds (Bits8), or not a ScalarType at all
        found.add(_SCALAR_TYPES[m.group(1)])
    for m in _SAME.finditer(cond):
        klass = element_type_class(m.group(2))
        if klass is None:
            return set()  # a test of another type (an index type, an accumulate type): not told apart
        found.add(klass)
    return found


def line_offsets(text: str) -> list[int]:
    """Offset of the start of each line (1-based line ``n`` starts at ``offsets[n - 1]``)."""
    return [0, *itertools.accumulate(len(line) + 1 for line in text.split("\n"))][:-1]


def _definition_start(text: str, offset: int) -> int:
    """Offset of the last line before ``offset`` that starts with a name at column 0 (the head
    of the definition around it, in ATen's layout); 0 when none."""
    pos = offset
    while pos > 0:
        pos = text.rfind("\n", 0, pos - 1) + 1
        if _TOP.match(text, pos):
            return pos
    return 0


def lines_scope(text: str, lines: Iterable[int]) -> DtypeScope:
    """The dtypes every one of ``lines`` (1-based) of ``text`` runs for: the intersection of
    the dispatch constructs around each, united over the lines; None when a line is in none.
    Only the code from the definition around each line (its last line starting at column 0)
    is read: the constructs around a line are inside its function."""
    if not _ANY_CONSTRUCT.search(text):
        return None  # no dispatch construct in the file: every line runs for any dtype
    offsets = line_offsets(text)
    scope: set[DtypeClass] = set()
    for line in lines:
        if not 1 <= line <= len(offsets):
            return None
        offset = offsets[line - 1]
        start = _definition_start(text, offset)
        around = [c for at in _open_brackets(text, start, offset) if (c := _construct_classes(text, at)) is not None]
        if not around:
            return None
        scope |= set.intersection(*around)
    return frozenset(scope) if scope else None


def calls_scope(text: str, name: str, first: int, last: int) -> DtypeScope:
    """The dtypes the calls of ``name`` on lines ``first``..``last`` (1-based: one caller's
    extent) of ``text`` run for: the union of their scopes; None when a call runs for any dtype
    or no call of that name is found there (a call through a pointer, a macro)."""
    offsets = line_offsets(text)
    if not 1 <= first <= last <= len(offsets):
        return None
    end = offsets[last] if last < len(offsets) else len(text)
    call = re.compile(rf"(?<![\w:])(?:\w+::)*{re.escape(name)}\s*(?:<[^;{{}}()]*>)?\s*\(")
    lines = {bisect.bisect_right(offsets, m.start()) for m in call.finditer(text, offsets[first - 1], end)}
    return lines_scope(text, sorted(lines)) if lines else None


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
