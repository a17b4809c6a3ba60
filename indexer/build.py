"""``perfq index``: the build as named passes over one state (indexer/build_spec.py). Every build
discovers and hashes the files; an edit of a few C++ files is then patched in place
(indexer/incremental.py), anything else re-linked from the facts cache (indexer/relink.py, loaded
only then: extract, link native, trace, link Python, link benchmarks, pack, write)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path

from common import git
from common.config import Config
from common.interrupt import sigterm_as_interrupt
from indexer.build_config import reads_torch, target_build
from indexer.build_info import BuildEvents, BuildReport
from indexer.build_spec import BuildSpec, BuildState, specify_build
from indexer.discover import discover
from indexer.incremental import patch_index
from indexer.native import NativeRun
from indexer.stat_cache import StatCache, combined_digest, stat_cache
from indexer.torch_record import record_torch_build
from schema.engine import duckdb
from schema.writer import CopyInProgress, build_lock, copying


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
    native_run: NativeRun | None = None,
) -> BuildReport:
    """Build (or incrementally refresh) the index of ``repo`` at ``db_path``: an edit of
    a few C++ files that keeps their registrations is patched in place, anything else
    re-links from the facts cache (only changed files are parsed again); ``full`` forces the
    re-link. Benchmarks whose traces are not cached are traced when torch is importable
    (``trace`` True: required, False: never, None: the config's ``trace``); cached traces of
    unchanged benchmark files are always kept. ``native``: also sample benchmark tests under perf
    (indexer/native.py; a re-link, never a patch); ``native_run``: one shard of them, written to a
    file too, or (without ``native``) shard files merged instead of sampling."""
    spec = specify_build(repo, cfg, db_path, jobs=jobs, quiet=quiet, full=full, trace=trace, events=events,
                      native=native, native_run=native_run)
    state = BuildState(inputs=dict(spec.inputs))
    with sigterm_as_interrupt(), build_lock(spec.db_path):
        state.inputs["indexed_commit"] = git.head(spec.repo)
        record_build_settings(spec)  # before the link: its -D flags decide which #if branches it keeps
        state.build = target_build(spec.repo, spec.cfg, spec.db_path.parent)
        state.inputs["config:build_macros"] = state.build.digest()  # other macros: re-linked, not patched
        # a patch's copy of the index is made, and the stat cache read, while the files are found
        # and hashed; a re-link starts after the copy is gone (it writes at the same scratch path)
        with copying(spec.db_path) if spec.patchable else nullcontext() as copy, stat_cache(spec.stat_path) as stats:
            discover_files(spec, state)
            hash_files(spec, state, stats)
            if copy is not None and patch(spec, state, copy):
                return state.report
        relink_from_cache(spec, state)
    return state.report


def record_build_settings(spec: BuildSpec) -> None:
    """Record the installed torch's build settings once per torch install, in a build that may
    trace (importing torch costs seconds, as each traced benchmark's run does):
    the link and `perfq affected` read which ``#if`` branches the target build compiles from them."""
    if spec.trace is not False and reads_torch(spec.cfg):
        why = record_torch_build(spec.db_path.parent)
        if why is not None:
            spec.events.phase("torch build settings not recorded", f"{why} (#if branches on its -D flags stay kept)")


def discover_files(spec: BuildSpec, state: BuildState) -> None:
    """Pass *discover*: the files to index, by kind (indexer/discover.py)."""
    state.files = discover(spec.repo, spec.cfg)
    state.report.timings["discover"] = time.perf_counter() - spec.started


def hash_files(spec: BuildSpec, state: BuildState, stats: StatCache) -> None:
    """Pass *hash*: the files' content digests (hashed again only when their stat changed)."""
    with state.timed("hash"):
        state.digests = stats.digests(spec.repo, [path for paths in state.files.values() for path in paths])
    # a changed module of a benchmark tree (the harness, shared configs) changes the tests
    # of the benchmarks importing it: they are traced again, in a re-link
    modules = {p: state.digests[p] for p in state.files["benchmark_module"]}
    state.inputs["source_sha:benchmark_modules"] = combined_digest(modules)


def patch(spec: BuildSpec, state: BuildState, copy: CopyInProgress) -> bool:
    """Pass *patch*: patch the index in place (``copy``: the copy of it being made) when only a few
    C++ files changed; False when the change needs a re-link."""
    patched = patch_index(spec, state, copy)
    if patched is None:
        return False
    report = state.report
    report.reparsed, report.counts, report.skipped = patched.reparsed, patched.counts, patched.skipped
    report.timings.update(patched.timings)
    report.timings["total"] = time.perf_counter() - spec.started
    report.mode = "patched"
    return True


def relink_from_cache(spec: BuildSpec, state: BuildState) -> None:
    """The re-link's passes (indexer/relink.py); when the facts cache holds facts that do not fit,
    once more with every file parsed again."""
    from indexer.relink import relink  # here: the pool, linker, yaml and tracer load only for a re-link

    try:
        relink(spec, state)
    except _CACHE_FAULTS:
        if not spec.facts_path.exists():
            raise  # a fault of the build itself, not of cached facts
        # facts that decode but do not fit (a poisoned or damaged cache line): every file is
        # parsed again, once; a fault that remains is the build's own and propagates
        spec.events.phase("cache", f"the facts cache {spec.facts_path} holds facts that do not fit: "
                                   "parsing every file again")
        spec.facts_path.unlink(missing_ok=True)
        relink(spec, state)


# what facts of the wrong types or references out of range raise while linking and writing
_CACHE_FAULTS = (TypeError, IndexError, KeyError, AttributeError, ValueError, duckdb.DataError,
                 duckdb.InvalidInputException)
