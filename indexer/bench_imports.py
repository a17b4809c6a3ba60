"""Imports within a benchmark tree: which benchmark files import a changed helper module
(``pt/configs.py``, the harness's ``benchmark_core.py``), and which modules a benchmark file's
trace depends on, directly or through other modules of the tree."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import PurePosixPath


def module_names(path: str) -> set[str]:
    """The dotted names ``path`` can be imported as, from any folder above it being on
    ``sys.path``: ``a/pt/configs.py`` -> configs, pt.configs, a.pt.configs."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts[i:]) for i in range(len(parts))}


def imported_names(path: str, source: bytes) -> set[str]:
    """Dotted modules ``source`` imports, ``from X import y`` counted as X and X.y; relative
    imports resolved against ``path``'s folder. Unparsable source imports nothing."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    package = list(PurePosixPath(path).parent.parts)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1] if node.level <= len(package) + 1 else []
                base = ".".join([*up, *([base] if base else [])])
            if base:
                out.add(base)
            out.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return out


def import_graph(sources: dict[str, bytes], also: Iterable[str] = ()) -> dict[str, set[str]]:
    """path -> the files of ``sources`` (and ``also``: paths that may have no source, a deleted
    module) that it imports directly."""
    by_name: dict[str, set[str]] = {}
    for path in (*sources, *also):
        for name in module_names(path):
            by_name.setdefault(name, set()).add(path)
    return {
        path: {target for name in imported_names(path, source) for target in by_name.get(name, ()) if target != path}
        for path, source in sources.items()
    }


def _closure(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    frontier = [start]
    while frontier:
        frontier = [n for node in frontier for n in edges.get(node, ()) if n not in seen and n != start]
        seen.update(frontier)
    return seen


def importers(changed: Iterable[str], sources: dict[str, bytes]) -> dict[str, set[str]]:
    """For each of the ``changed`` paths, the files of ``sources`` (path -> text) that import
    it, directly or through other files of ``sources``."""
    changed = list(changed)
    imported_by: dict[str, set[str]] = {}
    for path, targets in import_graph(sources, changed).items():
        for target in targets:
            imported_by.setdefault(target, set()).add(path)
    return {path: _closure(path, imported_by) for path in changed}


def dependencies(paths: Iterable[str], sources: dict[str, bytes]) -> dict[str, set[str]]:
    """For each of ``paths`` (files of ``sources``), the files of ``sources`` it imports,
    directly or through others."""
    graph = import_graph(sources)
    return {path: _closure(path, graph) for path in paths}
