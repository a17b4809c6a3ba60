"""The C++ a code generator emits into every operator's generated wrapper: the generated files
(VariableType_*.cpp, RegisterCPU.cpp, ...) are written at build time and are not in the source
tree, but their templates (``tools/autograd/templates/*.cpp``) and the generators' C++ strings
(``tools/autograd/gen_*.py``, ``torchgen/dest/*.py``) are. The names that C++ uses are read here:
the classes it declares variables of (``at::AutoDispatchBelowADInplaceOrView guard;``: their
constructors run), the qualified functions it calls, the unqualified ones (resolved against the
headers the templates include) and those includes."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from indexer.source_text import NOT_CALLED

# a generator's placeholder (``${api_name}``, ``$name``): no name of the emitted code
_PLACEHOLDER = re.compile(r"\$\{\w+\}|\$\w+")
_GENERATED = "__generated__"  # what a placeholder stands for: a name of no function of the index
# a qualified C++ name written as a generator's string, placeholders allowed: at::detail::empty_${dispatch}
_NAME_STRING = re.compile(r"(?:\w+::)+(?:\w|\$\{\w+\})+")
_VARIABLE_CALL = re.compile(r"\$\{(\w+)\}\s*\(")
WILDCARD = "{}"  # a placeholder in a TemplateName's name: one identifier fragment
_LINE_COMMENT = re.compile(r"//[^\n]*")
_INCLUDE = re.compile(r'#\s*include\s*[<"]([^>"]+)[>"]')
# ``Type var;`` / ``Type var(args)`` / ``Type var{args}``: a qualified or capitalized type
_DECLARED = re.compile(r"(?<![\w:.>$])((?:\w+::)+[A-Za-z_]\w*|[A-Z]\w*)\s+([a-z_]\w*)\s*[;({]")
_QUALIFIED_CALL = re.compile(r"(?<![\w:.>$])((?:\w+::)+[A-Za-z_]\w*)\s*\(")
_PLAIN_CALL = re.compile(r"(?<![\w:.>$])([a-z_]\w*)\s*\(")
_NOT_NAMES = NOT_CALLED | {"const", "static", "constexpr", "inline", "template", "typename", "using", "struct", "class"}


@dataclass(frozen=True)
class TemplateName:
    """A name the generated C++ of ``source`` (a template or generator file) uses at ``line``:
    ``kind`` 'type' (a variable of that class is declared: its constructor runs), 'call' (a
    qualified function is called) or 'plain' (an unqualified one: found in the included headers)."""

    source: str
    line: int
    kind: str
    name: str


@dataclass(frozen=True)
class TemplateNames:
    """The names of every template and generator file, and the headers they include."""

    names: tuple[TemplateName, ...]
    includes: tuple[str, ...]


def cpp_texts(path: str, text: str) -> list[tuple[int, str]]:
    """(first line, C++ text) of a template file: a Python generator's string literals (an
    f-string whole, each ``{expr}`` written ``${name}``: its variable's name, ``${_}`` for another
    expression), or the whole text of a C++ template. A generator's call through a variable
    (``{empty_impl}(sizes)``) is read once more with each name string the module assigns to that
    variable (``empty_impl = f"at::detail::empty_{dispatch}"``) in its place."""
    if not path.endswith(".py"):
        return [(1, text)]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    pieces = _string_pieces(tree)
    bound = _name_bindings(tree)
    return [(line, t) for line, piece in pieces for t in (piece, *_bound_calls(piece, bound))
            if "(" in t or ";" in t]


def _string_pieces(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal and f-string of a module (an f-string's own parts
    are not read again on their own)."""
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr) and id(node) not in inner:
            out.append((node.lineno, _rendered(node)))
    return out


def _rendered(node: ast.JoinedStr) -> str:
    """An f-string's text, each formatted value as a placeholder named by its variable."""
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(v.value)
        elif isinstance(v, ast.FormattedValue):
            parts.append("${" + (v.value.id if isinstance(v.value, ast.Name) else "_") + "}")
    return "".join(parts)


def _name_bindings(tree: ast.AST) -> dict[str, set[str]]:
    """variable -> the qualified C++ names with a placeholder (``at::detail::empty_${dispatch}``)
    a module's string assignments give it (``x = f"..."``); a fixed name bound so
    (``copy_op = "at::_copy_from"``) is an operator's call, chosen per kind of wrapper."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        value = node.value
        text = _rendered(value) if isinstance(value, ast.JoinedStr) else (
            value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else "")
        if _NAME_STRING.fullmatch(text) and "${" in text:
            out.setdefault(node.targets[0].id, set()).add(text)
    return out


def _bound_calls(piece: str, bound: dict[str, set[str]]) -> list[str]:
    """``piece`` with a call through a variable the module binds to names (``${v}(``), once per
    name it binds (in every such call of the piece)."""
    out = []
    for var in sorted(set(_VARIABLE_CALL.findall(piece))):
        out += [piece.replace("${" + var + "}(", name + "(") for name in sorted(bound.get(var, ()))]
    return out


def names_in(source: str, first_line: int, text: str) -> tuple[list[TemplateName], list[str]]:
    """The names one piece of generated C++ uses, and the headers it includes."""
    code = _PLACEHOLDER.sub(_GENERATED, _LINE_COMMENT.sub("", text))
    includes = _INCLUDE.findall(code)
    found: dict[tuple[str, str], int] = {}

    def add(kind: str, name: str, offset: int) -> None:
        if name.split("::")[-1] in _NOT_NAMES or (_GENERATED in name and not _wildcard_call(kind, name)):
            return
        found.setdefault((kind, name.replace(_GENERATED, WILDCARD)), first_line + code.count("\n", 0, offset))

    for m in _DECLARED.finditer(code):
        if m.group(2) not in _NOT_NAMES and _GENERATED not in m.group(2):  # a generated member: one per field
            add("type", m.group(1), m.start(1))
    for m in _QUALIFIED_CALL.finditer(code):
        add("call", m.group(1), m.start(1))
    for m in _PLAIN_CALL.finditer(code):
        add("plain", m.group(1), m.start(1))
    return [TemplateName(source, line, kind, name) for (kind, name), line in found.items()], includes


def _wildcard_call(kind: str, name: str) -> bool:
    """A qualified call whose placeholders are in its last part beside fixed text
    (``at::detail::empty_strided_${dispatch}``): a family of functions, one a fragment of the
    name picks; a placeholder that is a whole part (``at::redispatch::${api_name}``) names none."""
    *namespaces, last = name.split("::")
    return kind == "call" and bool(namespaces) and last != _GENERATED and not any(_GENERATED in n for n in namespaces)


def template_files(repo: Path, patterns: tuple[str, ...]) -> list[str]:
    """The repo-relative paths of the regular files matching ``patterns`` (globs of the repo)."""
    found = {p for g in patterns for p in repo.glob(g) if p.is_file() and not p.is_symlink()}
    return sorted(p.relative_to(repo).as_posix() for p in found)


def read_templates(repo: Path, patterns: tuple[str, ...]) -> TemplateNames:
    """The names the templates and generators matching ``patterns`` use; a file that cannot be
    read is left out."""
    names: list[TemplateName] = []
    includes: set[str] = set()
    for path in template_files(repo, patterns):
        try:
            text = (repo / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for first, piece in cpp_texts(path, text):
            got, inc = names_in(path, first, piece)
            names += got
            includes.update(inc)
    return TemplateNames(tuple(names), tuple(sorted(includes)))


def templates_digest(repo: Path, patterns: tuple[str, ...]) -> str:
    """A digest of the template and generator files (their paths and contents): another one
    re-links the index (the layer is read again), it is not patched."""
    digest = hashlib.sha256()
    for path in template_files(repo, patterns):
        digest.update(path.encode())
        try:
            digest.update((repo / path).read_bytes())
        except OSError:
            continue
    return digest.hexdigest()
