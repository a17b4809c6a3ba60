"""Text helpers shared by the extractors: blanking comments and string literals
(keeping offsets and line numbers) and mapping offsets to lines."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

# C++ words that stand before '(' without naming a function: statements, operators, casts,
# attributes and the built-in types (each extractor adds its own)
NOT_CALLED = frozenset(
    {
        "__asm__", "__attribute__", "__declspec", "alignas", "alignof", "asm", "auto", "bool", "case", "catch",
        "char", "const_cast", "decltype", "delete", "do", "double", "dynamic_cast", "else", "float", "for", "if",
        "int", "long", "new", "noexcept", "reinterpret_cast", "return", "short", "signed", "sizeof",
        "static_assert", "static_cast", "switch", "throw", "typeid", "unsigned", "void", "while",
    }
)  # fmt: skip

# A C/C++ comment, string or char literal.
_C_NOISE = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
    re.S,
)
# The same, or a raw string literal (R"delim(...)delim", blanked whole: it holds code of
# other languages, shaders and kernels compiled at run time). Slower: only for texts with R".
_C_NOISE_RAW = re.compile(r"""(?<![\w"])(?:u8|[uUL])?R"([^()\\\s"]{0,16})\(.*?\)\1"|""" + _C_NOISE.pattern, re.S)


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    if text[0] == '"':
        # keep the quotes and the text of string literals: registrations name ops in strings
        return text
    if "\\\n" in text:  # a line splice inside a comment (a #define goes on): kept
        return re.sub(r"[^\n\\]|\\(?!\n)", " ", text)
    return spaces(text)


def spaces(text: str) -> str:
    """``text`` with every character but newlines replaced by a space."""
    if "\n" not in text:
        return " " * len(text)
    return "\n".join(" " * len(part) for part in text.split("\n"))


def strip_c_comments(text: str) -> str:
    """``text`` with C/C++ comments and char literals blanked (same length, same lines)."""
    return (_C_NOISE_RAW if 'R"' in text else _C_NOISE).sub(_blank, text)


def blank_strings(text: str) -> str:
    """``text`` (comments already blanked) with string literal contents blanked too."""
    return re.sub(r'"(?:\\.|[^"\\\n])*"', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)


# a directive from its '#' (which only blanks may precede on its line; see _directives)
_DIRECTIVE = re.compile(r"#[ \t]*(\w*)((?:[^\n]*\\\n)*[^\n]*)")
Span = tuple[int, int]


def _directives(code: str) -> Iterator[tuple[int, re.Match[str]]]:
    """(start of its line, match) of every preprocessor directive of ``code``."""
    for m in at_line_start(_DIRECTIVE, code):
        yield code.rfind("\n", 0, m.start()) + 1, m


def at_line_start(pattern: re.Pattern[str], code: str) -> Iterator[re.Match[str]]:
    r"""The matches of ``pattern`` in ``code`` that only blanks (spaces, tabs) precede on their
    line, as ``finditer`` of ``^[ \t]*`` + ``pattern`` with ``re.M`` finds them (but from the
    pattern's own start): a pattern that begins with a literal (``#``) is searched for that
    literal, where ``^`` makes the engine try the whole pattern at every line."""
    pos = 0
    while m := pattern.search(code, pos):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if code[line_start : m.start()].strip(" \t"):
            pos = m.start() + 1  # inside a line: not at its start
            continue
        yield m
        pos = m.end()


def at_word_start(pattern: re.Pattern[str], code: str) -> Iterator[re.Match[str]]:
    r"""The matches of ``pattern`` (which begins with a word character) in ``code`` that begin
    a word, as ``finditer`` of ``\b`` + ``pattern`` finds them: a leading ``\b`` makes the
    engine try the whole pattern at every offset, where the pattern's literal is searched for."""
    pos = 0
    while m := pattern.search(code, pos):
        start = m.start()
        if start and _WORD_CHAR.match(code, start - 1):
            pos = start + 1  # inside a word
            continue
        yield m
        pos = m.end()


_WORD_CHAR = re.compile(r"\w")


def preprocessor_spans(code: str) -> tuple[list[Span], list[Span]]:
    """(directive lines, branches a build would not see) of ``code`` (comments blanked), as
    (start, end) offsets. Not seen: ``#if 0`` branches and, of a conditional group whose
    branches do not all leave braces and parentheses balanced, every branch but the first
    (``#if A`` / ``struct S : B {`` / ``#else`` / ``struct S {`` / ``#endif``), so that the
    blocks of the code still match."""
    groups: list[list[tuple[int, int, bool]]] = []  # open groups: (directive start, end, is '#if 0')
    directives: list[Span] = []
    dropped: list[Span] = []
    for start, m in _directives(code):
        word = m.group(1)
        directives.append((start, m.end()))
        zero = m.group(2).strip() in ("0", "false")
        if word in ("if", "ifdef", "ifndef"):
            groups.append([(start, m.end(), word == "if" and zero)])
        elif word in ("elif", "else", "elifdef", "elifndef") and groups:
            groups[-1].append((start, m.end(), word == "elif" and zero))
        elif word == "endif" and groups:
            dropped += _dropped_branches(code, groups.pop(), start, directives + dropped)
    return directives, dropped


def _dropped_branches(code: str, branches: list[tuple[int, int, bool]], endif: int, cut: list[Span]) -> list[Span]:
    """The branches of one conditional group to drop."""
    bodies = [(b[1], branches[k + 1][0] if k + 1 < len(branches) else endif, b[2]) for k, b in enumerate(branches)]
    drop = [(s, e) for s, e, zero in bodies if zero]
    live = [(s, e) for s, e, zero in bodies if not zero]
    if len(live) > 1 and any(_balance(_without(code, s, e, cut)) for s, e in live):
        drop += live[1:]
    return drop


def _balance(text: str) -> int:
    return text.count("{") - text.count("}") + 7919 * (text.count("(") - text.count(")"))


def _without(code: str, start: int, end: int, cut: list[Span]) -> str:
    """code[start:end] without the ``cut`` spans inside it."""
    parts, pos = [], start
    for s, e in sorted(r for r in cut if start <= r[0] < end):
        if s >= pos:
            parts.append(code[pos:s])
        pos = max(pos, e)
    parts.append(code[pos:end])
    return "".join(parts)


def blank_spans(text: str, spans: list[Span]) -> str:
    """``text`` with the characters of ``spans`` but newlines replaced by spaces."""
    if not spans:
        return text
    parts, pos = [], 0
    for start, end in sorted(spans):
        if end <= pos:
            continue
        start = max(start, pos)
        parts += [text[pos:start], spaces(text[start:end])]
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def angle_argument_spans(code: str, open_at: int, limit: int | None = None) -> list[tuple[int, int]] | None:
    """(start, end) of each top-level argument of the ``<...>`` opened at ``open_at``, split on
    its top-level commas; None when no ``<`` is there, or it is not closed (within ``limit``
    characters) before a ``;``, ``{`` or ``}``."""
    if open_at < 0 or open_at >= len(code) or code[open_at] != "<":
        return None
    spans, depth, start = [], 0, open_at + 1
    end = len(code) if limit is None else min(len(code), open_at + limit)
    for i in range(open_at, end):
        ch = code[i]
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
            if depth == 0:
                spans.append((start, i))
                return spans
        elif ch == "," and depth == 1:
            spans.append((start, i))
            start = i + 1
        elif ch in ";{}":
            return None
    return None


class LineIndex:
    """Maps character offsets of a text to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)

    def offset_of(self, line: int) -> int:
        """Offset of the first character of 1-based ``line``."""
        return self._starts[max(0, min(line - 1, len(self._starts) - 1))]


def decode_source(data: bytes) -> str | None:
    """Source bytes as text, or None for binary (NUL bytes) content. Non-UTF-8 bytes
    are replaced, never fatal."""
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")
