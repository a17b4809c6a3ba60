#!/usr/bin/env python3
"""Function-definition recall of perfq's header-less C++ extraction, against tree-sitter-cpp.

For every non-test header (.h, .hpp, .cuh) under aten/src/ATen and c10 of the PyTorch
2.6.0 corpus (and, with --sources, every .cpp/.cu/.cc source as a sanity check; not .mm:
tree-sitter-cpp cannot read Objective-C++), parses the file with tree-sitter-cpp (the
reference) and with perfq's extractor
(``indexer.extract.file_facts``, full facts as ``perfq index`` computes them), and
compares their function definitions per file.

What counts as a reference definition: every ``function_definition`` node whose body is
a ``{...}`` block (or a function try block): free functions, function templates and their
specialisations, methods defined inside classes and class templates, out-of-line methods,
constructors, destructors, operators and conversion functions, at any namespace/class
depth and inside ``#if`` branches. Not counted: ``= default`` / ``= delete`` (no body),
declarations, lambdas, definitions inside another function's body (methods of local
classes), whose lines belong to the enclosing function anyway, and text no build compiles
as C++ here: ``#if 0`` branches, raw string literals (Metal shaders, run-time compiled
CUDA) and the bodies of ``#define``s. Tree-sitter does not expand macros, so the
attribute-like ones (``C10_HOST_DEVICE``, ``CUTLASS_DEVICE``, ``TORCH_API``...) are blanked
before its parse; a definition's first line includes the lines they stand on.

A reference definition is found when perfq has a function with the same name (whitespace
and trailing template arguments removed) whose extent contains the reference's declarator
line. For found definitions the bench also checks the extent (perfq's start line lies
between the reference's first line, ``template`` included, and its declarator line; the
end lines agree) and the qualified name (namespaces, classes and the declarator's
qualifier, as the reference spells them, against perfq's qualname without its template
suffix). Prints the overall ratio, per-area ratios, the top loss classes with examples,
perfq-only definitions, and extraction time against tree-sitter's parse time.

    pip install -e '.[bench]'
    python bench/header_defs.py [--corpus DIR] [--sources] [--examples N] [--list FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

try:
    import tree_sitter_cpp
    from tree_sitter import Language, Node, Parser
except ImportError:
    sys.exit("error: bench/header_defs.py needs tree-sitter and tree-sitter-cpp: pip install -e '.[bench]'")

from common.config import Config
from indexer import cpp
from indexer.cpp_fallback import text_functions
from indexer.discover import discover
from indexer.extract import file_facts
from indexer.facts import FileFacts, Function
from indexer.source_text import blank_spans, blank_strings, preprocessor_spans, strip_c_comments

TARGET = 0.99
ROOTS = ("aten/src/ATen", "c10")
HEADERS = (".h", ".hpp", ".cuh")
SOURCES = (".cpp", ".cu", ".cc")  # not .mm: tree-sitter-cpp does not read Objective-C++
# area of a path: the longest matching prefix
AREAS = (
    ("aten/src/ATen/native/transformers/cuda/", "native/transformers/cuda"),
    ("aten/src/ATen/native/transformers/", "native/transformers"),
    ("aten/src/ATen/native/cuda/", "native/cuda"),
    ("aten/src/ATen/native/cpu/", "native/cpu"),
    ("aten/src/ATen/native/quantized/", "native/quantized"),
    ("aten/src/ATen/native/sparse/", "native/sparse"),
    ("aten/src/ATen/native/", "native (other)"),
    ("aten/src/ATen/cpu/vec/", "cpu/vec"),
    ("aten/src/ATen/core/", "core"),
    ("aten/src/ATen/cuda/", "ATen/cuda"),
    ("aten/src/ATen/", "ATen (other)"),
    ("c10/", "c10"),
    ("torch/csrc/", "torch/csrc"),
    ("", "other"),
)
_FUNCTION_LIKE = frozenset({"function_definition", "lambda_expression"})
_PREPROC = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"})
_MACRO_WORD = re.compile(r"\b([A-Z_][A-Z0-9_]{2,})\b")
# attribute-like macros that tree-sitter (which does not expand macros) would read as
# types: blanked (same length, same lines) before the reference parse
_ATTRIBUTE_MACROS = re.compile(
    rb"\b(?:C10_(?:HOST_DEVICE|HOST|DEVICE|ALWAYS_INLINE(?:_ATTRIBUTE)?|NOINLINE|UNUSED|NODISCARD|USED|ALWAYS_INLINE)"
    rb"|[A-Z][A-Z0-9_]*_API|CUTLASS_(?:HOST_DEVICE|DEVICE|HOST|GLOBAL)|HOST_DEVICE|__(?:host|device|global|forceinline"
    rb"|noinline)__|__ubsan_ignore_\w+__|(?:C10_LAUNCH_BOUNDS_\d|__launch_bounds__)\s*\([^()]*\))(?![\w(])"
)

# raw string literals (Metal shaders, run-time compiled CUDA): tree-sitter reads the
# directives inside them as code, so they are blanked too
_RAW_STRING = re.compile(rb'(?<![\w"])(?:u8|[uUL])?R"([^()\\\s"]{0,16})\(.*?\)\1"', re.S)


@dataclass(frozen=True)
class RefDef:
    """One reference (tree-sitter) function definition."""

    name: str
    qualname: str
    first: int  # first line, template header included
    name_line: int
    end: int
    in_class_template: bool
    under_if: bool
    suspect: bool  # tree-sitter had a parse error before it in an enclosing scope: the qualname may be wrong


def area_of(path: str) -> str:
    return next(area for prefix, area in AREAS if path.startswith(prefix))


def norm_name(name: str) -> str:
    """A function name without whitespace and trailing template arguments."""
    name = re.sub(r"\s+", "", name)
    if not name.startswith("operator") and name.endswith(">") and "<" in name:
        name = name[: name.index("<")]
    return name


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _declarator_name(decl: Node | None) -> tuple[str, list[str]] | None:
    """(name, qualifier parts) of a function declarator, or None."""
    while decl is not None and decl.type not in ("function_declarator",):
        if decl.type == "operator_cast":
            return "operator" + _text(decl.child_by_field_name("type")), []
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return None
    target = decl.child_by_field_name("declarator")
    scope: list[str] = []
    while target is not None and target.type == "qualified_identifier":
        scope.append(re.sub(r"\s+", "", _text(target.child_by_field_name("scope"))).split("<")[0])
        target = target.child_by_field_name("name")
    if target is None:
        return None
    if target.type == "template_function":
        target = target.child_by_field_name("name")
    if target is not None and target.type == "operator_cast":
        return "operator" + _text(target.child_by_field_name("type")), scope
    return norm_name(_text(target)), scope


def _scope_name(node: Node) -> str | None:
    """The scope a namespace or class node opens, or None for other nodes."""
    if node.type == "namespace_definition":
        name = node.child_by_field_name("name")
        return norm_name(_text(name)) if name is not None else "(anonymous namespace)"
    if node.type in ("class_specifier", "struct_specifier", "union_specifier"):
        name = node.child_by_field_name("name")
        return re.sub(r"\s+", "", _text(name)).split("<")[0] if name is not None else "(anonymous)"
    return None


@dataclass(frozen=True)
class _Ctx:
    """Where the reference walk is: enclosing scopes and flags."""

    scope: tuple[str, ...] = ()
    in_class_template: bool = False
    under_if: bool = False
    suspect: bool = False  # after or inside a parse error: the scopes may be wrong


def _children(node: Node) -> list[Node]:
    """``node``'s children, without the ``#if 0`` branch of a ``#if 0`` group."""
    if node.type == "preproc_if" and _text(node.child_by_field_name("condition")).strip() == "0":
        alternative = node.child_by_field_name("alternative")
        return [alternative] if alternative is not None else []
    return node.children


def _ref_def(node: Node, name: str, qual: list[str], ctx: _Ctx) -> RefDef:
    first = node
    while first.parent is not None and first.parent.type == "template_declaration":
        first = first.parent
    return RefDef(
        name,
        "::".join([*ctx.scope, *qual, name]),
        first.start_point[0] + 1,
        node.child_by_field_name("declarator").start_point[0] + 1,
        node.end_point[0] + 1,
        ctx.in_class_template,
        ctx.under_if,
        ctx.suspect or node.has_error,
    )


def reference_defs(root: Node) -> list[RefDef]:
    """The function definitions tree-sitter finds (see the module docstring)."""
    out: list[RefDef] = []
    stack: list[tuple[Node, _Ctx]] = [(root, _Ctx())]
    while stack:
        node, ctx = stack.pop()
        suspect = ctx.suspect or node.type == "ERROR"
        for child in _children(node):
            kind = child.type
            here = _Ctx(ctx.scope, ctx.in_class_template, ctx.under_if, suspect)
            suspect = suspect or kind == "ERROR" or child.is_missing
            if kind == "function_definition":
                named = _declarator_name(child.child_by_field_name("declarator"))
                if child.child_by_field_name("body") is not None and named is not None:
                    out.append(_ref_def(child, named[0], named[1], here))
                continue  # nothing inside a function body counts
            if kind in _FUNCTION_LIKE:
                continue
            sub = _scope_name(child)
            if sub is not None:
                tmpl = here.in_class_template or (
                    kind != "namespace_definition" and node.type == "template_declaration"
                )
                stack.append((child, _Ctx((*here.scope, *sub.split("::")), tmpl, here.under_if, here.suspect)))
            else:
                stack.append(
                    (child, _Ctx(here.scope, here.in_class_template, here.under_if or kind in _PREPROC, here.suspect))
                )
    return out


def _strip_template_suffix(qualname: str) -> str:
    """A qualname without whitespace (``operator bool``) and a function template's ``<T, U>``."""
    qualname = re.sub(r"\s+", "", qualname)
    return qualname[: _suffix_start(qualname)] if qualname.endswith(">") else qualname


def _suffix_start(qualname: str) -> int:
    """Offset of the '<' opening the template suffix that ends ``qualname`` (its length
    when none does: ``operator>``)."""
    depth = 0
    for i in range(len(qualname) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(qualname[i], 0)
        if depth == 0:
            return i
    return len(qualname)


@dataclass
class FileResult:
    path: str
    refs: list[RefDef]
    found: list[tuple[RefDef, Function]]
    missed: list[RefDef]
    extra: list[Function]
    ts_s: float
    perfq_s: float


def compare(path: str, refs: list[RefDef], facts: FileFacts) -> tuple[list, list, list]:
    """(found pairs, missed refs, perfq-only functions) of one file."""
    by_name: dict[str, list[Function]] = defaultdict(list)
    for f in facts.functions:
        by_name[norm_name(f.name)].append(f)
    used: set[int] = set()
    found: list[tuple[RefDef, Function]] = []
    missed: list[RefDef] = []
    unnamed: list[RefDef] = []
    for ref in sorted(refs, key=lambda r: (r.name_line, r.end)):
        cands = [
            f for f in by_name.get(ref.name, []) if f.start_line <= ref.name_line <= f.end_line and id(f) not in used
        ]
        if not cands:
            unnamed.append(ref)
            continue
        best = min(cands, key=lambda f: (abs(f.end_line - ref.end), abs(f.start_line - ref.first)))
        used.add(id(best))
        found.append((ref, best))
    # a definition whose name a macro makes (TORCH_META_FUNC2(add, Tensor) -> add_Tensor): same extent
    for ref in unnamed:
        same = [
            f for f in facts.functions if id(f) not in used and f.start_line <= ref.name_line <= f.end_line == ref.end
        ]
        if same:
            used.add(id(same[0]))
            found.append((ref, same[0]))
        else:
            missed.append(ref)
    extra = [f for f in facts.functions if id(f) not in used]
    return found, missed, extra


def loss_class(ref: RefDef, lines: list[str], prelude: set[str]) -> str:
    """A short label for why a reference definition may be missing (a heuristic)."""
    head = " ".join(lines[ref.first - 1 : ref.name_line])
    macros = [m for m in _MACRO_WORD.findall(head) if m not in prelude and not m.startswith("C10_")]
    before = next((line.strip() for line in reversed(lines[: ref.first - 1]) if line.strip()), "")
    if before.startswith("DECLARE_DISPATCH") and not before.endswith(";"):
        return "after DECLARE_DISPATCH(...)"
    if macros:
        return f"macro {macros[0]}"
    if "[[" in head:
        return "[[attribute]]"
    if ref.under_if:
        return "under #if"
    if ref.in_class_template:
        return "method of a class template"
    return "other"


def prelude_macros() -> set[str]:
    text = resources.files("data").joinpath("prelude.h").read_text()
    return set(re.findall(r"#define\s+(\w+)", text))


def _text_only(path: str, data: bytes) -> FileFacts:
    """Facts with only the text fallback's functions (``--mode text``)."""
    facts = FileFacts(path, "cpp", "", 0)
    code = blank_strings(strip_c_comments(data.decode("utf-8", "replace")))
    directives, unseen = preprocessor_spans(code)
    facts.functions = text_functions(blank_spans(code, directives + unseen))
    return facts


def _blank(m: re.Match[bytes]) -> bytes:
    return re.sub(rb"[^\n]", b" ", m.group(0))


def _with_attribute_lines(refs: list[RefDef], data: bytes, blanked: bytes) -> list[RefDef]:
    """``refs`` whose first line is moved up over lines holding only the attribute macros
    blanked for tree-sitter (``CUTLASS_HOST_DEVICE`` above a method belongs to it)."""
    attribute_lines = {
        n
        for n, (a, b) in enumerate(zip(data.split(b"\n"), blanked.split(b"\n"), strict=True), 1)
        if a.strip() and not b.strip()
    }
    out = []
    for ref in refs:
        first = ref.first
        while first - 1 in attribute_lines:
            first -= 1
        out.append(replace(ref, first=first))
    return out


def run_file(repo: Path, path: str, parser: Parser, mode: str) -> FileResult:
    data = (repo / path).read_bytes()
    t0 = time.process_time()
    blanked = _RAW_STRING.sub(_blank, _ATTRIBUTE_MACROS.sub(_blank, data))
    tree = parser.parse(blanked)
    in_macro = {n for n, line in enumerate(data.split(b"\n"), 1) if line.rstrip().endswith(b"\\")}
    refs = [r for r in reference_defs(tree.root_node) if r.name_line not in in_macro]
    t1 = time.process_time()
    refs = _with_attribute_lines(refs, data, blanked)
    facts = _text_only(path, data) if mode == "text" else file_facts("cpp", path, data)
    t2 = time.process_time()
    found, missed, extra = compare(path, refs, facts)
    return FileResult(path, refs, found, missed, extra, t1 - t0, t2 - t1)


def _ratio(found: int, total: int) -> str:
    return f"{found:>6}/{total:<6} {100.0 * found / max(total, 1):6.2f}%"


def report(title: str, results: list[FileResult], repo: Path, n_examples: int, list_file: Path | None) -> None:
    total = sum(len(r.refs) for r in results)
    found = sum(len(r.found) for r in results)
    print(f"\n== {title}: {len(results)} files ==")
    print(
        f"definitions found   {_ratio(found, total)}   target >= {100 * TARGET:.0f}%   "
        f"ratio {found / max(total, 1) / TARGET:.3f}"
    )
    areas: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        a = areas[area_of(r.path)]
        a[0] += len(r.found)
        a[1] += len(r.refs)
    for area, (f, t) in sorted(areas.items(), key=lambda kv: -kv[1][1]):
        print(f"  {area:<26} {_ratio(f, t)}")
    native = [r for r in results if r.path.startswith("aten/src/ATen/native/")]
    if native:  # the scope of the first measurement (issue 10)
        n_found, n_total = sum(len(r.found) for r in native), sum(len(r.refs) for r in native)
        print(f"  {'(all of native/)':<26} {_ratio(n_found, n_total)}")
    pairs = [p for r in results for p in r.found]
    start_ok = sum(1 for ref, f in pairs if ref.first <= f.start_line <= ref.name_line)
    end_ok = sum(1 for ref, f in pairs if f.end_line == ref.end)
    named = [(ref, f) for ref, f in pairs if norm_name(f.name) == ref.name and not ref.suspect]
    qual_ok = sum(1 for ref, f in named if _strip_template_suffix(f.qualname) == _strip_template_suffix(ref.qualname))
    macro_named = sum(1 for ref, f in pairs if norm_name(f.name) != ref.name)
    print(f"  named by a macro  {macro_named:>6}  (same extent, another name: TORCH_META_FUNC2(add, Tensor))")
    print(f"extent start right  {_ratio(start_ok, len(pairs))}")
    print(f"extent end right    {_ratio(end_ok, len(pairs))}")
    print(f"qualname agrees     {_ratio(qual_ok, len(named))}   (where tree-sitter parsed the scopes cleanly)")
    extra = sum(len(r.extra) for r in results)
    print(f"perfq-only defs     {extra:>6}  (not in the reference: macro-made functions, tree-sitter misparses)")
    ts_s = sum(r.ts_s for r in results)
    pq_s = sum(r.perfq_s for r in results)
    print(f"time: perfq extract {pq_s:6.2f} s   tree-sitter parse {ts_s:6.2f} s   ratio {pq_s / max(ts_s, 1e-9):.1f}")
    prelude = prelude_macros()
    classes: dict[str, list[str]] = defaultdict(list)
    bad_extent: list[str] = []
    bad_qual: list[str] = []
    for r in results:
        lines = (repo / r.path).read_text(errors="replace").splitlines()
        for ref in r.missed:
            classes[loss_class(ref, lines, prelude)].append(f"{r.path}:{ref.name_line} {ref.qualname}")
        for ref, f in r.found:
            if not (ref.first <= f.start_line <= ref.name_line and f.end_line == ref.end):
                bad_extent.append(
                    f"{r.path}:{ref.name_line} {ref.name} ref {ref.first}-{ref.end} perfq {f.start_line}-{f.end_line}"
                )
            if (
                norm_name(f.name) == ref.name
                and not ref.suspect
                and _strip_template_suffix(f.qualname) != _strip_template_suffix(ref.qualname)
            ):
                bad_qual.append(f"{r.path}:{ref.name_line} ref {ref.qualname} perfq {f.qualname}")
    if classes:
        print("top loss classes:")
        for label, items in sorted(classes.items(), key=lambda kv: -len(kv[1]))[:12]:
            print(f"  {len(items):>5}  {label}")
            for item in items[:n_examples]:
                print(f"           {item}")
    for label, items in (("wrong extents", bad_extent), ("other qualnames", bad_qual)):
        if items:
            print(f"{label} ({len(items)}), e.g.:")
            for item in items[:n_examples]:
                print(f"           {item}")
    if list_file is not None:
        with list_file.open("a") as out:
            for label, items in classes.items():
                out.writelines(f"missed\t{label}\t{item}\n" for item in items)
            out.writelines(f"extent\t{item}\n" for item in bad_extent)
            out.writelines(f"qualname\t{item}\n" for item in bad_qual)
            out.writelines(
                f"extra\t{r.path}:{f.start_line}-{f.end_line} {f.qualname}\n" for r in results for f in r.extra
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0",
    )
    ap.add_argument("--sources", action="store_true", help="also measure .cpp/.cu/.cc sources")
    ap.add_argument("--examples", type=int, default=3, help="examples per loss class")
    ap.add_argument("--list", type=Path, help="write every miss, bad extent and perfq-only function to this file")
    ap.add_argument("--only", default="", help="only paths containing this string")
    ap.add_argument("--root", action="append", help=f"source root (repeatable; default: {' '.join(ROOTS)})")
    ap.add_argument(
        "--mode",
        choices=("full", "clang", "text"),
        default="full",
        help="full extraction (the text scanner, and libclang for files whose macros define functions), "
        "libclang alone on every file, or the text scanner alone",
    )
    args = ap.parse_args()
    if not (args.corpus / "aten/src/ATen").is_dir():
        sys.exit(f"error: no PyTorch corpus at {args.corpus} (set PERFQ_CORPUS)")
    if args.list is not None:
        args.list.write_text("")
    files = discover(args.corpus, Config(source_roots=tuple(args.root or ROOTS)))["cpp"]
    files = [p for p in files if args.only in p]
    parser = Parser(Language(tree_sitter_cpp.language()))
    if args.mode == "clang":  # every file through libclang, none through the scanner
        cpp.text_functions = lambda code: []
        cpp._defines_functions = lambda code, scanned: True
    groups = [("headers (.h .hpp .cuh)", HEADERS)] + ([("sources (.cpp .cu .cc)", SOURCES)] if args.sources else [])
    for title, suffixes in groups:
        results = [run_file(args.corpus, p, parser, args.mode) for p in files if p.endswith(suffixes)]
        report(title, results, args.corpus, args.examples, args.list)


if __name__ == "__main__":
    main()
