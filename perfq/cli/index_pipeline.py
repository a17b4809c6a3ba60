"""``perfq index`` as a function: a typed request in, the build's report out.

The stages: the configuration (the repository's config file, then the command line's roots and
files), then the build (``indexer.build.build_index``: discover, hash, patch or re-link, write;
see docs/architecture.md). ``perfq.cli.index_cmd`` turns the command line into an
``IndexRequest`` and prints the ``IndexAnswer``; from Python::

    answer = index(IndexRequest(repo=Path("."), trace=False))
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfq.options import resolve_db

if TYPE_CHECKING:  # the indexer loads only when a command runs
    from common.config import Config
    from indexer.build_info import BuildEvents, BuildReport
    from indexer.native import NativeRun


@dataclass(frozen=True)
class IndexRequest:
    """What ``perfq index`` was asked (``repo`` resolved to its root); the roots and files
    override the config's when given."""

    repo: Path
    db: Path | None = None
    jobs: int | None = None  # worker processes (None: all cores)
    source_roots: tuple[str, ...] = ()
    native_functions: tuple[str, ...] = ()
    python_roots: tuple[str, ...] = ()
    benchmark_roots: tuple[str, ...] = ()
    script_benchmark_roots: tuple[str, ...] = ()
    upstream: str | None = None
    canaries: str | None = None
    compile_commands: str | None = None
    quiet: bool = False
    full: bool = False
    trace: bool | None = None  # None: the config's trace
    native: bool = False
    native_shard: str | None = None  # I/N
    native_out: Path | None = None
    native_from: tuple[Path, ...] = ()


@dataclass(frozen=True)
class IndexAnswer:
    """Where the index was written, and what the build did."""

    db: Path
    report: BuildReport


def index(request: IndexRequest, events: BuildEvents | None = None,
          warn: Callable[[str], None] | None = None) -> IndexAnswer:
    """Run the command's stages for ``request``; ``events`` sees the build's phases, ``warn``
    the configuration's warnings (default: stderr)."""
    cfg = config(request, warn or _to_stderr)
    target = resolve_db(request.repo, request.db)
    return IndexAnswer(target, build(request, cfg, target, events))


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def config(request: IndexRequest, warn: Callable[[str], None]) -> Config:
    """The repository's configuration with the request's roots and files; unknown keys warned of."""
    from common.config import load_config

    overrides = {
        "source_roots": list(request.source_roots) or None,
        "native_functions": list(request.native_functions) or None,
        "python_roots": list(request.python_roots) or None,
        "benchmark_roots": list(request.benchmark_roots) or None,
        "script_benchmark_roots": list(request.script_benchmark_roots) or None,
        "upstream": request.upstream,
        "canaries": request.canaries,
        "compile_commands": request.compile_commands,
    }
    cfg = load_config(request.repo, overrides)
    for key in cfg.unknown_keys():
        warn(f"warning: unknown config key {key!r} is ignored")
    return cfg


def build(request: IndexRequest, cfg: Config, target: Path, events: BuildEvents | None) -> BuildReport:
    """The index built (or patched) at ``target``."""
    from indexer.build import build_index

    return build_index(request.repo, cfg, target, jobs=request.jobs, quiet=request.quiet, full=request.full,
                       trace=request.trace, events=events, native=request.native, native_run=native_run(request))


def native_run(request: IndexRequest) -> NativeRun:
    """The native pass's shard, shard file and files to merge."""
    from indexer.native import NativeRun, Shard

    shard = Shard.parse(request.native_shard) if request.native_shard else None
    return NativeRun(shard, request.native_out, request.native_from)
