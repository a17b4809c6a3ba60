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

from perfq.indexer.cpp_fallback import merge_functions, text_functions
from perfq.indexer.facts import Call, FileFacts, Function
from perfq.indexer.registrations import extract_registrations
from perfq.indexer.source_text import LineIndex, blank_spans, blank_strings, preprocessor_spans, strip_c_comments

# libclang translation-unit flags (CXTranslationUnit_*)
_INCOMPLETE = 0x02
_KEEP_GOING = 0x200
_SINGLE_FILE_PARSE = 0x400

_KEYWORDS = frozenset(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "decltype",
        "alignof",
        "alignas",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
        "dynamic_cast",
        "catch",
        "defined",
        "noexcept",
        "static_assert",
        "typeid",
        "new",
        "delete",
        "throw",
        "case",
        "do",
        "else",
        "void",
        "int",
        "char",
        "bool",
        "float",
        "double",
        "long",
        "short",
        "unsigned",
        "signed",
        "auto",
        "const",
        "volatile",
        "template",
        "typename",
        "operator",
        "using",
        "namespace",
        "struct",
        "class",
        "union",
        "enum",
        "public",
        "private",
        "protected",
        "__attribute__",
        "__declspec",
        "asm",
        "__asm__",
        "explicit",
        "constexpr",
    ]
)

# name( or name<...>( ; the qualifier chain (a::b::) or member access (. / ->) before
# the name is read backwards by _qualifier, which is much faster than one big regex.
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*?>\s*)?\(")
_SPACE = " \t\r\n"
_ADDRESS = re.compile(
    r"(?:(?<=[(,=])|(?<=return))\s*&\s*(?P<qual>(?:[A-Za-z_]\w*\s*::\s*)*)(?P<name>[A-Za-z_]\w*)\b(?!\s*[(.\[])"
)
_USING_NAMESPACE = re.compile(r"\busing\s+namespace\s+([\w:]+)\s*;")
# a DispatchStub (or kernel) passed as an argument: allany_impl<1>(self, result, dim, keepdim, and_stub)
_STUB_VALUE = re.compile(r"(?<=[(,])\s*([A-Za-z_]\w*(?:_stub|_kernel|Kernel))\s*(?=[,)])")
# a function template passed by name with its arguments: cpu_kernel_vec(it, scalar_gelu<scalar_t>,
# vectorized_gelu<scalar_t>); a template-id argument names a function (or a variable template,
# which no function row matches), so it links like a call
_TEMPLATE_VALUE = re.compile(
    r"(?<=[(,])\s*(?P<qual>(?:[A-Za-z_]\w*\s*::\s*)*)(?P<name>[A-Za-z_]\w*)\s*<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>\s*(?=[,)])"
)
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

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


def language_of(path: str) -> str:
    if path.endswith((".cu", ".cuh")):
        return "cuda"
    if path.endswith(".mm"):
        return "objcpp"
    return "cpp"


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+(?:\([^)]*\))?)[ \t]*(.*?)[ \t]*$", re.M)


@cache
def _prelude() -> tuple[str, int]:
    """``data/prelude.h``'s macros, one ``#define`` a line, and their number of lines.
    Single-file parsing skips every include, ``-include`` files too: the prelude goes in
    front of the file's own text (cheaper than as ``-D`` arguments), and clang's lines
    are shifted back by its length."""
    text = resources.files("perfq.data").joinpath("prelude.h").read_text()
    text = re.sub(r"\\\n", " ", strip_c_comments(text))
    defines = [f"#define {name} {body}\n" for name, body in _DEFINE.findall(text)]
    return "".join(defines), len(defines)


@cache
def _index():  # one libclang Index per process
    from clang import cindex

    return cindex.Index.create()


def _clang_args(path: str) -> list[str]:
    lang = language_of(path)
    if lang == "cuda":
        lang_args = ["-x", "c++", "-std=c++17", "-D__CUDACC__"]
    elif lang == "objcpp":
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


def _kind_of(cursor_kind: str, head: str, name: str, in_class: bool) -> str:
    if name.startswith("__perfq_torch_library"):
        return "registration"
    stripped = head.lstrip()
    if stripped.startswith("TORCH_IMPL_FUNC"):
        return "structured_impl"
    if stripped.startswith(("TORCH_META_FUNC", "TORCH_PRECOMPUTE_META_FUNC")):
        return "structured_meta"
    if "__global__" in head:
        return "global_kernel"
    if cursor_kind in ("CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION") or in_class:
        return "method"
    if cursor_kind == "FUNCTION_TEMPLATE":
        return "template"
    return "function"


def _definitions(tu, path: str, lines: list[str], cursors: list | None = None, shift: int = 0) -> list[Function]:
    """Function definitions of the main file, with qualified names and extents (their
    cursors appended to ``cursors`` when given); clang's lines less ``shift`` (the
    prelude's lines in front of the text)."""
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
                        child.get_usr(),
                    )
                )
                if cursors is not None:
                    cursors.append(child)

    visit(tu.cursor, [], False, False)
    return out


def _innermost(functions: list[Function]) -> list[int]:
    """For each line, the index of the innermost function containing it (-1: none)."""
    if not functions:
        return []
    n = max(f.end_line for f in functions) + 2
    owner = [-1] * n
    # wider functions first, so nested definitions overwrite their parents' lines
    for i in sorted(range(len(functions)), key=lambda k: functions[k].start_line - functions[k].end_line):
        f = functions[i]
        for line in range(f.start_line, f.end_line + 1):
            owner[line] = i
    return owner


def _skip_back_template(code: str, j: int) -> int:
    """From a '>' at ``j``, the offset before its matching '<' (bounded scan)."""
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


def _qualifier(code: str, start: int) -> tuple[str, str]:
    """(qualifier, kind) of the call name starting at ``start``: ('at::native', 'direct'),
    ('.', 'member') or ('', 'direct')."""
    j = start - 1
    while j >= 0 and code[j] in _SPACE:
        j -= 1
    if j < 0:
        return "", "direct"
    ch = code[j]
    if ch == "." or (ch == ">" and j > 0 and code[j - 1] == "-"):
        return ".", "member"
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
        if end == j + 1:
            break
        parts.append(code[j + 1 : end])
        while j >= 0 and code[j] in _SPACE:
            j -= 1
    return "::".join(reversed(parts)), "direct"


def _call_sites(code: str, functions: list[Function]) -> list[Call]:
    owner = _innermost(functions)
    if not owner:
        return []
    lines = LineIndex(code)
    calls: list[Call] = []
    n_owner = len(owner)
    for m in _CALL.finditer(code):
        name = m.group(1)
        if name in _KEYWORDS:
            continue
        start = m.start(1)
        line = lines.line_of(start)
        idx = owner[line] if line < n_owner else -1
        if idx < 0:
            continue
        f = functions[idx]
        if name == f.name and start < code.find("{", lines.offset_of(f.start_line)):
            continue  # the definition's own declarator (below its template<...> line)
        qual, kind = _qualifier(code, start)
        calls.append(Call(idx, name, qual, kind, line))
    for m in _ADDRESS.finditer(code):
        line = lines.line_of(m.start("name"))
        idx = owner[line] if line < n_owner else -1
        if idx >= 0 and m.group("name") not in _KEYWORDS:
            qual = re.sub(r"\s+", "", m.group("qual") or "").rstrip(":")
            calls.append(Call(idx, m.group("name"), qual, "address", line))
    for m in _STUB_VALUE.finditer(code):
        line = lines.line_of(m.start(1))
        idx = owner[line] if line < n_owner else -1
        if idx >= 0:
            calls.append(Call(idx, m.group(1), "", "value", line))
    for m in _TEMPLATE_VALUE.finditer(code):
        line = lines.line_of(m.start("name"))
        idx = owner[line] if line < n_owner else -1
        if idx >= 0 and m.group("name") not in _KEYWORDS:
            qual = re.sub(r"\s+", "", m.group("qual")).rstrip(":")
            calls.append(Call(idx, m.group("name"), qual, "direct", line))
    return calls


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
                out.append(Call(idx, ref.spelling, usr, "resolved", node.location.line))
    return out


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
    """
    from clang import cindex

    lines = text.splitlines(keepends=True)
    tu_name = abs_path if compile_args is not None and abs_path else path
    stripped = strip_c_comments(text)
    code = blank_strings(stripped)
    directives, unseen = preprocessor_spans(code)
    try:
        if compile_args is not None:
            tu = _index().parse(
                tu_name, args=compile_args, unsaved_files=[(tu_name, text)], options=_KEEP_GOING | _INCOMPLETE
            )
        else:
            # single-file parsing reads every branch of an #if on an unknown macro: the
            # branches that would unbalance the braces are blanked first (same lines)
            prelude, shift = _prelude()
            tu = _index().parse(
                path,
                args=_clang_args(path),
                unsaved_files=[(path, prelude + blank_spans(text, unseen))],
                options=_SINGLE_FILE_PARSE | _KEEP_GOING | _INCOMPLETE,
            )
    except cindex.TranslationUnitLoadError as exc:
        facts.status, facts.message = "warning", f"libclang could not parse: {exc}"
        tu = None
    cursors: list = []
    if tu is not None:
        if compile_args is not None:
            facts.functions = _definitions(tu, tu_name, lines, cursors)
        else:
            facts.functions = _definitions(tu, tu_name, lines, shift=shift)
    facts.functions = merge_functions(facts.functions, text_functions(blank_spans(code, directives + unseen)))
    if functions_only:
        return facts
    facts.calls = _call_sites(code, facts.functions)
    if cursors:
        facts.calls += _resolved_calls(cursors, facts.functions)
    facts.includes = _INCLUDE.findall(stripped) + [f"using:{ns}" for ns in _USING_NAMESPACE.findall(code)]
    extract_registrations(path, stripped, facts)
    return facts
