"""Keys of the index cache: one entry per commit; a PR restores its base's, else the nearest ancestor's."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from common import git
from schema.version import SCHEMA_VERSION


@dataclass(frozen=True)
class CacheKeys:
    """``key`` for ``actions/cache`` and its ``restore-keys``, nearest first (the last one a bare prefix)."""

    key: str
    restore_keys: tuple[str, ...]
    delimiter: str  # of the multi-line $GITHUB_OUTPUT value


def cache_keys(repo: Path, rev: str, prefix: str, ancestors: int) -> CacheKeys:
    """Keys for the index of ``rev``: ``PREFIX-sSCHEMA-<commit>``, then its first-parent ancestors in the clone."""
    stem = f"{prefix}-s{SCHEMA_VERSION}-"
    commit = git.resolve_ref(repo, rev)
    older: list[str] = []
    if ancestors:
        # a shallow clone ends where it was cut: rev-list lists what is there, and that is enough
        out = git.git(repo, "rev-list", "--first-parent", f"--max-count={ancestors}", f"{commit}^", "--",
                      check=False)
        older = out.stdout.split() if out.returncode == 0 else []
    return CacheKeys(stem + commit, (*(stem + c for c in older), stem), f"PERFQ_{secrets.token_hex(8)}")


def pinned_torch(repo: Path) -> str:
    """The ``torch==X`` requirement the repository pins (requirements*.txt, pyproject.toml), '' when none."""
    for name in ("requirements.txt", "requirements-ci.txt", "pyproject.toml"):
        data = git.show(repo, None, name)
        for line in (data or b"").decode("utf-8", "replace").splitlines():
            words = line.replace('"', " ").replace("'", " ").replace(",", " ").split()
            for word in words:
                if word.startswith("torch==") and len(word) > len("torch=="):
                    return word
    return ""
