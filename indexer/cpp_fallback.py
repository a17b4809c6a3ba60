"""Function definitions recovered from the text where libclang's recovery drops them.

Without headers, clang discards declarations it cannot type (``std::optional<double>``
parameters, ``Vectorized<T>`` return types...). This scanner walks the brace structure
of the comment- and string-blanked code, tracks namespace and class scopes, and takes
every brace block whose header ends like a function declarator as a definition.
"""

from __future__ import annotations

import re

from perfq.indexer.facts import Function
from perfq.indexer.source_text import LineIndex

_NAMESPACE = re.compile(r"(?:^|[\s;])(?:inline\s+)?namespace\s*([\w:]*)\s*$")
_EXTERN_C = re.compile(r'extern\s+"C"\s*$')
_CLASS = re.compile(r"\b(class|struct|union)\s+(?:\w+\s+)*?([A-Za-z_]\w*)\s*(?:final\s*)?(?::[^;{}()]*)?$")
_MACRO_NAMED = re.compile(
    r"\b(TORCH_IMPL_FUNC|TORCH_META_FUNC2?|TORCH_PRECOMPUTE_META_FUNC2?)\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)"
)
_TRAILER = re.compile(
    r"\)\s*(?:const|noexcept(?:\s*\([^)]*\))?|override|final|volatile|&&?|\s|->[^{;=]*|"
    r"C10_\w+(?:\([^)]*\))?|__attribute__\s*\(\([^)]*\)\))*$"
)
_NOT_FUNCTIONS = {
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "return",
    "sizeof",
    "decltype",
    "do",
    "else",
    "TORCH_LIBRARY",
    "TORCH_LIBRARY_IMPL",
    "TORCH_LIBRARY_FRAGMENT",
    "AT_DISPATCH_CASE",
    "static_assert",
    "alignas",
}


def _blank_directives(code: str) -> str:
    """Preprocessor lines (with continuations) blanked, keeping line structure."""
    return re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


_BRACES = re.compile(r"[{}]")
_DELIMS = re.compile(r"[{};]")


def _brace_pairs(code: str) -> dict[int, int]:
    """Offset of every '{' -> offset of its matching '}' (unmatched: end of text)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACES.finditer(code):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    for open_ in stack:
        pairs[open_] = len(code) - 1
    return pairs


def _function_name(header: str) -> tuple[str, str] | None:
    """(name, qualifier) of a definition header ending just before '{', or None."""
    if not _TRAILER.search(header):
        return None
    macro = _MACRO_NAMED.search(header)
    if macro:
        name = macro.group(2) + (f"_{macro.group(3)}" if macro.group(3) else "")
        return name, ""
    if re.search(r"(?:^|[^\w:])=\s*[^=]*$", header) and "operator" not in header:
        return None  # an initializer or lambda assigned to a variable
    depth = 0
    for i, ch in enumerate(header):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif ch == "(" and depth == 0:
            m = re.search(
                r"((?:[A-Za-z_]\w*\s*(?:<[^(){};]*>)?\s*::\s*)*)(~?[A-Za-z_]\w*|operator\s*\S+?)\s*$", header[:i]
            )
            if not m or m.group(2) in _NOT_FUNCTIONS or m.group(2).isupper():
                return None
            qual = re.sub(r"\s+|<[^(){};]*>", "", m.group(1)).rstrip(":")
            return m.group(2).replace(" ", ""), qual
    return None


def text_functions(code: str, covered: list[tuple[int, int]]) -> list[Function]:
    """Definitions in ``code`` (comments and strings blanked) outside ``covered`` line spans."""
    code = _blank_directives(code)
    lines = LineIndex(code)
    spans = sorted(covered)
    out: list[Function] = []

    def is_covered(line: int) -> bool:
        return any(a <= line <= b for a, b in spans)

    pairs = _brace_pairs(code)

    def scan(start: int, end: int, scope: list[str], anonymous: bool, in_class: bool) -> None:
        header_start = start
        pos = start
        while True:
            m = _DELIMS.search(code, pos, end)
            if m is None:
                return
            i = m.start()
            ch = m.group()
            pos = i + 1
            if ch in ";}":
                header_start = i + 1
            else:
                header = code[header_start:i]
                close = pairs.get(i, end)
                stripped = header.strip()
                ns = _NAMESPACE.search(stripped)
                if ns:
                    name = ns.group(1)
                    scan(
                        i + 1,
                        close,
                        [*scope, *(name.split("::") if name else ["(anonymous namespace)"])],
                        anonymous or not name,
                        False,
                    )
                elif _EXTERN_C.search(stripped):
                    scan(i + 1, close, scope, anonymous, False)
                elif _CLASS.search(stripped) and "(" not in stripped.split("{")[-1].rsplit(">", 1)[-1]:
                    cls = _CLASS.search(stripped)
                    scan(i + 1, close, [*scope, cls.group(2)], anonymous, True)
                else:
                    found = _function_name(stripped) if stripped else None
                    if found:
                        name, qual = found
                        offset = header_start + len(header) - len(header.lstrip())
                        first = lines.line_of(offset)
                        last = lines.line_of(close)
                        if not is_covered(first) and not is_covered(last):
                            kind = "method" if in_class or qual else "function"
                            if "TORCH_IMPL_FUNC" in stripped:
                                kind = "structured_impl"
                            elif "META_FUNC" in stripped:
                                kind = "structured_meta"
                            elif "__global__" in stripped:
                                kind = "global_kernel"
                            elif stripped.startswith("template"):
                                kind = "template"
                            internal = anonymous or bool(re.match(r"(?:template\s*<[^{}]*>\s*)?static\b", stripped))
                            qualname = "::".join([*scope, *([qual] if qual else []), name])
                            out.append(Function(qualname, name, kind, first, last, internal))
                pos = close + 1
                header_start = close + 1

    scan(0, len(code), [], False, False)
    return out
