"""The side-effect half of ``perfq affected``: git plumbing, reading the base and head
versions of changed files, opening the index; the answer comes from query/."""

from __future__ import annotations

from pathlib import Path

from perfq.config import Config, load_config
from perfq.errors import PerfqError
from perfq.paths import default_index_path
from perfq.query.affected import AffectedInput, affected
from perfq.query.changes import changed_functions
from perfq.query.diff_parse import apply_hunks, parse_diff
from perfq.runner import git
from perfq.schema.reader import meta, open_index


def _revisions(repo: Path, ref: str, worktree: bool) -> tuple[str, str | None]:
    """(base commit, head commit or None for the working tree) for ``ref`` / ``A..B``."""
    if ".." in ref:
        a, _, b = ref.partition("...") if "..." in ref else ref.partition("..")
        head = git.resolve_ref(repo, b or "HEAD")
        base = git.merge_base(repo, git.resolve_ref(repo, a or "HEAD"), head)
        return base, head
    head_commit = git.resolve_ref(repo, "HEAD")
    base = git.merge_base(repo, git.resolve_ref(repo, ref), head_commit)
    return base, None if worktree else head_commit


def affected_for_ref(
    repo: Path,
    ref: str | None,
    db: Path | None = None,
    *,
    diff_text: str | None = None,
    worktree: bool = False,
    cfg: Config | None = None,
    reindex: bool = False,
) -> dict:
    """The affected document for HEAD against ``ref`` (or ``A..B``, or a given diff)."""
    repo = git.require_repo(repo)
    cfg = cfg or load_config(repo)
    db = db or default_index_path(repo)
    if reindex or not db.exists():
        if not reindex:
            raise PerfqError(f"no perfq index at {db}; build one with `perfq index` (or pass --reindex)")
        from perfq.indexer.build import build_index

        build_index(repo, cfg, db, quiet=True)
    warnings: list[str] = []
    if diff_text is not None:
        # a bare patch applies to ``ref`` (default: the working tree); its new side is rebuilt
        base = git.resolve_ref(repo, ref) if ref else ""
        head = None
        changes = parse_diff(diff_text)
        by_new_path = {c.new_path: c for c in changes if c.new_path}

        def base_text(path: str) -> bytes | None:
            return git.show(repo, base or None, path)

        def head_text(path: str) -> bytes | None:
            change = by_new_path.get(path)
            if change is None:
                return git.show(repo, base or None, path)
            return apply_hunks(base_text(change.old_path) if change.old_path else None, change)

    else:
        if ref is None:
            raise PerfqError("give a base ref, A..B, or --diff")
        base, head = _revisions(repo, ref, worktree)
        changes = parse_diff(git.diff(repo, base, head))

        def base_text(path: str) -> bytes | None:
            return git.show(repo, base, path)

        def head_text(path: str) -> bytes | None:
            return git.show(repo, head, path)

    cs = changed_functions(changes, base_text, head_text, cfg)
    with open_index(db) as con:
        indexed = meta(con).get("indexed_commit", "")
        if indexed and base and indexed != base:
            proc = git.git(repo, "merge-base", "--is-ancestor", indexed, base, check=False)
            if proc.returncode == 0:
                warnings.append(
                    f"index built at {indexed[:12]}, older than the base {base[:12]}; "
                    "refresh with `perfq index` or --reindex"
                )
            else:
                warnings.append(f"index built at {indexed[:12]}, not an ancestor of the base {base[:12]}")
        head_label = head or ("PATCH" if diff_text is not None else "WORKTREE")
        return affected(con, AffectedInput(base, head_label, cs, warnings), cfg)


def affected_for_range(repo: Path, rev_range: str, db: Path | None = None) -> dict:
    """The affected document for ``A..B`` (used by bisect --prune and run --affected)."""
    return affected_for_ref(repo, rev_range, db)
