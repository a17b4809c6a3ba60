"""``perfq ir collect | capture | harvest`` as functions: a typed request in, the stored
collection out.

Each runs the same stages: gather IR records (compile the manifest's kernels, run a command and
compile what it specialized, or read a cache directory), store them under a label in the results
history, then the document (``IRCollectDocument``). ``perfq.ir.cli`` builds the requests and prints
the answers; from Python::

    answer = collect_ir(CollectRequest(Destination(repo, history, "base"), targets=("cuda:90",)))
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfq.ir.collect import CollectResult
from perfq.ir.report import IRCollectDocument


@dataclass(frozen=True)
class Destination:
    """Where a collection is stored: ``label`` in ``history``, for ``commit`` (default: HEAD of ``repo``)."""

    repo: Path
    history: Path
    label: str
    commit: str | None = None


@dataclass(frozen=True)
class CollectRequest:
    """``perfq ir collect``: the manifest's kernels compiled for each target."""

    to: Destination
    targets: tuple[str, ...] = ()  # comma-separated lists allowed; none: the manifest's
    stages: tuple[str, ...] = ()  # none: the manifest's
    manifest: Path | None = None  # default perfq-ir.yaml
    kernels: tuple[str, ...] = ()  # only kernels whose name contains one of these
    fresh_cache: bool = True


@dataclass(frozen=True)
class CaptureRequest:
    """``perfq ir capture``: ``command`` run, the specializations it compiled or launched compiled."""

    to: Destination
    command: tuple[str, ...]
    cwd: Path
    targets: tuple[str, ...] = ()  # none: cuda:90
    stages: tuple[str, ...] = ()
    fresh_cache: bool = True


@dataclass(frozen=True)
class HarvestRequest:
    """``perfq ir harvest``: the IR files a run left in a directory."""

    to: Destination
    directory: Path | None = None  # default $TRITON_DUMP_DIR, $TRITON_CACHE_DIR, ~/.triton/cache
    stages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Collected:
    """What was gathered, and the stored collection's document."""

    result: CollectResult
    document: IRCollectDocument


def stages_of(values: tuple[str, ...] | list[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """IR stages from comma-separated values (``default`` when none), checked."""
    from perfq.ir.collect import check_stages

    if not values:
        return default
    return check_stages(tuple(s.strip() for v in values for s in v.split(",") if s.strip()))


def targets_of(values: tuple[str, ...] | list[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """Compile targets from comma-separated values (``default`` when none), checked."""
    from perfq.ir.collect import check_targets

    targets = tuple(t.strip() for v in (values or []) for t in v.split(",") if t.strip()) or default
    return check_targets(targets)


def collect_ir(request: CollectRequest) -> Collected:
    """Compile the manifest's kernels for each target and store every IR."""
    from dataclasses import replace

    from common.errors import PerfqError
    from perfq.ir.collect import collect, require_triton
    from perfq.ir.manifest import load_manifest

    repo = request.to.repo
    require_triton()
    spec = load_manifest(repo, request.manifest)
    if request.kernels:
        spec = replace(spec, kernels=tuple(k for k in spec.kernels if any(s in k.kernel for s in request.kernels)))
        if not spec.kernels:
            raise PerfqError(f"no manifest kernel matches {', '.join(request.kernels)}")
    targets = targets_of(request.targets, spec.targets)
    stages = stages_of(request.stages, spec.stages)
    result = collect(spec, targets, stages, repo, fresh_cache=request.fresh_cache)
    details = {"targets": targets, "stages": stages, "manifest": spec.origin, "errors": result.errors,
               "seconds": round(result.seconds, 2)}
    return store(request.to, "manifest", result, details)


def capture_ir(request: CaptureRequest) -> Collected:
    """Run the command recording its Triton specializations, compile them for each target, store them."""
    from perfq.ir.capture import capture
    from perfq.ir.collect import require_triton
    from perfq.ir.compile import DEFAULT_STAGES

    require_triton()
    command = list(request.command)
    targets = targets_of(request.targets, ("cuda:90",) if not request.targets else ())
    stages = stages_of(request.stages, DEFAULT_STAGES)
    status, result, n_specs = capture(command, targets, stages, request.cwd, request.to.repo,
                                      fresh_cache=request.fresh_cache)
    if status != 0:
        result.errors.insert(0, f"command exited with status {status}")
    if n_specs == 0:
        result.errors.append("no Triton specialization was compiled or launched by the command")
    details = {"targets": targets, "stages": stages, "command": command, "command_status": status,
               "specializations": n_specs, "errors": result.errors}
    return store(request.to, "capture", result, details, specializations=n_specs, command_status=status)


def harvest_ir(request: HarvestRequest) -> Collected:
    """Read the IR files under the directory and store them."""
    from perfq.ir.compile import DEFAULT_STAGES
    from perfq.ir.harvest import harvest

    directory = request.directory or _default_harvest_directory()
    stages = stages_of(request.stages, DEFAULT_STAGES)
    start = time.perf_counter()
    records = harvest(directory, stages, request.to.repo)
    versions = sorted({r.triton_version for r in records if r.triton_version})
    result = CollectResult(records, [], 0, time.perf_counter() - start, ",".join(versions))
    if not records:
        result.errors.append(f"no Triton IR files ({', '.join(stages)}) found under {directory}")
    details = {"directory": str(directory), "stages": stages}
    return store(request.to, "harvest", result, details, directory=str(directory))


def _default_harvest_directory() -> Path:
    env = os.environ.get("TRITON_DUMP_DIR") or os.environ.get("TRITON_CACHE_DIR")
    return Path(env) if env else Path.home() / ".triton" / "cache"


def store(to: Destination, source: str, result: CollectResult, details: dict, **extra: Any) -> Collected:
    """The records stored under ``to.label``, and the collection's document."""
    from perfq.ir.collect import git_commit
    from perfq.ir.store import store_collection

    commit = to.commit if to.commit is not None else git_commit(to.repo)
    collection_id = store_collection(to.history, to.label, source, result.records, commit, details)
    document = IRCollectDocument(to.label, result.triton_version, len(result.records), result.compiles,
                                 round(result.seconds, 2), tuple(result.errors), collection_id, **extra)
    return Collected(result, document)
