"""From changed lines to changed functions: function extents of the base and head
versions of each changed file come from query/extents.py (pure: the texts are passed in),
so an index some commits away still maps lines exactly."""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common import globs
from common.config import Config
from common.diff import FileChange
from common.documents import to_json
from indexer.build_config import BuildMacros, file_kind
from indexer.cpp_arity import operand_classes
from indexer.discover import CPP_SUFFIXES, excluded, in_benchmark_tree, is_benchmark_file
from indexer.dtypes import DtypeClass
from indexer.facts import FileFacts, Function, namespace_of
from indexer.preprocessor import Compiled, line_states
from indexer.source_text import LineIndex, blank_strings, strip_c_comments
from query.equivalent import declares, dispatch_gain, rename_between, scoped_rename, type_arm_scope, words
from query.extents import parse_extents
from query.instantiations import bool_parameter, call_sites, constexpr_guard
from query.loose_lines import sort_loose
from schema.kinds import FunctionKind

_PYTHON_SCOPES = (FunctionKind.CLASS, FunctionKind.ALIAS)  # Python functions that hold no body lines of their own
TextOf = Callable[[str], bytes | None]
Parse = Callable[[str, str, bytes], "FileFacts | None"]  # (kind, path, content) -> function extents
Tokens = Callable[[str, str, bytes], "CodeTokens | None"]  # (kind, path, content) -> code tokens

if TYPE_CHECKING:
    from indexer.api import CodeTokens


@dataclass
class ChangedFunction:
    """A function whose lines a change touches (``lines``: changed lines, either side)."""

    path: str = field(metadata={"json": "file"})
    qualname: str = field(metadata={"json": "function"})
    name: str = field(metadata={"internal": True})
    lines: list[int]
    side: str = field(metadata={"internal": True})  # base | head | both
    status: str  # modified | added | deleted
    why: str | None = field(default=None, metadata={"omit_if_none": True})  # a no-op's: why nothing runs differently
    member: bool = field(default=False, metadata={"internal": True})  # a C++ class's method (a member call may call it)
    # a free function of a source file (not a header) that is ``static``, ``inline``, ``constexpr``
    # or in an anonymous namespace: no other translation unit can call it
    file_local: bool = field(default=False, metadata={"internal": True})
    # the argument counts its changed definitions accept (indexer/cpp_arity.py): least, most (None: no bound)
    arity: tuple[int, int | None] = field(default=(0, None), metadata={"internal": True})
    # an operator overload's: the classes its parameters take (an expression on their values uses it)
    operands: tuple[str, ...] = field(default=(), metadata={"internal": True})

    def as_dict(self) -> dict:
        return to_json(self)

    def to_json(self) -> dict:
        return to_json(self)


@dataclass
class ChangeSet:
    functions: list[ChangedFunction] = field(default_factory=list)
    no_ops: list[ChangedFunction] = field(
        default_factory=list
    )  # same tokens before and after: nothing runs differently
    file_level: list[tuple[str, list[int], str]] = field(default_factory=list)  # (path, lines, why)
    yaml_ops: list[tuple[str, str]] = field(default_factory=list)  # (op, why)
    benchmark_files: list[str] = field(default_factory=list)
    benchmark_modules: list[str] = field(default_factory=list)  # other modules of a benchmark tree
    benchmark_importers: dict[str, set[str]] = field(default_factory=dict)  # module -> files importing it
    compile_paths: list[str] = field(default_factory=list)
    not_compiled: list[tuple[str, list[int], str]] = field(default_factory=list)  # (path, lines, #if that drops them)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    whole: dict[tuple[str, str], tuple[str, int, int]] = field(default_factory=dict)  # added/deleted: (kind, extent)
    # (path, changed function) -> the functions of its file whose base bodies call it by name
    base_callers: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # ("-" | "+", path, line) -> the dtype classes a changed line runs differently for, where the
    # function's tokens tell (an element type ``if constexpr`` arm: query.equivalent.type_arm_scope)
    line_scopes: dict[tuple[str, str, int], frozenset[DtypeClass]] = field(default_factory=dict)


_UNKNOWN_ARITY: tuple[int, int | None] = (0, None)


def _operands(raw: bytes | None, f: Function) -> tuple[str, ...]:
    """The classes the operator overload ``f`` takes, read in its file's text ``raw``."""
    if not raw:
        return ()
    code = blank_strings(strip_c_comments(raw.decode("utf-8", "replace")))
    return operand_classes(code, f, LineIndex(code))


def _widened(known: tuple[int, int | None] | None, more: tuple[int, int | None]) -> tuple[int, int | None]:
    """The argument counts that ``known`` or ``more`` accepts (definitions of one qualified name)."""
    if known is None:
        return more
    most = None if known[1] is None or more[1] is None else max(known[1], more[1])
    return min(known[0], more[0]), most


def _innermost(functions: list[Function], line: int) -> Function | None:
    best = None
    for f in functions:
        if f.start_line <= line <= f.end_line and (
            best is None or f.end_line - f.start_line < best.end_line - best.start_line
        ):
            best = f
    return best


def source_kind(path: str, cfg: Config) -> str:
    """native_yaml | derivatives | benchmark | benchmark_module | cpp | python | other."""
    if any(path == p for p in cfg.native_functions):
        return "native_yaml"
    if path.endswith("derivatives.yaml"):
        return "derivatives"
    if in_benchmark_tree(path, cfg):
        return "benchmark" if is_benchmark_file(path, cfg) else "benchmark_module"
    if excluded(path, cfg.exclude):
        return "other"  # tests, third_party: not indexed, nothing a benchmark runs
    if path.endswith(CPP_SUFFIXES):
        return "cpp"
    if path.endswith(".py"):
        return "python"
    return "other"


def _yaml_entries(text: str, lines: set[int], key: str) -> list[tuple[str, str]]:
    """(name, entry text) of the yaml entries (``- func:`` / ``- name:``) that contain ``lines``."""
    all_lines = text.splitlines()
    starts = [
        (i + 1, m.group(1)) for i, line in enumerate(all_lines) if (m := re.match(rf"-\s+{key}:\s*([^\s(]+)", line))
    ]
    out: list[tuple[str, str]] = []
    for line in sorted(lines):
        for k, (start, name) in enumerate(starts):
            end = starts[k + 1][0] if k + 1 < len(starts) else len(all_lines) + 1
            if start <= line < end:
                if name not in [n for n, _ in out]:
                    out.append((name, "\n".join(all_lines[start - 1 : end - 1])))
                break
    return out


LAYOUT_ONLY = "same code tokens (comments, whitespace or formatting)"
MACRO_CONSTANT = "a macro constant turned into a constant of the same name and value"
_DEFINE_CONSTANT = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+([-+]?[\w.']+)\s*$")
_TYPED_CONSTANT = re.compile(  # inline constexpr int SIMD = 32;  static const int64_t N{4};
    r"^\s*(?:(?:inline|static|constexpr|const)\s+)*(?:constexpr|const)\s+[\w:<>]+\s+([A-Za-z_]\w*)\s*"
    r"(?:=\s*([-+]?[\w.']+)|\{\s*([-+]?[\w.']+)\s*\})\s*;\s*$")
_BACKWARD_CALL = re.compile(r"\b([A-Za-z_]\w*backward\w*)\s*\(")
_CALLED_NAME = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)(?=\s*(?:<[^;{}]*?>\s*)?\()")  # name( or name<...>(


def changed_functions(
    changes: list[FileChange],
    base_text: TextOf,
    head_text: TextOf,
    cfg: Config,
    parse: Parse = parse_extents,
    tokens: Tokens | None = None,
    build: BuildMacros | None = None,
) -> ChangeSet:
    """Map every changed line of ``changes`` to the function that encloses it, with the
    extents ``parse`` gives for the base and head versions of each file; changes that leave
    the code tokens as they were (comments, whitespace, formatting) go to ``no_ops``. With the
    target ``build``'s macros, C++ lines in ``#if`` branches it does not compile go to
    ``not_compiled`` (a condition on a macro it does not know keeps them, with a note)."""
    cs = ChangeSet()
    for fc in changes:
        kind = source_kind(fc.path, cfg)
        if fc.binary and kind in ("cpp", "python"):  # a GIT binary patch, or NUL bytes in a source file
            note = f"{fc.path}: binary change, not mapped to functions"
            cs.notes.append(note)
            cs.file_level.append((fc.path, [], "binary change: not mapped to functions"))
            continue
        if fc.binary:
            cs.ignored.append(f"{fc.path} (binary)")
            continue
        if kind == "other":
            cs.ignored.append(fc.path)
            continue
        if any(globs.match(fc.path, p) for p in ("torch/_inductor/*", "torch/_dynamo/*")):
            cs.compile_paths.append(fc.path)
        if kind in ("benchmark", "benchmark_module"):
            if _layout_only(fc, base_text, head_text, tokens):
                lines = sorted(fc.added | fc.removed)[:20]
                cs.no_ops.append(ChangedFunction(fc.path, "", "", lines, "both", "modified", LAYOUT_ONLY))
            else:
                (cs.benchmark_files if kind == "benchmark" else cs.benchmark_modules).append(fc.path)
            continue
        if kind in ("native_yaml", "derivatives"):
            key = "func" if kind == "native_yaml" else "name"
            for side_lines, text_of, path in ((fc.removed, base_text, fc.old_path), (fc.added, head_text, fc.new_path)):
                data = text_of(path) if path else None
                if data and side_lines:
                    for name, entry in _yaml_entries(data.decode("utf-8", "replace"), side_lines, key):
                        cs.yaml_ops.append((name, f"{fc.path} entry changed"))
                        if kind == "derivatives":  # the op and the backward ops its formulas call
                            for backward in dict.fromkeys(_BACKWARD_CALL.findall(entry)):
                                cs.yaml_ops.append((backward, f"{fc.path}: backward of {name}"))
            continue
        _map_source(fc, "cpp" if kind == "cpp" else "python", base_text, head_text, cs, parse, tokens, build)
    _moved_between_files(cs, base_text, head_text, tokens)
    return cs


def _moved_between_files(cs: ChangeSet, base_text: TextOf, head_text: TextOf, tokens: Tokens | None) -> None:
    """A function deleted from one file and added, with the same name and code tokens, to
    another is a move: both sides go to ``no_ops``."""
    deleted = [cf for cf in cs.functions if cf.status == "deleted" and (cf.path, cf.qualname) in cs.whole]
    added = {}
    for cf in cs.functions:
        if cf.status == "added" and (cf.path, cf.qualname) in cs.whole:
            added.setdefault(cf.name, []).append(cf)
    pairs = [(d, a) for d in deleted for a in added.get(d.name, []) if a.path != d.path]
    if not pairs:
        return
    tokenize = _tokenizer(tokens)
    cache: dict[tuple[str, str], CodeTokens | None] = {}

    def body(cf: ChangedFunction, text_of: TextOf, side: str) -> list[str] | None:
        kind, start, end = cs.whole[cf.path, cf.qualname]
        if (side, cf.path) not in cache:
            data = text_of(cf.path)
            cache[side, cf.path] = tokenize(kind, cf.path, data) if data is not None else None
        found = cache[side, cf.path]
        return found.within(start, end) if found is not None else None

    moved: set[int] = set()
    for d, a in pairs:
        if id(d) in moved or id(a) in moved:
            continue
        old = body(d, base_text, "base")
        if old is not None and old == body(a, head_text, "head"):
            d.why, a.why = f"moved to {a.path}, same code tokens", f"moved from {d.path}, same code tokens"
            moved |= {id(d), id(a)}
    cs.no_ops += [cf for cf in cs.functions if id(cf) in moved]
    cs.functions = [cf for cf in cs.functions if id(cf) not in moved]


def compiled_lines(path: str, text: bytes | None, lines: set[int], build: BuildMacros, cs: ChangeSet) -> set[int]:
    """``lines`` of a C++ file version less those the target build does not compile (noted in
    ``cs.not_compiled``); lines under a condition on macros the build does not know stay, noted."""
    if not lines or text is None or b"#if" not in text:
        return lines
    states = line_states(text.decode("utf-8", "replace"), build, file_kind(path))
    kept: set[int] = set()
    dropped: dict[str, list[int]] = {}
    undecided: dict[tuple[str, ...], list[int]] = {}
    for line in sorted(lines):
        region = states.at(line)
        if region is not None and region.compiled is Compiled.no:
            dropped.setdefault(region.condition, []).append(line)
            continue
        kept.add(line)
        if region is not None and region.compiled is Compiled.unknown:
            undecided.setdefault(region.unknown, []).append(line)
    for condition, out in dropped.items():
        cs.not_compiled.append((path, out, condition))
        _note(cs, f"{path}: {_line_span(out)} not compiled by the target build ({condition}): nothing selected")
    for macros, held in undecided.items():
        _note(cs, f"{path}: {_line_span(held)} build-conditional on {', '.join(macros)} "
                  "(not known for the target build): kept")
    return kept


def _note(cs: ChangeSet, note: str) -> None:
    """Add ``note`` once (a line changed on both sides is looked at twice)."""
    if note not in cs.notes:
        cs.notes.append(note)


def _line_span(lines: list[int]) -> str:
    return f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"


def _facts(kind: str, path: str | None, text_of: TextOf, parse: Parse) -> FileFacts | None:
    if path is None:
        return None
    data = text_of(path)
    return None if data is None else parse(kind, path, data)


def _sort_outside(
    text: bytes, outside: list[int], facts: FileFacts, side: str, hits: list[tuple[str, int]], cs: ChangeSet
) -> list[int]:
    """Sort a C++ file's changed lines outside function bodies: those of a function (its class's
    fields, its prototype, a global it names) join ``hits``, #include and comment lines go to
    ``cs``'s notes and no-ops; the lines still outside are returned."""
    sorted_out = sort_loose(text.decode("utf-8", "replace"), outside, facts)
    hits += [(owner, line) for owner, lines in sorted_out.functions.items() for line in lines]
    note = f"{facts.path}: #include lines changed (nothing selected for them)"
    if sorted_out.includes and note not in cs.notes:  # once for a file, whichever side holds them
        cs.notes.append(note)
    note = f"{facts.path}: namespace alias lines no function of the file names (nothing selected for them)"
    if sorted_out.aliases and note not in cs.notes:
        cs.notes.append(note)
    note = f"{facts.path}: namespace braces or #pragma once changed: no code of their own (nothing selected for them)"
    if sorted_out.scopes and note not in cs.notes:
        cs.notes.append(note)
    if sorted_out.comments:
        cs.no_ops.append(ChangedFunction(facts.path, "", "", sorted_out.comments[:20], side, "modified", LAYOUT_ONLY))
    return sorted_out.other


def _added_whole(head: FileFacts, fc: FileChange, head_text: TextOf) -> set[str]:
    """Qualified names of the head's functions whose every line the change adds (a diff may
    take a closing brace or a blank line as context: those do not count)."""
    candidates = [f for f in head.functions if f.start_line in fc.added]
    if not candidates:
        return set()
    rows = _rows(head_text, fc.new_path)
    return {
        f.qualname
        for f in candidates
        if all(line in fc.added or _trivial(rows, line) for line in range(f.start_line, f.end_line + 1))
    }


def _rows(text_of: TextOf, path: str | None) -> list[str]:
    raw = text_of(path) if path else None
    return list(_lines_of(raw)) if raw else []


@functools.lru_cache(maxsize=16)
def _lines_of(raw: bytes) -> tuple[str, ...]:
    """A text's lines, split once for the several readers of one file's version."""
    return tuple(raw.decode("utf-8", "replace").splitlines())


def _trivial(rows: list[str], line: int) -> bool:
    """Whether ``line`` holds no more than a brace (or nothing)."""
    return 0 < line <= len(rows) and rows[line - 1].strip() in ("", "{", "}", "};")


def _macro_constants(fc: FileChange, base_text: TextOf, head_text: TextOf) -> tuple[set[int], set[int]]:
    """Old and new line numbers of ``#define NAME value`` lines replaced by a typed constant of
    the same name and value (``inline constexpr int NAME = value;``): the same values everywhere
    the name is used, unless the preprocessor reads the name (``#if NAME``, ``#ifdef NAME``)."""
    old_lines: set[int] = set()
    new_lines: set[int] = set()
    texts = [_rows(base_text, fc.old_path), _rows(head_text, fc.new_path)]
    for hunk in fc.hunks:
        defines: dict[tuple[str, str], int] = {}
        constants: dict[tuple[str, str], int] = {}
        old_no, new_no = hunk.source_start, hunk.target_start
        for line in hunk.lines:
            if line.kind == "-":
                m = _DEFINE_CONSTANT.match(line.text)
                if m:
                    defines[m.group(1), m.group(2)] = old_no
                old_no += 1
            elif line.kind == "+":
                m = _TYPED_CONSTANT.match(line.text)
                if m:
                    constants[m.group(1), m.group(2) or m.group(3)] = new_no
                new_no += 1
            else:
                old_no, new_no = old_no + 1, new_no + 1
        for key in defines.keys() & constants.keys():
            if not any(_preprocessor_reads(rows, key[0]) for rows in texts):
                old_lines.add(defines[key])
                new_lines.add(constants[key])
    return old_lines, new_lines


_SOURCE_SUFFIXES = (".cpp", ".cc", ".cu", ".mm")  # a template defined here is instantiated here


def _guarded_instantiations(
    cf: ChangedFunction, head: FileFacts, old_words: Callable[[str], list[str] | None],
    new_words: Callable[[str], list[str] | None], head_rows: Callable[[], list[str]],
) -> tuple[str, list[Function]] | None:
    """For a source file's function template whose change only wraps code in ``if constexpr
    ([!]P)`` on a ``bool`` template parameter: why it is a no-op for the instantiations where the
    guard holds, and the functions whose call sites instantiate the others (None: not such a
    change, or a call site whose argument the text does not tell)."""
    before, after = old_words(cf.qualname), new_words(cf.qualname)
    guard = constexpr_guard(before, after) if before and after else None
    func = next((f for f in head.functions if f.qualname == cf.qualname), None) if guard is not None else None
    if guard is None or func is None:
        return None
    rows = head_rows()  # read only for a function that gained a guard
    param = bool_parameter(rows, func, guard.param)
    if param is None:
        return None
    sites = call_sites(rows, func, *param)
    callers = [_innermost(head.functions, s.line) for s in sites if s.value is not guard.holds]
    if any(s.value is None for s in sites) or None in callers:
        return None
    why = (f"its change only wraps code in `{guard.text()}`: the instantiations for which it holds run the "
           "same code; the others are reached through the call sites that instantiate them")
    return why, [c for c in callers if c is not None and c.qualname != cf.qualname]


def _note_type_arms(
    cs: ChangeSet, fc: FileChange, cf: ChangedFunction, facts: tuple[FileFacts | None, FileFacts | None],
    words_of: tuple[Callable[[str], list[str] | None], Callable[[str], list[str] | None]],
) -> None:
    """The dtype classes ``cf``'s changed lines run differently for, in ``cs.line_scopes``, when its
    change only adds or edits element type ``if constexpr`` arms (the other types run the old code)."""
    before, after = (of(cf.qualname) for of in words_of)
    scope = type_arm_scope(before, after) if before and after else None
    if scope is None:
        return
    for sign, side, path, lines in (("-", facts[0], fc.old_path, fc.removed), ("+", facts[1], fc.new_path, fc.added)):
        spans = [(f.start_line, f.end_line) for f in side.functions if f.qualname == cf.qualname] if side else []
        for line in lines:
            if path and any(lo <= line <= hi for lo, hi in spans):
                cs.line_scopes[sign, path, line] = scope


def _add_line(found: dict[tuple[str, str], ChangedFunction], cs: ChangeSet, cf: ChangedFunction, line: int) -> None:
    """``cf`` (a function a change reaches through one of its lines) among the changed functions."""
    known = found.get((cf.path, cf.qualname))
    if known is None:
        found[cf.path, cf.qualname] = cf
        cf.lines.append(line)
        cs.functions.append(cf)
    elif line not in known.lines:
        known.lines.append(line)


def _preprocessor_reads(rows: list[str], name: str) -> bool:
    """Whether a directive other than the name's own ``#define`` mentions ``name``."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    return any(row.lstrip().startswith("#") and word.search(row) and not _DEFINE_CONSTANT.match(row) for row in rows)


def _map_source(
    fc: FileChange, kind: str, base_text: TextOf, head_text: TextOf, cs: ChangeSet, parse: Parse, tokens: Tokens | None,
    build: BuildMacros | None = None,
) -> None:
    base = _facts(kind, fc.old_path, base_text, parse)
    head = _facts(kind, fc.new_path, head_text, parse)
    found: dict[tuple[str, str], ChangedFunction] = {}
    arities: dict[str, tuple[int, int | None]] = {}  # qualname -> the argument counts its changed definitions accept
    operands: dict[str, tuple[str, ...]] = {}  # an operator overload's qualname -> the classes it takes
    loose: list[int] = []
    same_old, same_new = _macro_constants(fc, base_text, head_text) if kind == "cpp" else (set(), set())
    if same_new:
        cs.no_ops.append(ChangedFunction(fc.path, "", "", sorted(same_new), "both", "modified", MACRO_CONSTANT))
    between = _deleted_between(fc, head) if base is not None and head is not None else set()
    for side, facts, lines, text_of in (("base", base, fc.removed - same_old, base_text),
                                        ("head", head, fc.added - same_new - between, head_text)):
        if facts is None:
            continue
        if facts.status == "skipped":  # not parsed (binary, larger than the limit): say so, keep the lines
            note = f"{facts.path}: not indexed ({facts.message})"
            if note not in cs.notes:
                cs.notes.append(note)
                cs.file_level.append((facts.path, sorted(lines)[:20], f"file not indexed: {facts.message}"))
            continue
        if kind == "cpp" and build is not None:
            version = text_of(fc.old_path if side == "base" else fc.new_path)
            lines = compiled_lines(facts.path, version, lines, build, cs)
        funcs = (
            [f for f in facts.functions if f.kind not in _PYTHON_SCOPES] if kind == "python" else facts.functions
        )
        classes = [f for f in facts.functions if f.kind in _PYTHON_SCOPES] if kind == "python" else []
        names = {f.qualname: f.name for f in facts.functions}
        outside: list[int] = []
        hits: list[tuple[str, int]] = []
        for line in sorted(lines):
            f = _innermost(funcs, line) or _innermost(classes, line)
            if f is None:
                outside.append(line)
            else:
                hits.append((f.qualname, line))
                arities[f.qualname] = _widened(arities.get(f.qualname), (f.least_args, f.most_args))
                if kind == "cpp" and f.name.startswith("operator") and f.qualname not in operands:
                    operands[f.qualname] = _operands(text_of(fc.old_path if side == "base" else fc.new_path), f)
        if outside and kind == "cpp":  # a class's fields and head belong to its methods
            text = text_of(fc.old_path if side == "base" else fc.new_path)
            if text:
                inside = len(hits)
                outside = _sort_outside(text, outside, facts, side, hits, cs)
                arities.update((qualname, _UNKNOWN_ARITY) for qualname, _ in hits[inside:])  # no definition's lines
        loose += outside
        for qualname, line in hits:
            key = (facts.path, qualname)
            cf = found.get(key)
            if cf is None:
                status = {"added": "added", "deleted": "deleted"}.get(fc.status, "modified")
                name = names.get(qualname, qualname)  # a prototype's function: named by its declaration
                cf = found[key] = ChangedFunction(facts.path, qualname, name, [], side, status)
            elif cf.side != side:
                cf.side = "both"
            if line not in cf.lines:
                cf.lines.append(line)
    for (_, qualname), cf in found.items():
        cf.arity = arities.get(qualname, _UNKNOWN_ARITY)
        cf.operands = operands.get(qualname, ())
    if base is not None and head is not None:
        base_names = {f.qualname for f in base.functions}
        head_names = {f.qualname for f in head.functions}
        # a function every line of which the change adds: new, even when an overload of the
        # same name was there before (a new sycl_kernel_submit<kptr> is not the old ones)
        whole = _added_whole(head, fc, head_text)
        if whole:  # a diff may take an old closing brace as removed and added again
            base_rows = _rows(base_text, fc.old_path)
            moved = {f.qualname for f in base.functions for line in fc.removed
                     if f.start_line <= line <= f.end_line and not _trivial(base_rows, line)}
            whole -= moved
        spans = {line for f in head.functions if f.qualname in whole for line in range(f.start_line, f.end_line + 1)}
        for cf in found.values():
            new_only = cf.qualname in whole and all(line in spans for line in cf.lines if line in fc.added)
            if (cf.side == "head" and cf.qualname not in base_names) or new_only:
                cf.status = "added"
            elif cf.side == "base" and cf.qualname not in head_names:
                cf.status = "deleted"
    for cf in found.values():  # where a function moved to another file is looked for
        facts = head if cf.status == "added" else base if cf.status == "deleted" else None
        spans = [(f.start_line, f.end_line) for f in facts.functions if f.qualname == cf.qualname] if facts else []
        if len(spans) == 1:
            cs.whole[cf.path, cf.qualname] = (kind, *spans[0])
    if kind == "cpp" and base is not None:
        base_rows = _rows(base_text, fc.old_path)
        _note_base_callers(cs, base, list(found.values()), base_rows)
        classes = {namespace_of(f.qualname) for f in base.functions if f.kind == FunctionKind.METHOD}
        for cf in found.values():
            cf.member = namespace_of(cf.qualname) in classes
            cf.file_local = not cf.member and _file_local(base, base_rows, cf.qualname)
    same = _same_tokens(fc, kind, base, head, base_text, head_text, tokens)
    old_words, new_words = (_function_words(kind, base, base_text, fc.old_path),
                            _function_words(kind, head, head_text, fc.new_path))
    gains = _dispatch_gains(fc, kind, head, old_words, new_words) if head is not None else {}
    arms = kind == "cpp" and base is not None and head is not None and any(
        "is_same" in line.text for h in fc.hunks for line in h.lines if line.kind in "+-")
    for cf in list(found.values()):
        cf.why = (same(cf.qualname) if same is not None else "") or None
        gained = gains.get(cf.qualname, gains.get(None))
        if cf.why is None and gained is not None:
            cf.why = "its " + _gain_why(gained)
        if cf.why is None and arms:
            _note_type_arms(cs, fc, cf, (base, head), (old_words, new_words))
        if cf.why is None and head is not None and fc.path.endswith(_SOURCE_SUFFIXES):
            guarded = _guarded_instantiations(cf, head, old_words, new_words, lambda: _rows(head_text, fc.new_path))
            if guarded is not None:
                cf.why, callers = guarded
                for caller in callers:
                    _add_line(found, cs, ChangedFunction(cf.path, caller.qualname, caller.name, [], "head", "modified"),
                              caller.start_line)
        (cs.no_ops if cf.why else cs.functions).append(cf)
    if loose:
        path = fc.path if fc.new_path else (fc.old_path or "")
        lines = sorted(set(loose))[:20]
        why = (same(None) if same is not None else "") or ("a " + _gain_why(gains[None]) if None in gains else "")
        if why:
            cs.no_ops.append(ChangedFunction(path, "", "", lines, "both", "modified", why))
        else:
            cs.file_level.append((path, lines, "outside any function (globals, macros, includes)"))


_LOCAL_SPECIFIER = re.compile(r"\b(?:static|inline|constexpr|consteval)\b")


def _file_local(base: FileFacts, rows: list[str], qualname: str) -> bool:
    """Whether a function of a source file (not a header) is called from that translation unit
    only: internal linkage (``static``, an anonymous namespace), or ``inline``/``constexpr``
    (defined in every translation unit that uses it, and this file defines it for itself)."""
    if not base.path.endswith(_SOURCE_SUFFIXES):
        return False
    defs = [f for f in base.functions if f.qualname == qualname]
    return bool(defs) and all(f.internal or _LOCAL_SPECIFIER.search(_declarator_head(rows, f)) for f in defs)


def _declarator_head(rows: list[str], func: Function) -> str:
    """A function's text up to its parameter list: its specifiers, return type and name."""
    text = " ".join(rows[func.start_line - 1 : min(func.end_line, len(rows))])
    return text.partition("(")[0]


def _note_base_callers(cs: ChangeSet, base: FileFacts, changed: list[ChangedFunction], rows: list[str]) -> None:
    """For each changed function of a file, the functions of the base version of the file whose
    bodies call it by name (``name(`` or ``name<...>(``): where the walk goes when an index of
    another tree lacks the function and its name (renamed there)."""
    bodies = [(f, "\n".join(rows[f.start_line - 1:min(f.end_line, len(rows))])) for f in base.functions]
    called: dict[int, set[str]] = {}  # a body's called names, read once for the bodies a name is in

    def calls(i: int) -> set[str]:
        if i not in called:
            called[i] = set(_CALLED_NAME.findall(bodies[i][1]))
        return called[i]

    for cf in changed:
        if not cf.name or cf.name.startswith("operator"):
            continue
        own = [f.start_line for f in base.functions if f.qualname == cf.qualname]
        callers = [f.qualname for i, (f, body) in enumerate(bodies) if f.qualname != cf.qualname and cf.name in body
                   and not any(f.start_line <= n <= f.end_line for n in own) and cf.name in calls(i)]
        if callers:
            cs.base_callers[cf.path, cf.qualname] = sorted(set(callers))


def _deleted_between(fc: FileChange, head: FileFacts) -> set[int]:
    """The head lines that stand for a pure deletion (the line it follows) outside every head
    function's body: the deleted lines are the base's, mapped there (whole functions deleted
    after a kept one are not a change to the kept one)."""
    out: set[int] = set()
    for hunk in fc.hunks:
        if hunk.target_length or any(line.kind == "+" for line in hunk.lines):
            continue
        after = max(1, hunk.target_start)
        if not any(f.start_line <= after < f.end_line for f in head.functions):
            out.add(after)
    return out - {line.new_line for h in fc.hunks for line in h.lines if line.kind == "+"}


def _same_tokens(
    fc: FileChange,
    kind: str,
    base: FileFacts | None,
    head: FileFacts | None,
    base_text: TextOf,
    head_text: TextOf,
    tokens: Tokens | None,
) -> Callable[[str | None], str] | None:
    """A test 'has this function (None: the code outside functions) the same tokens in the
    base and head versions, or up to a consistent rename?' giving why ('' when not), or None
    when the file was added, deleted or cannot be tokenized."""
    if base is None or head is None or not fc.old_path or not fc.new_path:
        return None
    old, new = base_text(fc.old_path), head_text(fc.new_path)
    if old is None or new is None:
        return None
    whole_file = not fc.hunks or _maybe_layout_only(fc, kind)
    # beside real changes elsewhere in the file, a function whose own lines read the same
    # (a blank line dropped, a comment reworded) is compared token by token too
    candidates = set() if whole_file else _maybe_layout_only_functions(fc, kind, head)
    rename = None if whole_file else rename_between(*(words(_code_lines(fc, sign, kind)) for sign in "-+"))
    if not whole_file and not candidates and rename is None:
        return None
    tokens = _tokenizer(tokens)
    old_tokens, new_tokens = tokens(kind, fc.old_path, old), tokens(kind, fc.new_path, new)
    if old_tokens is None or new_tokens is None:
        return None
    old_all = [t.text for t in old_tokens.all()]
    renamed = f"{rename.old} renamed to {rename.new} at every use" if rename is not None else ""
    if rename is not None and rename_between(old_all, [t.text for t in new_tokens.all()]) == rename \
            and declares(old_all, rename.old):
        return lambda _name: renamed  # one name renamed at its declaration and every use in the file

    def extents(facts: FileFacts, name: str) -> list[tuple[int, int]]:
        return [(f.start_line, f.end_line) for f in facts.functions if f.qualname == name]

    def renamed_within(name: str) -> bool:
        """The function renames a name it declares, everywhere it uses it, to a name new to the file."""
        a, b = extents(base, name), extents(head, name)
        if rename is None or len(a) != 1 or len(b) != 1:
            return False
        return scoped_rename(old_tokens.within(*a[0]), new_tokens.within(*b[0])) == rename and rename.new not in old_all

    def same(name: str | None) -> str:
        if name is not None and name not in candidates and renamed_within(name):
            return renamed
        return LAYOUT_ONLY if same_tokens(name) else ""

    def same_tokens(name: str | None) -> bool:
        if not whole_file and name not in candidates:
            return False
        if name is None:
            return old_tokens.outside(extents_all(base)) == new_tokens.outside(extents_all(head))
        a, b = extents(base, name), extents(head, name)
        if not a or len(a) != len(b):
            return False
        return all(old_tokens.within(*x) == new_tokens.within(*y) for x, y in zip(a, b, strict=True))

    return same


_COMMENTS = {
    "cpp": re.compile(r"//[^\n]*|/\*.*?(\*/|$)|^[^\n]*?\*/", re.DOTALL | re.MULTILINE),
    "python": re.compile(r"#[^\n]*"),
}


def _layout_only(fc: FileChange, base_text: TextOf, head_text: TextOf, tokens: Tokens | None) -> bool:
    """A Python file whose change leaves its code tokens as they were (comments, blank lines)."""
    if not (fc.old_path and fc.new_path and fc.hunks and _maybe_layout_only(fc, "python")):
        return False
    old, new = base_text(fc.old_path), head_text(fc.new_path)
    if old is None or new is None:
        return False
    tokens = _tokenizer(tokens)
    old_tokens, new_tokens = tokens("python", fc.old_path, old), tokens("python", fc.new_path, new)
    return old_tokens is not None and new_tokens is not None and [t.text for t in old_tokens.all()] == [
        t.text for t in new_tokens.all()
    ]


def _tokenizer(tokens: Tokens | None) -> Tokens:
    if tokens is not None:
        return tokens
    from indexer.api import code_tokens  # libclang's lexer: only for a change that may be layout only

    return code_tokens


def _maybe_layout_only(fc: FileChange, kind: str) -> bool:
    """A cheap first look: do the removed and added lines, without comments and whitespace,
    read the same? Only then are both versions tokenized (most changes change code)."""

    def lines(sign: str) -> list[str]:
        return [line.text for h in fc.hunks for line in h.lines if line.kind == sign]

    return _code_words(lines("-"), kind) == _code_words(lines("+"), kind)


def _code_lines(fc: FileChange, sign: str, kind: str) -> list[str]:
    """The removed (``-``) or added (``+``) lines of ``fc`` without comments."""
    return _COMMENTS[kind].sub(" ", "\n".join(line.text for h in fc.hunks for line in h.lines
                                              if line.kind == sign)).split("\n")


def _gain_why(gained: tuple[str, ...]) -> str:
    """Why a dispatch list's change is a no-op (after "its" or "a")."""
    if not gained:
        return "AT_DISPATCH type list is written another way (AT_DISPATCH_V2) with the same dtypes: the same code runs"
    return (f"AT_DISPATCH type list only gains {', '.join(gained)}: the existing dtypes run the same code; "
            "the new dtypes are new code with no benchmark")


def _function_words(
    kind: str, facts: FileFacts | None, text_of: TextOf, path: str | None
) -> Callable[[str], list[str] | None]:
    """The code words of one version's function of a name (None: not exactly one definition)."""
    rows = _rows(text_of, path) if facts is not None else []

    @functools.cache  # asked by the dispatch-list and the constexpr-guard checks alike
    def of(name: str) -> list[str] | None:
        spans = [(f.start_line, f.end_line) for f in facts.functions if f.qualname == name] if facts else []
        if len(spans) != 1 or not rows:
            return None
        return words(_COMMENTS[kind].sub(" ", "\n".join(rows[spans[0][0] - 1 : spans[0][1]])).split("\n"))

    return of


def _dispatch_gains(
    fc: FileChange, kind: str, head: FileFacts,
    old_words: Callable[[str], list[str] | None], new_words: Callable[[str], list[str] | None],
) -> dict[str | None, tuple[str, ...]]:
    """Functions of the head whose only change is ``AT_DISPATCH_*`` type lists that gain
    dtypes, with the dtypes they gain (under None when that holds for the whole file's change).
    A function whose changed lines alone do not tell (a list moved to ``AT_DISPATCH_V2`` around
    unchanged lines) is compared whole."""
    if kind != "cpp" or not any("AT_DISPATCH_" in line.text or "AT_EXPAND(" in line.text
                                for h in fc.hunks for line in h.lines):
        return {}
    out: dict[str | None, tuple[str, ...]] = {}
    whole = dispatch_gain(*(words(_code_lines(fc, sign, kind)) for sign in "-+"))
    if whole is not None:  # every changed line (a macro's list too) only gains dtypes
        out[None] = whole.dtypes
    for name, sides in _hunk_lines_by_function(fc, head).items():
        old, new = ([_COMMENTS[kind].sub(" ", x) for x in sides[sign]] for sign in "-+")
        gain = dispatch_gain(words(old), words(new))
        if gain is None and name is not None:
            before, after = old_words(name), new_words(name)
            gain = dispatch_gain(before, after) if before and after else None
        if gain is not None:
            out[name] = gain.dtypes
    return out


def _code_words(lines: list[str], kind: str) -> str:
    """``lines`` without comments and whitespace: what the cheap first looks compare."""
    return "".join(_COMMENTS[kind].sub(" ", "\n".join(lines)).split())


def _maybe_layout_only_functions(fc: FileChange, kind: str, head: FileFacts) -> set[str]:
    """Functions of the head whose removed and added lines (a removed line counted where it
    sat, before a head line), without comments and whitespace, read the same: the cheap first
    look of ``_maybe_layout_only``, per function. The tokens of both versions decide."""
    text = _hunk_lines_by_function(fc, head)
    return {name for name, sides in text.items() if _code_words(sides["-"], kind) == _code_words(sides["+"], kind)}


def _hunk_lines_by_function(fc: FileChange, head: FileFacts) -> dict[str, dict[str, list[str]]]:
    """The removed and added lines of ``fc`` by the head function holding them (a removed line
    counted where it sat, before a head line)."""
    starts = sorted((f.start_line, f.end_line, f.qualname) for f in head.functions)
    firsts = [start for start, _, _ in starts]
    text: dict[str, dict[str, list[str]]] = {}
    for line in (line for h in fc.hunks for line in h.lines if line.kind in "+-"):
        i = bisect.bisect_right(firsts, line.new_line)
        # the innermost function holding it: the last to start before it that ends after it
        owner = next((name for _, end, name in reversed(starts[:i]) if end >= line.new_line), None)
        if owner is not None:
            text.setdefault(owner, {"+": [], "-": []})[line.kind].append(line.text)
    return text


def extents_all(facts: FileFacts) -> list[tuple[int, int]]:
    return [(f.start_line, f.end_line) for f in facts.functions]
