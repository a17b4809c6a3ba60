"""Where perfq keeps its files for a repository.

The index and the results history live in the clone's git common dir
(``.git/perfq/``), so every worktree of a clone shares them; a non-git tree keeps
them in ``.perfq/``. Both can be overridden with ``--db`` / ``--history``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

INDEX_FILE = "index.duckdb"
HISTORY_FILE = "history.duckdb"


def git_common_dir(repo: Path) -> Path | None:
    """The git common dir of ``repo`` (shared by all its worktrees), or None outside git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        )
    except (FileNotFoundError, NotADirectoryError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return Path(out.stdout.strip())


def repo_root(start: Path) -> Path:
    """The top of the git worktree containing ``start``, or ``start`` itself outside git."""
    out = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True, text=True, check=False
    )
    if out.returncode == 0 and out.stdout.strip():
        return Path(out.stdout.strip())
    return start.resolve()


def state_dir(repo: Path) -> Path:
    """The directory holding perfq's databases for ``repo``."""
    common = git_common_dir(repo)
    return common / "perfq" if common is not None else repo.resolve() / ".perfq"


def default_index_path(repo: Path) -> Path:
    return state_dir(repo) / INDEX_FILE


def default_history_path(repo: Path) -> Path:
    return state_dir(repo) / HISTORY_FILE
