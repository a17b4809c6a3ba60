"""C++/CUDA/ObjC++ extractor: one source text in, its functions and call sites out.

libclang parses each file on its own (single-file mode: includes are not followed, so
no build and no generated headers are needed) with ``data/prelude.h``'s macros in front of
its text (single-file mode skips ``-include`` files). Without headers clang drops
many definitions (unknown types, members of class templates); the text scanner of
``cpp_fallback`` recovers them and corrects clang's extents, both reading the ``#if``
branches a build could see. Call sites come from the tokens of each function body,
because without headers clang's recovery loses most callees (unknown types, undeclared
functions).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from indexer.cpp_arity import with_arity
from indexer.cpp_calls import call_sites
from indexer.cpp_fallback import merge_functions, text_structure
from indexer.facts import Call, FileFacts, Function
from indexer.preprocessor import DIRECTIVES, decides_lines
from indexer.preprocessor import directives as preprocessor_directives
from indexer.registrations import extract_registrations
from indexer.source_text import LineIndex, Span, blank_spans, blank_strings, preprocessor_spans, strip_c_comments
from schema.model import CallKind, FileStatus, FunctionKind, Lang

# libclang translation-unit flags (CXTranslationUnit_*)
_INCOMPLETE = 0x02
_KEEP_GOING = 0x200
_SINGLE_FILE_PARSE = 0x400

_USING_NAMESPACE = re.compile(r"using\s+namespace\s+([\w:]+)\s*;")  # literal first: fast
_INCLUDE = re.compile(r'#\s*include\s*[<"]([^>"]+)[>"]')  # at a line's start: see _includes

_FUNCTION_KINDS = {
    "FUNCTION_DECL",
    "CXX_METHOD",
    "FUNCTION_TEMPLATE",
    "CONSTRUCTOR",
    "DESTRUCTOR",
    "CONVERSION_FUNCTION",
}
_SCOPE_KINDS = {
    "NAMESPACE",
    "LINKAGE_SPEC",
    "CLASS_DECL",
    "STRUCT_DECL",
    "CLASS_TEMPLATE",
    "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION",
    "UNEXPOSED_DECL",
    "UNION_DECL",
    "FRIEND_DECL",  # a friend function defined in its class
}
_CLASS_KINDS = {"CLASS_DECL", "STRUCT_DECL", "CLASS_TEMPLATE", "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION", "UNION_DECL"}


def language_of(path: str) -> Lang:
    if path.endswith((".cu", ".cuh")):
        return Lang.CUDA
    if path.endswith(".mm"):
        return Lang.OBJCPP
    return Lang.CPP


# a #define whose body has a brace: a macro that may define functions where it is used
_BRACE_MACRO = re.compile(r"#[ \t]*define[ \t]+\w+(?:[^\n{]*\\\n)*[^\n{]*\{")
_DEFINED = re.compile(r"#[ \t]*define[ \t]+(\w+)")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+(?:\([^)]*\))?)[ \t]*(.*?)[ \t]*$", re.M)
_FUNCTION_MACRO = re.compile(r"[ \t]*#[ \t]*define[ \t]+(\w+)\(")  # at a directive's line start
_HEADERS = (".h", ".hpp", ".cuh")


@cache
def _prelude() -> tuple[str, int]:
    """``data/prelude.h``'s macros, one ``#define`` a line, and their number of lines.
    Single-file parsing skips every include, ``-include`` files too: the prelude goes in
    front of the file's own text (cheaper than as ``-D`` arguments), and clang's lines
    are shifted back by its length."""
    text = resources.files("data").joinpath("prelude.h").read_text()
    text = re.sub(r"\\\n", " ", strip_c_comments(text))
    defines = [f"#define {name} {body}\n" for name, body in _DEFINE.findall(text)]
    return "".join(defines), len(defines)


@cache
def _index():  # one libclang Index per process
    from clang import cindex

    return cindex.Index.create()


def _clang_args(path: str) -> list[str]:
    lang = language_of(path)
    if lang == Lang.CUDA:
        lang_args = ["-x", "c++", "-std=c++17", "-D__CUDACC__"]
    elif lang == Lang.OBJCPP:
        lang_args = ["-x", "objective-c++", "-std=c++17"]
    else:
        lang_args = ["-x", "c++", "-std=c++17"]
    return [*lang_args, "-fsyntax-only", "-Wno-everything", "-ferror-limit=0"]


def _template_suffix(cursor) -> str:
    params = [
        c.spelling
        for c in cursor.get_children()
        if c.kind.name in ("TEMPLATE_TYPE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER", "TEMPLATE_TEMPLATE_PARAMETER")
    ]
    return f"<{', '.join(p or '?' for p in params)}>" if params else ""


def _kind_of(cursor_kind: str, head: str, name: str, in_class: bool) -> FunctionKind:
    if name.startswith("__perfq_torch_library"):
        return FunctionKind.REGISTRATION
    stripped = head.lstrip()
    if stripped.startswith("TORCH_IMPL_FUNC"):
        return FunctionKind.STRUCTURED_IMPL
    if stripped.startswith(("TORCH_META_FUNC", "TORCH_PRECOMPUTE_META_FUNC")):
        return FunctionKind.STRUCTURED_META
    if "__global__" in head:
        return FunctionKind.GLOBAL_KERNEL
    if cursor_kind in ("CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION") or in_class:
        return FunctionKind.METHOD
    if cursor_kind == "FUNCTION_TEMPLATE":
        return FunctionKind.TEMPLATE
    return FunctionKind.FUNCTION


def _definitions(
    tu, path: str, lines: list[str], cursors: list | None = None, shift: int = 0, usr: bool = False
) -> list[Function]:
    """Function definitions of the main file, with qualified names and extents (their
    cursors appended to ``cursors`` when given, their USRs with ``usr``: a real parse);
    clang's lines less ``shift`` (the prelude's lines in front of the text)."""
    out: list[Function] = []

    def visit(cursor, scope: list[str], in_class: bool, anonymous: bool) -> None:
        for child in cursor.get_children():
            loc = child.location
            if loc.file is None or loc.file.name != path:
                continue
            kind = child.kind.name
            if kind in _SCOPE_KINDS:
                spelling = child.spelling
                if kind == "NAMESPACE":
                    is_anon = not spelling
                    visit(child, [*scope, spelling or "(anonymous namespace)"], False, anonymous or is_anon)
                elif kind in _CLASS_KINDS:
                    visit(child, [*scope, spelling or "(anonymous)"], True, anonymous)
                else:
                    visit(child, scope, in_class, anonymous)
            elif kind in _FUNCTION_KINDS and child.is_definition():
                start, end = child.extent.start.line - shift, child.extent.end.line - shift
                if start <= 0 or end < start:
                    continue
                name = child.spelling
                if kind in ("CONSTRUCTOR", "DESTRUCTOR"):
                    name = name.split("<")[0]  # a class template's: Vec<T> -> Vec, as calls name it
                head = "".join(lines[start - 1 : max(start, min(end, loc.line - shift))])  # up to the name
                semantic = child.semantic_parent
                member = semantic is not None and semantic.kind.name in _CLASS_KINDS
                qual = list(scope)
                # out-of-line member definitions (void Foo::bar()) name their class
                if member and (not qual or qual[-1] != semantic.spelling):
                    qual.append(semantic.spelling)
                suffix = _template_suffix(child) if kind == "FUNCTION_TEMPLATE" else ""
                qualname = "::".join([*qual, name]) + suffix
                internal = anonymous or child.linkage.name == "INTERNAL"
                out.append(
                    Function(
                        qualname,
                        name,
                        _kind_of(kind, head, name, in_class or member),
                        start,
                        end,
                        internal,
                        child.get_usr() if usr else "",
                    )
                )
                if cursors is not None:
                    cursors.append(child)

    visit(tu.cursor, [], False, False)
    return out


def _resolved_calls(cursors: list, functions: list[Function]) -> list[Call]:
    """Calls whose callee clang resolved (a real parse with compile flags), by USR."""
    index = {(f.start_line, f.end_line, f.name): i for i, f in enumerate(functions)}
    out: list[Call] = []
    for cursor in cursors:
        idx = index.get((cursor.extent.start.line, cursor.extent.end.line, cursor.spelling))
        if idx is None:
            continue
        for node in cursor.walk_preorder():
            if node.kind.name not in ("CALL_EXPR", "DECL_REF_EXPR", "MEMBER_REF_EXPR"):
                continue
            ref = node.referenced
            if ref is None or ref.kind.name not in _FUNCTION_KINDS:
                continue
            usr = ref.get_usr()
            if usr:
                out.append(Call(idx, ref.spelling, usr, CallKind.RESOLVED, node.location.line))
    return out


def _defines_functions(code: str, scanned: list[Function]) -> bool:
    """Whether the file's own macros may define functions: a ``#define`` with a body in
    braces, or one the scanner took for a function's name (``DEFINE_KERNEL(name, ...) {``,
    a macro that expands to a function head)."""
    if _BRACE_MACRO.search(code):
        return True
    defined = set(_DEFINED.findall(code)) if "define" in code else set()
    return any(f.name in defined for f in scanned)


def macro_definitions(
    path: str, code: str, directives: list[Span], unseen: list[Span], lines: LineIndex
) -> list[Function]:
    """The function-like macros ``code`` defines (outside the branches a build does not see),
    as functions of kind ``macro`` spanning their ``#define`` lines: a change of a macro's body
    reaches the functions that expand it, which call it by name (its expansion sites). A
    macro of a source file is seen by that file only (internal)."""
    out = []
    for start, end in directives:
        named = _FUNCTION_MACRO.match(code, start)
        if named and not any(s <= start < e for s, e in unseen):
            name = named.group(1)
            first, last = lines.line_of(start), lines.line_of(max(start, end - 1))
            out.append(Function(name, name, FunctionKind.MACRO, first, last, not path.endswith(_HEADERS)))
    return out


def _includes(code: str) -> list[str]:
    """The targets of the ``#include`` directives of ``code``."""
    return [
        m.group(1) for m in _INCLUDE.finditer(code) if not code[code.rfind("\n", 0, m.start()) + 1 : m.start()].strip()
    ]


def clang_definitions(
    path: str, text: str, facts: FileFacts | None = None, unseen: list[Span] | None = None
) -> list[Function]:
    """The definitions libclang finds in ``text`` parsed on its own (no headers), with
    data/prelude.h's macros in front; ``unseen``: the ``#if`` branches a build would not
    see (computed when not given). A parse failure is noted in ``facts``."""
    if unseen is None:
        unseen = preprocessor_spans(blank_strings(strip_c_comments(text)))[1]
    # single-file parsing reads every branch of an #if on an unknown macro: the branches
    # that would unbalance the braces are blanked first (same lines)
    prelude, shift = _prelude()
    source = prelude + blank_spans(text, unseen)
    tu = _parse(facts, path, _clang_args(path), source, _SINGLE_FILE_PARSE | _KEEP_GOING | _INCOMPLETE)
    return [] if tu is None else _definitions(tu, path, text.splitlines(keepends=True), shift=shift)


def _parse(facts: FileFacts | None, name: str, args: list[str], source: str, options: int):
    """libclang's translation unit of ``source``, or None (the reason in ``facts``)."""
    from clang import cindex

    try:
        return _index().parse(name, args=args, unsaved_files=[(name, source)], options=options)
    except cindex.TranslationUnitLoadError as exc:
        if facts is not None:
            facts.status, facts.message = FileStatus.WARNING, f"libclang could not parse: {exc}"
        return None


UNSEEN_BRANCHES = "unseen_branches"  # its rule's table (indexer/rules/unseen_branches.py)


def _unseen_branches(code: str, directives: list[Span], unseen: list[Span], lines: LineIndex) -> list[tuple]:
    """(first line, last line, the directive that opens it) of each non-empty branch a build would
    not see (``preprocessor_spans``: it starts where its directive ends)."""
    opening = {end: start for start, end in directives}
    out = []
    for start, end in sorted(unseen):
        first, last = lines.line_of(start) + 1, lines.line_of(end) - 1
        if first <= last:
            out.append((first, last, " ".join(code[opening.get(start, start) : start].split())))
    return out


PY_BINDINGS = "py_bindings"  # its rule's table (indexer/rules/py_bindings.py)
# an entry of a CPython method table: {"name", <the function, maybe cast>, <flags naming METH_...>
_METHOD_ENTRY = re.compile(r'\{\s*"(\w+)"\s*,\s*([^,{}";]+?)\s*,\s*[^,{}";]*\bMETH_')
# a pybind11 binding of a named function: m.def("name", &fn ...), .def_static("name", fn ...)
_PYBIND_DEF = re.compile(r'\.def(?:_static)?\(\s*"(\w+)"\s*,\s*&?\s*((?:::)?[A-Za-z_][\w:]*)\s*[,)]')
_IDENTIFIER = re.compile(r"(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_NOT_BOUND = frozenset({"nullptr", "NULL", "void", "PyCFunction", "PyCFunctionWithKeywords", "PyObject"})


def _bound_symbol(expr: str) -> str | None:
    """The function a method table entry binds: the last name of its expression, past the casts
    (``(PyCFunction)(void (*)())fn``, ``castPyCFunctionWithKeywords(fn)``); None for a null entry."""
    names = [n for n in _IDENTIFIER.findall(expr) if n not in _NOT_BOUND and not n.startswith("reinterpret_cast")]
    return names[-1].removeprefix("::") if names else None


def python_bindings(code: str, lines: LineIndex) -> list[tuple]:
    """(line, Python name, C++ function as written) of each function ``code`` (comments stripped,
    strings kept) binds to a Python name: entries of ``PyMethodDef`` tables and pybind11 ``def``s."""
    out = []
    if "METH_" in code:
        for m in _METHOD_ENTRY.finditer(code):
            symbol = _bound_symbol(m.group(2))
            if symbol is not None:
                out.append((lines.line_of(m.start()), m.group(1), symbol))
    if ".def" in code:
        out += [
            (lines.line_of(m.start()), m.group(1), m.group(2).removeprefix("::")) for m in _PYBIND_DEF.finditer(code)
        ]
    return sorted(out)


def extract_cpp(
    path: str,
    text: str,
    facts: FileFacts,
    functions_only: bool = False,
    compile_args: list[str] | None = None,
    abs_path: str | None = None,
) -> FileFacts:
    """Fill ``facts`` with the functions, calls, includes and registrations of ``text``
    (only the functions with ``functions_only``, for mapping changed lines).

    ``path`` is the repo-relative path; ``text`` is the file's content (from disk or a git
    blob). Without ``compile_args`` the file is parsed on its own (no build needed); with
    the flags of a compile_commands.json entry it is parsed for real (``abs_path`` names
    the translation unit) and calls clang resolves are recorded by USR, for exact edges.

    Without flags, the text scanner alone finds the definitions (clang without headers
    adds nothing to it), except where the file's own macros may define functions: clang
    expands their uses.
    """
    stripped = strip_c_comments(text)
    code = blank_strings(stripped)
    directives, unseen = preprocessor_spans(code)
    lines = LineIndex(code)  # blanking keeps every newline: the same lines for every version of the text
    scanned, classes, fields = text_structure(blank_spans(code, directives + unseen), lines)
    cursors: list = []
    if compile_args is not None:
        tu_name = abs_path or path
        tu = _parse(facts, tu_name, compile_args, text, _KEEP_GOING | _INCOMPLETE)
        if tu is not None:
            facts.functions = _definitions(tu, tu_name, text.splitlines(keepends=True), cursors, usr=True)
    elif _defines_functions(code, scanned):
        facts.functions = clang_definitions(path, text, facts, unseen)
    facts.functions = merge_functions(facts.functions, scanned)
    macros = macro_definitions(path, code, directives, unseen, lines)
    if macros:
        facts.functions = sorted(facts.functions + macros, key=lambda f: (f.start_line, f.end_line))
    facts.functions = with_arity(code, facts.functions, lines)
    if functions_only:
        return facts
    facts.classes = classes
    if branches := _unseen_branches(code, directives, unseen, lines):
        facts.constructs[UNSEEN_BRANCHES] = branches
    if bindings := python_bindings(blank_spans(stripped, unseen), lines):
        facts.constructs[PY_BINDINGS] = bindings
    if decides_lines(conditionals := preprocessor_directives(text)):  # which lines a build compiles
        facts.constructs[DIRECTIVES] = [tuple(d) for d in conditionals]
    facts.calls = call_sites(code, facts.functions, lines, fields)
    if cursors:
        facts.calls += _resolved_calls(cursors, facts.functions)
    facts.includes = _includes(stripped) + [f"using:{ns}" for ns in _USING_NAMESPACE.findall(code)]
    extract_registrations(path, stripped, facts, lines)
    return facts
