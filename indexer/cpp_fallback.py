"""Function definitions recovered from the text where libclang's recovery drops them.

Without headers, clang discards declarations it cannot type (``std::optional<double>``
parameters, ``Vectorized<T>`` return types, members of class templates over unknown
bases...). This scanner reads the structure of the comment- and string-blanked code
instead: it keeps the preprocessor branches a build could see (all of them when each
leaves the braces balanced, else the first), walks the brace blocks at namespace and
class scope, and takes every block whose header ends like a function declarator as a
definition, named as clang would name it (``ns::Class::name``, ``<T, U>`` for a
function template).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from indexer.facts import ClassFact, Function
from indexer.source_text import NOT_CALLED, LineIndex
from schema.model import FunctionKind

_MACRO_NAMED = re.compile(
    r"\b(TORCH_IMPL_FUNC|TORCH_META_FUNC2?|TORCH_PRECOMPUTE_META_FUNC2?)\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)"
)
# library registration blocks, named as data/prelude.h names them:
# TORCH_LIBRARY_IMPL(aten, CPU, m) { -> __perfq_torch_library_impl_aten_CPU
_LIBRARY_BLOCKS = {
    "TORCH_LIBRARY": ("__perfq_torch_library_", 1),
    "TORCH_LIBRARY_FRAGMENT": ("__perfq_torch_library_fragment_", 1),
    "TORCH_LIBRARY_IMPL": ("__perfq_torch_library_impl_", 2),
}
# one token of a declaration header; '>>' is two tokens (it closes two template lists);
# a backslash (a line splice kept in a blanked comment) is none
_TOKEN = re.compile(r'"[^"\n]*"|[A-Za-z_]\w*|\d[\w.]*|::|->|>=|<=|<<=?|&&|\|\||==|!=|\.\.\.|[^\s\w\\]')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_MACRO_CASE = re.compile(r"[A-Z][A-Z0-9_]*")
# words that may stand before '(' in a header without naming a function
_NOT_NAMES = NOT_CALLED | {"_Pragma", "__pragma", "requires"}
_SPECIFIER_SKIP = frozenset({"__attribute__", "__declspec", "alignas"})
_CLASS_KEYS = frozenset({"class", "struct", "union"})
_ACCESS = frozenset({"public", "private", "protected"})
_ATTRIBUTE_MACRO = re.compile(r"LAUNCH_BOUNDS|DEPRECATED|ALIGN")
_SCOPE_DELIMS = re.compile(r"[{};()]")
_BRACES = re.compile(r"[{}]")
_CATCH = re.compile(r"\s*catch\s*\(")
# a method declared virtual, or overriding one, in a class body (nested blocks blanked)
_VIRTUAL = re.compile(r"\bvirtual\b[^;{}()]*?(~?\w+)\s*\(")
# a data member's declaration, once the class body's nested blocks are cut out: its type
# (template arguments and all) and its name (``c10::intrusive_ptr<LinearPackedParamsBase> packed_w_ih``)
_FIELD = re.compile(
    r"(?:(?:public|protected|private)\s*:\s*)*(?:(?:static|mutable|const|constexpr|inline|volatile)\s+)*"
    r"(?P<type>[A-Za-z_][\w:]*(?:\s*<[^;{}()]*>)?(?:\s*(?:const\b|\*|&))*)\s*(?<=[\s*&>])"
    r"(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\])?"
)
_FIELD_MAX = 400  # a longer statement is no plain member declaration (nor worth a regex's backtracking)
_NOT_FIELD_TYPES = frozenset({"using", "typedef", "friend", "return", "template", "enum", "class", "struct",
                              "union", "namespace", "static_assert", "operator", "public", "protected", "private"})
_OVERRIDE = re.compile(r"(~?\w+)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)[^;{}()]*\b(?:override|final)\b")
_PARENS = re.compile(r"[(){}]")


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


@dataclass(frozen=True)
class Declarator:
    """What a header before '{' declares: a scope (namespace, class) or a function."""

    kind: str  # namespace | extern | class | enum | function | initializer (``x = {``) | other
    name: str = ""
    qualifier: str = ""
    template_params: tuple[str, ...] | None = None  # a function template's parameter names
    static: bool = False
    start: int = 0  # offset in the header where the declaration begins
    init_brace: bool = False  # the '{' opens a member initializer (``Foo() : a_{``), not the body


def _match(toks: list[str], i: int, open_: str, close: str) -> int:
    """Index of the token closing the bracket opened at ``toks[i]`` (or the last index)."""
    depth = 0
    for k in range(i, len(toks)):
        if toks[k] == open_:
            depth += 1
        elif toks[k] == close:
            depth -= 1
            if depth == 0:
                return k
    return len(toks) - 1


def _match_angle(toks: list[str], i: int) -> int:
    """Index of the '>' closing the template list opened at ``toks[i]`` ('(' groups
    inside are skipped, so comparisons in them do not count)."""
    depth = 0
    k = i
    while k < len(toks):
        t = toks[k]
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
            if depth == 0:
                return k
        elif t in "([":
            k = _match(toks, k, t, ")" if t == "(" else "]")
        elif t in ";{}":
            break
        k += 1
    return len(toks) - 1


def _template_param_names(toks: list[str], lo: int, hi: int) -> tuple[str, ...]:
    """Names of the template parameters in toks[lo:hi] (between '<' and '>'), '?' for an
    unnamed one, as libclang spells them."""
    names: list[str] = []
    param: list[str] = []  # the depth-0 tokens of the current parameter, before any '='
    depth = 0
    defaulted = False
    for t in [*toks[lo:hi], ","]:
        if depth == 0 and t == ",":
            last = param[-1] if param else ""
            named = len(param) > 1 and _IDENT.fullmatch(last) and param[-2] != "::"
            names.append(last if named else "?")
            param, defaulted = [], False
        elif t in "<([":
            depth += 1
        elif t in ">)]":
            depth -= 1
        elif depth == 0 and t == "=":
            defaulted = True
        elif depth == 0 and not defaulted:
            param.append(t)
    return tuple(names) if any(toks[lo:hi]) else ()


def _statement_macro(header: str, toks: list[str], offs: list[int], i: int) -> int:
    """Index after a macro invocation at toks[i] that is a statement of its own, written
    without ';' on its own lines (``DECLARE_DISPATCH(fn, stub)`` before a definition),
    else ``i``. Attribute macros (``C10_LAUNCH_BOUNDS_1(128)``) belong to the declaration."""
    if not (_MACRO_CASE.fullmatch(toks[i]) and i + 1 < len(toks) and toks[i + 1] == "("):
        return i
    close = _match(toks, i + 1, "(", ")")
    if close + 1 >= len(toks) or toks[close + 1] in ("(", ":") or _ATTRIBUTE_MACRO.search(toks[i]):
        # a '(' next: the macro names a function (``TORCH_IMPL_FUNC(name)\n(args) {``); a
        # ':' next: a constructor's initializers (``FDE(void* data)\n : data_(data) {``)
        return i
    return close + 1 if "\n" in header[offs[close] + 1 : offs[close + 1]] else i


def _skip_prefix(header: str, toks: list[str], offs: list[int]) -> tuple[int, int, list[tuple[str, ...]]]:
    """(index of the first token after access specifiers, statement macros, attributes
    and ``template<...>`` prefixes; index where the declaration begins; the parameter
    names of each template prefix)."""
    i = begin = 0
    templates: list[tuple[str, ...]] = []
    n = len(toks)
    while i < n:
        t = toks[i]
        if t in _ACCESS and i + 1 < n and toks[i + 1] == ":" or t == "@" and i + 1 < n and toks[i + 1] == "end":
            i = begin = i + 2  # 'public:', Objective-C's '@end'
        elif i == begin and _statement_macro(header, toks, offs, i) > i:
            i = begin = _statement_macro(header, toks, offs, i)
        elif t == "template" and i + 1 < n and toks[i + 1] == "<":
            close = _match_angle(toks, i + 1)
            templates.append(_template_param_names(toks, i + 2, close))
            i = close + 1
        elif t == "[" and i + 1 < n and toks[i + 1] == "[":
            i = _match(toks, i, "[", "]") + 1
        elif t in _SPECIFIER_SKIP and i + 1 < n and toks[i + 1] == "(":
            i = _match(toks, i + 1, "(", ")") + 1
        else:
            break
    return i, begin, templates


def _class_name(toks: list[str], i: int) -> str | None:
    """The name a class head at toks[i] (after the class key) declares, or None when the
    tokens are not a class head (``struct Foo* make()``)."""
    n = len(toks)
    name = ""
    while i < n:
        t = toks[i]
        if t in _SPECIFIER_SKIP and i + 1 < n and toks[i + 1] == "(":
            i = _match(toks, i + 1, "(", ")") + 1
        elif t == "[" and i + 1 < n and toks[i + 1] == "[":
            i = _match(toks, i, "[", "]") + 1
        elif _IDENT.fullmatch(t) and t != "final":
            name = t
            i += 1
        elif t == "::":
            i += 1
        elif t == "<" and name:
            i = _match_angle(toks, i) + 1
        else:
            break
    if i < n and toks[i] == "final":
        i += 1
    if i == n or toks[i] == ":":
        return name or "(anonymous)"
    return None


def _name_before(toks: list[str], k: int) -> tuple[str, int] | None:
    """(name, index of its first token) of the function name ending at toks[k] (just
    before a '('), or None."""
    t = toks[k]
    if t == ">":  # an explicit specialisation: name<args>(
        depth = 0
        for j in range(k, -1, -1):
            if toks[j] == ">":
                depth += 1
            elif toks[j] == "<":
                depth -= 1
                if depth == 0:
                    return _name_before(toks, j - 1) if j > 0 and _IDENT.fullmatch(toks[j - 1]) else None
        return None
    if not _IDENT.fullmatch(t) or t in _NOT_NAMES:
        return None
    if k > 0 and toks[k - 1] == "~":
        return "~" + t, k - 1
    return t, k


def _operator_name(toks: list[str], i: int) -> tuple[str, int]:
    """(name, index of the '(' opening the parameters) of ``operator`` at toks[i]."""
    j = i + 1
    n = len(toks)
    if j + 1 < n and (toks[j], toks[j + 1]) in (("(", ")"), ("[", "]")):
        return "operator" + toks[j] + toks[j + 1], j + 2
    if j + 2 < n and toks[j] == '""' and _IDENT.fullmatch(toks[j + 1]):  # a literal: operator""_TiB(
        return f'operator""{toks[j + 1]}', j + 2
    if j < n and toks[j] in ("new", "delete"):
        if j + 2 < n and toks[j + 1] == "[":
            return f"operator {toks[j]}[]", j + 3
        return f"operator {toks[j]}", j + 1
    if j < n and not _IDENT.fullmatch(toks[j]) and toks[j] not in ("(", "::"):
        k = j
        while k < n and toks[k] != "(" and not _IDENT.fullmatch(toks[k]):
            k += 1
        return "operator" + "".join(toks[j:k]), k
    parts: list[str] = []  # a conversion function: operator <type>(
    k = j
    while k < n and toks[k] != "(":
        if toks[k] == "<":
            close = _match_angle(toks, k)
            parts.append("".join(toks[k : close + 1]))
            k = close + 1
            continue
        parts.append(toks[k])
        k += 1
    return "operator " + re.sub(r" ?(::|<|>|,) ?", r"\1", " ".join(parts)), k


def _qualifier(toks: list[str], start: int) -> str:
    """The ``a::B`` qualifier before the name starting at toks[start] (template arguments
    dropped)."""
    parts: list[str] = []
    j = start - 1
    while j >= 1 and toks[j] == "::":
        j -= 1
        if toks[j] == ">":
            depth = 0
            while j >= 0:
                if toks[j] == ">":
                    depth += 1
                elif toks[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
        if j < 0 or not _IDENT.fullmatch(toks[j]) or toks[j] in ("template", "typename"):
            break
        parts.append(toks[j])
        j -= 1
    return "::".join(reversed(parts))


def _trailer_ok(toks: list[str], k: int) -> tuple[bool, int]:
    """(whether toks[k:] may follow a function's parameter list: qualifiers, attributes,
    attribute-like macros, a trailing return type; the index of the ':' starting a
    constructor's initializer list, or -1)."""
    n = len(toks)
    while k < n:
        t = toks[k]
        if t in ("->", "requires", "try"):
            return True, -1
        if t == ":":
            return True, k
        if t in ("&", "&&") or _IDENT.fullmatch(t):
            k += 1
        elif t == "(" and _IDENT.fullmatch(toks[k - 1]):
            k = _match(toks, k, "(", ")") + 1
        elif t == "[" and k + 1 < n and toks[k + 1] == "[":
            k = _match(toks, k, "[", "]") + 1
        else:
            return False, -1
    return True, -1


def _function(toks: list[str], start: int, class_name: str, angles: bool = True) -> Declarator | None:
    """The function a header declares, from toks[start:] (after its prefixes), or None.
    Without ``angles``, '<' never opens a template argument list (a comparison inside one,
    ``enable_if_t<i < sizeof...(T), int> f(...)``, leaves the lists unbalanced)."""
    candidates: list[tuple[str, int, bool]] = []  # (name, its first token, a ctor-initializer follows)
    limit = len(toks)  # a ctor-initializer list: no declarator after its ':'
    k = start
    depth: list[str] = []
    while k < limit:
        t = toks[k]
        if t == "operator" and not depth:
            name, paren = _operator_name(toks, k)
            if paren >= limit or toks[paren] != "(":
                return None
            k = _candidate(toks, paren, name, k, candidates)
            limit = min(limit, candidates[-1][3]) if candidates and candidates[-1][3] >= 0 else limit
            continue
        if t == "(" and not depth:
            named = _name_before(toks, k - 1) if k > start else None
            k = _candidate(toks, k, *named, candidates) if named else _match(toks, k, "(", ")") + 1
            limit = min(limit, candidates[-1][3]) if candidates and candidates[-1][3] >= 0 else limit
            continue
        if t == "=" and not depth:
            return Declarator("initializer")  # a variable's initializer, or a lambda stored in one
        if t == "<" and angles and k > start and (_IDENT.fullmatch(toks[k - 1]) or toks[k - 1] == "template"):
            depth.append("<")
        elif t == ">" and depth and depth[-1] == "<":
            depth.pop()
        elif t in "([":
            depth.append(t)
        elif t in ")]" and depth:
            while depth and depth.pop() == "<":
                pass
        k += 1
    return _pick(toks, start, [(name, first, init >= 0) for name, first, _, init in candidates], class_name)


def _candidate(toks: list[str], paren: int, name: str, first: int, candidates: list) -> int:
    """Records ``name`` (first token ``first``, parameters from ``paren``) as a candidate
    declarator when what follows its parameters may follow one; the index after them."""
    close = _match(toks, paren, "(", ")")
    ok, colon = _trailer_ok(toks, close + 1)
    if ok:
        candidates.append((name, first, close + 1, colon))
    return close + 1


def _pick(toks: list[str], start: int, candidates: list[tuple[str, int, bool]], class_name: str):
    """The declarator among ``candidates``: the last one not named like a macro, else a
    macro-cased one that something (a type, a qualifier) precedes, or a constructor."""
    for name, first, init in reversed(candidates):
        if not _MACRO_CASE.fullmatch(name.lstrip("~")):
            return _declarator(toks, start, name, first, init)
    for name, first, init in reversed(candidates):
        qual = _qualifier(toks, first)
        if qual or name.lstrip("~") == class_name or first > start and toks[first - 1] != "::":
            return _declarator(toks, start, name, first, init)
    return None


def _declarator(toks: list[str], start: int, name: str, first: int, init: bool) -> Declarator:
    qual = _qualifier(toks, first)
    static = "static" in toks[start:first]
    # a '{' right after a name in a constructor's initializer list opens an initializer
    init_brace = init and bool(_IDENT.fullmatch(toks[-1]) or toks[-1] == ">")
    return Declarator("function", name, qual, None, static, init_brace=init_brace)


def _tokens(header: str) -> tuple[list[str], list[int]]:
    """The tokens of ``header`` and their offsets."""
    matches = list(_TOKEN.finditer(header))
    return [m.group() for m in matches], [m.start() for m in matches]


def declarator(header: str, class_name: str = "") -> Declarator:
    """What ``header`` (the text between the previous ';' or '}' and a '{') declares."""
    toks, offs = _tokens(header)
    start, begin, templates = _skip_prefix(header, toks, offs)
    if start >= len(toks):
        return Declarator("other")
    t = toks[start]
    if "namespace" in toks:
        # after 'namespace' only its name: stray text before it (an unexpanded template
        # placeholder, a macro without ';') does not hide the namespace
        at = len(toks) - 1 - toks[::-1].index("namespace")
        names = toks[at + 1 :]
        if all(_IDENT.fullmatch(x) or x == "::" for x in names) and "inline" not in names:
            return Declarator("namespace", "::".join(x for x in names if x != "::"))
    if t == "extern" and start + 1 < len(toks) and toks[start + 1].startswith('"'):
        if start + 2 == len(toks):
            return Declarator("extern")
        start += 2
    if t == "enum" and "(" not in toks:  # not ``enum status f(...) {`` (a return type)
        return Declarator("enum")
    if t in _CLASS_KEYS or (t == "typedef" and start + 1 < len(toks) and toks[start + 1] in _CLASS_KEYS):
        name = _class_name(toks, start + 1 + (t == "typedef"))
        if name is not None:
            return Declarator("class", name)
    macro = _MACRO_NAMED.search(header, offs[begin])
    if macro:
        name = macro.group(2) + (f"_{macro.group(3)}" if macro.group(3) else "")
        return Declarator("function", name, start=offs[begin])
    if t in _LIBRARY_BLOCKS and start + 1 < len(toks) and toks[start + 1] == "(":
        return _library_block(toks, start, offs[begin])
    found = _function(toks, start, class_name)
    if found is None:
        found = _function(toks, start, class_name, angles=False) or _macro_function(toks, start, class_name)
        found = found if found is not None and found.kind == "function" else None
    if found is None or found.kind != "function":
        return found or Declarator("other")
    # ``template<class T> void S<T>::f()`` is a member of a class template, not a template
    qualified_templates = sum(1 for part in _qualifier_parts_with_args(toks, start, found) if part)
    params = templates[-1] if len(templates) > qualified_templates and templates[-1] else None
    return Declarator("function", found.name, found.qualifier, params, found.static, offs[begin], found.init_brace)


def _macro_function(toks: list[str], start: int, class_name: str) -> Declarator | None:
    """``TEST(Suite, Name) {`` or ``BENCHMARK_F(Fixture, name)(benchmark::State& state) {``
    at namespace scope: a function named after the macro (as clang names it)."""
    if class_name or not (_MACRO_CASE.fullmatch(toks[start]) and start + 1 < len(toks) and toks[start + 1] == "("):
        return None
    close = _match(toks, start + 1, "(", ")")
    if close + 1 < len(toks) and (toks[close + 1] != "(" or _match(toks, close + 1, "(", ")") != len(toks) - 1):
        return None
    return Declarator("function", toks[start])


def _library_block(toks: list[str], start: int, offset: int) -> Declarator:
    """The function ``TORCH_LIBRARY*(ns, [key,] m) {`` stands for (see data/prelude.h)."""
    prefix, n_names = _LIBRARY_BLOCKS[toks[start]]
    close = _match(toks, start + 1, "(", ")")
    args = [a for a in toks[start + 2 : close] if a != ","]
    return Declarator("function", prefix + "_".join(args[:n_names]), start=offset)


def _qualifier_parts_with_args(toks: list[str], start: int, found: Declarator) -> list[bool]:
    """For each qualifier part of ``found``, whether it has template arguments (``S<T>::``)."""
    if not found.qualifier:
        return []
    text = " ".join(toks[start:])
    return [bool(re.search(rf"\b{re.escape(part)}\s*<", text)) for part in found.qualifier.split("::")]


def _close_paren(code: str, i: int, end: int, pairs: dict[int, int]) -> int:
    """Offset of the ')' matching the '(' at ``i`` (braces inside are skipped whole)."""
    depth = 0
    pos = i
    while True:
        m = _PARENS.search(code, pos, end)
        if m is None:
            return end
        ch = m.group()
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return m.start()
        elif ch == "{":
            pos = pairs.get(m.start(), end) + 1
            continue
        else:
            return m.start() - 1  # a '}' closing the enclosing block: the '(' never closes
        pos = m.end()


class _Scanner:
    """Walks the brace blocks of one file's active code and records function definitions."""

    def __init__(self, code: str, lines: LineIndex | None = None) -> None:
        self.code = code
        self.lines = lines or LineIndex(code)
        self.pairs = _brace_pairs(code)
        self.out: list[Function] = []
        self.classes: list[ClassFact] = []
        self.bodies: dict[str, str] = {}  # class qualname -> its body, nested blocks cut out

    def scan(self, start: int, end: int, scope: list[str], anonymous: bool, class_name: str) -> None:
        code = self.code
        header_start = pos = start
        while True:
            m = _SCOPE_DELIMS.search(code, pos, end)
            if m is None:
                return
            i = m.start()
            ch = m.group()
            if ch == "(":
                pos = _close_paren(code, i, end, self.pairs) + 1
                continue
            if ch == ")":
                pos = i + 1
                continue
            if ch in ";}":
                header_start = pos = i + 1
                continue
            close = self.pairs.get(i, end)
            header = code[header_start:i]
            decl = declarator(header, class_name) if header.strip() else Declarator("other")
            pos = close + 1
            if decl.kind == "namespace":
                names = decl.name.split("::") if decl.name else ["(anonymous namespace)"]
                self.scan(i + 1, close, [*scope, *names], anonymous or not decl.name, "")
            elif decl.kind == "extern":
                self.scan(i + 1, close, scope, anonymous, "")
            elif decl.kind == "class":
                self.record_class(header, i, close, [*scope, decl.name])
                self.scan(i + 1, close, [*scope, decl.name], anonymous, decl.name)
            elif decl.kind == "function":
                if decl.init_brace:
                    continue  # Foo() : a_{...}: the header goes on
                close = self.handlers_end(close, end)
                pos = close + 1
                self.record(decl, header_start + decl.start, close, scope, anonymous, class_name, header)
            elif decl.kind == "initializer":
                continue  # an initializer: the declaration ends at the next ';'
            header_start = pos

    def record_class(self, header: str, brace: int, close: int, qualified: list[str]) -> None:
        """A class definition: its bases (from ``header``) and the methods its body, less the
        blocks nested in it, declares ``virtual`` or ``override``."""
        bases = class_bases(header)
        parts, pos = [], brace + 1
        for m in _BRACES.finditer(self.code, brace + 1, close):
            if m.start() < pos:
                continue
            if m.group() == "{":
                parts.append(self.code[pos : m.start()] + ";")  # a nested block ends a declaration
                pos = self.pairs.get(m.start(), close) + 1
        parts.append(self.code[pos:close])
        body = "".join(parts)
        self.bodies.setdefault("::".join(qualified), body)
        virtuals = {m.group(1) for m in _VIRTUAL.finditer(body)} if "virtual" in body else set()
        if "override" in body:
            virtuals |= {m.group(1) for m in _OVERRIDE.finditer(body)}
        if bases or virtuals:
            line = self.lines.line_of(brace)
            self.classes.append(ClassFact("::".join(qualified), bases, tuple(sorted(virtuals)), line))

    def handlers_end(self, close: int, end: int) -> int:
        """The end of a function-try-block's last ``catch`` handler after the body that
        ends at ``close`` (``close`` when none follows)."""
        while m := _CATCH.match(self.code, close + 1, end):
            paren = _close_paren(self.code, m.end() - 1, end, self.pairs)
            brace = self.code.find("{", paren, end)
            if brace < 0:
                break
            close = self.pairs.get(brace, end)
        return close

    def record(
        self, decl: Declarator, offset: int, close: int, scope: list[str], anonymous: bool, class_name: str, header: str
    ) -> None:
        first = self.lines.line_of(offset)
        last = self.lines.line_of(close)
        in_class = bool(class_name)
        header = header[decl.start :]
        if decl.name.startswith("__perfq_torch_library"):
            kind = FunctionKind.REGISTRATION
        elif "TORCH_IMPL_FUNC" in header:
            kind = FunctionKind.STRUCTURED_IMPL
        elif "META_FUNC" in header:
            kind = FunctionKind.STRUCTURED_META
        elif "__global__" in header:
            kind = FunctionKind.GLOBAL_KERNEL
        elif in_class or decl.qualifier:
            kind = FunctionKind.METHOD
        elif decl.template_params is not None:
            kind = FunctionKind.TEMPLATE
        else:
            kind = FunctionKind.FUNCTION
        suffix = f"<{', '.join(decl.template_params)}>" if decl.template_params else ""
        qualname = "::".join([*scope, *([decl.qualifier] if decl.qualifier else []), decl.name]) + suffix
        internal = anonymous or (decl.static and not in_class and not decl.qualifier)
        self.out.append(Function(qualname, decl.name, kind, first, last, internal))


def text_functions(code: str, lines: LineIndex | None = None) -> list[Function]:
    """The definitions in ``code``, which has comments, strings, directives and the
    branches a build would not see blanked (``lines``: its line index, when at hand)."""
    return text_structure(code, lines)[0]


def text_structure(
    code: str, lines: LineIndex | None = None
) -> tuple[list[Function], list[ClassFact], dict[str, dict[str, str]]]:
    """The function definitions in ``code`` (as ``text_functions``), its class definitions
    with bases or virtual methods, and the declared types of every class's data members
    (class qualname -> member -> type, read when looked up)."""
    scanner = _Scanner(code, lines)
    scanner.scan(0, len(scanner.code), [], False, "")
    return scanner.out, scanner.classes, ClassMembers(scanner.bodies)


class ClassMembers(Mapping[str, dict[str, str]]):
    """Class qualname -> its data members' declared types, read from a class body only when
    asked for (most classes' members are never looked up)."""

    def __init__(self, bodies: dict[str, str]) -> None:
        self._bodies = bodies
        self._read: dict[str, dict[str, str]] = {}

    def __getitem__(self, cls: str) -> dict[str, str]:
        found = self._read.get(cls)
        if found is None:
            found = self._read[cls] = class_fields(self._bodies[cls])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._bodies)

    def __len__(self) -> int:
        return len(self._bodies)


def class_fields(body: str) -> dict[str, str]:
    """Data member -> declared type (spaces dropped) of a class body whose nested blocks are
    cut out (each ends a declaration): ``std::unique_ptr<Base> impl_;`` -> {'impl_':
    'std::unique_ptr<Base>'}; method declarations, aliases and friends are not members."""
    out: dict[str, str] = {}
    for statement in body.split(";"):
        declared = statement.partition("=")[0]  # an initializer may call anything
        if "(" in declared or len(declared) > _FIELD_MAX:
            continue  # a method's declaration, or no plain member's
        m = _FIELD.fullmatch(declared.strip())
        if m is None:
            continue
        kind = m.group("type").split("<")[0].split("::")[-1].strip()
        if kind not in _NOT_FIELD_TYPES and m.group("name") not in _NOT_FIELD_TYPES:
            out.setdefault(m.group("name"), "".join(m.group("type").split()))
    return out


def class_bases(header: str) -> tuple[str, ...]:
    """The bases a class head names (``struct TORCH_API D : public ns::B<T>, private C``:
    ('ns::B', 'C')), template arguments, access and ``virtual`` dropped."""
    toks, _ = _tokens(header)
    depth, colon = 0, -1
    for i, t in enumerate(toks):
        if t == "<":
            depth += 1
        elif t == ">" and depth:
            depth -= 1
        elif t == ":" and depth == 0:
            colon = i
            break
    if colon < 0:
        return ()
    bases, current, depth = [], [], 0
    for t in [*toks[colon + 1 :], ","]:
        if t == "<":
            depth += 1
        elif t == ">" and depth:
            depth -= 1
        elif depth:
            continue
        elif t == ",":
            name = "".join(current)
            if name:
                bases.append(name)
            current = []
        elif t not in _ACCESS and t != "virtual" and t != "...":
            current.append(t)
    return tuple(bases)


def merge_functions(parsed: list[Function], scanned: list[Function]) -> list[Function]:
    """``parsed`` (libclang's) with the extents the text gives them, plus the ``scanned``
    definitions outside them, sorted. A definition both find with the same name and the
    same first or last line takes the text's extent: clang's recovery from unknown types
    can run a body past its closing brace (and hide the next definitions), and clang's
    extent leaves out the lines of attribute macros that expand to nothing."""
    by_start = {(f.name, f.start_line): f for f in scanned}
    by_end = {(f.name, f.end_line): f for f in scanned}
    fixed = []
    for f in parsed:
        same = by_start.get((f.name, f.start_line)) or by_end.get((f.name, f.end_line))
        fixed.append(f._replace(start_line=same.start_line, end_line=same.end_line) if same else f)
    n_lines = max((f.end_line for f in fixed), default=0) + 2
    covered = bytearray(n_lines)
    for f in fixed:
        covered[f.start_line : f.end_line + 1] = b"\x01" * (f.end_line + 1 - f.start_line)
    extra = [f for f in scanned if not _covers(covered, f.start_line) and not _covers(covered, f.end_line)]
    return sorted(fixed + extra, key=lambda f: (f.start_line, f.end_line))


def _covers(covered: bytearray, line: int) -> bool:
    return line < len(covered) and covered[line] == 1
