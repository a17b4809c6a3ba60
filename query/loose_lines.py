"""Changed C++ lines outside any function body, told apart before they fall back to the whole
file: lines without code (comments, blank), ``#include`` lines, lines of a class's definition
(its fields, its ``template <...>`` head), which belong to the class's methods, lines of a
function's declaration (a header's prototype), which belong to the functions of its name, and a
namespace-scope variable's declaration or a namespace or type alias, which belongs to the file's
functions that name it, the lines of a ``#define``, which belong to the file's functions that use
the macro, and scope lines (a namespace's or ``extern "C"``'s opening and closing lines,
``#pragma once``), which hold no code: the functions inside them hold their own lines."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from indexer.facts import FileFacts, scope_name
from indexer.source_text import LineIndex, blank_strings, preprocessor_spans, strip_c_comments

_INCLUDE = re.compile(r"^\s*#\s*include\b")
_DEFINE = re.compile(r"#\s*define\s+(\w+)")
_DECLARED = re.compile(r"(\w+)\s*\($")  # the name before a declaration's parameter list
_NOT_DECLARED = frozenset({"if", "for", "while", "switch", "return", "sizeof", "decltype", "static_assert"})
_CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\s+(?:\w+\s+)*?(\w+)\s*(?:<[^{;]*>\s*)?(?:final\s*)?(?::[^{]*)?$")
_ALIAS = re.compile(r"^(?:namespace|using)\s+(\w+)\s*=")  # namespace X = a::b; using T = U<V>;
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$")
_SCOPE = re.compile(r'^\s*(?:(?:inline\s+)?namespace\b[\w:\s]*\{|extern\s+"[^"]*"\s*\{|\}\s*;?)\s*$')  # opens or closes
_VARIABLE = re.compile(r"(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=[^;]*)?$")  # the name a namespace-scope declaration defines


@dataclass
class LooseLines:
    # function -> lines that belong to it: its class's (qualname), a global it names (qualname),
    # its prototype's (the declared name: the header may not define it)
    functions: dict[str, list[int]] = field(default_factory=dict)
    includes: list[int] = field(default_factory=list)
    comments: list[int] = field(default_factory=list)  # no code on the line
    aliases: list[int] = field(default_factory=list)  # a namespace alias no function of the file names
    scopes: list[int] = field(default_factory=list)  # a namespace's braces, #pragma once: no code
    other: list[int] = field(default_factory=list)  # still outside: macro bodies, registrations, other globals


def sort_loose(text: str, lines: list[int], facts: FileFacts) -> LooseLines:
    """Where the changed ``lines`` (outside function bodies) of a C++ ``text`` belong."""
    code = blank_strings(strip_c_comments(text))
    index = LineIndex(code)
    rows = code.split("\n")
    classes = _class_spans(code)
    directives = preprocessor_spans(code)[0]
    out = LooseLines()
    for line in lines:
        row = rows[line - 1] if 0 < line <= len(rows) else ""
        if not row.strip():
            out.comments.append(line)
            continue
        if _INCLUDE.match(row):
            out.includes.append(line)
            continue
        if _PRAGMA_ONCE.match(row):
            out.scopes.append(line)
            continue
        offset = index.offset_of(line)
        macro = next(((start, end) for start, end in directives if start <= offset <= end), None)
        if macro is not None:  # a #define's lines: its calls declare nothing (``sycl_kernel_submit(...);``)
            owners = _macro_users(code, macro[0], facts, index)
            for owner in owners:
                out.functions.setdefault(owner, []).append(line)
            if not owners:
                out.other.append(line)
            continue
        inside = [(start, name) for start, end, name in classes if start <= offset <= end]
        if not inside and _SCOPE.match(row):
            out.scopes.append(line)
            continue
        if inside:
            owners = _methods(facts, max(inside)[1])
        else:
            alias = _ALIAS.match(row.strip())
            if alias:  # a namespace or type alias (an object-like macro may stand before it)
                owners = _functions_naming(alias.group(1), code, facts, index)
                if not owners and row.strip().startswith("namespace"):
                    out.aliases.append(line)  # ``namespace syclexp = ...;`` for code added with it
                    continue
            else:
                owners = _declaration_owners(_statement(code, offset, directives), code, facts, index)
        for owner in owners:
            out.functions.setdefault(owner, []).append(line)
        if not owners:
            out.other.append(line)
    return out


def _statement(code: str, offset: int, directives: list[tuple[int, int]]) -> str | None:
    """The declaration around ``offset`` (from the last ';', '{', '}' or preprocessor directive
    before it to the next ';'), or None when a '{' comes first (a definition)."""
    start = max([code.rfind(c, 0, offset) for c in ";{}"] + [end for _, end in directives if end <= offset]) + 1
    ends = [i for i in (code.find(";", offset), code.find("{", offset)) if i >= 0]
    if not ends or code[min(ends)] != ";":
        return None
    return code[start : min(ends)]


def _declaration_owners(statement: str | None, code: str, facts: FileFacts, index: LineIndex) -> list[str]:
    """The functions a namespace-scope declaration belongs to: the function it declares, else
    those naming the variable it defines."""
    if statement is None:
        return []
    declared = _declared_name(statement)
    return [declared] if declared else _users_of_global(statement, code, facts, index)


def _users_of_global(statement: str, code: str, facts: FileFacts, index: LineIndex) -> list[str]:
    """The functions of the file that name the variable a namespace-scope declaration
    ``statement`` defines (``static IndexReduceAddFunctor reduce_add;``)."""
    if "(" in statement.split("=")[0] or statement.lstrip().startswith(("#", "using", "typedef")):
        return []
    named = _VARIABLE.search(statement.strip())
    if not named or named.group(1).isupper() or len(statement.split("=")[0].split()) < 2:
        return []  # a macro's name, or no type before the name (not a declaration)
    return _functions_naming(named.group(1), code, facts, index)


def _macro_users(code: str, directive: int, facts: FileFacts, index: LineIndex) -> list[str]:
    """The functions of the file that use the macro the ``#define`` at offset ``directive``
    defines (they expand its body); [] for another directive or a macro no function names."""
    named = _DEFINE.match(code, directive)
    if not named:
        return []
    return _functions_naming(named.group(1), code, facts, index)


def _functions_naming(name: str, code: str, facts: FileFacts, index: LineIndex) -> list[str]:
    """Qualified names of the file's functions whose text names ``name`` as a whole word."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    spans = ((f.qualname, index.offset_of(f.start_line), index.offset_of(f.end_line + 1)) for f in facts.functions)
    return [qualname for qualname, start, end in spans if word.search(code, start, end)]


def _declared_name(statement: str) -> str | None:
    """The function a declaration ``statement`` (``Tensor& f(const Tensor& x)``, no body) declares, else None."""
    if "(" not in statement or statement.lstrip().startswith(("#", "using", "typedef", "return")):
        return None
    named = _DECLARED.search(statement[: statement.index("(") + 1])
    if not named or named.group(1) in _NOT_DECLARED or named.group(1).isupper():
        return None  # a statement, or a macro (REGISTER_XPU_DISPATCH(...);): the file falls back
    return named.group(1)


def _class_spans(code: str) -> list[tuple[int, int, str]]:
    """(head start, closing brace, name) of every class, struct or union definition: the head
    runs from the end of the statement before it (its ``template <...>`` included)."""
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    statement_start = 0
    for m in re.finditer(r"[{};]", code):
        ch, at = m.group(0), m.start()
        if ch == "{":
            head = code[statement_start:at]
            named = _CLASS_HEAD.search(" ".join(head.split()))
            stack.append((statement_start, named.group(1) if named and "(" not in head else ""))
        elif ch == "}" and stack:
            start, name = stack.pop()
            if name:
                spans.append((start, at, name))
        statement_start = at + 1
    return spans


def _methods(facts: FileFacts, name: str) -> list[str]:
    """Qualified names of the methods of class ``name`` that ``facts`` defines."""
    return [f.qualname for f in facts.functions if scope_name(f.qualname) == name]
