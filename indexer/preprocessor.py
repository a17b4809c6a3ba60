"""Which lines of a C++ file a build compiles: its ``#if``/``#ifdef``/``#elif``/``#else`` branches
evaluated against the target build's macros (indexer/build_config.py), in three values.

A condition whose macros the build configuration does not know is neither true nor false: its
lines are *build-conditional* and keep whatever they select, with the unknown macros named. Only a
branch that is known to be left out (``#if defined(__aarch64__)`` on x86-64, the ``#else`` of
``#if AT_MKLDNN_ENABLED()`` in a oneDNN build) drops its lines. libclang's skipped ranges would
give the inactive ranges too, but its preprocessor reads an unknown macro as 0: it cannot tell
"not compiled" from "not known". Pure: text in, line states out.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from indexer.build_config import BuildMacros

UNKNOWN = None  # a value the build configuration does not decide
Value = int | None
Macro = tuple[bool, int | None] | None  # (defined, value: None when not a number); None: not known at all

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif|define|undef)\b((?:[^\n]*\\\n)*[^\n]*)",
                        re.MULTILINE)
_COMMENT = re.compile(r"//.*$|/\*.*?\*/")
_TOKEN = re.compile(r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+)[uUlL]*|(?P<name>[A-Za-z_]\w*)"
                    r"|(?P<op>&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%<>!~&|^(),?:]))")


class Compiled(Enum):
    """Whether the target build compiles a line."""

    yes = "yes"
    no = "no"
    unknown = "unknown"  # a condition on a macro the build configuration does not know


@dataclass(frozen=True)
class Region:
    """Lines ``start``..``end`` (1-based, inclusive) under the same conditions."""

    start: int
    end: int
    compiled: Compiled
    condition: str  # the innermost directive that decides it ('' for unconditional lines)
    unknown: tuple[str, ...] = ()  # the macros that leave it undecided


@dataclass(frozen=True)
class LineStates:
    """The regions of a file, in line order, looked up by line."""

    regions: tuple[Region, ...]

    @functools.cached_property
    def _starts(self) -> list[int]:
        return [r.start for r in self.regions]

    def at(self, line: int) -> Region | None:
        i = bisect.bisect_right(self._starts, line) - 1
        return self.regions[i] if i >= 0 and self.regions[i].end >= line else None

    def left_out(self) -> LineStates:
        """Only the regions the build is known not to compile (never the build-conditional ones)."""
        return LineStates(tuple(r for r in self.regions if r.compiled is Compiled.no))


@dataclass
class _Frame:
    parent: Value  # whether the enclosing region is compiled
    taken: Value  # whether an earlier branch of this #if chain was taken
    active: Value
    condition: str
    unknown: tuple[str, ...]  # the macros that leave this branch undecided
    seen: tuple[str, ...]  # every undecided macro of the chain so far


_State = tuple[Value, str, tuple[str, ...]]


def _state_of(stack: list[_Frame]) -> _State:
    if not stack:
        return 1, "", ()
    top = stack[-1]
    if top.active == 0:  # named by the outermost branch that leaves it out
        return 0, next(f.condition for f in stack if f.active == 0), ()
    unknown = tuple(dict.fromkeys(m for f in stack for m in f.unknown)) if top.active is UNKNOWN else ()
    return top.active, top.condition, unknown


class Directive(NamedTuple):
    """One conditional or ``#define``/``#undef`` directive of a file, as written: what
    ``line_states`` reads of it, whatever the build (the facts cache keeps them per file)."""

    first: int  # its first line
    last: int  # its last line (a directive continued with backslashes spans several)
    word: str  # if, ifdef, ifndef, elif, else, endif, define, undef
    rest: str  # what follows the word, comments removed
    guard: bool = False  # an ``#ifndef X`` followed by ``#define X``: an include guard


DIRECTIVES = "directives"  # the FileFacts.constructs key of a C++ file's directives (when a condition decides lines)
CONDITIONAL = frozenset({"if", "ifdef", "ifndef", "elif", "else"})


def directives(text: str) -> list[Directive]:
    """The directives of ``text`` (a C++ file) in order: one regex over the text."""
    out: list[Directive] = []
    line, pos = 1, 0  # the line number at offset ``pos``
    for m in _DIRECTIVE.finditer(text):
        first = line + text.count("\n", pos, m.start())
        last = first + m.group(0).count("\n")
        line, pos = last, m.end()
        word, rest = m.group(1), _COMMENT.sub(" ", m.group(2).replace("\\\n", " ")).strip()
        out.append(Directive(first, last, word, rest, word == "ifndef" and _guard(rest, text, m.end())))
    return out


def decides_lines(found: list[Directive]) -> bool:
    """Whether ``found`` hold a condition that may leave lines out (not only include guards)."""
    return any(d.word in CONDITIONAL and not d.guard for d in found)


def line_states(text: str, macros: BuildMacros, kind: str) -> LineStates:
    """The compiled / not compiled / build-conditional regions of ``text`` (a C++ file whose
    kind, ``cpp`` / ``cuda`` / ``header``, decides the compiler's own macros) for ``macros``.
    A directive's own lines take the state of the region around its ``#if`` chain."""
    return states_of(directives(text), text.count("\n") + 1, macros, kind)


def states_of(found: list[Directive], n_lines: int, macros: BuildMacros, kind: str) -> LineStates:
    """``line_states`` from a file's directives (``directives``) and its number of lines: only
    the directives are read, so the cost is in them."""
    lookup = macros.for_kind(kind)
    local: dict[str, Macro] = {}
    stack: list[_Frame] = []
    regions: list[Region] = []
    for d in found:
        _add(regions, d.first - 1, _state_of(stack))  # the lines up to the directive
        if d.word in ("define", "undef"):
            _record_define(d.word, d.rest, _state_of(stack)[0], local)
            _add(regions, d.last, _state_of(stack))
            continue
        _add(regions, d.last, _state_of(stack if d.word in ("if", "ifdef", "ifndef") else stack[:-1]))
        _branch(d, stack, lookup, local)
    _add(regions, max(n_lines, found[-1].last if found else 0), _state_of(stack))
    return LineStates(tuple(regions))


def _add(regions: list[Region], end: int, state: _State) -> None:
    """Extend ``regions`` up to line ``end`` with ``state`` (merged into the last region when equal)."""
    start = regions[-1].end + 1 if regions else 1
    if end < start:
        return
    value, condition, unknown = state
    compiled = _state(value)
    last = regions[-1] if regions else None
    if last is not None and (last.compiled, last.condition, last.unknown) == (compiled, condition, unknown):
        regions[-1] = Region(last.start, end, compiled, condition, unknown)
    else:
        regions.append(Region(start, end, compiled, condition, unknown))


def _state(value: Value) -> Compiled:
    return Compiled.unknown if value is UNKNOWN else Compiled.yes if value else Compiled.no


def _branch(d: Directive, stack: list[_Frame], lookup: Callable[[str], Macro], local: dict[str, Macro]) -> None:
    """Open, switch or close the branch a directive starts."""
    word, rest = d.word, d.rest
    if word == "endif":
        if stack:
            stack.pop()
        return
    if word in ("if", "ifdef", "ifndef"):
        parent = stack[-1].active if stack else 1
        if d.guard:
            value, unknown = 1, ()  # an include guard: the file's body is compiled
        else:
            value, unknown = _condition(word, rest, lookup, local)
        stack.append(_Frame(parent, value, _and(parent, value), f"#{word} {rest}".strip(), unknown, unknown))
        return
    if not stack:
        return  # an #elif or #else without its #if: a fragment, nothing to decide
    frame = stack[-1]
    value, unknown = (1, ()) if word == "else" else _condition("if", rest, lookup, local)
    frame.seen = tuple(dict.fromkeys(frame.seen + unknown))
    frame.active = _and(frame.parent, _and(_not(frame.taken), value))
    frame.taken = _or(frame.taken, value)
    frame.condition = f"#else (of {frame.condition})" if word == "else" else f"#elif {rest}"
    frame.unknown = frame.seen if frame.active is UNKNOWN else ()


def _guard(rest: str, text: str, after: int) -> bool:
    """``#ifndef X`` followed by ``#define X`` (``after``: the offset past the ``#ifndef``)."""
    name = rest.split()[0] if rest.split() else ""
    nxt = next((line.strip() for line in text[after:after + 400].split("\n")[1:4] if line.strip()), "")
    return bool(name) and re.fullmatch(rf"#\s*define\s+{re.escape(name)}(\s.*)?", nxt) is not None


def _record_define(word: str, rest: str, where: Value, local: dict[str, Macro]) -> None:
    """A ``#define``/``#undef`` in the file itself: known from here on when its branch is known."""
    m = re.match(r"([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)", rest)
    if m is None:
        return
    name, params, body = m.group(1), m.group(2), m.group(3).strip()
    names = (name, name + "()") if params is not None else (name,)
    for key in names:
        if where is UNKNOWN:
            local[key] = None
        elif not where:
            return
        elif word == "undef":
            local[key] = (False, 0)
        elif params is None and re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", body):
            local[key] = (True, int(body, 0))
        else:  # defined; its value an expression (or arguments') read nowhere here
            local[key] = (True, 1 if not body and params is None else None)


def _condition(word: str, rest: str, lookup: Callable[[str], Macro],
               local: dict[str, Macro]) -> tuple[Value, tuple[str, ...]]:
    """The value of a directive's condition and the macros it could not decide."""
    unknown: list[str] = []

    def value_of(name: str, defined: bool) -> Value:
        macro = local[name] if name in local else lookup(name)
        if macro is None and defined:  # defined(AT_MKLDNN_ENABLED): a function-like macro
            macro = local[name + "()"] if name + "()" in local else lookup(name + "()")
        if macro is None or (macro[0] and macro[1] is None and not defined):
            unknown.append(name.removesuffix("()"))
            return UNKNOWN
        is_defined, value = macro
        return int(is_defined) if defined else (value if is_defined else 0)

    if word in ("ifdef", "ifndef"):
        name = rest.split()[0] if rest.split() else ""
        value = value_of(name, defined=True)
        return (value if word == "ifdef" else _not(value)), tuple(dict.fromkeys(unknown))
    try:
        value = _Parser(_tokens(rest), value_of).expression()
    except ValueError:
        return UNKNOWN, (rest,)
    return value, tuple(dict.fromkeys(unknown))


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(text)
        kind = m.lastgroup or "op"
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _and(a: Value, b: Value) -> Value:
    if a == 0 or b == 0:
        return 0
    return UNKNOWN if a is UNKNOWN or b is UNKNOWN else 1


def _or(a: Value, b: Value) -> Value:
    if (a is not UNKNOWN and a) or (b is not UNKNOWN and b):
        return 1
    return UNKNOWN if a is UNKNOWN or b is UNKNOWN else 0


def _not(a: Value) -> Value:
    return UNKNOWN if a is UNKNOWN else int(not a)


_BINARY = {  # precedence, function (unknown operands give unknown)
    "*": (10, lambda a, b: a * b),
    "/": (10, lambda a, b: a // b if b else 0), "%": (10, lambda a, b: a % b if b else 0),
    "+": (9, lambda a, b: a + b), "-": (9, lambda a, b: a - b),
    "<<": (8, lambda a, b: a << b if 0 <= b < 64 else 0), ">>": (8, lambda a, b: a >> b if 0 <= b < 64 else 0),
    "<": (7, lambda a, b: int(a < b)), ">": (7, lambda a, b: int(a > b)),
    "<=": (7, lambda a, b: int(a <= b)), ">=": (7, lambda a, b: int(a >= b)),
    "==": (6, lambda a, b: int(a == b)), "!=": (6, lambda a, b: int(a != b)),
    "&": (5, lambda a, b: a & b), "^": (4, lambda a, b: a ^ b), "|": (3, lambda a, b: a | b),
    "&&": (2, None), "||": (1, None),
}


class _Parser:
    """A precedence-climbing reader of one ``#if`` expression over three-valued integers."""

    def __init__(self, tokens: list[tuple[str, str]], value_of: Callable[[str, bool], Value]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.value_of = value_of

    def peek(self) -> str:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else ""

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ValueError("unexpected end")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expression(self) -> Value:
        value = self.ternary()
        if self.pos != len(self.tokens):
            raise ValueError("trailing tokens")
        return value

    def ternary(self) -> Value:
        cond = self.binary(1)
        if self.peek() != "?":
            return cond
        self.take()
        yes = self.ternary()
        if self.take()[1] != ":":
            raise ValueError("':' expected")
        no = self.ternary()
        if cond is UNKNOWN:
            return yes if yes == no else UNKNOWN
        return yes if cond else no

    def binary(self, floor: int) -> Value:
        left = self.unary()
        while (op := self.peek()) in _BINARY and _BINARY[op][0] >= floor:
            self.take()
            right = self.binary(_BINARY[op][0] + 1)
            if op == "&&":
                left = _and(left, right)
            elif op == "||":
                left = _or(left, right)
            else:
                left = UNKNOWN if left is UNKNOWN or right is UNKNOWN else _BINARY[op][1](left, right)
        return left

    def unary(self) -> Value:
        kind, text = self.take()
        if text == "!":
            return _not(self.unary())
        if text in ("-", "+", "~"):
            value = self.unary()
            return UNKNOWN if value is UNKNOWN else {"-": -value, "+": value, "~": ~value}[text]
        if text == "(":
            value = self.ternary()
            if self.take()[1] != ")":
                raise ValueError("')' expected")
            return value
        if kind == "num":
            return int(text, 0)
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if text == "defined":
            paren = self.peek() == "("
            if paren:
                self.take()
            name = self.take()[1]
            if paren and self.take()[1] != ")":
                raise ValueError("')' expected")
            return self.value_of(name, True)
        if text in ("true", "false"):
            return int(text == "true")
        if self.peek() == "(":  # a function-like macro: AT_MKLDNN_ENABLED()
            depth = 0
            while True:
                tok = self.take()[1]
                depth += tok == "("
                depth -= tok == ")"
                if depth == 0:
                    break
            return self.value_of(text + "()", False)
        return self.value_of(text, False)
