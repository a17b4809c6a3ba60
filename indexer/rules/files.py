"""Files, their functions and includes: a row per file and per function (node id == function
id: the C++ functions first, the Python ones after the nodes the native phases made, so none
moves), and each include resolved to an indexed file by path suffix."""

from __future__ import annotations

import functools
import json
from collections import defaultdict

from indexer.facts import FileFacts, Function, registration_signature, structure_signature, usings_of
from indexer.link_cpp import call_names
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule
from schema.model import CallRow, FileRow, FileStatus, FunctionRow, IncludeRow, Lang, NodeKind, row_tuple
from schema.patch_store import PatchStore

_PYTHON_FILE = Lang.PYTHON


def _file_rows(
    ctx: LinkContext, files: list[FileFacts], first_file: int, first_function: int
) -> tuple[list, list[int]]:
    """Add the files rows (and warnings) of ``files``, numbered from ``first_file``; return their
    function rows, numbered from ``first_function``, and each file's first function id."""
    out, warnings = ctx.out(FileRow), ctx.tables.warnings
    func_rows: list[tuple] = []
    fid_base: list[int] = []
    for file_id, f in enumerate(files, first_file):
        out.append(
            (
                file_id,
                f.path,
                f.sha256,
                f.lang,
                f.n_lines,
                f.status,
                f.message or None,
                structure_signature(f),
                registration_signature(f),
                json.dumps(usings_of(f)),
                f.origin,
            )
        )
        if f.status != FileStatus.OK:
            warnings.append((f.path, "extract", f.message))
        fid_base.append(first_function + len(func_rows))
        for fn in f.functions:
            gid = first_function + len(func_rows)
            func_rows.append(
                (gid, file_id, fn.qualname, fn.name, fn.kind, fn.start_line, fn.end_line, fn.internal, fn.usr,
                 fn.least_args, fn.most_args)
            )
    return func_rows, fid_base


def declare_native(ctx: LinkContext) -> None:
    """The C++ files and functions (a node per function), and their includes."""
    ctx.func_rows, ctx.fid_base = _file_rows(ctx, ctx.files, 0, 0)
    ctx.set_rows(FunctionRow, ctx.func_rows)
    for gid, _, qualname, *_ in ctx.func_rows:  # node id == function id
        ctx.graph.node(NodeKind.FUNCTION, str(gid), qualname)
    ctx.include_map = _link_includes(ctx)


def _link_includes(ctx: LinkContext) -> dict[int, list[int]]:
    """The includes, resolved to indexed files by path suffix (ATen/native/cpu/Loops.h);
    returns file -> the indexed files it includes."""
    files, out = ctx.files, ctx.out(IncludeRow)
    by_suffix: dict[str, list[int]] = defaultdict(list)
    for file_id, f in enumerate(files):
        parts = f.path.split("/")
        for i in range(len(parts)):
            by_suffix["/".join(parts[i:])].append(file_id)
    include_map: dict[int, list[int]] = defaultdict(list)
    for file_id, f in enumerate(files):
        if f.lang != _PYTHON_FILE:
            for target in f.includes:
                if not target.startswith("using:"):
                    found = by_suffix.get(target, [])
                    out.append((file_id, target, found[0] if len(found) == 1 else None))
                    if len(found) == 1:
                        include_map[file_id].append(found[0])
    return include_map


def add_python(ctx: LinkContext) -> None:
    """The Python files' rows, and their functions' rows and nodes, numbered from the first
    free node id (node id == function id, with no renumbering of the native nodes and edges)."""
    graph = ctx.graph
    ctx.all_files = files = [*ctx.files, *ctx.python_files]
    ctx.py_first = len(graph.node_ids)
    ctx.py_rows, py_base = _file_rows(ctx, ctx.python_files, len(ctx.files), ctx.py_first)
    for gid, _, qualname, *_ in ctx.py_rows:
        if graph.node(NodeKind.PYFUNCTION, str(gid), qualname) != gid:
            raise AssertionError("Python functions must be numbered from the first free node id")
    ctx.func_rows, ctx.fid_base = ctx.func_rows + ctx.py_rows, ctx.fid_base + py_base
    ctx.set_rows(FunctionRow, ctx.func_rows)
    ctx.py_by_qual = {
        qualname: gid for gid, file_id, qualname, *_ in ctx.py_rows if files[file_id].lang == _PYTHON_FILE
    }


def place_functions(ctx: PatchContext) -> None:
    """Give the changed files' functions their ids: those still there keep theirs, removed ones
    are dropped (with everything that refers to them), new ones get fresh ids."""
    ctx.ids, ctx.fresh_ids, ctx.extents, ctx.fresh = {}, {}, {}, []
    for file_id, (facts, structural) in ctx.changed.items():
        old = ctx.store.rows("file_functions", file_id=file_id)
        kept, gone = _same_functions([r[:8] for r in old], facts.functions) if structural else ([r[0] for r in old], [])
        edges, nodes = ctx.store.drop_functions(gone)
        ctx.graph.removed += edges
        ctx.graph.dropped += nodes
        staying = set(kept)
        ctx.extents[file_id] = {r[0]: (r[8], r[9]) for r in old if r[0] in staying}
        start = ctx.store.value("next_function_id") if -1 in kept else 0
        numbered = iter(range(start, start + kept.count(-1)))
        ctx.ids[file_id] = ids = [i if i >= 0 else next(numbered) for i in kept]
        added = [(fid, f) for fid, f, i in zip(ids, facts.functions, kept, strict=True) if i < 0]
        ctx.insert(FunctionRow, [row_tuple(FunctionRow(i, file_id, f.qualname, f.name, f.kind, f.start_line,
                                                       f.end_line, f.internal, f.usr, f.least_args, f.most_args))
                                 for i, f in added])
        ctx.fresh_ids[file_id] = [fid for fid, _ in added]
        ctx.fresh += added


def _key(f: Function) -> tuple:
    """What tells an indexed function and a file's new facts of it apart (``file_functions``'s
    columns after the id): a changed argument count is another function for the calls of its name."""
    return (f.qualname, f.name, f.kind, f.internal, f.usr, f.least_args, f.most_args)


def _same_functions(old: list[tuple], functions: list[Function]) -> tuple[list[int], list[int]]:
    """Per function of a file's new facts, the id of the indexed function it is (same
    qualified name, name, kind, internal linkage and USR, taken in order), or -1 for a new
    one; and the ids of the indexed functions that are gone. Every function is new when one
    still there shares a name calls reach it by with one added or gone (the candidates of
    those calls change, and the first is the lowest id, as in a full link)."""
    by_key: dict[tuple, list[int]] = {}
    for fid, *key in old:
        by_key.setdefault(tuple(key), []).append(fid)
    ids = [by_key[key].pop(0) if by_key.get(key := _key(f)) else -1 for f in functions]
    gone = sorted(fid for fids in by_key.values() for fid in fids)
    kept, gone_ids = set(ids) - {-1}, set(gone)
    changed_names = {n for f, i in zip(functions, ids, strict=True) if i < 0 for n in call_names(f.name, f.qualname)}
    changed_names |= {n for fid, qualname, name, *_ in old if fid in gone_ids for n in call_names(name, qualname)}
    if any(call_names(name, qualname) & changed_names for fid, qualname, name, *_ in old if fid in kept):
        return [-1] * len(functions), [r[0] for r in old]
    return ids, gone


def read_linker_functions(ctx: PatchContext) -> None:
    """The functions the C++ linker needs: those of the names the changed files call (functors:
    by operator()), of the names calls reach the new functions by, those of the changed files,
    and the functions calling a new function's name (their calls are resolved again)."""
    added_names = {n for _, f in ctx.fresh for n in call_names(f.name, f.qualname)}
    names = {c.callee_name for facts, _ in ctx.changed.values() for c in facts.calls} | {"operator()"}
    ctx.linker_rows = ctx.store.rows(
        "linker_functions",
        names=sorted(names | added_names),
        file_ids=list(ctx.changed),
        callers_of=sorted(added_names),
    )
    ctx.include_graph = functools.partial(_include_graph, ctx.store)


def _include_graph(store: PatchStore) -> dict[int, list[int]]:
    """file id -> the indexed files it includes (those resolved to one)."""
    out: dict[int, list[int]] = {}
    for file_id, target in store.rows("includes"):
        out.setdefault(file_id, []).append(target)
    return out


def record_files(ctx: PatchContext) -> None:
    """The changed files' rows, and the new extents of their functions that only moved."""
    for file_id, (facts, _) in ctx.changed.items():
        extents = ctx.extents[file_id]
        lines = {fid: (f.start_line, f.end_line) for fid, f in zip(ctx.ids[file_id], facts.functions, strict=True)}
        moved = [fid for fid in extents if extents[fid] != lines[fid]]
        if moved:
            ctx.write(FunctionRow, "move_functions", ids=moved, starts=[lines[fid][0] for fid in moved],
                      ends=[lines[fid][1] for fid in moved])
    for file_id, (facts, _) in ctx.changed.items():
        ctx.write(FileRow, "update_file", id=file_id, sha256=facts.sha256, n_lines=facts.n_lines,
                  signature=structure_signature(facts), usings=json.dumps(list(usings_of(facts))))


RULE = Rule(
    "files",
    writes=(FileRow, FunctionRow, IncludeRow),
    reads=(CallRow,),
    link={Phase.DECLARE: declare_native, Phase.PYTHON: add_python},
    patch={
        PatchPhase.PLACE: place_functions,
        PatchPhase.PREPARE: read_linker_functions,
        PatchPhase.RECORD: record_files,
    },
    place=10,
)
