"""Git plumbing: every git subprocess perfq runs goes through here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfq.errors import PerfqError


def git(
    repo: Path, *args: str, check: bool = True, text: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """Run ``git args`` in ``repo``; a failure is a PerfqError with git's first line."""
    try:
        proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=text, check=False, input=stdin)
    except FileNotFoundError:
        raise PerfqError("git is not installed") from None
    except NotADirectoryError:
        raise PerfqError(f"{repo} is not a directory") from None
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        first = (err.strip().splitlines() or ["failed"])[0]
        raise PerfqError(f"git {' '.join(args[:3])}: {first}")
    return proc


def require_repo(repo: Path) -> Path:
    """The top of the worktree at ``repo``, or a PerfqError when it is not a git repository."""
    if not repo.is_dir():
        raise PerfqError(f"{repo} is not a directory")
    proc = git(repo, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise PerfqError(f"{repo} is not a git repository")
    return Path(proc.stdout.strip())


def resolve_ref(repo: Path, ref: str) -> str:
    """The commit hash that ``ref`` names, or a PerfqError for an unknown ref."""
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise PerfqError(f"unknown ref {ref!r}")
    return proc.stdout.strip()


def merge_base(repo: Path, a: str, b: str) -> str:
    proc = git(repo, "merge-base", a, b, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise PerfqError(f"{a} and {b} have no common ancestor")
    return proc.stdout.strip()


def diff(repo: Path, base: str, head: str | None) -> str:
    """Unified diff (no context) from ``base`` to ``head`` (None: the working tree)."""
    args = ["diff", "--no-color", "--no-ext-diff", "-U0", "--find-renames", base]
    if head is not None:
        args.append(head)
    return git(repo, *args).stdout


def show(repo: Path, rev: str | None, path: str) -> bytes | None:
    """Content of ``path`` at ``rev`` (None: the working tree), or None when absent."""
    if rev is None:
        try:
            return (repo / path).read_bytes()
        except OSError:
            return None
    proc = git(repo, "show", f"{rev}:{path}", check=False, text=False)
    return proc.stdout if proc.returncode == 0 else None


def commit_info(repo: Path, rev: str) -> dict[str, str]:
    out = git(repo, "show", "-s", "--format=%H%x00%an%x00%aI%x00%s", rev).stdout.strip()
    sha, author, date, subject = (out.split("\x00") + ["", "", "", ""])[:4]
    return {"commit": sha, "author": author, "date": date, "subject": subject}


def first_parent_commits(repo: Path, rev_range: str) -> list[str]:
    """Commits of ``rev_range`` oldest first, first-parent."""
    out = git(repo, "rev-list", "--first-parent", "--reverse", rev_range).stdout
    return [line for line in out.splitlines() if line]


def read_blobs(repo: Path, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
    """Contents of many (rev, path) blobs with one ``git cat-file --batch`` process."""
    if not wanted:
        return {}
    request = "".join(f"{rev}:{path}\n" for rev, path in wanted).encode()
    try:
        proc = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=request, capture_output=True,
                              check=False)
    except FileNotFoundError:
        raise PerfqError("git is not installed") from None
    out, pos = proc.stdout, 0
    blobs: dict[tuple[str, str], bytes | None] = {}
    for key in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            blobs[key] = out[pos:pos + size]
            pos += size + 1
        else:
            blobs[key] = None  # "missing" (or not a blob)
    return blobs
