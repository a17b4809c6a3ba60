"""The side-effect half of ``perfq affected``: git plumbing, reading the base and head
versions of changed files, parsing them (in parallel when there are many, from the
index when a version is the indexed one), opening the index; the answer comes from
query/."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from common import files, git
from common.config import Config, load_config
from common.diff import FileChange, applies, apply_hunks, parse_diff, parse_patch
from common.errors import PerfqError
from common.paths import default_index_path
from indexer.bench_imports import importers
from indexer.build_config import target_build
from indexer.discover import benchmark_trees, listed_files
from indexer.facts import FileFacts, Function
from query.affected import AffectedInput, affected
from query.changes import changed_functions, source_kind
from query.document import AffectedDoc
from query.dtype_gaps import change_scope
from query.extents import parse_extents, shifted_extents
from query.py_lines import line_truth, without_answered
from schema.index_store import IndexStore
from schema.reader import open_index

PARALLEL_PARSE_FROM = 16  # files to parse before a process pool pays off


def _revisions(repo: Path, ref: str, worktree: bool) -> tuple[str, str | None]:
    """(base commit, head commit or None for the working tree) for ``ref`` / ``A..B``."""
    if ".." in ref:
        a, _, b = ref.partition("...") if "..." in ref else ref.partition("..")
        a, b = a or "HEAD", b or "HEAD"
        head, start, base = git.resolve_with_base(repo, b, a)
        if base == head != start:
            raise PerfqError(f"{ref} is empty: {b} is an ancestor of {a} (reversed? try {b}..{a})")
        return base, head
    head_commit, _, base = git.resolve_with_base(repo, "HEAD", ref)
    return base, None if worktree else head_commit


def _texts(
    repo: Path, changes: list[FileChange], base: str | None, head: str | None, patch: bool
) -> tuple[dict[str, bytes | None], dict[str, bytes | None]]:
    """Base and head contents of the changed files (a bare patch: head rebuilt from base).
    A head version the working tree holds as is (its file is the blob the diff names) is read
    from there; the other committed versions come from one ``git cat-file`` process, by the
    object ids our diff names (a bare patch's may be of another repository: by path)."""
    checked_out = _checked_out(repo, changes) if head and not patch else {}

    def name(rev: str, path: str, blob: str | None) -> tuple[str | None, str]:
        return (None, blob) if blob and not patch else (rev, path)

    old = {c.old_path: name(base, c.old_path, c.old_blob) for c in changes if c.old_path and base}
    new = {
        c.new_path: name(head, c.new_path, c.new_blob)
        for c in changes
        if c.new_path and head and not patch and c.new_path not in checked_out
    }
    blobs = git.read_blobs(repo, list(dict.fromkeys([*old.values(), *new.values()])))
    base_texts = {
        c.old_path: blobs[old[c.old_path]] if base else git.show(repo, None, c.old_path) for c in changes if c.old_path
    }
    if patch:
        head_texts = {
            c.new_path: apply_hunks(base_texts.get(c.old_path) if c.old_path else None, c)
            for c in changes
            if c.new_path
        }
    else:
        unread = [c.new_path for c in changes if c.new_path and c.new_path not in checked_out]
        head_texts = {p: blobs[new[p]] if head else git.show(repo, None, p) for p in unread} | checked_out
    return base_texts, head_texts


def _benchmark_tree(repo: Path, head: str | None, cfg: Config, head_texts: dict[str, bytes | None]) -> dict[str, bytes]:
    """The Python files of the benchmark trees at ``head`` (None: the working tree), with
    the changed ones as the change leaves them."""
    roots = benchmark_trees(cfg)
    if head:  # read by the blob ids the listing gives (no tree walk per file)
        ids = {}  # "<mode> blob <id>\t<path>"
        for line in git.out(repo, "ls-tree", "-r", "-z", "--end-of-options", head, "--", *roots).split("\0"):
            entry, _, path = line.partition("\t")
            if path.endswith(".py") and path not in head_texts:
                ids[path] = entry.split()[2]
        blobs = git.read_blobs(repo, [(None, blob) for blob in ids.values()])
        texts = {p: blobs[None, blob] for p, blob in ids.items()}
    else:  # the working tree, as the index lists it
        paths = [p for p in listed_files(repo, roots) if p.endswith(".py") and p not in head_texts]
        texts = {p: git.show(repo, None, p) for p in paths}
    texts.update({p: data for p, data in head_texts.items() if p.endswith(".py")})
    return {p: data for p, data in texts.items() if data is not None}


def _checked_out(repo: Path, changes: list[FileChange]) -> dict[str, bytes]:
    """The new versions of ``changes`` that the working tree has byte for byte (reading a
    file and hashing it is cheaper than inflating a loose object)."""
    out: dict[str, bytes] = {}
    for c in changes:
        if c.new_path and c.new_blob:
            try:
                data = b"".join(files.chunks(str(repo), c.new_path))  # never a device or a link out
            except OSError:
                continue
            if git.blob_id(data, c.new_blob) == c.new_blob:
                out[c.new_path] = data
    return out


def _extents(
    store: IndexStore,
    base: list[tuple[str, str, bytes]],
    head: list[tuple[str, str, bytes]],
    changes: dict[str, FileChange],
) -> dict[tuple[str, bytes], FileFacts]:
    """Function extents by (path, content) of the base and head versions: from the index
    when that content is the indexed one, moved from the base version's when a C++ change
    keeps every function's bounds (``changes``: by new path), else parsed (in a process pool
    when there are many)."""
    base_keyed = {(path, hashlib.sha256(data).hexdigest()): (kind, path, data) for kind, path, data in base}
    head_keyed = {(path, hashlib.sha256(data).hexdigest()): (kind, path, data) for kind, path, data in head}
    keyed = {**base_keyed, **head_keyed}
    out: dict[tuple[str, str], FileFacts] = {}
    digests = store.file_digests(sorted({path for path, _ in keyed}))
    indexed = {
        path: FileFacts(path, lang, sha, n_lines, status=status, message=message)
        for path, (sha, lang, n_lines, status, message) in digests.items()
        if (path, sha) in keyed
    }
    for row in store.functions_in(sorted(indexed)):
        indexed[row.path].functions.append(
            Function(row.qualname, row.name, row.kind, row.start_line, row.end_line, row.internal,
                     least_args=row.least_args, most_args=row.most_args)
        )
    out.update({(p, f.sha256): f for p, f in indexed.items()})
    base_key = {path: key for key, (_, path, _) in base_keyed.items()}
    for key, (kind, path, data) in head_keyed.items():
        change = changes.get(path)
        before = base_key.get(change.old_path or "") if change is not None and kind == "cpp" else None
        if key not in out and before in out:
            moved = shifted_extents(out[before], base_keyed[before][2], change, key[1], data.count(b"\n") + 1)
            if moved is not None:
                out[key] = moved
    todo = [(key, job) for key, job in keyed.items() if key not in out]
    if len(todo) >= PARALLEL_PARSE_FROM:
        from common.pool import worker_pool  # here: its multiprocessing import costs a small diff 10 ms

        with worker_pool(os.cpu_count() or 1) as pool:
            results = pool.map(_parse_job, [job for _, job in todo], chunksize=8)
            out.update({key: facts for (key, _), facts in zip(todo, results, strict=True) if facts is not None})
    else:
        for key, job in todo:
            facts = _parse_job(job)
            if facts is not None:
                out[key] = facts
    return {(path, data): out[key] for key, (_, path, data) in keyed.items() if key in out}


def _parse_job(job: tuple[str, str, bytes]) -> FileFacts | None:
    return parse_extents(*job)


def affected_for_ref(
    repo: Path,
    ref: str | None,
    db: Path | None = None,
    *,
    diff_text: str | None = None,
    worktree: bool = False,
    cfg: Config | None = None,
    reindex: bool = False,
) -> AffectedDoc:
    """The affected document for HEAD against ``ref`` (or ``A..B``, or a given diff)."""
    repo = git.require_repo(repo)
    cfg = cfg or load_config(repo)
    db = db or default_index_path(repo)
    if reindex or not db.exists():
        if not reindex:
            raise PerfqError(f"no perfq index at {db}; build one with `perfq index` (or pass --reindex)")
        from indexer.build import build_index

        build_index(repo, cfg, db, quiet=True)
    warnings: list[str] = []
    if diff_text is not None:
        # a bare patch applies to ``ref`` (default: the working tree); its new side is rebuilt
        base = git.resolve_ref(repo, ref) if ref else ""
        head = None
        changes = parse_patch(diff_text)
        base_texts, head_texts = _texts(repo, changes, base or None, None, patch=True)
        problems = [why for c in changes if (why := applies(base_texts.get(c.old_path or ""), c))]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PerfqError(f"the --diff patch does not apply to {ref or 'the working tree'}: {problems[0]}{more}")
        if not changes:
            warnings.append("the --diff input is empty: no change")
    else:
        if ref is None:
            raise PerfqError("give a base ref, A..B, or --diff")
        base, head = _revisions(repo, ref, worktree)
        changes = parse_diff(git.diff(repo, base, head))
        base_texts, head_texts = _texts(repo, changes, base, head, patch=False)
    # one DuckDB thread: a query makes dozens of small reads, each of which a second thread
    # slows by its scheduling (the one-file query ~15% slower in-process, a 500-file one no faster)
    with open_index(db, threads=1) as con:
        store = IndexStore(con, db)
        kinds = {c.path: source_kind(c.path, cfg) for c in changes}
        sides = []
        for texts, side in ((base_texts, "old_path"), (head_texts, "new_path")):
            versions = []
            for c in changes:
                path = getattr(c, side)
                kind = kinds[c.path]
                if path and kind in ("cpp", "python") and texts.get(path) is not None:
                    versions.append((kind, path, texts[path]))
            sides.append(versions)
        extents = _extents(store, *sides, {c.new_path: c for c in changes if c.new_path})

        def parse(kind: str, path: str, data: bytes) -> FileFacts | None:
            return extents.get((path, data))  # the very texts _extents hashed: no second digest

        build = target_build(repo, cfg, db.parent)
        cs = changed_functions(changes, base_texts.get, head_texts.get, cfg, parse, build=build)
        tree = _benchmark_tree(repo, head, cfg, head_texts) if cs.benchmark_modules else {}
        if cs.benchmark_modules:  # changed modules of a benchmark tree that are not benchmarks
            cs.benchmark_importers = importers(cs.benchmark_modules, tree)
        truth = line_truth(store, changes, base_texts.get, cs, tree)
        without_answered(cs, truth)
        indexed = store.meta().get("indexed_commit", "")
        if indexed and base and indexed != base:
            proc = git.git(repo, "merge-base", "--is-ancestor", "--end-of-options", indexed, base, check=False)
            if proc.returncode == 0:
                warnings.append(
                    f"index built at {indexed[:12]}, older than the base {base[:12]}; "
                    "refresh with `perfq index` or --reindex"
                )
            else:
                warnings.append(f"index built at {indexed[:12]}, not an ancestor of the base {base[:12]}")
        head_label = head or ("PATCH" if diff_text is not None else "WORKTREE")
        scope = change_scope(changes, base_texts.get, head_texts.get, cs.line_scopes)
        source = _base_source(repo, base, base_texts)
        return affected(
            store, AffectedInput(base, head_label, cs, warnings, dtypes=scope, lines=truth, source=source), cfg
        )


def _base_source(repo: Path, base: str | None, known: dict[str, bytes | None]) -> Callable[[str], bytes | None]:
    """A file of the base by its path: the changed files' texts as read, others from git (the
    working tree's without a base)."""

    def text_of(path: str) -> bytes | None:
        if path not in known:
            known[path] = git.show(repo, base, path)
        return known[path]

    return text_of


def check_index_of(repo: Path, db: Path | None = None) -> None:
    """A PerfqError when the index at ``db`` was built from another repository (the commit it
    was built at is not in ``repo``): its answers would name nothing of this one. A missing index
    is left to the query that needs it."""
    db = db or default_index_path(repo)
    if not db.exists():
        return
    with open_index(db, threads=1) as con:
        indexed = IndexStore(con, db).meta().get("indexed_commit", "")
    if indexed and git.rev(repo, indexed) is None:
        raise PerfqError(f"the index {db} was built from another repository (commit {indexed[:12]} is not in "
                         f"{repo}); build this repository's index with `perfq index`")


def affected_for_range(repo: Path, rev_range: str, db: Path | None = None) -> AffectedDoc:
    """The affected document for ``A..B`` (used by bisect --prune and run --affected)."""
    return affected_for_ref(repo, rev_range, db)
