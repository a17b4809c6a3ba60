"""Git history as data: which lines of which files each commit changed.

``git log -p -U0`` is run once for a period and parsed into :class:`FileChange` records
(commit, path, changed line ranges in the file as that commit left it). Callers map the
ranges onto whatever they index (function extents, kernels...). Parsing is a pure
function (:func:`parse_log`) so it can be tested on text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common import git
from common.diff import parse_diff
from common.errors import PerfqError

COMMIT_MARK = "\x00perfq-commit "


@dataclass(frozen=True)
class FileChange:
    """Lines of ``path`` changed by ``commit`` (1-based inclusive ranges, post-image numbering).

    A pure deletion is recorded as the one line next to where lines were removed.
    ``parents`` is the number of parents of the commit (0 for a root commit).
    """

    commit: str
    path: str
    ranges: tuple[tuple[int, int], ...]
    parents: int = 1


@dataclass
class History:
    """The commits of a period and the file changes they made."""

    commits: list[str] = field(default_factory=list)
    root_commits: set[str] = field(default_factory=set)
    changes: list[FileChange] = field(default_factory=list)
    total_commits: int = 0  # commits reachable from the ref, whatever the period


def _commit_changes(commit: str, parents: int, lines: list[str]) -> Iterator[FileChange]:
    for fc in parse_diff("".join(lines)):
        ranges = tuple(h.target_range for h in fc.hunks)
        if fc.new_path is not None and ranges:
            yield FileChange(commit, fc.new_path, ranges, parents)


def parse_log(lines: Iterable[str]) -> Iterator[FileChange]:
    """Parse the output of ``git log --format=<COMMIT_MARK>%H %P -p -U0`` into file changes.

    Files deleted by a commit (``+++ /dev/null``) and binary files yield nothing.
    """
    commit, parents, chunk = "", 1, []
    for raw in lines:
        line = raw if raw.endswith("\n") else raw + "\n"
        if line.startswith(COMMIT_MARK):
            if commit:
                yield from _commit_changes(commit, parents, chunk)
            parts = line[len(COMMIT_MARK) :].split()
            commit, parents, chunk = (parts[0] if parts else ""), len(parts) - 1, []
        else:
            chunk.append(line)
    if commit:
        yield from _commit_changes(commit, parents, chunk)


def count_commits(repo: Path, ref: str = "HEAD") -> int:
    """Number of commits reachable from ``ref`` (0 for an empty repository)."""
    return git.count_commits(repo, ref)


def changed_lines(repo: Path, since: str, ref: str = "HEAD", paths: Iterable[str] | None = None) -> History:
    """Commits of ``ref`` newer than ``since`` (git approxidate, e.g. ``180.days``) and their line changes.

    Merge commits contribute no diff (``git log -p`` default). ``paths`` restricts the log
    to those pathspecs. Raises PerfqError when ``repo`` is not a git repository or the
    ref/date is not understood.
    """
    if not git.ok(repo, "rev-parse", "--is-inside-work-tree"):
        raise PerfqError(f"{repo} is not a git repository")
    if git.rev(repo, ref) is None:
        if ref == "HEAD":  # an empty repository: no history at all
            return History()
        raise PerfqError(f"unknown git ref {ref!r} in {repo}")
    history = History(total_commits=count_commits(repo, ref))
    # log.showRoot=false: a root commit (an imported tree) shows no diff, so it is not churn.
    args = [
        "-c",
        "log.showRoot=false",
        "log",
        f"--since={since}",
        "--format=%x00perfq-commit %H %P",
        "-p",
        "-U0",
        "--no-color",
        "--no-renames",
        "--no-ext-diff",
        "--end-of-options",
        ref,
        "--",
    ]
    if paths is not None:
        args.extend(paths)
    commits: list[str] = []

    def tracked(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if line.startswith(COMMIT_MARK):
                parts = line[len(COMMIT_MARK) :].split()
                if parts:
                    commits.append(parts[0])
                    if len(parts) == 1:
                        history.root_commits.add(parts[0])
            yield line

    try:
        with git.stream(repo, *args) as lines:
            history.changes = list(parse_log(tracked(lines)))
    except PerfqError as exc:
        raise PerfqError(f"git log --since={since} failed: {str(exc).split('failed: ', 1)[-1]}") from None
    history.commits = commits
    return history
