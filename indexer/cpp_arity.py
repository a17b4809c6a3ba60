"""How many arguments a C++ call site passes, and how many a function definition accepts, read
from the comment- and string-blanked text; None wherever the text does not make it certain.

A call ``f(a, b)`` passes 2. Commas are counted at the top level of the argument list, reading
``<`` both as an operator and as a template's bracket: when the two readings differ
(``f(std::pair<A, B>(x))``, ``f(i < n, j > m)``), the count is unknown. So is any list with a
pack expansion (``f(args...)``), ``__VA_ARGS__`` or a preprocessor directive inside.

A definition accepts its parameters' count at most (no bound with a pack or C ``...``), and at
least those before its first default value, where that is certain: a member function defined
in its class has no other declaration to add defaults; any other definition may have a prior
declaration that does (a header's prototype), so its least count is 0."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from indexer.facts import Function
from indexer.source_text import LineIndex
from schema.kinds import FunctionKind

_SCAN_LIMIT = 8000  # characters of one argument list read before giving up (unknown)
_OPEN, _CLOSE = "([{", ")]}"
_MACRO_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_UNKNOWN_IN_LIST = ("__VA_ARGS__", "#")


class Arity(NamedTuple):
    """The argument counts a definition accepts: ``least`` .. ``most`` (None: no bound)."""

    least: int
    most: int | None


UNKNOWN = Arity(0, None)


def _char_literal_end(code: str, i: int, end: int) -> int:
    """The offset just past the character literal opening at ``code[i] == "'"`` (or past a digit
    separator, ``1'000``); -1 when it does not close within a few characters."""
    if i > 0 and code[i - 1].isalnum():
        return i + 1  # a digit separator
    j = i + 1
    if j < end and code[j] == "\\":
        j += 2
        while j < end and j - i < 12 and code[j] != "'":
            j += 1
    else:
        j += 1
    return j + 1 if j < end and code[j] == "'" else -1


# the characters that decide an argument list's items (letters, digits and blanks do not)
_SIGNIFICANT = re.compile(r"[][(){}<>,']")


def _split(code: str, open_at: int, angles: bool) -> tuple[list[tuple[int, int]], bool] | None:
    """(start, end) of each top-level item of the bracketed list opened at ``open_at``, and whether
    a top-level '<' is in it; ``<``/``>`` read as brackets with ``angles``. None when the list does
    not close within _SCAN_LIMIT characters, or (with ``angles``) a '<' stays open."""
    close = _CLOSE[_OPEN.index(code[open_at])]
    depth, angle, start, less = 0, 0, open_at + 1, False
    items: list[tuple[int, int]] = []
    end = min(len(code), open_at + _SCAN_LIMIT)
    pos = open_at + 1
    search = _SIGNIFICANT.search
    while (m := search(code, pos, end)) is not None:
        i = m.start()
        ch = code[i]
        pos = i + 1
        if ch == "'":
            pos = _char_literal_end(code, i, end)
            if pos < 0:
                return None
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                if ch != close or (angles and angle):
                    return None
                items.append((start, i))
                return items, less
            depth -= 1
        elif ch == "<" and depth == 0:
            if code.startswith(("<<", "<="), i):
                pos = i + 2
            else:
                less = True
                angle += angles
        elif ch == ">" and angle and depth == 0 and code[i - 1] != "-" and not code.startswith(">=", i):
            angle -= 1
        elif ch == "," and depth == 0 and angle == 0:
            items.append((start, i))
            start = i + 1
    return None


def _items(code: str, open_at: int) -> list[tuple[int, int]] | None:
    """The top-level items of the list opened at ``open_at`` when both readings of '<' agree on
    them (a reading with a '<' left open does not count); None otherwise."""
    plain = _split(code, open_at, angles=False)
    if plain is None:
        return None
    if plain[1]:  # a '<': read it as a bracket too
        bracketed = _split(code, open_at, angles=True)
        if bracketed is not None and len(bracketed[0]) != len(plain[0]):
            return None
    return plain[0]


def _outside_brackets(code: str, start: int, end: int) -> Iterator[int]:
    """The positions of ``code[start:end]`` outside any bracket ('<' counted as one)."""
    depth = 0
    for i in range(start, end):
        ch = code[i]
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>" and depth:
            depth -= 1
        elif depth == 0:
            yield i


def _has_pack(code: str, start: int, end: int) -> bool:
    """Whether ``code[start:end]`` has a ``...`` outside any bracket (a pack, C's variadic)."""
    return any(code.startswith("...", i) for i in _outside_brackets(code, start, end))


# an argument list with no bracket, '<', character literal or directive inside: its commas are its
# items' (most call sites; read with one match instead of the scan)
_FLAT_LIST = re.compile(r"\(([^][(){}<>'#]*)\)")


def argument_count(code: str, open_at: int) -> int | None:
    """The number of arguments of the call whose argument list opens at ``code[open_at] == '('``;
    None when it is not certain."""
    if open_at >= len(code) or code[open_at] != "(":
        return None
    flat = _FLAT_LIST.match(code, open_at)
    if flat is not None:
        text = flat.group(1)
        if "..." in text or "__VA_ARGS__" in text:
            return None
        return text.count(",") + 1 if text.strip() else 0
    items = _items(code, open_at)
    if items is None:
        return None
    whole = code[items[0][0] : items[-1][1]]
    if any(word in whole for word in _UNKNOWN_IN_LIST):
        return None
    if "..." in whole and _has_pack(code, items[0][0], items[-1][1]):
        return None
    if len(items) == 1 and not whole.strip():
        return 0
    return len(items)


def _has_default(code: str, start: int, end: int) -> bool:
    """Whether the parameter ``code[start:end]`` has a default value (a top-level '=')."""
    return any(
        code[i] == "=" and code[i + 1 : i + 2] != "=" and code[i - 1] not in "=!<>"
        for i in _outside_brackets(code, start, end)
    )


def parameter_arity(code: str, open_at: int, defaults_certain: bool) -> Arity:
    """The argument counts the parameter list opening at ``code[open_at] == '('`` accepts;
    its least count only when ``defaults_certain`` (no other declaration can add defaults)."""
    found = _split(code, open_at, angles=True) if code[open_at : open_at + 1] == "(" else None
    if found is None:
        return UNKNOWN
    items = found[0]
    whole = code[items[0][0] : items[-1][1]]
    if any(word in whole for word in _UNKNOWN_IN_LIST):
        return UNKNOWN
    if len(items) == 1 and whole.strip() in ("", "void"):
        return Arity(0, 0)
    texts = [code[s:e].strip() for s, e in items]
    if any(not t or _MACRO_NAME.fullmatch(t) for t in texts):
        return UNKNOWN  # an empty item, or a macro that may stand for several parameters
    packed = [_has_pack(code, s, e) for s, e in items]
    most = None if any(packed) else len(items)
    least = 0
    if defaults_certain:
        for (s, e), pack in zip(items, packed, strict=True):
            if pack or _has_default(code, s, e):
                break
            least += 1
    return Arity(least, most)


def parameter_texts(code: str, open_at: int) -> list[str] | None:
    """The parameters of the declaration whose list opens at ``code[open_at] == '('`` ('<' read as
    a template bracket); None when the list does not close."""
    found = _split(code, open_at, angles=True) if code[open_at : open_at + 1] == "(" else None
    return None if found is None else [code[s:e].strip() for s, e in found[0]]


def block_text(code: str, open_at: int) -> str | None:
    """The text between the brace at ``code[open_at] == '{'`` and the one closing it; None when it
    does not close."""
    found = _split(code, open_at, angles=False) if code[open_at : open_at + 1] == "{" else None
    return None if found is None else code[found[0][0][0] : found[0][-1][1]]


_TEMPLATE_ARGS_AND_PAREN = re.compile(r"\s*(?:<[^;{}()]*>\s*)?\(")


def _declarator(code: str, f: Function, start: int, end: int) -> tuple[int, int] | None:
    """(start of the definition's name, its parameter list's '(') before the first '{' of its text
    (the body's, or its initializers'); template arguments may stand between."""
    brace = code.find("{", start, end)
    stop = brace if brace >= 0 else end
    name, at = f.name, code.find(f.name, start, stop)
    while at >= 0:
        before = code[at - 1] if at > 0 else " "
        m = _TEMPLATE_ARGS_AND_PAREN.match(code, at + len(name), stop)
        if m is not None and not (before.isalnum() or before in "_~"):
            return at, m.end() - 1
        at = code.find(name, at + 1, stop)
    return None


def _in_class(code: str, f: Function, name_at: int, start: int) -> bool:
    """Whether a method's definition is written in its class (no ``Class::`` before its name,
    no ``friend``): its only declaration."""
    j = name_at - 1
    while j >= start and code[j] in " \t\r\n":
        j -= 1
    qualified = code.startswith("::", j - 1)
    return f.kind == FunctionKind.METHOD and not qualified and "friend" not in code[start:name_at]


def definition_arity(code: str, f: Function, lines: LineIndex) -> Arity:
    """The argument counts the C++ definition ``f`` accepts (UNKNOWN for a macro, an operator,
    a definition whose parameter list the text does not show)."""
    if f.kind in (FunctionKind.MACRO, FunctionKind.REGISTRATION) or f.name.startswith("operator"):
        return UNKNOWN
    start, end = lines.offset_of(f.start_line), lines.offset_of(f.end_line + 1)
    if end <= start:
        end = len(code)
    found = _declarator(code, f, start, end)
    if found is None:
        return UNKNOWN
    return parameter_arity(code, found[1], _in_class(code, f, found[0], start))


_TYPE_WORDS = frozenset({"const", "volatile", "typename", "struct", "class", "enum", "unsigned", "signed"})
_NAMED = re.compile(r"[A-Za-z_]\w*")


def _class_of_parameter(text: str) -> str | None:
    """The class a parameter's type names (``const pair<T1, T2>& x``: 'pair'), None for none."""
    text = text.split("=", 1)[0]
    less = text.find("<")
    words = [w for w in _NAMED.findall(text[:less] if less >= 0 else text) if w not in _TYPE_WORDS]
    if less < 0:
        words = words[:-1] if len(words) > 1 else words  # the parameter's own name last
    return words[-1] if words else None


def operand_classes(code: str, f: Function, lines: LineIndex) -> tuple[str, ...]:
    """The classes the parameters of the operator overload ``f`` take, in order, each once
    (``operator!=(const pair<T1, T2>& x, const pair<T1, T2>& y)``: ('pair',)); () when unread."""
    start, end = lines.offset_of(f.start_line), lines.offset_of(f.end_line + 1)
    named = _declarator(code, f, start, end if end > start else len(code))
    found = _split(code, named[1], angles=True) if named is not None else None
    if found is None:
        return ()
    classes = (_class_of_parameter(code[s:e]) for s, e in found[0])
    return tuple(dict.fromkeys(c for c in classes if c))


def with_arity(code: str, functions: list[Function], lines: LineIndex) -> list[Function]:
    """``functions`` with the argument counts each accepts (their ``least_args``/``most_args``)."""
    out = []
    for f in functions:
        arity = definition_arity(code, f, lines)
        out.append(f if arity == UNKNOWN else f._replace(least_args=arity.least, most_args=arity.most))
    return out


def accepts(least: int, most: int | None, n_args: int | None) -> bool:
    """Whether a definition accepting ``least`` .. ``most`` arguments can be called with ``n_args``
    (unknown counts accept)."""
    return n_args is None or (n_args >= least and (most is None or n_args <= most))
