"""Traced benchmark truth: run every benchmark test's timed region once (indexer/trace_driver.py,
fake tensors where they work, the CPU for short configs) and record the operators it executes.

The driver runs in one subprocess with the Python that has torch and forks a child per file;
this module builds its request, streams its per-file results (progress), and caches them per
benchmark file content, torch version and driver version.

Tracing runs the checkout's own code (its benchmark files and harness), so the driver runs
contained (common.sandbox): a scrubbed environment, its own HOME and TMPDIR in a scratch
directory that is removed afterwards, its process group killed however tracing ends (and a
``setsid`` daemon it started too: perfq is its subreaper), a time limit
on the warm-up and on each file (and on the driver's silence), and, where bubblewrap works, no
network and no writes outside the scratch directory.
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
from importlib import resources
from pathlib import Path

from common import proc
from common.errors import PerfqError
from common.sandbox import Sandbox, bwrap_problem
from common.test_names import stable_test_name
from indexer.stat_cache import combined_digest
from schema.model import TraceMode, TraceStatus

DEFAULT_TIMEOUT_S = 120  # per benchmark file
WARMUP_TIMEOUT_S = 120  # the driver's import of the benchmark harness (the repository's code)
STARTUP_TIMEOUT_S = 600  # the driver's own start (torch's import and warm-up), before any repository code
SILENCE_SLACK_S = 60  # the driver is stopped when it prints nothing for its time limits and this long
DEFAULT_MEMORY_MB = 3072  # per benchmark file (its child is killed past it)
REMAPPED_DEVICES = ("cuda", "xpu", "mps", "hpu")
_LINE = "PERFQ-TRACE "


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
    # of ``ops``, those run only inside another operator's kernel, never at graph level (called
    # from Python or inside composite operators): no torch.compile graph holds them
    inner: tuple[str, ...] = ()
    # 'aten::remainder|int32', 'aten::leaky_relu@quantized|quint8': the dtypes its operators ran on
    dtypes: tuple[str, ...] = ()
    # Python lines it ran (its build and its timed region): (repo-relative path, lines), for the
    # benchmark tree's shared modules and torch's own Python (``torch/...``)
    lines: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def to_json(self) -> dict:
        nested = [list(n) for n in self.nested]
        return {**asdict(self), "mode": self.mode.value, "ops": list(self.ops), "nested": nested,
                "inner": list(self.inner), "dtypes": list(self.dtypes),
                "lines": {path: list(lines) for path, lines in self.lines}}

    @classmethod
    def from_json(cls, d: dict) -> TracedTest:
        return cls(
            name=stable_test_name(str(d["name"])),  # the same name in every process
            module=str(d.get("module", "")),
            cls=str(d.get("cls", d.get("class", ""))),
            tag=str(d.get("tag", "")),
            backward=bool(d.get("backward", False)),
            device=str(d.get("device", "")),
            mode=TraceMode(d.get("mode", "real")),
            ops=tuple(d.get("ops", ())),
            nested=tuple((str(p), str(c)) for p, c in d.get("nested", ())),
            inner=tuple(str(op) for op in d.get("inner", ())),
            dtypes=tuple(str(op) for op in d.get("dtypes", ())),
            lines=tuple((str(path), tuple(map(int, lines))) for path, lines in sorted(d.get("lines", {}).items())),
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
    # per torch file its tests ran, a crc32 of each line's stripped text in the traced torch
    line_digests: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def to_json(self) -> dict:
        return {
            **asdict(self),
            "status": self.status.value,
            "tests": [t.to_json() for t in self.tests],
            "errors": list(self.errors),
            "line_digests": {path: list(rows) for path, rows in self.line_digests},
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
            line_digests=tuple(
                (str(path), tuple(map(int, rows))) for path, rows in sorted(d.get("line_digests", {}).items())
            ),
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
    warmup_s: int = WARMUP_TIMEOUT_S
    silence_s: float | None = None  # None: the warm-up's and a file's limits, plus SILENCE_SLACK_S
    repo: Path | None = None  # bound read-only into the sandbox (besides the benchmark roots)
    sandbox: bool = True  # False: no bubblewrap (the environment is scrubbed all the same)

    def silence_limit(self) -> float:
        """Seconds without a result line after which the driver is taken for hung."""
        return self.silence_s if self.silence_s is not None else max(self.warmup_s, self.timeout_s) + SILENCE_SLACK_S


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
    return hashlib.sha256(_driver_source()).hexdigest()[:12]


def _driver_source() -> bytes:
    """The bytes of the trace driver program (trace_driver.py, beside this module)."""
    return resources.files("indexer").joinpath("trace_driver.py").read_bytes()


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


def _largest_first(jobs: list[TraceJob]) -> list[TraceJob]:
    """``jobs``, the largest benchmark file first (a file's size stands for its configs, hence
    its tests): the driver starts them in this order on ``parallel`` children, and the pass lasts
    until its last file ends. PyTorch's largest, quantization_test.py, takes a third of the pass;
    started 50th of 58 (by path), it ran on alone for the last half of its time."""

    def size(job: TraceJob) -> int:
        try:
            return job.file.stat().st_size
        except OSError:
            return 0

    return sorted(jobs, key=lambda job: -size(job))  # stable: equal sizes keep their order


def _request(jobs: list[TraceJob], opts: TraceOptions) -> dict:
    entries = []
    for job in _largest_first(jobs):
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
        "warmup_seconds": opts.warmup_s,
        **opts.extra,
    }


def sandbox_summary() -> str:
    """How tracing is contained on this machine, in a phrase for the build's output."""
    problem = bwrap_problem()
    if not problem:
        return "sandboxed (bubblewrap: no network, read-only file system, scrubbed environment)"
    return (f"NOT sandboxed ({problem}): the checkout's benchmark code runs with a scrubbed environment and "
            "time limits, but its network and writes are not contained; trace = \"off\" or --no-trace skips it")


SANDBOX_REQUIRED_ENV = "PERFQ_TRACE_SANDBOX"  # "required": tracing without the sandbox is an error (CI sets it)


def check_sandbox_required(opts: TraceOptions) -> None:
    """A PerfqError when tracing must be sandboxed (``PERFQ_TRACE_SANDBOX=required``, as perfq's CI
    workflows set) and cannot be here: a PR's benchmark code never runs uncontained in CI."""
    if os.environ.get(SANDBOX_REQUIRED_ENV) != "required":
        return
    problem = bwrap_problem() if opts.sandbox else "the sandbox was turned off"
    if problem:
        raise PerfqError(f"tracing runs the checkout's benchmark code and {SANDBOX_REQUIRED_ENV}=required, but it "
                         f"cannot be sandboxed here ({problem}): install bubblewrap, or index with --no-trace")


def _readable(jobs: list[TraceJob], opts: TraceOptions) -> tuple[Path, ...]:
    """What the sandboxed driver reads besides its scratch directory (where the driver is): the
    repo, the benchmark files' directories and the tracing Python's installation."""
    paths = {Path(opts.python).parent, Path(opts.python).resolve().parent.parent}
    paths |= {operator_benchmark_root(job.file) or job.file.parent for job in jobs}
    if opts.repo is not None:
        paths.add(opts.repo)
    return tuple(sorted(paths))


def trace_files(
    jobs: list[TraceJob], opts: TraceOptions, on_result: Callable[[FileTrace], None] | None = None
) -> dict[str, FileTrace]:
    """Trace ``jobs`` in one driver process; ``on_result`` sees each file as it finishes.
    A PerfqError when a sandbox is required and cannot be had (:func:`check_sandbox_required`)."""
    check_sandbox_required(opts)
    request = _request(jobs, opts)
    version = torch_available() or ""
    out: dict[str, FileTrace] = {}
    for job in jobs:
        if job.kind == "operator_benchmark" and operator_benchmark_root(job.file) is None:
            out[job.path] = FileTrace(job.path, TraceStatus.failed, "no benchmark_pytorch.py above it", torch=version)
    if not request["jobs"]:
        return out
    with proc.scratch_dir("trace") as scratch:
        (scratch / "out").mkdir()
        # the driver runs as a file from the scratch directory: run from indexer/, its siblings
        # (trace.py, build.py...) would shadow the modules of that name the benchmarks import
        driver = scratch / "trace_driver.py"
        driver.write_bytes(_driver_source())
        sandbox = Sandbox(scratch, _readable(jobs, opts), use_bwrap=opts.sandbox)
        request["scratch"] = str(scratch / "out")
        env = sandbox.env(os.environ, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        with tempfile.TemporaryFile("w+b", dir=scratch) as stderr:
            # cwd: the scratch directory (a PyTorch checkout in cwd would shadow the installed torch)
            with sandbox.launch([opts.python, str(driver)]) as launch, proc.spawned(
                    launch.argv, reap_orphans=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    env=env, cwd=scratch, pass_fds=launch.pass_fds) as child:
                stopped = _read_results(child, request, version, opts.silence_limit(), out, on_result)
            returncode = child.returncode
            if stopped or returncode != 0:
                stderr.seek(0)
                tail = (stderr.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1][:200]
                why = stopped or f"tracer exited {returncode}: {tail}"
                for job in request["jobs"]:
                    out.setdefault(job["path"], FileTrace(job["path"], TraceStatus.failed, why))
    return out


def _read_results(child: subprocess.Popen, request: dict, version: str, silence: float,
                  out: dict[str, FileTrace], on_result: Callable[[FileTrace], None] | None) -> str:
    """Send the request, collect the driver's result lines; why it was stopped ('' when it ended)."""
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(json.dumps(request).encode())
        child.stdin.close()
    except BrokenPipeError:
        return ""  # it died at once: its exit status and stderr say why
    try:
        for line in proc.lines(child.stdout, silence, first=max(silence, STARTUP_TIMEOUT_S)):
            if not line.startswith(_LINE):
                continue
            result = FileTrace.from_json({**json.loads(line[len(_LINE) :]), "torch": version})
            out[result.path] = result
            if on_result is not None:
                on_result(result)
    except TimeoutError:
        return f"the tracer printed nothing for {silence:g} s and was stopped"
    return "" if proc.ended(child, silence) else f"the tracer did not end within {silence:g} s and was stopped"


def kernels_seen(tests: Iterable[TracedTest]) -> dict[str, bool]:
    """Per test: do its operators include those called inside kernels (it ran for real, or
    its module and direction have a real test to borrow them from)?"""
    tests = list(tests)
    real = {(t.module, t.backward) for t in tests if t.mode == TraceMode.real}
    seen = (TraceMode.real, TraceMode.inferred)  # inferred tests carry the ops of real ones
    return {t.name: t.mode in seen or (t.module, t.backward) in real for t in tests}


def graph_ops(tests: Iterable[TracedTest]) -> dict[str, set[str]]:
    """Operators per test run at graph level (see TracedTest.inner), where a fake or inferred
    test also gets those the real tests of its module and direction ran so."""
    tests = list(tests)
    real: dict[tuple[str, bool], set[str]] = {}
    for t in tests:
        if t.mode == TraceMode.real:
            real.setdefault((t.module, t.backward), set()).update(set(t.ops) - set(t.inner))
    out: dict[str, set[str]] = {}
    for t in tests:
        ops = set(t.ops) - set(t.inner)
        if t.mode != TraceMode.real:
            ops |= real.get((t.module, t.backward), set())
        out.setdefault(t.name, set()).update(ops)
    return out


def borrowed_dtypes(tests: Iterable[TracedTest]) -> dict[str, set[str]]:
    """Per fake or inferred test, ``op|dtype`` for the operators it takes from the real tests
    of its module and direction (``group_ops``): the dtypes those tests ran them on, and its own
    calls' dtypes (a long half config borrowing from short float ones runs them on half)."""
    tests = list(tests)
    real: dict[tuple[str, bool], set[str]] = {}
    ran_on: dict[tuple[str, bool, str], set[str]] = {}
    for t in tests:
        if t.mode == TraceMode.real:
            real.setdefault((t.module, t.backward), set()).update(t.ops)
            for entry in t.dtypes:
                op, _, dtype = entry.rpartition("|")
                ran_on.setdefault((t.module, t.backward, op), set()).add(dtype)
    out: dict[str, set[str]] = {}
    for t in tests:
        if t.mode == TraceMode.real:
            continue
        own = {entry.rpartition("|")[2] for entry in t.dtypes}
        for op in real.get((t.module, t.backward), set()) - set(t.ops):
            dtypes = ran_on.get((t.module, t.backward, op), set())
            if dtypes:
                out.setdefault(t.name, set()).update(f"{op}|{dtype}" for dtype in dtypes | own)
    return out


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
