"""Which files of a repository get indexed, by kind (cpp, python, benchmark, yaml)."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path

from perfq.config import Config
from perfq.errors import PerfqError

CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".mm")


def _listed(repo: Path, roots: tuple[str, ...]) -> list[str]:
    """Repo-relative files below ``roots``: git's list when in git, else a walk."""
    roots = tuple(r.strip("/") for r in roots if r)
    if not roots:
        return []
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *roots],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    if out.returncode == 0:
        return sorted({p for p in out.stdout.decode("utf-8", "replace").split("\0") if p})
    found: list[str] = []
    for root in roots:
        base = repo / root
        if base.is_file():
            found.append(root)
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, repo)
            found += [f"{rel}/{f}".replace(os.sep, "/") for f in filenames]
    return sorted(set(found))


def _excluded(path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch("/" + path, p) for p in patterns)


ROOT_KEYS = ("source_roots", "python_roots", "benchmark_roots", "script_benchmark_roots")


def check_roots(repo: Path, cfg: Config) -> None:
    """A configured root that does not exist in ``repo`` is an error. Roots left at their PyTorch
    defaults may be missing (an out-of-tree backend, a partial checkout)."""
    defaults = Config()
    for key in ROOT_KEYS:
        for root in getattr(cfg, key):
            if root not in getattr(defaults, key) and not (repo / root.strip("/")).exists():
                raise PerfqError(f"{key}: {root!r} does not exist in {repo} (set {key} in [tool.perfq] or perfq.toml)")


def require_sources(repo: Path, cfg: Config, files: dict[str, list[str]]) -> None:
    """Nothing to index (no C++ or Python file and no upstream) is an error, not an empty index."""
    if files["cpp"] or files["python"] or cfg.upstream:
        return
    roots = ", ".join(repr(r) for r in cfg.source_roots + cfg.python_roots) or "none"
    raise PerfqError(
        f"nothing to index in {repo}: no C++ or Python file under source_roots/python_roots ({roots}); "
        "set them in [tool.perfq] or perfq.toml"
    )


def discover(repo: Path, cfg: Config) -> dict[str, list[str]]:
    """Files to index by kind: 'cpp', 'python', 'benchmark'; PerfqError when a configured root is
    missing or there is nothing to index."""
    check_roots(repo, cfg)
    files = _discover(repo, cfg)
    require_sources(repo, cfg, files)
    return files


def _discover(repo: Path, cfg: Config) -> dict[str, list[str]]:
    cpp = [p for p in _listed(repo, cfg.source_roots) if p.endswith(CPP_SUFFIXES) and not _excluded(p, cfg.exclude)]
    bench_roots = tuple(cfg.benchmark_roots) + tuple(cfg.script_benchmark_roots)
    bench = [
        p
        for p in _listed(repo, bench_roots)
        if p.endswith(".py")
        and not p.endswith("__init__.py")
        and (p.endswith("_test.py") or any(p.startswith(r.strip("/") + "/") for r in cfg.script_benchmark_roots))
    ]
    python = [p for p in _listed(repo, cfg.python_roots) if p.endswith(".py") and not _excluded(p, cfg.exclude)]
    return {"cpp": cpp, "python": python, "benchmark": bench}
