"""Files, their functions and includes: a row per file and per function (node id == function
id: the C++ functions first, the Python ones after the nodes the native phases made, so none
moves), and each include resolved to an indexed file by path suffix."""

from __future__ import annotations

import json
from collections import defaultdict

from indexer.facts import FileFacts, registration_signature, structure_signature, usings_of
from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import FileRow, FileStatus, FunctionRow, IncludeRow, Lang, NodeKind

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
                (gid, file_id, fn.qualname, fn.name, fn.kind, fn.start_line, fn.end_line, fn.internal, fn.usr)
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


RULE = Rule(
    "files",
    writes=(FileRow, FunctionRow, IncludeRow),
    reads=(),
    link={Phase.DECLARE: declare_native, Phase.PYTHON: add_python},
)
