"""Where perfq keeps its files for a repository.

The index and the results history live in the clone's git common dir
(``.git/perfq/``), so every worktree of a clone shares them; a non-git tree keeps
them in ``.perfq/``. Both can be overridden with ``--db`` / ``--history``.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from common import git

INDEX_FILE = "index.duckdb"
HISTORY_FILE = "history.duckdb"


def git_common_dir(repo: Path) -> Path | None:
    """The git common dir of ``repo`` (shared by all its worktrees), or None outside git."""
    return git.common_dir(repo)


def repo_root(start: Path) -> Path:
    """The top of the git worktree containing ``start``, or ``start`` itself outside git."""
    return git.toplevel(start) or start.resolve()


def state_dir(repo: Path) -> Path:
    """The directory holding perfq's databases for ``repo``."""
    common = git_common_dir(repo)
    return common / "perfq" if common is not None else repo.resolve() / ".perfq"


def default_index_path(repo: Path) -> Path:
    return state_dir(repo) / INDEX_FILE


def default_history_path(repo: Path) -> Path:
    return state_dir(repo) / HISTORY_FILE


def write_atomically(path: Path, chunks: Iterable[str] | Iterable[bytes], *, binary: bool = False,
                     own: bool = False) -> None:
    """Write ``chunks`` (text, or bytes when ``binary``) to ``path`` through a scratch file with a
    unique name beside it (``<name>.<random>.tmp``, ``mkstemp``) renamed over it: readers see the
    old file or the new one, never half of one. A symlink is written through (its target is
    replaced, the link kept); a device or a pipe (``/dev/stdout``) is written directly, never
    replaced by a regular file; a directory is an IsADirectoryError. ``own``: perfq's own file (a
    cache beside the index): a symlink, device or pipe planted there is replaced, never written
    through (a FIFO would block the write forever). OSError propagates."""
    target = Path(path) if own else Path(os.path.realpath(path))
    try:
        mode = os.lstat(target).st_mode if own else os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if own and mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        mode = None  # replaced by the rename below
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if mode is not None and not stat.S_ISREG(mode):
        with target.open("ab") if binary else target.open("a", encoding="utf-8") as fh:
            fh.writelines(chunks)
        return
    fd, name = tempfile.mkstemp(prefix=f"{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, stat.S_IMODE(mode) if mode is not None else 0o644)
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(chunks)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
