"""Git history as data: which lines of which files each commit changed.

``git log -p -U0`` is run once for a period and parsed into :class:`FileChange` records
(commit, path, changed line ranges in the file as that commit left it). Callers map the
ranges onto whatever they index (function extents, kernels...). Parsing is a pure
function (:func:`parse_log`) so it can be tested on text.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from perfq.errors import PerfqError

COMMIT_MARK = "\x00perfq-commit "
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


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


def _hunk_range(match: re.Match[str]) -> tuple[int, int]:
    start = int(match.group(3))
    count = int(match.group(4)) if match.group(4) is not None else 1
    if count == 0:  # pure deletion: the line after which lines were removed
        line = max(start, 1)
        return (line, line)
    return (start, start + count - 1)


def parse_log(lines: Iterable[str]) -> Iterator[FileChange]:
    """Parse the output of ``git log --format=<COMMIT_MARK>%H %P -p -U0`` into file changes.

    Files deleted by a commit (``+++ /dev/null``) and binary files yield nothing.
    """
    commit = ""
    parents = 1
    path: str | None = None
    ranges: list[tuple[int, int]] = []

    def flush() -> Iterator[FileChange]:
        if commit and path is not None and ranges:
            yield FileChange(commit, path, tuple(ranges), parents)

    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith(COMMIT_MARK):
            yield from flush()
            parts = line[len(COMMIT_MARK) :].split()
            commit = parts[0] if parts else ""
            parents = len(parts) - 1
            path, ranges = None, []
        elif line.startswith("diff --git "):
            yield from flush()
            path, ranges = None, []
        elif line.startswith("+++ "):
            target = line[4:]
            path = target[2:] if target.startswith("b/") else None
            ranges = []
        elif line.startswith("@@") and path is not None:
            match = _HUNK.match(line)
            if match:
                ranges.append(_hunk_range(match))
    yield from flush()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, errors="replace", check=False
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise PerfqError(f"cannot run git in {repo}: {exc}") from None


def count_commits(repo: Path, ref: str = "HEAD") -> int:
    """Number of commits reachable from ``ref`` (0 for an empty repository)."""
    out = _git(repo, "rev-list", "--count", ref)
    if out.returncode != 0:
        return 0
    return int(out.stdout.strip() or 0)


def changed_lines(repo: Path, since: str, ref: str = "HEAD", paths: Iterable[str] | None = None) -> History:
    """Commits of ``ref`` newer than ``since`` (git approxidate, e.g. ``180.days``) and their line changes.

    Merge commits contribute no diff (``git log -p`` default). ``paths`` restricts the log
    to those pathspecs. Raises PerfqError when ``repo`` is not a git repository or the
    ref/date is not understood.
    """
    check = _git(repo, "rev-parse", "--is-inside-work-tree")
    if check.returncode != 0:
        raise PerfqError(f"{repo} is not a git repository")
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
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
        ref,
        "--",
    ]
    if paths is not None:
        args.extend(paths)
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise PerfqError(f"cannot run git in {repo}: {exc}") from None
    assert proc.stdout is not None
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

    history.changes = list(parse_log(tracked(proc.stdout)))
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0:
        first = stderr.strip().splitlines()[0] if stderr.strip() else "git log failed"
        raise PerfqError(f"git log --since={since} failed: {first}")
    history.commits = commits
    return history
