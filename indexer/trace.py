"""Traced benchmark truth: run every benchmark test's timed region once (data/trace_driver.py,
fake tensors where they work, the CPU for short configs) and record the operators it executes.

The driver runs in one subprocess with the Python that has torch and forks a child per file;
this module builds its request, streams its per-file results (progress), and caches them per
benchmark file content, torch version and driver version.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path

from perfq.indexer.stat_cache import combined_digest

DEFAULT_TIMEOUT_S = 120  # per benchmark file
DEFAULT_MEMORY_MB = 3072  # per benchmark file (its child is killed past it)
REMAPPED_DEVICES = ("cuda", "xpu", "mps", "hpu")
_LINE = "PERFQ-TRACE "


class TraceMode(str, Enum):
    """How a test was traced."""

    real = "real"  # ran on the CPU: operators called inside kernels are seen too
    meta = "meta"  # ran on the meta device (shapes only): the operators it dispatches
    fake = "fake"  # ran under FakeTensorMode: the operators it dispatches
    inferred = "inferred"  # could not run fake: the operators of the real tests of its module
    sampled = "sampled"  # not run: the operators of the traced configs of its group (same benchmark,
    # device and attributes but sizes), which agreed


class TraceStatus(str, Enum):
    ok = "ok"
    partial = "partial"  # some configs failed
    failed = "failed"


@dataclass(frozen=True)
class TracedTest:
    """One benchmark test (class + config) and the operators its timed region executes."""

    name: str
    module: str
    cls: str
    tag: str
    backward: bool
    device: str
    mode: TraceMode
    ops: tuple[str, ...]  # 'aten::add', 'quantized::relu6'
    nested: tuple[tuple[str, str], ...] = ()  # (parent, child) seen inside operators in a small CPU run

    def to_json(self) -> dict:
        nested = [list(n) for n in self.nested]
        return {**asdict(self), "mode": self.mode.value, "ops": list(self.ops), "nested": nested}

    @classmethod
    def from_json(cls, d: dict) -> TracedTest:
        return cls(
            name=str(d["name"]),
            module=str(d.get("module", "")),
            cls=str(d.get("cls", d.get("class", ""))),
            tag=str(d.get("tag", "")),
            backward=bool(d.get("backward", False)),
            device=str(d.get("device", "")),
            mode=TraceMode(d.get("mode", "real")),
            ops=tuple(d.get("ops", ())),
            nested=tuple((str(p), str(c)) for p, c in d.get("nested", ())),
        )


@dataclass(frozen=True)
class FileTrace:
    """The traced tests of one benchmark file, or why it could not be traced."""

    path: str
    status: TraceStatus
    reason: str = ""
    tests: tuple[TracedTest, ...] = ()
    errors: tuple[str, ...] = ()
    seconds: float = 0.0
    max_rss_mb: int = 0
    torch: str = ""

    def to_json(self) -> dict:
        return {
            **asdict(self),
            "status": self.status.value,
            "tests": [t.to_json() for t in self.tests],
            "errors": list(self.errors),
        }

    @classmethod
    def from_json(cls, d: dict) -> FileTrace:
        return cls(
            path=str(d["path"]),
            status=TraceStatus(d.get("status", "failed")),
            reason=str(d.get("reason", "")),
            tests=tuple(TracedTest.from_json(t) for t in d.get("tests", ())),
            errors=tuple(str(e) for e in d.get("errors", ())),
            seconds=float(d.get("seconds", 0.0)),
            max_rss_mb=int(d.get("max_rss_mb", 0)),
            torch=str(d.get("torch", "")),
        )

    def missing_module(self) -> str | None:
        """The top-level module a failed trace could not import, when that is why it failed (a
        missing submodule of an installed package is not one an install is likely to bring)."""
        found = _MISSING_MODULE.search(self.reason) if self.status == TraceStatus.failed else None
        return found.group(1) if found and "." not in found.group(1) else None

    def installed_since(self) -> bool:
        """A failed trace's missing module can be imported now (the environment changed)."""
        return any_installed([self.missing_module() or ""])


_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")  # ModuleNotFoundError's message


def any_installed(modules: Iterable[str]) -> bool:
    """One of the top-level ``modules`` can be imported by this Python (which the tracer runs)."""
    return any(m and importlib.util.find_spec(m) is not None for m in modules)


@dataclass(frozen=True)
class TraceJob:
    path: str  # repo-relative
    kind: str  # operator_benchmark | script
    file: Path


@dataclass
class TraceOptions:
    parallel: int = 2
    timeout_s: int = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    python: str = sys.executable
    real_tags: tuple[str, ...] = ("short",)
    remap: tuple[str, ...] = REMAPPED_DEVICES
    extra: dict = field(default_factory=dict)


def torch_available() -> str | None:
    """The version of the torch this Python would import, without importing it (None: none)."""
    if importlib.util.find_spec("torch") is None:
        return None
    from importlib import metadata  # here: 20 ms of imports, paid only where torch is installed

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def driver_digest() -> str:
    """A digest of the tracer itself: traces from another version of it are not reused."""
    data = resources.files("perfq.data").joinpath("trace_driver.py").read_bytes()
    return hashlib.sha256(data).hexdigest()[:12]


def trace_content(file_sha: str, imports: dict[str, str | None]) -> str:
    """What a benchmark file's trace depends on in its repo: the file's content and that of
    the files of its tree it imports (the harness, shared configs: they decide its tests)."""
    return f"{file_sha}+{combined_digest(imports)[:12]}" if imports else file_sha


def cache_key(content_sha: str, torch_version: str) -> str:
    return f"{content_sha}:{torch_version}:{driver_digest()}"


def operator_benchmark_root(file: Path) -> Path | None:
    """The operator_benchmark directory a ``pt/*_test.py`` file belongs to (holds benchmark_pytorch.py)."""
    for parent in file.parents:
        if (parent / "benchmark_pytorch.py").is_file() and (parent / "benchmark_core.py").is_file():
            return parent
    return None


def _request(jobs: list[TraceJob], opts: TraceOptions) -> dict:
    entries = []
    for job in jobs:
        if job.kind == "operator_benchmark":
            root = operator_benchmark_root(job.file)
            if root is None:
                continue
            module = ".".join(job.file.relative_to(root).with_suffix("").parts)
            entries.append({"path": job.path, "kind": job.kind, "root": str(root), "module": module})
        else:
            entries.append({"path": job.path, "kind": "script", "file": str(job.file)})
    return {
        "jobs": entries,
        "parallel": opts.parallel,
        "timeout": opts.timeout_s,
        "memory_mb": opts.memory_mb,
        "real_tags": list(opts.real_tags),
        "remap": list(opts.remap),
        **opts.extra,
    }


def trace_files(
    jobs: list[TraceJob], opts: TraceOptions, on_result: Callable[[FileTrace], None] | None = None
) -> dict[str, FileTrace]:
    """Trace ``jobs`` in one driver process; ``on_result`` sees each file as it finishes."""
    request = _request(jobs, opts)
    version = torch_available() or ""
    out: dict[str, FileTrace] = {}
    for job in jobs:
        if job.kind == "operator_benchmark" and operator_benchmark_root(job.file) is None:
            out[job.path] = FileTrace(job.path, TraceStatus.failed, "no benchmark_pytorch.py above it", torch=version)
    if not request["jobs"]:
        return out
    driver = str(resources.files("perfq.data").joinpath("trace_driver.py"))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("TRITON_INTERPRET", None)
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            [opts.python, driver],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            errors="replace",
            env=env,
            cwd=tempfile.gettempdir(),  # a PyTorch checkout in cwd would shadow the installed torch
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
            for line in proc.stdout:
                if not line.startswith(_LINE):
                    continue
                result = FileTrace.from_json({**json.loads(line[len(_LINE) :]), "torch": version})
                out[result.path] = result
                if on_result is not None:
                    on_result(result)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            stderr.seek(0)
            tail = (stderr.read().strip().splitlines() or ["no output"])[-1][:200]
            for job in request["jobs"]:
                out.setdefault(
                    job["path"], FileTrace(job["path"], TraceStatus.failed, f"tracer exited {proc.returncode}: {tail}")
                )
    return out


def kernels_seen(tests: Iterable[TracedTest]) -> dict[str, bool]:
    """Per test: do its operators include those called inside kernels (it ran for real, or
    its module and direction have a real test to borrow them from)?"""
    tests = list(tests)
    real = {(t.module, t.backward) for t in tests if t.mode == TraceMode.real}
    seen = (TraceMode.real, TraceMode.inferred)  # inferred tests carry the ops of real ones
    return {t.name: t.mode in seen or (t.module, t.backward) in real for t in tests}


def group_ops(tests: Iterable[TracedTest]) -> dict[str, set[str]]:
    """Operators per test, where a fake or inferred test also gets those the real tests of its
    module and direction executed inside their kernels (fake tensors do not run kernels)."""
    tests = list(tests)
    real: dict[tuple[str, bool], set[str]] = {}
    for t in tests:
        if t.mode == TraceMode.real:
            real.setdefault((t.module, t.backward), set()).update(t.ops)
    out: dict[str, set[str]] = {}
    for t in tests:
        ops = set(t.ops)
        if t.mode != TraceMode.real:
            ops |= real.get((t.module, t.backward), set())
        out.setdefault(t.name, set()).update(ops)
    return out
