"""`perfq ci sides`: base and head side by side, each a git worktree with its own venv, built.

The build command is one argv (no shell), ``{python}`` standing for the side's interpreter;
it runs in the side's worktree and its output goes to the log as it comes.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import git, proc
from common.errors import PerfqError

SIDE_NAMES = ("base", "head")


@dataclass(frozen=True)
class BuiltSide:
    """One built side: its commit, sources and interpreter."""

    name: str
    commit: str
    source: Path
    python: Path
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "commit": self.commit, "source": str(self.source), "python": str(self.python),
                "seconds": round(self.seconds, 1)}


def build_argv(build: str, python: Path) -> list[str]:
    """The build command as argv with ``{python}`` filled in."""
    try:
        words = shlex.split(build)
    except ValueError as exc:
        raise PerfqError(f"--build {build!r}: {exc}") from None
    if not words:
        raise PerfqError("--build is empty")
    return [w.replace("{python}", str(python)) for w in words]


def build_side(repo: Path, name: str, rev: str, build: str, root: Path, log=print) -> BuiltSide:
    """Check ``rev`` out into ``root/name/src``, make ``root/name/venv`` and run ``build`` there."""
    started = time.monotonic()
    commit = git.resolve_ref(repo, rev)
    src, venv = root / name / "src", root / name / "venv"
    if src.exists():
        raise PerfqError(f"{src} exists: give an empty --dir")
    src.parent.mkdir(parents=True, exist_ok=True)
    git.git(repo, "worktree", "add", "--detach", str(src), commit)
    log(f"{name}: {commit[:12]} checked out in {src}")
    res = proc.run([sys.executable, "-m", "venv", str(venv)], timeout=600)
    if not res.ok:
        raise PerfqError(f"{name}: cannot create a venv in {venv}: {res.error or res.last_line()}")
    python = venv / "bin" / "python"
    argv = build_argv(build, python)
    log(f"{name}: {shlex.join(argv)}")
    res = proc.run(argv, cwd=src, capture=False)
    if not res.ok:
        raise PerfqError(f"{name}: build failed ({res.error or f'exit {res.returncode}'}): {shlex.join(argv)}")
    seconds = time.monotonic() - started
    log(f"{name}: built in {seconds:.0f} s; interpreter {python}")
    return BuiltSide(name, commit, src, python, seconds)


def build_sides(repo: Path, base: str, head: str, build: str, root: Path, log=print) -> list[BuiltSide]:
    """Both sides, base first."""
    return [build_side(repo, name, rev, build, root, log) for name, rev in zip(SIDE_NAMES, (base, head), strict=True)]
