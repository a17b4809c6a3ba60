"""Patching an index in place for edits of a few C++ files (the common change).

When only C++ files changed and their stubs and registrations did not (same registration
signature), the patch copies the index, links the changed files' calls again, gives new
functions fresh ids and resolves the edges into them, drops removed ones, patches the
packed graph, and swaps the copy in atomically. Any other change (added or removed
files, Python, benchmarks, yaml, config) falls back to a full link from the facts cache.
It is a schedule over the rules of indexer/rules/ (each patches its own tables: Rule.patch),
as the full link is (indexer/link.py); their SQL is schema/patch.sql's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from indexer.build_config import BuildMacros
from indexer.build_spec import BuildSpec, BuildState
from indexer.extract import file_facts, read_source
from indexer.facts import FileFacts, registration_signature, structure_signature
from indexer.registrations import LAMBDA_KERNEL
from indexer.rules import RULES
from indexer.rules.base import PatchContext, PatchPhase, Unpatchable
from indexer.trace import any_installed
from schema.engine import duckdb
from schema.graph_file import write_graph_file
from schema.index_store import IndexStore
from schema.model import FileStatus, NodeRow, ReachEdgeRow
from schema.packed_graph import Edge, GraphDelta, StaleGraph, patch_packed
from schema.patch_store import NotAnIndex, PatchStore
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
            changes = _apply(patch, new_facts, {**meta, "reparsed_files": str(len(changed))}, state.build)
            if changes:
                graph, token = _repack_graph(store, patch, changes)
            counts, skipped = store.table_counts(index_tables()), store.skipped_files()
    except (Unpatchable, UnreadableIndex, NotAnIndex, duckdb.CatalogException, duckdb.BinderException):
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
    those whose content changed; Unpatchable unless only a few C++ files did."""
    old_meta, files, benches = patch.indexed_state()
    if old_meta.get("schema_version") != str(SCHEMA_VERSION):
        raise Unpatchable
    relinks = ("config", "source_sha:", "canaries", "upstream", "tracer")
    if any(old_meta.get(k) != v for k, v in meta.items() if k.startswith(relinks)):
        raise Unpatchable
    if "tracer" in meta and any_installed(old_meta.get("trace_missing_modules", "").split(",")):
        raise Unpatchable  # a trace failed for want of a module that is installed now: trace it again
    if set(discovered["cpp"]) | set(discovered["python"]) != set(files) or set(discovered["benchmark"]) != set(benches):
        raise Unpatchable
    if any(digests[p] != benches[p] for p in discovered["benchmark"]):
        raise Unpatchable
    changed = [p for p in files if digests[p] != files[p][1]]
    if len(changed) > MAX_PATCHED_FILES or any(p.endswith(".py") for p in changed):
        raise Unpatchable
    return files, changed


def _reparsed(repo: Path, path: str, indexed: tuple) -> tuple[FileFacts, bool]:
    """The facts of a changed C++ file and whether its functions changed (``indexed``: its
    row of _changed_files); Unpatchable when its stubs or registrations changed, or it is gone."""
    try:
        data, sha = read_source(str(repo), path)
    except OSError:  # removed or unreadable since it was listed: the re-link says so
        raise Unpatchable from None
    facts = file_facts("cpp", path, data, sha=sha)
    if not isinstance(facts, FileFacts) or facts.status != FileStatus.OK or registration_signature(facts) != indexed[3]:
        raise Unpatchable
    if any(li.kernel_name == LAMBDA_KERNEL for li in facts.library_impls):
        raise Unpatchable  # the functions its registered lambdas call are linked by the full link
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
    patch: PatchStore, changed: dict[int, tuple[FileFacts, bool]], meta: dict[str, str],
    build: BuildMacros | None = None,
) -> _GraphChanges | None:
    """Replace what the changed files contribute: the patch phases in order and, inside each,
    the rules in the order of RULES (the into phase file by file). A function that is still
    there keeps its id (its calls are linked again); a new one gets a fresh id, and the edges
    into it from other files, kernels, stubs and library registrations are resolved; a removed
    one goes with everything that refers to it. Returns what changed in the reachability
    graph, or None when nothing did (a body edit that calls the same things)."""
    ctx = PatchContext(patch, changed, build)
    for phase in PatchPhase:
        for file_id in _files_of(ctx, phase):
            ctx.file = file_id
            for rule in RULES:
                ctx.run(rule, phase)
    patch.update_meta({**meta, "patched": json.dumps(sorted(changed))})
    graph = ctx.graph
    body_only = not graph.fresh_nodes and not graph.dropped and not graph.new_nodes
    if body_only and sorted(graph.removed) == sorted(graph.added):
        return None
    new_nodes = graph.fresh_nodes + [n[:3] for n in graph.new_nodes]
    return _GraphChanges(graph.removed, graph.added, graph.dropped, new_nodes, graph.next_node)


def _files_of(ctx: PatchContext, phase: PatchPhase) -> list[int]:
    """The into phase runs file by file, over the changed files with new functions (in the order
    of ``ctx.changed``); the others once (-1)."""
    return [f for f, fresh in ctx.fresh_ids.items() if fresh] if phase == PatchPhase.INTO else [-1]


def _hold_old_graph(store: IndexStore) -> None:
    """Have ``store`` hold the packed graph as it is before the patch: the file beside the index
    (mapped; its names decoded only if the graph changes) or the graph table, or, when neither
    has it, the one packed from the tables now, before they change. Unpatchable when damaged."""
    try:
        store.graph()
    except (KeyError, ValueError, TypeError):
        raise Unpatchable from None


def _repack_graph(
    store: IndexStore, patch: PatchStore, changes: _GraphChanges
) -> tuple[list[tuple[str, bytes]], str]:
    """The packed graph of the patched tables, patched from the one the index held (``store``
    holds it: _hold_old_graph), written with its token; returns its rows and token.
    Unpatchable when the old one is unreadable or does not hold the edges removed."""
    try:
        old = store.graph()
        delta = GraphDelta(
            changes.removed,
            changes.added,
            [nid for nid, _ in changes.dropped_nodes],
            changes.new_nodes,
            changes.n_nodes,
            _names_in_use(patch, old.node_kinds, NodeRow.TABLE, "kind", changes.dropped_nodes, changes.new_nodes),
            _names_in_use(patch, old.edge_kinds, ReachEdgeRow.TABLE, "kind", changes.removed, changes.added, 2),
            _names_in_use(patch, old.details, ReachEdgeRow.TABLE, "detail", changes.removed, changes.added, 3),
        )
        rows = patch_packed(old, delta)
    except (StaleGraph, KeyError, ValueError, TypeError, IndexError):  # a damaged graph: the re-link writes one
        raise Unpatchable from None
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
