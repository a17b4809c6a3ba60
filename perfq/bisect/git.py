"""Git side of ``perfq bisect``: validation, commit enumeration, checkout and restoration
(every git process through :mod:`common.git`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from common import git as common_git
from common.errors import PerfqError


def git(repo: Path, *args: str, check: bool = True, timeout: float = 120) -> str:
    """Stdout of ``git args`` in ``repo``; PerfqError (one line) on failure."""
    return common_git.git(repo, *args, check=check, timeout=timeout).stdout


def toplevel(path: Path) -> Path:
    """The worktree root containing ``path``; PerfqError outside git."""
    if not path.is_dir():
        raise PerfqError(f"{path} is not a directory")
    top = common_git.toplevel(path)
    if top is None:
        raise PerfqError(f"{path} is not inside a git repository")
    return top


def resolve(repo: Path, ref: str) -> str:
    """The full hash of commit ``ref``; PerfqError when it does not name a commit."""
    sha = common_git.rev(repo, ref)
    if sha is None:
        raise PerfqError(f"unknown commit {ref!r} in {repo}")
    return sha


def first_parent_range(repo: Path, good: str, bad: str) -> list[str]:
    """Commits of ``good..bad`` on the first-parent line, oldest first."""
    return git(repo, "rev-list", "--reverse", "--first-parent", "--end-of-options", f"{good}..{bad}", "--").split()


def enumerate_range(repo: Path, good: str, bad: str) -> list[str]:
    """``[good, c1, ..., bad]`` along the first-parent line; PerfqError when empty or unrelated."""
    if good == bad:
        raise PerfqError("empty range: GOOD and BAD are the same commit")
    if not common_git.ok(repo, "merge-base", "--is-ancestor", "--end-of-options", good, bad):
        raise PerfqError(f"empty range: {good[:12]} is not an ancestor of {bad[:12]} (swapped GOOD and BAD?)")
    commits = first_parent_range(repo, good, bad)
    if not commits:
        raise PerfqError(f"empty range {good[:12]}..{bad[:12]}")
    if commits[-1] != bad:
        raise PerfqError(f"{bad[:12]} is not on a first-parent line from {good[:12]}")
    return [good, *commits]


def merge_side(repo: Path, merge: str) -> list[str]:
    """For a merge commit: ``[merge-base, side commits..., second parent]`` (first-parent of
    the merged branch, oldest first), the range ``--all-parents`` descends into."""
    ps = common_git.parents(repo, merge)
    if len(ps) < 2:
        return []
    base = git(repo, "merge-base", "--end-of-options", ps[0], ps[1]).strip()
    side = first_parent_range(repo, base, ps[1])
    return [base, *side] if side else []


def numstat(repo: Path, sha: str) -> list[dict]:
    """Files changed by ``sha`` against its first parent, with +/- line counts."""
    ps = common_git.parents(repo, sha)
    how = ["--numstat", "-z", "--no-renames"]  # -z: names as they are, never C-quoted
    args = ["diff", *how, "--end-of-options", ps[0], sha, "--"] if ps else \
        ["show", *how, "--format=", "--end-of-options", sha, "--"]
    files = []
    for line in git(repo, *args).split("\0"):
        parts = line.lstrip("\n").split("\t", 2)
        if len(parts) == 3:
            added, removed, path = parts
            files.append({"path": path, "added": int(added) if added.isdigit() else None,
                          "removed": int(removed) if removed.isdigit() else None})
    return files


def diff_text(repo: Path, sha: str, limit: int = 2_000_000) -> str:
    ps = common_git.parents(repo, sha)
    args = ["diff", "--unified=3", "--end-of-options", ps[0], sha, "--"] if ps else \
        ["show", "--format=", "--end-of-options", sha, "--"]
    text = git(repo, *args)
    if len(text) <= limit:
        return text
    cut = text.rfind("\ndiff --git ", 0, limit)  # whole files only: a cut hunk is not a diff
    return text[: cut + 1] if cut > 0 else ""


def head_ref(repo: Path) -> tuple[str | None, str]:
    """(branch name or None when detached, HEAD commit)."""
    return common_git.branch(repo), git(repo, "rev-parse", "HEAD").strip()


@dataclass(frozen=True)
class Origin:
    """Where a bisect started, stored in its session so that a bisect killed mid-way is put back
    by ``--resume``: the branch (None: a detached HEAD), its commit, and the autostashes of the
    dirty tree (oldest first) to re-apply."""

    branch: str | None
    head: str
    stashes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"branch": self.branch, "head": self.head, "stashes": list(self.stashes)}

    @classmethod
    def from_json(cls, data: Any) -> Origin | None:
        if not isinstance(data, dict) or not isinstance(data.get("head"), str):
            return None
        branch = data.get("branch")
        return cls(branch if isinstance(branch, str) else None, data["head"],
                   tuple(s for s in data.get("stashes") or () if isinstance(s, str)))


class Checkout:
    """Detached checkouts of commits to test; ``restore`` puts back the origin's branch or commit."""

    def __init__(self, repo: Path, origin: Origin) -> None:
        self.repo = repo
        self.branch, self.head = origin.branch, origin.head
        self.current: str | None = git(repo, "rev-parse", "HEAD").strip()

    def _switch(self, *args: str) -> None:
        """``git checkout args``; when tracked files block it, they were modified by a build
        or benchmark (the user's changes were stashed first): reset them and retry. Never
        forced, so untracked files are never overwritten."""
        *flags, ref = args
        if ref.startswith("-"):  # checkout takes no --end-of-options: a ref is never an option
            raise PerfqError(f"not a ref: {ref!r}")
        argv = ("checkout", "--quiet", *flags, ref, "--")
        if common_git.ok(self.repo, *argv):
            return
        if common_git.dirty(self.repo):
            git(self.repo, "reset", "--quiet", "--hard")
        git(self.repo, *argv)

    def to(self, sha: str) -> list[str]:
        """Check out ``sha`` with every tracked file as committed; the tracked files a build or
        benchmark had changed or deleted (the user's own changes were stashed first), now restored
        (issue 37: a deleted file stayed deleted for the next steps). Untracked files are kept."""
        changed = common_git.dirty(self.repo)
        if changed:
            git(self.repo, "reset", "--quiet", "--hard")
        if self.current != sha:
            self._switch("--detach", sha)
            self.current = sha
        return changed

    def restore(self) -> None:
        """Back to the origin's branch or commit, its tracked files as committed (the user's own
        changes, stashed at the start, are re-applied by :func:`guarded` afterwards)."""
        target = self.branch or self.head
        try:
            if common_git.dirty(self.repo):  # what the last build or benchmark changed or deleted
                git(self.repo, "reset", "--quiet", "--hard")
            self._switch(target)
        except PerfqError as exc:
            raise PerfqError(f"could not restore {target} ({exc}); run `git checkout {target}`") from None
        self.current = self.head


def _ignore(*_: Any) -> None:
    return None


@contextmanager
def guarded(repo: Path, stash_ok: Callable[[list[str]], bool], log: Callable[[str], None],
            origin: Origin | None = None, on_ready: Callable[[Origin], None] = _ignore,
            on_restored: Callable[[], None] = _ignore) -> Iterator[Checkout]:
    """Stash a dirty tree (when ``stash_ok`` agrees), yield a Checkout, and always restore the
    original branch/commit and the stashed changes, on success, error or Ctrl-C.

    ``origin``: where an interrupted bisect started (``--resume``), restored instead of the
    current checkout, its autostashes re-applied too. ``on_ready`` gets the origin (with this
    run's autostash) before anything is checked out, to store it; ``on_restored`` is called once
    the tree is back."""
    changed = common_git.dirty(repo)
    stash_sha = None
    if changed:
        if not stash_ok(changed):
            raise PerfqError(f"the working tree has uncommitted changes ({len(changed)} files); "
                             "commit them, or pass --yes to let perfq stash and restore them")
        log(f"stashing uncommitted changes in {len(changed)} file(s); they are restored at the end")
        git(repo, "stash", "push", "--quiet", "-m", "perfq bisect autostash")
        stash_sha = git(repo, "rev-parse", "refs/stash").strip()
    start = origin or Origin(*head_ref(repo))
    start = replace(start, stashes=start.stashes + ((stash_sha,) if stash_sha else ()))
    restored = False
    co: Checkout | None = None
    try:
        co = Checkout(repo, start)
        on_ready(start)
        yield co
    finally:
        try:
            (co or Checkout(repo, start)).restore()
            log(f"restored {start.branch or start.head[:12]}")
            restored = True
        finally:
            for sha in start.stashes:
                _unstash(repo, sha, log)
        if restored:
            on_restored()


def _unstash(repo: Path, stash_sha: str, log: Callable[[str], None]) -> None:
    shas = git(repo, "stash", "list", "--format=%H", check=False).split()
    if stash_sha not in shas:
        log(f"warning: the autostash {stash_sha[:12]} is gone; nothing to restore")
        return
    ref = f"stash@{{{shas.index(stash_sha)}}}"
    popped = common_git.ok(repo, "stash", "pop", "--quiet", "--index", ref)
    if popped or common_git.ok(repo, "stash", "pop", "--quiet", ref):
        log("restored your uncommitted changes")
    else:
        log(f"warning: could not re-apply your uncommitted changes; they are kept in {ref} (git stash pop)")
