"""Git plumbing: every git subprocess perfq runs goes through here."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import files
from common.errors import PerfqError

_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a full object id (SHA-1 or SHA-256)


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    text: bool = True,
    stdin: str | bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run ``git args`` in ``repo``; with ``check``, a failure is a PerfqError with git's first line."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=repo,
            capture_output=True,
            text=text,
            errors="replace" if text else None,
            check=False,
            input=stdin,
            timeout=timeout,
        )
    except FileNotFoundError:
        raise PerfqError("git is not installed or not on PATH") from None
    except NotADirectoryError:
        raise PerfqError(f"{repo} is not a directory") from None
    except subprocess.TimeoutExpired:
        raise PerfqError(f"git {' '.join(args[:2])} timed out after {timeout:g}s") from None
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        out = proc.stdout if text else proc.stdout.decode("utf-8", "replace")
        first = (err.strip() or out.strip() or f"exit {proc.returncode}").splitlines()[0]
        raise PerfqError(f"git {' '.join(args[:3])}: {first}")
    return proc


def out(repo: Path, *args: str, timeout: float | None = None) -> str:
    """Stdout of ``git args`` (PerfqError on failure)."""
    return git(repo, *args, timeout=timeout).stdout


def ok(repo: Path, *args: str) -> bool:
    """Whether ``git args`` succeeds (a missing git or directory is a failure too)."""
    try:
        return git(repo, *args, check=False).returncode == 0
    except PerfqError:
        return False


def line(repo: Path, *args: str) -> str | None:
    """The stripped stdout of a successful ``git args``, or None (failure, empty output, no git)."""
    try:
        proc = git(repo, *args, check=False)
    except PerfqError:
        return None
    text = proc.stdout.strip()
    return text if proc.returncode == 0 and text else None


@contextmanager
def stream(repo: Path, *args: str) -> Iterator[Iterator[str]]:
    """The stdout lines of a long-running ``git args`` as they come; PerfqError when it fails."""
    try:
        proc = subprocess.Popen(
            ["git", *args], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise PerfqError(f"cannot run git in {repo}: {exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield iter(proc.stdout)
        stderr = proc.stderr.read()
        if proc.wait() != 0:
            first = stderr.strip().splitlines()[0] if stderr.strip() else f"git {args[0]} failed"
            raise PerfqError(f"git {' '.join(args[:2])} failed: {first}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_LOCATED: dict[str, tuple[Path, Path]] = {}  # a worktree's paths -> (top, common dir), found once per process


def _locate(path: Path) -> tuple[Path, Path] | None:
    """(top of the worktree, git common dir) of ``path`` in one git call, or None (outside a worktree)."""
    key = str(path.resolve())
    if key not in _LOCATED:
        found = line(path, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
        parts = found.splitlines() if found else []
        if len(parts) != 2:
            return None
        top, common = Path(parts[0]), Path(parts[1])
        _LOCATED[key] = _LOCATED[str(top.resolve())] = (top, common)
    return _LOCATED[key]


def toplevel(path: Path) -> Path | None:
    """The top of the worktree containing ``path``, or None outside git."""
    located = _locate(path)
    return located[0] if located else None


def common_dir(repo: Path) -> Path | None:
    """The git common dir of ``repo`` (shared by all its worktrees), or None outside git."""
    located = _locate(repo)
    if located:
        return located[1]
    found = line(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")  # a bare repository
    return Path(found) if found else None


def require_repo(repo: Path) -> Path:
    """The top of the worktree at ``repo``, or a PerfqError when it is not a git repository."""
    if not repo.is_dir():
        raise PerfqError(f"{repo} is not a directory")
    top = toplevel(repo)
    if top is None:
        if shutil.which("git") is None:
            raise PerfqError("git is not installed or not on PATH")
        raise PerfqError(f"{repo} is not a git repository")
    return top


def rev(repo: Path, ref: str) -> str | None:
    """The commit hash ``ref`` names, or None when it names no commit."""
    if not ref or ref.startswith("-"):
        return None
    return line(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")


def resolve_ref(repo: Path, ref: str) -> str:
    """The commit hash that ``ref`` names, or a PerfqError for an unknown ref."""
    sha = rev(repo, ref)
    if sha is None:
        raise PerfqError(f"unknown ref {ref!r}")
    return sha


def resolve_refs(repo: Path, refs: list[str]) -> list[str]:
    """The commit hashes that ``refs`` name, asked in one git call; the PerfqError of the
    first unknown ref when one names no commit."""
    if all(ref and not ref.startswith("-") for ref in refs):
        proc = git(repo, "rev-parse", *(f"{ref}^{{commit}}" for ref in refs), check=False)
        shas = proc.stdout.split()
        if proc.returncode == 0 and len(shas) == len(refs) and all(_HASH.fullmatch(sha) for sha in shas):
            return shas
    return [resolve_ref(repo, ref) for ref in refs]


def resolve_with_base(repo: Path, head: str, other: str) -> tuple[str, str, str]:
    """(``head``'s commit, ``other``'s commit, their merge base), asked in one git call
    (``rev-parse other...head`` lists both and the merge base); the errors of resolve_refs and
    merge_base when a ref names no commit or the two have no single merge base."""
    if all(ref and not ref.startswith("-") for ref in (head, other)):
        proc = git(repo, "rev-parse", f"{other}^{{commit}}...{head}^{{commit}}", check=False)
        shas = proc.stdout.split()
        if proc.returncode == 0 and len(shas) == 3 and shas[2].startswith("^"):
            found = shas[0], shas[1], shas[2][1:]
            if all(_HASH.fullmatch(sha) for sha in found):
                return found
    head_sha, other_sha = resolve_refs(repo, [head, other])
    return head_sha, other_sha, other_sha if other_sha == head_sha else merge_base(repo, other_sha, head_sha)


def head(repo: Path) -> str:
    """The commit checked out in ``repo``, or '' (outside git, empty repository)."""
    return line(repo, "rev-parse", "HEAD") or ""


def branch(repo: Path) -> str | None:
    """The checked-out branch name, or None when HEAD is detached."""
    return line(repo, "symbolic-ref", "-q", "--short", "HEAD")


def dirty(repo: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not)."""
    entries = out(repo, "status", "--porcelain", "-z", "--untracked-files=no").split("\0")
    names, renamed = [], False
    for entry in entries:
        if renamed:  # a rename's second field: its old name
            renamed = False
        elif entry:
            names.append(entry[3:])
            renamed = entry[0] in "RC"
    return names


def head_with_state(repo: Path) -> str:
    """HEAD of ``repo`` (with ``-dirty`` when tracked files changed), or '' outside git."""
    sha = head(repo)
    if not sha:
        return ""
    return sha + ("-dirty" if dirty(repo) else "")


def merge_base(repo: Path, a: str, b: str) -> str:
    found = line(repo, "merge-base", "--end-of-options", a, b)
    if found is None:
        raise PerfqError(f"{a} and {b} have no common ancestor")
    return found


def count_commits(repo: Path, ref: str = "HEAD") -> int:
    """Number of commits reachable from ``ref`` (0 for an empty repository)."""
    return int(line(repo, "rev-list", "--count", "--end-of-options", ref, "--") or 0)


def diff(repo: Path, base: str, head: str | None) -> str:
    """Unified diff (no context) from ``base`` to ``head`` (None: the working tree)."""
    args = ["diff", "--no-color", "--no-ext-diff", "-U0", "--find-renames", "--full-index", "--end-of-options", base]
    if head is not None:
        args.append(head)
    return out(repo, *args, "--")


def blob_id(data: bytes, like: str) -> str:
    """The id git gives ``data`` as a blob, in the hash of the id ``like`` (SHA-1 or SHA-256)."""
    digest = hashlib.sha256() if len(like) == 64 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def show(repo: Path, rev: str | None, path: str) -> bytes | None:
    """Content of ``path`` at ``rev`` (None: the working tree), or None when absent."""
    if rev is None:
        try:  # a regular file inside the tree: never a device, a pipe or a link leaving it
            return b"".join(files.chunks(str(repo), path))
        except OSError:
            return None
    proc = git(repo, "cat-file", "blob", "--end-of-options", f"{rev}:{path}", check=False, text=False)
    return proc.stdout if proc.returncode == 0 else None


@dataclass(frozen=True)
class CommitInfo:
    """Who made a commit, when, and its subject line."""

    commit: str
    author: str
    email: str
    date: str
    subject: str


def commit(repo: Path, rev: str) -> CommitInfo:
    """Author, date and subject of commit ``rev``."""
    text = out(repo, "show", "-s", "--format=%H%x00%an%x00%ae%x00%aI%x00%s", "--end-of-options", rev, "--").rstrip("\n")
    sha, author, email, date, subject = (text.split("\x00") + [""] * 5)[:5]
    return CommitInfo(sha, author, email, date, subject)


def commit_info(repo: Path, rev: str) -> dict[str, str]:
    """``commit(repo, rev)`` as the dict ``perfq backtest`` reports."""
    info = commit(repo, rev)
    return {"commit": info.commit, "author": info.author, "date": info.date, "subject": info.subject}


def first_parent_commits(repo: Path, rev_range: str) -> list[str]:
    """Commits of ``rev_range`` oldest first, first-parent."""
    return out(repo, "rev-list", "--first-parent", "--reverse", "--end-of-options", rev_range, "--").split()


def parents(repo: Path, sha: str) -> list[str]:
    return out(repo, "rev-list", "--parents", "-n", "1", "--end-of-options", sha, "--").split()[1:]


def read_blobs(repo: Path, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
    """Contents of many (rev, path) blobs with one ``git cat-file --batch`` process; a rev
    of None names the blob by the object id in ``path`` (no tree to walk: a third of the time)."""
    if not wanted:
        return {}
    request = "".join(f"{path}\n" if rev is None else f"{rev}:{path}\n" for rev, path in wanted).encode()
    data, pos = git(repo, "cat-file", "--batch", check=False, text=False, stdin=request).stdout, 0
    blobs: dict[tuple[str, str], bytes | None] = {}
    for key in wanted:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            blobs[key] = data[pos : pos + size]
            pos += size + 1
        else:
            blobs[key] = None  # "missing" (or not a blob)
    return blobs
