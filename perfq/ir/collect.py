"""Collect Triton IR: compile manifest kernels for the requested targets and stages.

``collect`` returns IRRecords (not yet stored) plus the per-compile failures, so one bad
kernel never loses the others. Compiles use a fresh temporary TRITON_CACHE_DIR by default,
so the raw text really comes from this compiler and this source file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common import git
from common.errors import PerfqError
from perfq.ir.compile import (
    KNOWN_STAGES,
    IRCompileError,
    compile_spec,
    kernel_source_info,
    parse_target,
)
from perfq.ir.manifest import Manifest, import_kernel
from perfq.ir.store import IRRecord


@dataclass
class CollectResult:
    """What a collection produced."""

    records: list[IRRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    compiles: int = 0
    seconds: float = 0.0
    triton_version: str = ""


@contextlib.contextmanager
def no_interpreter() -> Iterator[None]:
    """``TRITON_INTERPRET`` unset while perfq imports Triton and kernels and compiles them: a user who
    exports it to launch benchmarks on CPU would otherwise get interpreter objects that Triton cannot
    compile. The benchmark commands perfq runs keep the user's environment."""
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def require_triton() -> str:
    """The installed Triton version, or a one-line error telling how to install it. Triton is
    imported here, without ``TRITON_INTERPRET`` (see :func:`no_interpreter`): its own library
    functions are ``@triton.jit`` functions, made interpreter-only when it is set at import."""
    try:
        with no_interpreter():
            import triton
    except ImportError:
        raise PerfqError("triton is not installed: pip install triton (or pip install 'perfq[ir]')") from None
    return str(triton.__version__)


def check_targets(targets: tuple[str, ...]) -> tuple[str, ...]:
    """Validate ``backend:arch`` target strings (one-line error for a bad one)."""
    if not targets:
        raise PerfqError("no target: pass --target cuda:90 (or list targets in the manifest)")
    for target in targets:
        try:
            parse_target(target)
        except IRCompileError as exc:
            raise PerfqError(str(exc)) from None
    return targets


def check_stages(stages: tuple[str, ...]) -> tuple[str, ...]:
    bad = [s for s in stages if s not in KNOWN_STAGES]
    if bad or not stages:
        raise PerfqError(f"unknown stage(s) {', '.join(bad) or '(none)'}; known: {', '.join(KNOWN_STAGES)}")
    return stages


@contextlib.contextmanager
def triton_cache(fresh: bool) -> Iterator[None]:
    """Point TRITON_CACHE_DIR at a temporary directory for the duration (when ``fresh``)."""
    if not fresh:
        yield
        return
    old = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="perfq-ir-cache-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = old


def relative_source(path: str, repo: Path | None) -> str:
    """``path`` relative to ``repo`` when inside it (so stored metadata is checkout-independent)."""
    if not path or repo is None:
        return path
    try:
        return str(Path(path).resolve().relative_to(repo.resolve()))
    except ValueError:
        return path


def collect(
    manifest: Manifest,
    targets: tuple[str, ...],
    stages: tuple[str, ...],
    repo: Path | None = None,
    fresh_cache: bool = True,
    reload: bool = False,
) -> CollectResult:
    """Compile every (kernel, specialization) of ``manifest`` for every target (``reload``: import
    the kernels' modules afresh, e.g. after a checkout changed them)."""
    result = CollectResult(triton_version=require_triton())
    start = time.perf_counter()
    with triton_cache(fresh_cache), no_interpreter():
        for entry in manifest.kernels:
            try:
                fn = import_kernel(entry.kernel, manifest.paths, reload=reload)
            except PerfqError as exc:
                result.errors.append(f"{entry.kernel}: {exc}")
                continue
            info = kernel_source_info(fn)
            for raw_spec in entry.specializations:
                spec = raw_spec.ordered(list(getattr(fn, "arg_names", [])))
                for target in targets:
                    result.compiles += 1
                    try:
                        out = compile_spec(fn, spec, target, stages)
                    except IRCompileError as exc:
                        result.errors.append(f"{entry.kernel} [{target}]: {exc}")
                        continue
                    for stage, text in out["ir"].items():
                        result.records.append(IRRecord(
                            kernel=entry.kernel, specialization=spec.key(), target=target, stage=stage,
                            raw=text, source_file=relative_source(info["source_file"], repo),
                            function=info["function"], source_hash=info["source_hash"],
                            triton_version=out["triton_version"], spec=spec.as_dict(),
                        ))
    result.seconds = time.perf_counter() - start
    return result


def git_commit(repo: Path) -> str:
    """HEAD of ``repo`` (with ``-dirty`` when the tree has changes), or '' outside git."""
    return git.head_with_state(repo)
