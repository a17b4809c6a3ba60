"""Edits that change no behaviour beyond layout (issue 40 item 5), read from token lists: a
consistent rename (the token streams equal up to one identifier renamed at every use, to a
name the old version never used) and an ``AT_DISPATCH_*`` type list that only gains dtypes
(the existing instantiations are unchanged; the new dtypes are new code). Pure: no parsing here,
the tokens are handed in (``query/changes.py`` gets them from ``indexer.api``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import NamedTuple

from indexer.dtypes import DISPATCH_LISTS, V2_LISTS, DtypeClass, element_type_class

_IDENT = re.compile(r"[A-Za-z_]\w*")
_WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|::|->|&&|\|\||\S")
_KEYWORDS = frozenset({"return", "case", "else", "throw", "new", "delete", "sizeof", "goto", "co_return", "co_yield",
                       "typedef", "using", "namespace", "operator", "template", "typename", "decltype", "if", "while",
                       "for", "switch", "do", "not", "and", "or"})
_AFTER_DECLARED = frozenset({"(", "=", "{", ";", ",", ")", "[", ":"})


class Rename(NamedTuple):
    """Identifier ``old`` renamed to ``new``."""

    old: str
    new: str


def words(lines: Sequence[str]) -> list[str]:
    """The code words of ``lines`` (comments already removed): identifiers, numbers, punctuation."""
    return _WORD.findall("\n".join(lines))


def rename_between(old: Sequence[str], new: Sequence[str]) -> Rename | None:
    """The one identifier rename that turns token list ``old`` into ``new`` at every place
    ``old`` names it, when there is one and its new name is not in ``old`` (not a swap of two
    names, not a use redirected to another variable or function)."""
    if len(old) != len(new):
        return None
    pairs = {(a, b) for a, b in zip(old, new, strict=True) if a != b}
    if len(pairs) != 1:
        return None
    rename = Rename(*pairs.pop())
    if not (_IDENT.fullmatch(rename.old) and _IDENT.fullmatch(rename.new)) or rename.new in old or rename.old in new:
        return None
    return rename


def declares(tokens: Sequence[str], name: str) -> bool:
    """Whether the first use of ``name`` in ``tokens`` declares it (``T name(...)``,
    ``auto& name =``, a parameter ``const Scalar& name,``)."""
    return name in tokens and _declares_at(tokens, tokens.index(name))


def _declares_at(tokens: Sequence[str], i: int) -> bool:
    """Whether token ``i`` is a name being declared: after a type (``T``, ``T&``, ``T*``,
    ``vector<T>``), before what follows a declared name. ``&f)`` takes an address."""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    j = i - 1
    while j >= 0 and tokens[j] in ("*", "&", "&&"):
        j -= 1
    before = tokens[j] if j >= 0 else ""
    typed = before == ">" or (_IDENT.fullmatch(before) is not None and before not in _KEYWORDS)
    return typed and after in _AFTER_DECLARED


def scoped_rename(old: Sequence[str], new: Sequence[str]) -> Rename | None:
    """The rename of a name declared in a block of a function (its tokens ``old`` and ``new``),
    at the declaration and every use in that block, to a name the function never used; the tokens
    outside the block unchanged. None when the change is anything else."""
    if len(old) != len(new):
        return None
    diffs = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    pairs = {(old[i], new[i]) for i in diffs}
    if len(pairs) != 1:
        return None
    rename = Rename(*pairs.pop())
    if not (_IDENT.fullmatch(rename.old) and _IDENT.fullmatch(rename.new)) or not _declares_at(old, diffs[0]):
        return None
    lo, hi = _block(old, diffs[0])
    uses = [i for i in range(lo, hi + 1) if old[i] == rename.old]
    if diffs != uses or rename.new in old:
        return None
    return rename


def _block(tokens: Sequence[str], at: int) -> tuple[int, int]:
    """The innermost ``{...}`` holding token ``at`` (all of ``tokens`` when none does)."""
    depth = 0
    for lo in range(at - 1, -1, -1):
        depth += {"}": 1, "{": -1}.get(tokens[lo], 0)
        if depth < 0:
            break
    else:
        return 0, len(tokens) - 1
    depth = 0
    for hi in range(lo, len(tokens)):
        depth += {"{": 1, "}": -1}.get(tokens[hi], 0)
        if depth == 0:
            return lo, hi
    return lo, len(tokens) - 1


# ------------------------------------------------------------------------ dispatch type lists

_DISPATCH = re.compile(r"AT_DISPATCH_([A-Z0-9_]+?)_TYPES((?:_AND_COMPLEX)?)(?:_AND(\d*))?$")
_DTYPE = re.compile(r"^(?:(?:at|c10)::)?(?:ScalarType::|k)([A-Z]\w*)$")
_DTYPE_PREDICATE = re.compile(r"^is\w*Type$")  # isIntegralType, isReducedFloatingType, ...


class DispatchGain(NamedTuple):
    """A dispatch list that gained ``dtypes`` and lost none (none gained: the same list written
    another way, as an ``AT_DISPATCH_V2`` call)."""

    dtypes: tuple[str, ...]


def _dtypes(macro: str, type_args: list[str]) -> set[str] | None:
    m = _DISPATCH.fullmatch(macro)
    if m is None:
        return None
    out: set[str] = set()
    for part in m.group(1).split("_AND_"):
        if part not in DISPATCH_LISTS:
            return None
        out.update(DISPATCH_LISTS[part])
    if m.group(2):
        out.update(DISPATCH_LISTS["COMPLEX"])
    for arg in type_args:
        dtype = _DTYPE.match(arg)
        if dtype is None:
            return None
        out.add(dtype.group(1))
    return out


def _type_arg_count(macro: str) -> int:
    m = _DISPATCH.fullmatch(macro)
    if m is None or m.group(3) is None:
        return 0
    return int(m.group(3) or 1)


def _heads(tokens: Sequence[str]) -> tuple[list[str], list[set[str] | None]]:
    """``tokens`` with each dispatch macro's name and type arguments replaced by one marker,
    and the dtype set of each (in order)."""
    out: list[str] = []
    sets: list[set[str] | None] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        v2 = _v2_call(tokens, i) if tok == "AT_DISPATCH_V2" else None
        if v2 is not None:  # the same marker as the older macros: a list moved to V2 compares with them
            rest, dtypes, i = v2
            out += ["AT_DISPATCH", "(", *rest]
            sets.append(dtypes)
            continue
        if tok.startswith("AT_DISPATCH_") and i + 1 < len(tokens) and tokens[i + 1] == "(":
            n = _type_arg_count(tok)
            args, j = _leading_args(tokens, i + 2, n)
            sets.append(_dtypes(tok, args) if len(args) == n else None)
            out += ["AT_DISPATCH", "("]
            i = j
            continue
        out.append(tok)
        i += 1
    return out, sets


def _v2_call(tokens: Sequence[str], at: int) -> tuple[list[str], set[str] | None, int] | None:
    """``AT_DISPATCH_V2(type, name, AT_WRAP(lambda), items...)`` at ``at`` read as the older
    macros' arguments after their type list (``type, name, lambda)``), its dtype set, and where
    the call ends; None when the call is not whole in ``tokens``."""
    args, end = _call_args(tokens, at + 1)
    if end is None or len(args) < 4 or args[2][:2] != ["AT_WRAP", "("] or args[2][-1] != ")":
        return None
    items = _v2_items([t for arg in args[3:] for t in (",", *arg)])
    dtypes = set(items) if items else None
    return [*args[0], ",", *args[1], ",", *args[2][2:-1], ")"], dtypes, end


def _call_args(tokens: Sequence[str], open_at: int) -> tuple[list[list[str]], int | None]:
    """The top-level arguments of the call whose ``(`` is at ``open_at``, and the index after its ``)``."""
    if open_at >= len(tokens) or tokens[open_at] != "(":
        return [], None
    args: list[list[str]] = [[]]
    depth = 0
    for i in range(open_at + 1, len(tokens)):
        tok = tokens[i]
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            if depth == 0:
                return args, i + 1
            depth -= 1
        elif tok == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(tok)
    return args, None


def _leading_args(tokens: Sequence[str], start: int, n: int) -> tuple[list[str], int]:
    """The first ``n`` arguments (each joined into one word) from ``start``, and where the rest begins."""
    args: list[str] = []
    i = start
    while len(args) < n and i < len(tokens):
        j = i
        while j < len(tokens) and tokens[j] not in (",", ")"):
            j += 1
        args.append("".join(tokens[i:j]))
        i = j + 1
    return args, i


def _v2_items(tokens: Sequence[str]) -> list[str] | None:
    """The dtypes of inserted V2 list items (``, kHalf``, ``, AT_EXPAND(AT_FLOAT8_TYPES)``), or None."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] != ",":
            return None
        j = i + 1
        if tokens[j:j + 2] == ["AT_EXPAND", "("] and j + 4 <= len(tokens) and tokens[j + 3] == ")" \
                and tokens[j + 2] in V2_LISTS:
            out += V2_LISTS[tokens[j + 2]]
            i = j + 4
            continue
        k = j
        while k < len(tokens) and tokens[k] != ",":
            k += 1
        dtype = _DTYPE.match("".join(tokens[j:k]))
        if dtype is None:
            return None
        out.append(dtype.group(1))
        i = k
    return out


def _v2_gain(old: Sequence[str], new: Sequence[str]) -> DispatchGain | None:
    """An ``AT_DISPATCH_V2`` type list (its ``AT_EXPAND`` groups and single dtypes) that only
    gains items, read from its changed lines (the call's head is often on another line)."""
    if "AT_EXPAND" not in old and "AT_DISPATCH_V2" not in old:
        return None
    gained: list[str] = []
    for op, _a0, _a1, b0, b1 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op != "insert":
            return None
        chunk = list(new[b0:b1])
        if chunk[-1] == ",":  # inserted before an item: ``kBFloat16,`` reads as ``, kBFloat16``
            chunk = [",", *chunk[:-1]]
        items = _v2_items(chunk)
        if not items:
            return None
        gained += items
    return DispatchGain(tuple(sorted(set(gained)))) if gained else None


def _named_dtypes(tokens: Sequence[str], sets: list[set[str] | None]) -> set[str] | None:
    """The dtypes a version of a function runs for by name: its dispatch lists and every dtype
    token it names (None when a list is not understood, or a dtype-class test or a ``switch`` may
    run dtypes it does not name)."""
    if any(s is None for s in sets) or any(_DTYPE_PREDICATE.match(tok) or tok == "switch" for tok in tokens):
        return None  # a class test (isIntegralType) or a switch may run dtypes it does not name
    named = {m.group(1) for tok in tokens if (m := _DTYPE.match(tok))}
    return named.union(*(s for s in sets if s is not None))


def _dtype_test(cond: Sequence[str]) -> str | None:
    """The dtype of a condition that is one equality test against a dtype (``x == kBComplex32``)."""
    text = list(cond)
    eq = [i for i in range(len(text) - 1) if text[i] == text[i + 1] == "="]
    if len(eq) != 1 or any(set(t) & set("|&!?") for t in text):
        return None
    sides = (text[eq[0] - 1], text[eq[0] + 2] if eq[0] + 2 < len(text) else "")
    found = [m.group(1) for side in sides if (m := _DTYPE.match(side))]
    return found[0] if len(found) == 1 else None


def _closing(tokens: Sequence[str], open_at: int) -> int:
    """The index of the ``}`` closing the ``{`` at ``open_at`` (the last token when none does)."""
    depth = 0
    for i in range(open_at, len(tokens)):
        depth += {"{": 1, "}": -1}.get(tokens[i], 0)
        if depth == 0:
            return i
    return len(tokens) - 1


def _drop_new_dtype_branches(tokens: Sequence[str], known: set[str]) -> tuple[list[str], set[str]]:
    """``tokens`` without the ``if (x == kD) { ... }`` blocks (no ``else``) whose dtype ``kD`` is
    not in ``known``, and those dtypes: such a branch runs for that dtype alone."""
    out: list[str] = []
    dropped: set[str] = set()
    i = 0
    while i < len(tokens):
        args, end = _call_args(tokens, i + 1) if tokens[i] == "if" else ([], None)
        dtype = _dtype_test(args[0]) if end is not None and len(args) == 1 else None
        if dtype is not None and dtype not in known and end is not None and end < len(tokens) and tokens[end] == "{":
            hi = _closing(tokens, end)
            if hi + 1 >= len(tokens) or tokens[hi + 1] != "else":
                dropped.add(dtype)
                i = hi + 1
                continue
        out.append(tokens[i])
        i += 1
    return out, dropped


def dispatch_gain(old: Sequence[str], new: Sequence[str]) -> DispatchGain | None:
    """The dtypes a change adds when it changes nothing but ``AT_DISPATCH_*`` type lists, each
    of which only grows, and branches added for a dtype the old code never named (None otherwise)."""
    old_rest, old_sets = _heads(old)
    new_rest, new_sets = _heads(new)
    known = _named_dtypes(old, old_sets)
    branches: set[str] = set()
    if old_rest != new_rest and known is not None:
        new_rest, branches = _drop_new_dtype_branches(new_rest, known)
    if old_rest != new_rest or len(old_sets) != len(new_sets) or not old_sets:
        return _v2_gain(old, new)
    gained: set[str] = set(branches)
    for before, after in zip(old_sets, new_sets, strict=True):
        if before is None or after is None or not before <= after:
            return None
        gained |= after - before
    # the same dtypes written another way (a list moved to AT_DISPATCH_V2): the same code, no dtype gained
    return DispatchGain(tuple(sorted(gained))) if gained or list(old) != list(new) else None


# ------------------------------------------------------------------------ element type arms


def type_arm_scope(old: Sequence[str], new: Sequence[str]) -> frozenset[DtypeClass] | None:
    """The dtype classes a change runs differently for when it only adds or edits ``if constexpr
    (std::is_same_v<T, D>) {...} [else {...}]`` arms: with each such ``if`` read as its ``else``
    arm (nothing without one) and a declaration split from its first assignment joined again
    (``T x; x = e;`` is ``T x = e;``), both versions read the same, so every other element type
    runs the old code. None when the change is anything else, or an arm tests a type that is not
    one dtype class's (``indexer.dtypes.element_type_class``)."""
    if list(old) == list(new):
        return None
    old_rest, old_classes = _without_type_arms(old)
    new_rest, new_classes = _without_type_arms(new)
    if old_rest is None or new_rest is None or not old_classes | new_classes:
        return None
    if _joined_declarations(old_rest) != _joined_declarations(new_rest):
        return None
    return frozenset(old_classes | new_classes)


def _without_type_arms(tokens: Sequence[str]) -> tuple[list[str] | None, set[DtypeClass]]:
    """``tokens`` with each element type ``if constexpr`` replaced by its ``else`` arm's
    statements, and the classes the arms test (None: an arm whose type is not understood)."""
    out: list[str] = []
    classes: set[DtypeClass] = set()
    i = 0
    while i < len(tokens):
        if list(tokens[i : i + 3]) != ["if", "constexpr", "("]:
            out.append(tokens[i])
            i += 1
            continue
        args, end = _call_args(tokens, i + 2)
        klass = _element_type_test([tok for arg in args for tok in (*arg, ",")][:-1]) if end is not None else None
        if klass is None or end is None or end >= len(tokens) or tokens[end] != "{":
            out.append(tokens[i])
            i += 1
            continue
        classes.add(klass)
        hi = _closing(tokens, end)
        if tokens[hi + 1 : hi + 3] == ["else", "{"]:
            other = _closing(tokens, hi + 2)
            body, inner = _without_type_arms(tokens[hi + 3 : other])
            if body is None:
                return None, classes
            out += body
            classes |= inner
            i = other + 1
        else:
            i = hi + 1
    return out, classes


def _element_type_test(cond: Sequence[str]) -> DtypeClass | None:
    """The class of ``[std::]is_same_v<P, D>`` / ``is_same<P, D>::value`` (P one name, D a type
    of one dtype class); None for any other condition."""
    text = list(cond)
    if text[:2] == ["std", "::"]:
        text = text[2:]
    if len(text) < 6 or text[0] not in ("is_same_v", "is_same") or text[1] != "<" or text[3] != ",":
        return None
    tail = ["::", "value"] if text[0] == "is_same" else []
    if tail and text[-2:] == tail:
        text = text[:-2]
    if text[-1] != ">" or not _IDENT.fullmatch(text[2]):
        return None
    return element_type_class("".join(text[4:-1]))


def _joined_declarations(tokens: Sequence[str]) -> list[str]:
    """``tokens`` with ``T x ; x =`` read as ``T x =`` (a declaration and its first assignment)."""
    out = list(tokens)
    i = 0
    while i + 3 < len(out):
        if out[i + 1] == ";" and out[i + 2] == out[i] and out[i + 3] == "=" and _IDENT.fullmatch(out[i]) \
                and _declares_at(out, i):
            del out[i + 1 : i + 3]
        i += 1
    return out
