"""Which files of a repository get indexed, by kind (cpp, python, benchmark, yaml)."""

from __future__ import annotations

import bisect
import os
from pathlib import Path, PurePosixPath

from common import git, globs
from common.config import Config
from common.errors import PerfqError

CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".mm")


def listed_files(repo: Path, roots: tuple[str, ...]) -> list[str]:
    """Repo-relative files below ``roots``: git's list when in git, else a walk."""
    roots = tuple(r.strip("/") for r in roots if r)
    if not roots:
        return []
    out = git.git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *roots,
                  check=False, text=False)  # git missing from PATH: PerfqError, one line
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


def excluded(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``path`` (or ``/path``) matches one of the fnmatch ``patterns``."""
    return bool(excluded_paths([path], patterns))


def excluded_paths(paths: list[str], patterns: tuple[str, ...]) -> set[str]:
    """Those of ``paths`` matching one of the fnmatch ``patterns`` (a path or ``/path``;
    thousands of paths per build, filtered a pattern's literal text at a time)."""
    rooted = ["/" + p for p in paths]
    return {r[1:] for pattern in patterns for r in globs.matching(rooted, pattern, rooted=True)}


ROOTS = {  # config key -> the kind of file its roots hold, and what it is called
    "source_roots": ("cpp", "C++ source"),
    "python_roots": ("python", "Python file"),
    "benchmark_roots": ("benchmark", "benchmark file (*_test.py)"),
    "script_benchmark_roots": ("benchmark", "Python script"),
}


def _configured(cfg: Config, key: str) -> list[str]:
    """The roots of ``key`` the user chose (not left at the PyTorch defaults)."""
    defaults = getattr(Config(), key)
    return [r for r in getattr(cfg, key) if r not in defaults]


def check_roots(repo: Path, cfg: Config) -> None:
    """A configured root that does not exist in ``repo`` is an error. Roots left at their PyTorch
    defaults may be missing (an out-of-tree backend, a partial checkout)."""
    for key in ROOTS:
        for root in _configured(cfg, key):
            if PurePosixPath(root).is_absolute() or ".." in PurePosixPath(root).parts:
                raise PerfqError(f"{key}: {root!r} is not inside the repository (roots are relative to {repo})")
            if not (repo / root.strip("/")).exists():
                raise PerfqError(f"{key}: {root!r} does not exist in {repo} (set {key} in [tool.perfq] or perfq.toml)")


def require_sources(repo: Path, cfg: Config, files: dict[str, list[str]]) -> None:
    """A configured root holding no file of its kind, or nothing at all to index (and no upstream),
    is an error, not an empty index."""
    for key, (kind, what) in ROOTS.items():
        for root in _configured(cfg, key):
            base = root.strip("/")
            if not any(p == base or p.startswith(base + "/") for p in files[kind]):
                raise PerfqError(f"{key}: {root!r} holds no {what} to index (outside the exclude patterns)")
    if any(files[kind] for kind, _ in ROOTS.values()) or cfg.upstream:
        return
    raise PerfqError(
        f"nothing to index in {repo}: no C++, Python or benchmark file under the configured roots; "
        "set source_roots, python_roots or benchmark_roots in [tool.perfq] or perfq.toml"
    )


def discover(repo: Path, cfg: Config) -> dict[str, list[str]]:
    """Files to index by kind: 'cpp', 'python', 'benchmark', and the 'benchmark_module's the
    benchmarks may import; PerfqError when a configured root is missing or there is nothing to
    index."""
    check_roots(repo, cfg)
    files = _discover(repo, cfg)
    require_sources(repo, cfg, files)
    return files


def _under(files: list[str], roots: tuple[str, ...]) -> list[str]:
    """The paths of sorted ``files`` that are one of ``roots`` or lie below one."""
    found: set[str] = set()
    for root in (r.strip("/") for r in roots if r.strip("/")):
        at = bisect.bisect_left(files, root)
        if at < len(files) and files[at] == root:  # a root that is a file
            found.add(root)
        below = bisect.bisect_left(files, root + "/"), bisect.bisect_left(files, root + "0")  # "0" follows "/"
        found.update(files[below[0] : below[1]])
    return sorted(found)


def _in_roots(path: str, roots: tuple[str, ...]) -> bool:
    return any(path.startswith(r.strip("/") + "/") for r in roots)


def benchmark_trees(cfg: Config) -> tuple[str, ...]:
    """The folders benchmarks run from, whose other Python files they may import: an
    operator_benchmark root's parent (``pt``'s holds the harness, ``benchmark_core.py``) and
    each script root."""
    roots = [r.strip("/") for r in cfg.benchmark_roots if r.strip("/")]
    parents = [str(PurePosixPath(r).parent) if "/" in r else r for r in roots]
    return tuple(dict.fromkeys([*parents, *(r.strip("/") for r in cfg.script_benchmark_roots if r.strip("/"))]))


def in_benchmark_tree(path: str, cfg: Config) -> bool:
    """A Python file of a benchmark tree: a benchmark, or a module benchmarks may import."""
    return path.endswith(".py") and _in_roots(path, benchmark_trees(cfg))


def is_benchmark_file(path: str, cfg: Config) -> bool:
    """A benchmark file: ``*_test.py`` under a benchmark root, or any script under a script root."""
    if not path.endswith(".py") or path.endswith("__init__.py"):
        return False
    return (path.endswith("_test.py") and _in_roots(path, cfg.benchmark_roots)) or _in_roots(
        path, cfg.script_benchmark_roots
    )


def _discover(repo: Path, cfg: Config) -> dict[str, list[str]]:
    trees = benchmark_trees(cfg)
    every = listed_files(repo, (*cfg.source_roots, *trees, *cfg.python_roots))  # one git call for all roots
    cpp = [p for p in _under(every, tuple(cfg.source_roots)) if p.endswith(CPP_SUFFIXES)]
    cpp = _without(cpp, cfg.exclude)
    bench, modules = [], []
    for p in _under(every, trees):
        if p.endswith(".py"):
            (bench if is_benchmark_file(p, cfg) else modules).append(p)
    python = _without([p for p in _under(every, tuple(cfg.python_roots)) if p.endswith(".py")], cfg.exclude)
    return {"cpp": cpp, "python": python, "benchmark": bench, "benchmark_module": modules}


def _without(paths: list[str], patterns: tuple[str, ...]) -> list[str]:
    gone = excluded_paths(paths, patterns)
    return [p for p in paths if p not in gone] if gone else paths
