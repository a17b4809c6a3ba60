"""Call sites of C++ function bodies, read from the comment- and string-blanked text.

Without headers clang's recovery loses most callees (unknown types, undeclared functions),
so calls are read from the text: every ``name(`` and ``name<args>(`` (a call, a macro, a
constructor), ``&name`` passed or assigned (an address), a DispatchStub or kernel passed
by name, and a function template passed with its arguments. Each site is anchored on the
one character it cannot lack ('(', '&', '>') and read backwards, in a reversed copy of
the text: a regular expression that must try every identifier is several times slower.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping

from indexer.cpp_arity import argument_count
from indexer.cpp_local_names import resolve_local_names
from indexer.facts import GLOBAL_SCOPE, Call, Function
from indexer.source_text import NOT_CALLED, LineIndex, angle_argument_spans
from schema.model import CallKind, FunctionKind

# kinds bound once: the hot loops compare them per call site, and an Enum member looked up on
# its class costs ~0.15 µs on Python 3.11 (a second over PyTorch's call sites)
_MEMBER = CallKind.MEMBER
_DIRECT = CallKind.DIRECT
_ADDRESS_OF = CallKind.ADDRESS
_VALUE = CallKind.VALUE
_TEMPLATE_ARG = CallKind.TEMPLATE_ARG
_MACRO = FunctionKind.MACRO

KEYWORDS = NOT_CALLED | {
    "class", "const", "constexpr", "defined", "enum", "explicit", "namespace", "operator", "private", "protected",
    "public", "struct", "template", "typename", "union", "using", "volatile",
}  # fmt: skip
_SPACE = " \t\r\n\f\v"
# words that end a statement's start, not a qualifier: ``return ::isinf(x)``
_BEFORE_GLOBAL_SCOPE = frozenset(("return", "case", "else", "do", "throw", "co_return", "co_yield", "new", "delete"))
# read in the reversed text, from just before a '(': an identifier, or the '>' closing
# template arguments
_REV_CALLEE = re.compile(r"[\s\\]*(?:(\w+)|>)")  # a macro's line splices count as blanks
_REV_WORD = re.compile(r"[\s\\]*(\w+)")
# read in the reversed text, from just before a template argument list's '<': the name
# and its qualifier, after an argument list's '(' or ','
_REV_TEMPLATE_VALUE = re.compile(r"\s*(\w+)((?:\s*::\s*\w+)*)\s*[(,]")
_ADDRESS = re.compile(r"&\s*(?P<qual>(?:[A-Za-z_]\w*\s*::\s*)*)(?P<name>[A-Za-z_]\w*)\b(?!\s*[(.\[])")
# a DispatchStub (or kernel) passed as an argument: allany_impl<1>(self, result, dim, keepdim, and_stub)
_STUB_VALUE_ENDS = [re.compile(rf"({suffix})\s*(?=[,)])") for suffix in ("_stub", "_kernel", "Kernel")]
_REV_ARGUMENT = re.compile(r"(\w+)\s*[(,]")
# the end of a template-id passed as an argument: cpu_kernel_vec(it, scalar_gelu<scalar_t>,
# vectorized_gelu<scalar_t>) names function templates, so it links like a call
_TEMPLATE_END = re.compile(r">\s*(?=[,)])")
_SPACES = re.compile(r"\s+")
# read in the reversed text, from a declared variable's name back to its type: blanks (at
# least one), then the type's name, or the '>' closing its template arguments
_REV_DECLARED_TYPE = re.compile(r"[\s\\]*>|[\s\\]+(\w+)")
# words before a name that make ``word name(`` something else than a declaration
_NOT_TYPES = KEYWORDS | {
    "co_return", "co_await", "co_yield", "goto", "static", "inline", "virtual", "extern", "friend", "mutable",
    "register", "thread_local", "consteval", "constinit", "and", "or", "not", "xor", "bitand", "bitor", "compl",
    "typedef", "final", "override", "noexcept",
}  # fmt: skip
# a word before '{' that does not name a variable (``class X final {``, ``f() const {``, ``try {``)
_NOT_VARIABLES = _NOT_TYPES | {"try", "else", "do"}
# words that can stand before a variable's first mention without declaring it
_NOT_A_TYPE_BEFORE = {"return", "case", "throw", "new", "delete", "else", "do", "sizeof", "co_return"}
_MACRO_CASE = re.compile(r"[A-Z][A-Z0-9_]+")
_STATEMENT_END = re.compile(r"[;{}]")


def innermost(functions: list[Function]) -> list[int]:
    """For each line, the index of the innermost function containing it (-1: none)."""
    if not functions:
        return []
    owner = [-1] * (max(f.end_line for f in functions) + 2)
    # wider functions first, so nested definitions overwrite their parents' lines
    for i in sorted(range(len(functions)), key=lambda k: functions[k].start_line - functions[k].end_line):
        f = functions[i]
        owner[f.start_line : f.end_line + 1] = [i] * (f.end_line + 1 - f.start_line)
    return owner


def template_start(code: str, j: int) -> int:
    """From the '>' at ``j`` closing template arguments, the offset of its '<' (-1: none
    within 1500 characters, or a ';', a brace or an unmatched '(' first). Parenthesised
    groups inside are skipped whole (``kernel<T, size<N>()><<<grid, block>>>(``)."""
    depth = parens = 0
    stop = max(0, j - 1500)  # arguments one a line each, padded for a macro's line splices
    while j >= stop:
        ch = code[j]
        if ch == ")":
            parens += 1
        elif ch == "(":
            if not parens:
                return -1
            parens -= 1
        elif parens:
            pass
        elif ch == ">":
            depth += 1
        elif ch == "<":
            depth -= 1
            if depth == 0:
                return j
        elif ch in ";{}":
            return -1
        j -= 1
    return -1


def _skip_back_template(code: str, j: int) -> int:
    """From a '>' at ``j``, the offset before its matching '<' (a qualifier's arguments:
    parentheses allowed inside; -1 when unmatched)."""
    depth = 0
    stop = max(0, j - 200)
    while j >= stop:
        ch = code[j]
        if ch == ">":
            depth += 1
        elif ch == "<":
            depth -= 1
            if depth == 0:
                return j - 1
        elif ch in ";{}":
            break
        j -= 1
    return -1


def _qualifiers(code: str, start: int) -> tuple[list[str], int]:
    """The qualifiers written before the name starting at ``start`` (``at::native``: ['at',
    'native'], template arguments skipped) and the offset of the last character before them
    (blanks skipped; -1 at the start of the text)."""
    j = start - 1
    while j >= 0 and code[j] in _SPACE:
        j -= 1
    parts: list[str] = []
    while j >= 1 and code[j] == ":" and code[j - 1] == ":":
        j -= 2
        while j >= 0 and code[j] in _SPACE:
            j -= 1
        if j >= 0 and code[j] == ">":
            j = _skip_back_template(code, j)
            while j >= 0 and code[j] in _SPACE:
                j -= 1
        end = j + 1
        while j >= 0 and (code[j].isalnum() or code[j] == "_"):
            j -= 1
        if end == j + 1 or code[j + 1 : end] in _BEFORE_GLOBAL_SCOPE:
            parts.append("")  # a leading '::' (``return ::isinf(x)``): the global namespace
            j = end - 1
            break
        parts.append(code[j + 1 : end])
        while j >= 0 and code[j] in _SPACE:
            j -= 1
    return parts[::-1], j


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def qualifier(code: str, start: int) -> tuple[str, CallKind]:
    """(qualifier, kind) of the call name starting at ``start``: ('at::native', 'direct'),
    ('.', 'member') or ('', 'direct')."""
    parts, j = _qualifiers(code, start)
    if not parts and j >= 7 and code[j - 7 : j + 1] == "template" and not _is_word_char(code[j - 8 : j - 7]):
        j -= 8  # ``obj.template launch<T>(...)``: a member template called through a dependent object
        while j >= 0 and code[j] in _SPACE:
            j -= 1
    if not parts and j >= 0 and (code[j] == "." or (code[j] == ">" and j > 0 and code[j - 1] == "-")):
        return ".", _MEMBER
    named = [p for p in parts if p]  # ``::at::empty`` is ``at::empty``; ``::isinf`` alone is global
    return ("::".join(named) if named or not parts else GLOBAL_SCOPE), _DIRECT


class _Text:
    """A code text with its reversed copy, for reading names backwards."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.rev = code[::-1]
        self.n = len(code)

    def _span(self, m: re.Match[str] | None) -> tuple[int, int] | None:
        """The forward (start, end) of group 1 of a match in the reversed text; None for
        no match or a name starting with a digit."""
        if m is None or m.group(1) is None:
            return None
        start = self.n - m.end(1)
        return None if self.code[start].isdigit() else (start, self.n - m.start(1))

    def word_before(self, end: int) -> tuple[int, int] | None:
        """The identifier that ends before ``end`` (whitespace between allowed)."""
        return self._span(_REV_WORD.match(self.rev, self.n - end))

    def callee_before(self, paren: int) -> tuple[int, int] | None:
        """The callee name of the '(' at ``paren``: ``name(``, ``name<args>(``, or a CUDA
        kernel launch ``name<<<grid, block>>>(`` / ``name<args><<<grid, block>>>(``."""
        m = _REV_CALLEE.match(self.rev, self.n - paren)
        if m is None or m.group(1) is not None:
            return self._span(m)
        greater = self.n - m.end()
        if self.code.startswith(">>>", greater - 2):
            launch = self.code.rfind("<<<", max(0, greater - 1500), greater)
            if launch > 0 and not _STATEMENT_END.search(self.code, launch, greater):
                return self.callee_before(launch)
        less = template_start(self.code, greater)
        return self.word_before(less) if less > 0 else None


def receiver_type(
    text: _Text,
    name_start: int,
    body_start: int,
    declared: dict[tuple[int, str], str],
    members: Callable[[], Mapping[str, str] | None] | None = None,
) -> str:
    """The declared type of the variable a member call's name at ``name_start`` is called on
    (``Device d`` ... ``d.index()``: 'Device'), read where the variable is first named after
    ``body_start`` (a parameter or a local); for a parenthesized expression (``(x * k).erf()``),
    that of its first variable with a declared type (arithmetic keeps its operands' type: a
    Vectorized, a Tensor); '' when the receiver is not a plain variable or such a group, or no
    first mention declares one. ``declared`` keeps what was read per (body, variable); a
    variable the body does not declare is looked up in ``members()``, the data members of the
    method's class (``packed_w_ih->apply_dynamic(x)``: 'c10::intrusive_ptr<LinearPackedParamsBase>')."""
    code = text.code
    j = name_start - 1
    while j >= 0 and code[j] in _SPACE:
        j -= 1
    end = j if code[j] == "." else j - 1  # just after the receiver
    k = end - 1
    while k >= 0 and code[k] in _SPACE:
        k -= 1
    if k >= 0 and code[k] == ")":
        return _group_type(text, k, body_start, declared)
    var = text.word_before(end)
    if var is None or _receiver_is_qualified(code, var[0]):
        return ""
    name = code[var[0] : var[1]]
    found = _variable_type(text, name, var[0], body_start, declared)
    if found or members is None:
        return found
    return (members() or {}).get(name, "")  # not declared in the body: a member, maybe


def _variable_type(text: _Text, name: str, at: int, body_start: int, declared: dict[tuple[int, str], str]) -> str:
    """The type declared at the first mention of the variable ``name`` (used at ``at``) after
    ``body_start``; '' when that mention declares none."""
    key = (body_start, name)
    found = declared.get(key)
    if found is None:
        first = _first_mention(text.code, name, body_start, at)
        if first < 0:
            return ""
        found = declared[key] = _type_before(text, first)
    return found


_GROUP_WORD = re.compile(r"[A-Za-z_]\w*")


def _group_type(text: _Text, close: int, body_start: int, declared: dict[tuple[int, str], str]) -> str:
    """The type of the parenthesized expression closing at ``close`` (not a call's or a cast's
    argument list): that of its first plain variable with a declared type other than ``auto``."""
    code = text.code
    depth, j = 0, close
    while j >= body_start:
        if code[j] == ")":
            depth += 1
        elif code[j] == "(":
            depth -= 1
            if depth == 0:
                break
        elif code[j] in ";{}":
            return ""
        j -= 1
    else:
        return ""
    before = j - 1
    while before >= 0 and code[before] in _SPACE:
        before -= 1
    word = text.word_before(before + 1) if before >= 0 and _is_word_char(code[before]) else None
    called = word is not None and code[word[0] : word[1]] not in _NOT_A_TYPE_BEFORE  # not ``return (...)``
    if called or (before >= 0 and code[before] in ">]"):
        return ""  # f(x).m(), cast<T>(x).m(), a[i](x).m(): a result whose type is not written here
    for m in _GROUP_WORD.finditer(code, j + 1, close):
        name, after = m.group(), code[m.end() : m.end() + 2].lstrip()
        if name in _NOT_TYPES or after.startswith(("(", "<", "::")) or _receiver_is_qualified(code, m.start()):
            continue  # a function, a template, a qualifier, a member
        found = _variable_type(text, name, m.start(), body_start, declared)
        if found and found != "auto":
            return found
    return ""


def _receiver_is_qualified(code: str, start: int) -> bool:
    """``a.b.foo()``, ``p->b.foo()``, ``ns::b.foo()``: the receiver is not a plain variable."""
    j = start - 1
    while j >= 0 and code[j] in _SPACE:
        j -= 1
    return j >= 0 and (code[j] in ".:" or (code[j] == ">" and j > 0 and code[j - 1] == "-"))


def _first_mention(code: str, name: str, start: int, end: int) -> int:
    """Offset of the first whole-word ``name`` in ``code[start:end]``, -1 for none."""
    k = code.find(name, start, end)
    while k >= 0:
        after = k + len(name)
        if (k == 0 or not (code[k - 1].isalnum() or code[k - 1] == "_")) and not (
            code[after].isalnum() or code[after] == "_"
        ):
            return k
        k = code.find(name, after, end)
    return -1


def _type_before(text: _Text, name_start: int) -> str:
    """The type written before the variable named at ``name_start`` (``const at::Tensor& x``:
    'at::Tensor'; ``std::vector<int64_t> x``: 'std::vector<int64_t>'), '' when no type is."""
    code = text.code
    j = name_start - 1
    while j >= 0 and code[j] in _SPACE + "&*":
        j -= 1
    end = j + 1
    if j >= 0 and code[j] == ">":
        less = template_start(code, j)
        if less <= 0:
            return ""
        j = less - 1
        while j >= 0 and code[j] in _SPACE:
            j -= 1
    word = text.word_before(j + 1)
    if word is None or word[1] != j + 1:
        return ""
    if code[word[0] : word[1]] == "const":  # ``Tensor const& x``
        return _type_before(text, word[0])
    if code[word[0] : word[1]] in _NOT_TYPES or code[word[0] : word[1]] in _NOT_A_TYPE_BEFORE:
        return ""
    _, before = _qualifiers(code, word[0])
    return _SPACES.sub("", code[before + 1 : end]).lstrip("(,;{}=!<")


def _declared_type(text: _Text, name_start: int) -> tuple[int, int] | None:
    """The type's name when the identifier at ``name_start`` is a variable declared with
    constructor arguments (``Functor<T, U> kfn(args)``, ``Functor kfn{args}``): constructing
    it calls the type's constructor."""
    m = _REV_DECLARED_TYPE.match(text.rev, text.n - name_start)
    if m is None:
        return None
    if m.group(1) is None:  # template arguments: the type's name is before them (not ``p->name(``)
        greater = text.n - m.end()
        less = template_start(text.code, greater) if text.code[greater - 1] != "-" else -1
        span = text.word_before(less) if less > 0 else None
    else:
        span = text._span(m)
    if span is None:
        return None
    word = text.code[span[0] : span[1]]
    if word in _NOT_TYPES or _MACRO_CASE.fullmatch(word) or text.rev.startswith("#", text.n - span[0]):
        return None  # a keyword, a statement macro without ';' (HANDLE_TH_ERRORS), a directive
    return span


def _temporary_type(text: _Text, brace: int) -> tuple[int, int] | None:
    """The type's name when the '{' at ``brace`` constructs a temporary inside an expression
    (``gpu_kernel(iter, AbsDiffFunctor{})``, ``return Op<T>{a}``)."""
    code = text.code
    j = brace - 1
    while j >= 0 and code[j] in _SPACE:
        j -= 1
    if j < 0:
        return None
    if code[j] == ">":
        less = template_start(code, j) if j > 0 and code[j - 1] != "-" else -1
        span = text.word_before(less) if less > 0 else None
    else:
        span = text.word_before(brace)
    if span is None or code[span[0] : span[1]] in _NOT_VARIABLES or _MACRO_CASE.fullmatch(code[span[0] : span[1]]):
        return None
    _, k = _qualifiers(code, span[0])  # a qualified name: what stands before its start decides
    if k >= 0 and (code[k] in "(,=?" or code.endswith("return", 0, k + 1)):
        return span
    if (k < 0 or code[k] in ";{})") and _called_after(code, brace):  # ``sum_functor<T>{}(iter);``
        return span
    return None


def _called_after(code: str, brace: int) -> bool:
    """Whether the braces opening at ``brace`` are directly followed by an argument list."""
    depth = 0
    for j in range(brace, min(len(code), brace + 2000)):
        ch = code[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                rest = code[j + 1 : j + 80].lstrip()
                return rest.startswith("(")
        elif ch == ";" and depth == 1:
            return False  # a block of statements, not an initializer
    return False


def _brace_declarations(text: _Text) -> Iterator[tuple[int, int]]:
    """(start, end) of the type of every ``Type name{args}`` declaration and ``Type{args}``
    temporary."""
    code = text.code
    pos = code.find("{")
    while pos >= 0:
        var = text.word_before(pos)
        span = None
        if var is not None and code[var[0] : var[1]] not in _NOT_VARIABLES:
            span = _declared_type(text, var[0])
        if span is None:
            span = _temporary_type(text, pos)
        if span is not None:
            yield span
        pos = code.find("{", pos + 1)


def _names(text: _Text) -> Iterator[tuple[str, int, int]]:
    """(name, offset, its argument list's '(') of every ``name(`` / ``name<args>(``, in text order."""
    code, rev, n = text.code, text.rev, text.n
    callee = _REV_CALLEE.match
    find = code.find
    pos = find("(")
    while pos >= 0:
        m = callee(rev, n - pos)
        if m is not None and m.group(1) is not None:  # ``name(``, the common case, read in line
            start = n - m.end(1)
            if not code[start].isdigit():
                yield code[start : n - m.start(1)], start, pos
        elif m is not None:  # a '>' before the '(': templates and kernel launches
            span = text.callee_before(pos)
            if span is not None:
                yield code[span[0] : span[1]], span[0], pos
        pos = find("(", pos + 1)


def _addresses(code: str) -> Iterator[re.Match[str]]:
    """``&name`` after '(', ',', '=' or ``return``: a function's address taken."""
    for m in _ADDRESS.finditer(code):
        j = m.start() - 1
        while j >= 0 and code[j] in _SPACE:
            j -= 1
        if j >= 0 and (code[j] in "(,=" or code.endswith("return", 0, j + 1)):
            yield m


def _stub_values(text: _Text) -> list[tuple[str, int]]:
    """(name, offset) of the arguments named like a DispatchStub or kernel (``and_stub``)."""
    found: set[tuple[str, int]] = set()
    for pattern in _STUB_VALUE_ENDS:
        for m in pattern.finditer(text.code):
            span = text._span(_REV_ARGUMENT.match(text.rev, text.n - m.end(1)))
            if span is not None and span[1] - span[0] > m.end(1) - m.start(1):
                found.add((text.code[span[0] : span[1]], span[0]))
    return sorted(found, key=lambda x: x[1])


# ``Functor<T> name;``: a variable of a class template's type, default-constructed
_DEFAULT_DECLARED = re.compile(r">\s*\w+\s*;")
_TYPE_BEFORE = re.compile(r"((?:\w+\s*::\s*)*)(\w+)\s*$")


def _default_declarations(text: _Text) -> Iterator[tuple[str, str, int]]:
    """(name, qualifier, offset) of the class template of every ``Type<args> name;``
    declaration: the functor it makes is called later (``loop_func.template operator()<...>(``),
    which reads as no call of it."""
    code = text.code
    for m in _DEFAULT_DECLARED.finditer(code):
        less = template_start(code, m.start())
        found = _TYPE_BEFORE.search(code, max(0, less - 200), less) if less > 0 else None
        if found is not None:
            yield found.group(2), _SPACES.sub("", found.group(1)).rstrip(":"), found.start(2)


def _template_values(text: _Text) -> list[tuple[str, str, int]]:
    """(name, qualifier, offset) of template-ids passed as arguments (``op<T>``), not
    those among another's template arguments (``op<std::optional<T>, U>``)."""
    found: list[tuple[str, str, int, int]] = []
    for m in _TEMPLATE_END.finditer(text.code):
        less = template_start(text.code, m.start())
        arg = _REV_TEMPLATE_VALUE.match(text.rev, text.n - less) if less > 0 else None
        span = text._span(arg)
        if arg is not None and span is not None:
            qual = _SPACES.sub("", text.rev[arg.start(2) : arg.end(2)][::-1]).rstrip(":")
            while found and found[-1][2] > span[0]:  # inner ones end first
                found.pop()
            found.append((text.code[span[0] : span[1]], qual, span[0], m.start()))
    return [(name, qual, start) for name, qual, start, _ in found]


# a (qualified) name, and the template arguments of a class template it may carry
_TEMPLATE_ARGUMENT = re.compile(r"\s*((?:\w+\s*::\s*)*)(\w+)\s*(?:<.*>\s*)?$", re.DOTALL)


def template_arguments(code: str, name_end: int) -> list[tuple[str, str]]:
    """(qualifier, name) of the template arguments that are (qualified) class names, with or
    without their own template arguments, in the template-id whose name ends at ``name_end``
    (``impl_<ExponentialStub, Generator>(``: ('', 'ExponentialStub'), ('', 'Generator');
    ``_rnn_impl<LSTMCell<cell_params>, LayerT>(``: ('', 'LSTMCell'), ('', 'LayerT'));
    [] when no '<' follows the name."""
    j = name_end
    while j < len(code) and code[j] in _SPACE:
        j += 1
    if j >= len(code) or code[j] != "<" or code.startswith("<<", j):
        return []
    spans = angle_argument_spans(code, j, limit=1500)
    if spans is None:
        return []
    names = (_TEMPLATE_ARGUMENT.fullmatch(code, s, e) for s, e in spans)
    return [(_SPACES.sub("", m.group(1)).rstrip(":"), m.group(2)) for m in names if m is not None]


def _members(fields: Mapping[str, Mapping[str, str]], qualname: str) -> Mapping[str, str] | None:
    """The data members of the class a method ``qualname`` belongs to, among the file's
    classes (by its qualified name, else by the only class of its short name)."""
    cls = qualname.rpartition("::")[0]
    if cls in fields:
        return fields[cls]
    short = "::" + cls.rpartition("::")[2]
    same = [k for k in fields if k.endswith(short) or k == short[2:]] if cls else []
    return fields[same[0]] if len(same) == 1 else None


# an initializer list's entry: a (qualified) name, maybe with template arguments, then '(' or '{'
_INITIALIZER = re.compile(r"\s*((?:\w+\s*::\s*)*\w+)\s*(?:<[^<>(){};]*(?:<[^<>(){};]*>[^<>(){};]*)*>\s*)?([({])")


def _close_of(code: str, open_at: int) -> int:
    """The offset just past the bracket matching ``code[open_at]`` ('(' or '{'), or -1."""
    depth = 0
    for i in range(open_at, len(code)):
        ch = code[i]
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def initializer_list(code: str, f: Function, from_offset: int) -> list[tuple[str, int]]:
    """(name, offset) of the entries of constructor ``f``'s member initializer list
    (``AutoBelow() : guard_(keys), count_{2} {}``: guard_, count_), its definition read from
    ``from_offset``; [] when ``f`` is no constructor or has no such list."""
    if f.qualname.rpartition("::")[0].rpartition("::")[2] != f.name:
        return []
    m = re.compile(rf"\b{re.escape(f.name)}\s*\(").search(code, from_offset)
    end = _close_of(code, m.end() - 1) if m else -1
    k = end
    while 0 <= k < len(code) and (code[k] in _SPACE or code[k].isalnum() or code[k] == "_"):
        k += 1  # blanks, noexcept, a macro's name
    if k < 0 or not code.startswith(":", k) or code.startswith("::", k):
        return []
    found, k = [], k + 1
    while (e := _INITIALIZER.match(code, k)) is not None:
        found.append((_SPACES.sub("", e.group(1)), e.start(1)))
        k = _close_of(code, e.start(2))
        while 0 <= k < len(code) and code[k] in _SPACE:
            k += 1
        if k < 0 or not code.startswith(",", k):
            break
        k += 1
    return found


def _member_constructors(
    code: str, functions: list[Function], lines: LineIndex, members_for: Callable[[int, str], Mapping[str, str] | None]
) -> Iterator[tuple[int, str, str, str, int]]:
    """(function index, member, its type's name, its type's qualifier, line) of every data
    member a constructor's initializer list constructs: the member's type's constructor runs
    (the type's name is '' for a type no constructor of the index can have: ``int``)."""
    for idx, f in enumerate(functions):
        entries = initializer_list(code, f, lines.offset_of(f.start_line))
        members = (members_for(idx, f.qualname) or {}) if entries else {}
        for name, start in entries:
            if name not in members:
                continue  # a base class's constructor, or a member of a class in another file
            qual, _, type_name = members[name].split("<")[0].rpartition("::")
            if type_name in KEYWORDS or type_name.startswith(("int", "uint")):
                type_name = ""
            yield idx, name, type_name, qual, lines.line_of(start)


def call_sites(
    code: str,
    functions: list[Function],
    lines: LineIndex | None = None,
    fields: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Call]:
    """Every call site inside ``functions`` (``code``: comments and strings blanked;
    ``lines``: its line index, when at hand; ``fields``: class qualname -> the declared types
    of its data members, for calls on a member from a method of the class)."""
    owner = innermost(functions)
    if not owner:
        return []
    text = _Text(code)
    lines = lines or LineIndex(code)
    n_owner = len(owner)
    calls: list[Call] = []
    line_of = lines.line_of
    receivers: dict[tuple[int, str], str] = {}  # (function body, variable) -> its declared type
    members_of: dict[int, Mapping[str, str] | None] = {}  # function -> its class's data members

    def members_for(idx: int, qualname: str) -> Mapping[str, str] | None:
        if idx not in members_of:
            members_of[idx] = _members(fields or {}, qualname)
        return members_of[idx]

    for name, start, paren in _names(text):
        if name in KEYWORDS:
            continue
        line = line_of(start)  # not counted on: a launch's name comes after its configuration's calls
        idx = owner[line] if line < n_owner else -1
        if idx < 0:
            continue
        f = functions[idx]
        if name == f.name and start < code.find("{", lines.offset_of(f.start_line)):
            continue  # the definition's own declarator (below its template<...> line)
        declared = _declared_type(text, start)
        if declared is not None:  # ``Functor<T> kfn(args)``: the constructor is called, kfn is not
            start = declared[0]
            name = code[start : declared[1]]
        qual, kind = qualifier(code, start)
        if kind == _MEMBER:
            members = functools.partial(members_for, idx, f.qualname) if fields else None
            qual += receiver_type(text, start, lines.offset_of(f.start_line), receivers, members)
        # a macro's body: its parameters may stand for several arguments
        n_args = None if f.kind == _MACRO else argument_count(code, paren)
        calls.append(Call(idx, name, qual, kind, line, n_args))
        for arg_qual, arg in template_arguments(code, start + len(name)):
            if arg not in KEYWORDS and not arg[0].isdigit():  # a class it may construct and call
                calls.append(Call(idx, arg, arg_qual, _TEMPLATE_ARG, line))
    initialized = set()
    for idx, member, type_name, qual, line in _member_constructors(code, functions, lines, members_for):
        initialized.add((idx, member, line))
        if type_name:
            calls.append(Call(idx, type_name, qual, _DIRECT, line))
    for start, end in _brace_declarations(text):
        line = line_of(start)
        idx = owner[line] if line < n_owner else -1
        if idx >= 0:
            calls.append(Call(idx, code[start:end], *qualifier(code, start), line))
    for m in _addresses(code):
        line = lines.line_of(m.start("name"))
        idx = owner[line] if line < n_owner else -1
        if idx >= 0 and m.group("name") not in KEYWORDS:
            qual = _SPACES.sub("", m.group("qual") or "").rstrip(":")
            calls.append(Call(idx, m.group("name"), qual, _ADDRESS_OF, line))
    for name, start in _stub_values(text):
        line = lines.line_of(start)
        idx = owner[line] if line < n_owner else -1
        if idx >= 0:
            calls.append(Call(idx, name, "", _VALUE, line))
    for name, qual, start in _default_declarations(text):
        line = lines.line_of(start)
        idx = owner[line] if line < n_owner else -1
        if idx >= 0 and name not in KEYWORDS:
            calls.append(Call(idx, name, qual, _TEMPLATE_ARG, line))
    for name, qual, start in _template_values(text):
        line = lines.line_of(start)
        idx = owner[line] if line < n_owner else -1
        if idx >= 0 and name not in KEYWORDS:
            calls.append(Call(idx, name, qual, _DIRECT, line))
    if initialized:  # ``guard_(keys)`` calls no function named guard_
        calls = [c for c in calls if (c.func_index, c.callee_name, c.line) not in initialized]
    return resolve_local_names(code, calls, owner, line_of, KEYWORDS)
