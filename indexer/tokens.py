"""Code tokens without comments and layout: libclang's tokenizer for C++, ``tokenize`` for
Python. Two versions of a function with the same tokens differ only in comments, whitespace
or formatting, so a change between them cannot change what runs."""

from __future__ import annotations

import io
import tokenize
from typing import NamedTuple

from clang import cindex

_CPP_ARGS = ["-x", "c++", "-std=c++17", "-nostdinc", "-fsyntax-only"]
_PY_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


class Token(NamedTuple):
    line: int
    text: str


class CodeTokens:
    """The code tokens of one file version, read by line range (comments dropped)."""

    def within(self, start: int, end: int) -> list[str]:
        """The texts of the tokens on lines ``start``..``end``."""
        return [t.text for t in self.all() if start <= t.line <= end]

    def outside(self, extents: list[tuple[int, int]]) -> list[str]:
        """The texts of the tokens on no line of ``extents`` (globals, macros, includes)."""
        return [t.text for t in self.all() if not any(s <= t.line <= e for s, e in extents)]

    def all(self) -> list[Token]:
        raise NotImplementedError


class CppTokens(CodeTokens):
    """libclang's tokens (no preprocessing: macros stay as written); a line range is
    tokenized on its own, so a function costs what its body costs."""

    def __init__(self, path: str, data: bytes) -> None:
        self.name = path if path.endswith((".cpp", ".cc", ".cu", ".h", ".hpp", ".cuh", ".mm")) else path + ".cpp"
        self.tu = cindex.Index.create().parse(
            self.name,
            args=_CPP_ARGS,
            unsaved_files=[(self.name, data.decode("utf-8", "replace"))],
            options=cindex.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES | cindex.TranslationUnit.PARSE_INCOMPLETE,
        )
        self._all: list[Token] | None = None

    def _tokens(self, extent) -> list[Token]:
        return [
            Token(tok.location.line, tok.spelling)
            for tok in self.tu.get_tokens(extent=extent)
            if tok.kind != cindex.TokenKind.COMMENT
        ]

    def within(self, start: int, end: int) -> list[str]:
        f = self.tu.get_file(self.name)
        extent = cindex.SourceRange.from_locations(
            cindex.SourceLocation.from_position(self.tu, f, start, 1),
            cindex.SourceLocation.from_position(self.tu, f, end + 1, 1),
        )
        return [t.text for t in self._tokens(extent) if start <= t.line <= end]

    def all(self) -> list[Token]:
        if self._all is None:
            self._all = self._tokens(self.tu.cursor.extent)
        return self._all


class PythonTokens(CodeTokens):
    """``tokenize``'s tokens, comments and blank lines dropped (indentation kept: it is syntax)."""

    def __init__(self, tokens: list[Token]) -> None:
        self._all = tokens

    def all(self) -> list[Token]:
        return self._all


def code_tokens(kind: str, path: str, data: bytes) -> CodeTokens | None:
    """Tokens of a ``cpp`` or ``python`` source (None when it cannot be tokenized)."""
    if kind == "python":
        try:
            return PythonTokens(
                [
                    Token(tok.start[0], tok.string)
                    for tok in tokenize.tokenize(io.BytesIO(data).readline)
                    if tok.type not in _PY_LAYOUT
                ]
            )
        except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
            return None
    try:
        return CppTokens(path, data)
    except cindex.TranslationUnitLoadError:
        return None
