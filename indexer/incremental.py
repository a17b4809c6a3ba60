"""Patching an index in place for edits of a few C++ files (the common change).

When only C++ files changed and their stubs and registrations did not (same registration
signature), the patch copies the index, links the changed files' calls again, gives new
functions fresh ids and resolves the edges into them, drops removed ones, patches the
packed graph, and swaps the copy in atomically. Any other change (added or removed
files, Python, benchmarks, yaml, config) falls back to a full link from the facts cache.
Its SQL is schema/patch_store.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from indexer.build_spec import BuildSpec, BuildState
from indexer.devices import device_of_key, ops_of_stubs
from indexer.extract import file_facts, read_source
from indexer.facts import Call, FileFacts, Function, registration_signature, structure_signature, usings_of
from indexer.link_cpp import ClassHierarchy, CppCallLinker, LinkedCalls, call_names
from indexer.registrations import LAMBDA_KERNEL
from indexer.trace import any_installed
from schema.engine import duckdb
from schema.graph_file import write_graph_file
from schema.index_store import IndexStore
from schema.model import CallKind, EdgeKind, FileStatus, NodeKind
from schema.packed_graph import Edge, GraphDelta, StaleGraph, patch_packed
from schema.patch_store import CALLER_AT, LINKED_TABLES, NotAnIndex, PatchStore
from schema.version import SCHEMA_VERSION
from schema.writer import CopyInProgress, UnreadableIndex, index_tables, replacing, write_graph

MAX_PATCHED_FILES = 25


class Patched(NamedTuple):
    """What a patch did: files re-parsed, phase timings, and the patched index's rows per
    table and skipped files (read on the patch's own connection)."""

    reparsed: int
    timings: dict[str, float]
    counts: dict[str, int]
    skipped: list[tuple[str, str]]


class _Unpatchable(Exception):
    """The change needs a full re-link."""


def patch_index(spec: BuildSpec, state: BuildState, copy: CopyInProgress) -> Patched | None:
    """The build's patch pass: patch ``spec.db_path`` for the files changed since it was built (the
    files and digests of ``state``, found by the discover and hash passes), or None when a full
    build is needed. One connection, to ``copy`` (the copy of the index the build started, which
    replaces it), both checks and patches."""
    repo, db_path, discovered, digests = spec.repo, spec.db_path, state.files, state.digests
    meta = {**state.inputs, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    timings: dict[str, float] = {}
    started = time.perf_counter()
    graph: list[tuple[str, bytes]] = []
    try:
        with replacing(db_path, copy) as con:
            patch = PatchStore(con)
            files, changed = _changed_files(patch, discovered, digests, meta)
            t0 = time.perf_counter()
            new_facts = {files[p][0]: _reparsed(repo, p, files[p]) for p in changed}
            timings["extract"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            store = IndexStore(con, db_path)
            _hold_old_graph(store)
            changes = _apply(patch, new_facts, {**meta, "reparsed_files": str(len(changed))})
            if changes:
                graph, token = _repack_graph(store, patch, changes)
            counts, skipped = store.table_counts(index_tables()), store.skipped_files()
    except (_Unpatchable, UnreadableIndex, NotAnIndex, duckdb.CatalogException, duckdb.BinderException):
        return None  # (a table or column missing under the same schema version: re-linked whole)
    if graph:
        write_graph_file(db_path, graph, token)
    timings["link"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - started
    return Patched(len(changed), timings, counts, skipped)


def _changed_files(
    patch: PatchStore, discovered: dict[str, list[str]], digests: dict[str, str | None], meta: dict[str, str]
) -> tuple[dict[str, tuple], list[str]]:
    """The index's repo files (path -> id, digest, structure and registration signatures) and
    those whose content changed; _Unpatchable unless only a few C++ files did."""
    old_meta, files, benches = patch.indexed_state()
    if old_meta.get("schema_version") != str(SCHEMA_VERSION):
        raise _Unpatchable
    relinks = ("config", "source_sha:", "canaries", "upstream", "tracer")
    if any(old_meta.get(k) != v for k, v in meta.items() if k.startswith(relinks)):
        raise _Unpatchable
    if "tracer" in meta and any_installed(old_meta.get("trace_missing_modules", "").split(",")):
        raise _Unpatchable  # a trace failed for want of a module that is installed now: trace it again
    if set(discovered["cpp"]) | set(discovered["python"]) != set(files) or set(discovered["benchmark"]) != set(benches):
        raise _Unpatchable
    if any(digests[p] != benches[p] for p in discovered["benchmark"]):
        raise _Unpatchable
    changed = [p for p in files if digests[p] != files[p][1]]
    if len(changed) > MAX_PATCHED_FILES or any(p.endswith(".py") for p in changed):
        raise _Unpatchable
    return files, changed


def _reparsed(repo: Path, path: str, indexed: tuple) -> tuple[FileFacts, bool]:
    """The facts of a changed C++ file and whether its functions changed (``indexed``: its
    row of _changed_files); _Unpatchable when its stubs or registrations changed, or it is gone."""
    try:
        data, sha = read_source(str(repo), path)
    except OSError:  # removed or unreadable since it was listed: the re-link says so
        raise _Unpatchable from None
    facts = file_facts("cpp", path, data, sha=sha)
    if not isinstance(facts, FileFacts) or facts.status != FileStatus.OK or registration_signature(facts) != indexed[3]:
        raise _Unpatchable
    if any(li.kernel_name == LAMBDA_KERNEL for li in facts.library_impls):
        raise _Unpatchable  # the functions its registered lambdas call are linked by the full link
    return facts, structure_signature(facts) != indexed[2]


class _GraphChanges(NamedTuple):
    """What a patch changed in the nodes and reach_edges tables (GraphDelta, less what the
    tables hold afterwards)."""

    removed: list[Edge]
    added: list[Edge]
    dropped_nodes: list[tuple[int, str]]  # (id, kind)
    new_nodes: list[tuple[int, str, str]]  # (id, kind, key)
    n_nodes: int


def _apply(
    patch: PatchStore, changed: dict[int, tuple[FileFacts, bool]], meta: dict[str, str]
) -> _GraphChanges | None:
    """Replace what the changed files contribute. A function that is still there keeps its id
    (its calls are linked again); a new one gets a fresh id, and the edges into it from other
    files, kernels, stubs and library registrations are resolved; a removed one goes with
    everything that refers to it. Returns what changed in the reachability graph, or None when
    nothing did (a body edit that calls the same things)."""
    ids: dict[int, list[int]] = {}  # file -> its functions' ids, in the order of its facts
    new_ids: dict[int, list[int]] = {}  # file -> the fresh ones
    extents: dict[int, dict[int, tuple[int, int]]] = {}  # file -> indexed extents of those that stay
    fresh: list[tuple[int, Function]] = []
    removed: list[Edge] = []
    dropped: list[tuple[int, str]] = []
    for file_id, (facts, structural) in changed.items():
        ids[file_id], added, edges, nodes, extents[file_id] = _place_functions(patch, file_id, facts, structural)
        new_ids[file_id] = [fid for fid, _ in added]
        fresh += added
        removed += edges
        dropped += nodes
    body_only = not fresh and not dropped
    fresh_nodes = [(fid, NodeKind.FUNCTION, str(fid)) for fid, _ in fresh]
    added_names = {n for _, f in fresh for n in call_names(f.name, f.qualname)}  # calls reach them by

    # the linker needs every function of the names that resolve anything here: those the changed
    # files call (functors: by operator()); for fresh functions also the names calls reach them by,
    # and the functions that make such calls (_edges_into resolves them again)
    names = {c.callee_name for facts, _ in changed.values() for c in facts.calls} | {"operator()"}
    functions = patch.linker_functions(names | added_names, changed, added_names)
    nodes = patch.op_and_stub_nodes()
    next_node = [patch.next_node_id()]
    new_nodes: list[tuple] = []

    def node_of(kind: NodeKind, key: str) -> int:
        nid = nodes.get((kind, key))
        if nid is None:
            nid = nodes[(kind, key)] = next_node[0]
            next_node[0] += 1
            new_nodes.append((nid, kind, key, key))
        return nid

    classes = patch.class_hierarchy()  # unchanged: a change of it is re-linked (registration_signature)
    paths = patch.paths(sorted({row[1] for row in functions} | set(changed) | {row[0] for row in classes}))
    linker = CppCallLinker(
        functions, patch.aten_ops(), patch.stub_names(), node_of, paths, patch.include_graph, ClassHierarchy(classes)
    )
    reach: list[tuple] = []
    for file_id, (facts, _) in changed.items():
        lines = {fid: (f.start_line, f.end_line) for fid, f in zip(ids[file_id], facts.functions, strict=True)}
        linked, unlinked = _relinked(
            patch, linker.link_file(file_id, ids[file_id], facts.calls, usings_of(facts)), extents[file_id], lines
        )
        removed += unlinked
        patch.insert("calls", linked.calls)
        patch.insert("call_edges", linked.call_edges)
        patch.insert("op_calls", linked.op_calls)
        reach += linked.reach
    for file_id, file_fresh in new_ids.items():
        if file_fresh:
            reach += _edges_into(patch, linker, file_id, file_fresh, node_of)
    unique = _each_once(reach)
    patch.insert("nodes", new_nodes)
    patch.insert("reach_edges", unique)
    for file_id, (facts, _) in changed.items():
        patch.update_file(file_id, facts.sha256, facts.n_lines, structure_signature(facts), usings_of(facts))
    patch.update_meta({**meta, "patched": json.dumps(sorted(changed))})
    if body_only and not new_nodes and sorted(removed) == sorted(unique):
        return None
    return _GraphChanges(removed, unique, dropped, fresh_nodes + [n[:3] for n in new_nodes], next_node[0])


def _place_functions(
    patch: PatchStore, file_id: int, facts: FileFacts, structural: bool
) -> tuple[list[int], list[tuple[int, Function]], list[Edge], list[tuple[int, str]], dict[int, tuple[int, int]]]:
    """Give a changed file's functions their ids: those still there keep theirs, removed ones
    are dropped, new ones get fresh ids. Returns the ids in the order of its facts, the new
    functions (fresh id, facts), the reachability edges and nodes (id, kind) removed, and the
    indexed extents (start, end) of the functions that stay, by id."""
    old = patch.file_functions(file_id)
    kept, gone = _same_functions([r[:6] for r in old], facts.functions) if structural else ([r[0] for r in old], [])
    edges, nodes = patch.drop_functions(gone)
    staying = set(kept)
    extents = {r[0]: (r[6], r[7]) for r in old if r[0] in staying}
    start = patch.next_function_id() if -1 in kept else 0
    fresh = list(range(start, start + kept.count(-1)))
    numbered = iter(fresh)
    ids = [i if i >= 0 else next(numbered) for i in kept]
    added = [(fid, f) for fid, f, i in zip(ids, facts.functions, kept, strict=True) if i < 0]
    patch.add_functions(file_id, added)
    return ids, added, edges, nodes, extents


def _relinked(
    patch: PatchStore, linked: LinkedCalls, extents: dict[int, tuple[int, int]], lines: dict[int, tuple[int, int]]
) -> tuple[LinkedCalls, list[Edge]]:
    """The rows of ``linked`` (a changed file's calls, linked again) that the index lacks: those
    of new functions and of functions whose rows differ from the indexed ones, whose indexed
    rows are removed (returned: the reachability edges removed). A function that stays as it
    was keeps its rows; one that only moved gets its new extent (``extents``: the indexed
    extents of the functions that stay, ``lines``: the new ones, by id)."""
    reach = _each_once(linked.reach)  # as the index holds them
    new = dict(zip(LINKED_TABLES, (linked.calls, linked.call_edges, linked.op_calls, reach), strict=True))
    old = patch.linked_rows(list(extents))
    changed = {
        fid
        for table in LINKED_TABLES
        for fid, _ in _by_caller(table, new[table]).items() ^ _by_caller(table, old[table]).items()
        if fid in extents
    }
    if _runs_inside_device_kernels(patch, sorted(changed)):
        raise _Unpatchable  # what the link inferred those kernels to run is inferred again
    removed = patch.unlink_calls(sorted(changed))
    moved = [fid for fid in extents if extents[fid] != lines[fid]]
    patch.move_functions(moved, [lines[fid] for fid in moved])
    rows = [
        [row for row in new[table] if row[CALLER_AT[table]] not in extents or row[CALLER_AT[table]] in changed]
        for table in LINKED_TABLES
    ]
    return LinkedCalls(*rows), removed


def _runs_inside_device_kernels(patch: PatchStore, changed: list[int]) -> bool:
    """Do functions ``changed`` belong to a device's kernel or DispatchStub impl (are one, or
    called by one) for an operator that traced tests of that device (traced on the CPU) run?
    The link inferred from those kernels' calls what such tests run."""
    impls = patch.stub_impls_around(changed)
    served = ops_of_stubs(*patch.stub_links(sorted({stub for stub, _ in impls})))
    kernels = patch.kernels_around(changed) + [(arch, op) for stub, arch in impls for op, _ in served.get(stub, ())]
    around = {(device_of_key(key), op.split(".")[0]) for key, op in kernels}
    around = {(family, base) for family, base in around if family not in ("", "cpu")}
    if not around:
        return False
    running = patch.devices_running(sorted({base for _, base in around}))
    return any((device_of_key(device), base) in around for device, base in running)


def _each_once(edges: list[tuple]) -> list[tuple]:
    """Reachability ``edges`` as the index holds them: no loop, the first of each (dst, src)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for edge in edges:
        if edge[0] != edge[1] and edge[:2] not in seen:
            seen.add(edge[:2])
            out.append(edge)
    return out


def _by_caller(table: str, rows: list[tuple]) -> dict[int, tuple]:
    """``rows`` of ``table`` by their caller, each caller's sorted."""
    out: dict[int, list[tuple]] = {}
    for row in rows:
        out.setdefault(row[CALLER_AT[table]], []).append(row)
    return {fid: tuple(sorted(group)) for fid, group in out.items()}


def _same_functions(old: list[tuple], functions: list[Function]) -> tuple[list[int], list[int]]:
    """Per function of a file's new facts, the id of the indexed function it is (same
    qualified name, name, kind, internal linkage and USR, taken in order), or -1 for a new
    one; and the ids of the indexed functions that are gone. Every function is new when one
    still there shares a name calls reach it by with one added or gone (the candidates of
    those calls change, and the first is the lowest id, as in a full link)."""
    by_key: dict[tuple, list[int]] = {}
    for fid, *key in old:
        by_key.setdefault(tuple(key), []).append(fid)
    ids = [by_key[key].pop(0) if by_key.get(key := (f.qualname, f.name, f.kind, f.internal, f.usr)) else -1
           for f in functions]
    gone = sorted(fid for fids in by_key.values() for fid in fids)
    kept, gone_ids = set(ids) - {-1}, set(gone)
    changed_names = {n for f, i in zip(functions, ids, strict=True) if i < 0 for n in call_names(f.name, f.qualname)}
    changed_names |= {n for fid, qualname, name, *_ in old if fid in gone_ids for n in call_names(name, qualname)}
    if any(call_names(name, qualname) & changed_names for fid, qualname, name, *_ in old if fid in kept):
        return [-1] * len(functions), [r[0] for r in old]
    return ids, gone


def _edges_into(
    patch: PatchStore, linker: CppCallLinker, file_id: int, fresh: list[int], node_of: Callable[[NodeKind, str], int]
) -> list[tuple]:
    """Edges into the fresh functions of a file: calls from other files, dispatch kernels,
    meta functions, stub registrations and library registrations (the link's rules)."""
    mine = set(fresh)
    names = sorted({name for f in fresh for name in linker.call_names(f)})
    reach: list[tuple] = []
    call_edges: list[tuple] = []
    linked: set[tuple[int, int]] = set()
    for caller, name, qual, kind, line, caller_file, usings in patch.calls_named(names, file_id):
        call = Call(0, name, qual, kind, line)
        for callee, edge_kind in linker.function_targets(caller_file, caller, call, tuple(json.loads(usings))):
            for target in [callee, *linker.invoked(callee)]:  # a functor's construction reaches its operator()
                if target in mine and (caller, target) not in linked:
                    linked.add((caller, target))
                    call_edges.append((caller, target, edge_kind, line))
                    virtual = target == callee and edge_kind == CallKind.VIRTUAL
                    reach.append(linker.reach_edge(target, caller, virtual, line))
    patch.insert("call_edges", call_edges)
    resolved: list[tuple] = []
    for op, key, kernel in patch.kernels():
        name = kernel.split("::")[-1]
        if name not in names:
            continue
        targets = linker.kernel_targets(kernel)
        resolved.append((targets[0] if targets else None, op, key, kernel))
        reach += [(f, node_of(NodeKind.OP, op), EdgeKind.KERNEL, key) for f in targets if f in mine]
    metas = [f for f in fresh if linker.rows[f][2] == "structured_meta"]
    if metas:
        for op, base, overload in patch.ops():
            for f in metas:
                if linker.name_of[f] in (base, f"{base}_{overload}"):
                    reach.append((f, node_of(NodeKind.OP, op), EdgeKind.META, "TORCH_META_FUNC"))
    patch.set_function_ids("kernels", ("op", "dispatch_key", "kernel_name"), resolved)
    resolved = []
    for stub, arch, impl, impl_file, line in patch.stub_impls():
        name = impl.split("::")[-1]
        if name not in names:
            continue
        targets = linker.registered_targets(impl, impl_file)
        resolved.append((targets[0] if targets else None, stub, arch, impl_file, line))
        reach += [(f, node_of(NodeKind.STUB, stub), EdgeKind.REGISTERED, arch) for f in targets if f in mine]
    patch.set_function_ids("stub_impls", ("stub", "arch", "file_id", "line"), resolved)
    resolved = []
    for namespace, key, op, kernel, lib_file, line in patch.library_impls():
        name = kernel.split("::")[-1]
        if name not in names:
            continue
        cands = linker.library_targets(kernel, lib_file)
        resolved.append((cands[0] if cands else None, lib_file, line, op))
        op_names = linker.library_ops(namespace, op)
        reach += [
            (f, node_of(NodeKind.OP, o), EdgeKind.LIBRARY_IMPL, key or "CatchAll")
            for f in cands
            if f in mine
            for o in op_names
        ]
    patch.set_function_ids("library_impls", ("file_id", "line", "op"), resolved)
    return reach


def _hold_old_graph(store: IndexStore) -> None:
    """Have ``store`` hold the packed graph as it is before the patch: the file beside the index
    (mapped; its names decoded only if the graph changes) or the graph table, or, when neither
    has it, the one packed from the tables now, before they change. _Unpatchable when damaged."""
    try:
        store.graph()
    except (KeyError, ValueError, TypeError):
        raise _Unpatchable from None


def _repack_graph(
    store: IndexStore, patch: PatchStore, changes: _GraphChanges
) -> tuple[list[tuple[str, bytes]], str]:
    """The packed graph of the patched tables, patched from the one the index held (``store``
    holds it: _hold_old_graph), written with its token; returns its rows and token.
    _Unpatchable when the old one is unreadable or does not hold the edges removed."""
    try:
        old = store.graph()
        delta = GraphDelta(
            changes.removed,
            changes.added,
            [nid for nid, _ in changes.dropped_nodes],
            changes.new_nodes,
            changes.n_nodes,
            _names_in_use(patch, old.node_kinds, "nodes", "kind", changes.dropped_nodes, changes.new_nodes),
            _names_in_use(patch, old.edge_kinds, "reach_edges", "kind", changes.removed, changes.added, 2),
            _names_in_use(patch, old.details, "reach_edges", "detail", changes.removed, changes.added, 3),
        )
        rows = patch_packed(old, delta)
    except (StaleGraph, KeyError, ValueError, TypeError, IndexError):  # a damaged graph: the re-link writes one
        raise _Unpatchable from None
    return rows, write_graph(store.con, rows, in_table=False)


def _names_in_use(
    patch: PatchStore, old: list[str], table: str, column: str, removed: list[tuple], added: list[tuple], at: int = 1
) -> list[str]:
    """The sorted distinct values of ``table.column`` after a patch: the ``old`` ones, less
    those only ``removed`` rows held that no row holds any more, plus those of the ``added``
    rows (``at``: the value's place in a row)."""
    new = {row[at] for row in added}
    gone = {row[at] for row in removed} - new
    gone -= patch.values_in_use(table, column, gone) if gone else set()
    if not gone and new <= set(old):
        return old
    return sorted((set(old) - gone) | new)
