"""``perfq index``: find the files, hash them, and patch the index in place for edits of a few C++
files (indexer/incremental.py) or re-link it from the facts cache (indexer/relink.py, loaded only then)."""

from __future__ import annotations

import hashlib
import time
from contextlib import nullcontext
from pathlib import Path

from indexer.build_info import BuildEvents, BuildReport, canaries_text, extractor_version, linker_version
from indexer.discover import discover
from indexer.incremental import patch_index
from indexer.native import perf_problem
from indexer.stat_cache import combined_digest, stat_cache
from indexer.trace import driver_digest, torch_available
from indexer.upstream import Upstream, resolve_upstream
from perfq.common import git
from perfq.common.interrupt import sigterm_as_interrupt
from perfq.config import Config
from perfq.errors import PerfqError
from schema.engine import duckdb
from schema.writer import build_lock, check_replaceable, copying


def build_index(
    repo: Path,
    cfg: Config,
    db_path: Path,
    jobs: int | None = None,
    quiet: bool = False,
    full: bool = False,
    trace: bool | None = None,
    events: BuildEvents | None = None,
    native: bool = False,
) -> BuildReport:
    """Build (or incrementally refresh) the index of ``repo`` at ``db_path``: an edit of
    a few C++ files that keeps their registrations is patched in place, anything else
    re-links from the facts cache (only changed files are parsed again); ``full`` forces the
    re-link. Benchmarks whose traces are not cached are traced when torch is importable
    (``trace`` True: required, False: never, None: the config's ``trace``); cached traces of
    unchanged benchmark files are always kept. ``native``: also sample benchmark tests under perf
    (indexer/native.py; a re-link, never a patch)."""
    events = events or BuildEvents()
    if trace is None:
        trace = {"on": True, "off": False}.get(cfg.trace)  # the command line wins over the config
    if not repo.is_dir():
        raise PerfqError(f"{repo} is not a directory")
    check_replaceable(db_path)
    if native and (problem := perf_problem()):
        raise PerfqError(f"--native needs perf sampling: {problem}")
    report = BuildReport()
    t0 = time.perf_counter()
    upstream = resolve_upstream(cfg.upstream, repo)
    yaml_paths = _yaml_paths(repo, cfg, upstream)
    canaries = canaries_text(repo, cfg)
    inputs = {
        "config": repr(cfg),
        "canaries": hashlib.sha256(canaries.encode()).hexdigest(),
        "config:linker": linker_version() + extractor_version(),
    }
    if upstream is not None:
        inputs["upstream"] = upstream.key()
    if trace is not False and (version := torch_available()):
        inputs["tracer"] = f"{version}:{driver_digest()}"  # new traces are due: no in-place patch
    yaml_keys = {p: _yaml_key(p) for p in yaml_paths}
    inputs.update({f"source_sha:{_named(p, repo)}": sha for p, (_, sha) in yaml_keys.items()})
    patchable = db_path.exists() and not full and not trace and not native and not cfg.compile_commands
    with sigterm_as_interrupt(), build_lock(db_path):
        inputs["indexed_commit"] = git.head(repo)
        # a patch's copy of the index is made, and the stat cache read, while the files are found
        # and hashed; a re-link starts after the copy is gone (it writes at the same scratch path)
        stat_path = db_path.with_name(db_path.name + ".stat") if db_path.parent.is_dir() else None
        with copying(db_path) if patchable else nullcontext() as copy, stat_cache(stat_path) as stats:
            files = discover(repo, cfg)
            report.timings["discover"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            digests = stats.digests(repo, [path for paths in files.values() for path in paths])
            report.timings["hash"] = time.perf_counter() - t1
            # a changed module of a benchmark tree (the harness, shared configs) changes the tests
            # of the benchmarks importing it: they are traced again, in a re-link
            inputs["source_sha:benchmark_modules"] = combined_digest({p: digests[p] for p in files["benchmark_module"]})
            patched = None
            if copy is not None:
                patched = patch_index(
                    repo,
                    db_path,
                    files,
                    digests,
                    {**inputs, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                    copy,
                )
        if patched is not None:
            report.reparsed, report.counts, report.skipped = patched.reparsed, patched.counts, patched.skipped
            report.timings.update(patched.timings)
            report.timings["total"] = time.perf_counter() - t0
            report.mode = "patched"
            return report
        from indexer.relink import relink  # here: the pool, linker, yaml and tracer load only for a re-link

        def link() -> None:
            relink(repo, cfg, db_path, files, digests, upstream, yaml_keys, canaries, inputs, report, events,
                   jobs=jobs, quiet=quiet, trace=trace, started=t0, native=native)

        facts = db_path.with_name(db_path.name + ".facts")
        try:
            link()
        except _CACHE_FAULTS:
            if not facts.exists():
                raise  # a fault of the build itself, not of cached facts
            # facts that decode but do not fit (a poisoned or damaged cache line): every file is
            # parsed again, once; a fault that remains is the build's own and propagates
            events.phase("cache", f"the facts cache {facts} holds facts that do not fit: parsing every file again")
            facts.unlink(missing_ok=True)
            link()
    return report


# what facts of the wrong types or references out of range raise while linking and writing
_CACHE_FAULTS = (TypeError, IndexError, KeyError, AttributeError, ValueError, duckdb.DataError,
                 duckdb.InvalidInputException)


def _yaml_paths(repo: Path, cfg: Config, upstream: Upstream | None) -> list[Path]:
    """The native_functions.yaml files, upstream's first; each file once, however spelt.
    With an upstream, a default path the repo lacks is not an error."""
    paths = [upstream.native_yaml] if upstream is not None else []
    default = Config().native_functions
    for p in cfg.native_functions:
        path = (Path(p) if Path(p).is_absolute() else repo / p).resolve()
        if not path.is_file():
            if upstream is not None and cfg.native_functions == default:
                continue
            raise PerfqError(f"native_functions.yaml not found at {path} (set native_functions in [tool.perfq])")
        paths.append(path)
    return list(dict.fromkeys(p.resolve() for p in paths))


def _named(path: Path, repo: Path) -> str:
    """``path`` relative to ``repo`` when it lies inside (an index moved with its repository
    keeps its inputs), else as it is."""
    try:
        return path.relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)


def _yaml_key(yaml_path: Path) -> tuple[str, str]:
    """Cache key and content digest of a native_functions.yaml (with its tags.yaml)."""
    digest = hashlib.sha256(yaml_path.read_bytes())
    tags = yaml_path.parent / "tags.yaml"
    if tags.is_file():
        digest.update(tags.read_bytes())
    return f"yaml:{yaml_path}", digest.hexdigest()
