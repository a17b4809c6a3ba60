"""Native truth, the side effects (opt-in: ``perfq index --native``): run benchmark tests under
``perf record -e cpu-clock -g`` and map their sampled stacks to index functions
(indexer/native_frames.py), giving the ``native_samples`` rows.

One process per test (``--test-name``), at most ``per_file`` tests per benchmark file: the first
traced real CPU forward test of each of its modules. perf runs outside the sandbox and follows
the benchmark's Python inside it (perfq.common.sandbox, as tracing does); each test has a time limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from indexer.native_frames import (
    FunctionMatcher,
    MatchRate,
    Sample,
    mangled_symbols,
    parse_perf_script,
    profile,
    renamed,
)
from indexer.trace import operator_benchmark_root
from perfq.common import proc
from perfq.common.sandbox import Launch, Sandbox

LIBRARY = "libtorch_cpu.so"
MIN_SHARE = 0.01  # a function on fewer of a test's samples is not stored (start-up noise)
TEST_TIMEOUT_S = 180


@dataclass(frozen=True)
class NativeTest:
    """A benchmark test to sample: its benchmark, the framework's test name, and how to run it."""

    bench: str
    test: str
    module: str  # python -m name under root: pt.softmax_test
    root: Path  # the operator_benchmark directory

    def to_json(self) -> dict:
        return {"bench": self.bench, "test": self.test, "module": self.module, "root": str(self.root)}


@dataclass(frozen=True)
class NativeOptions:
    per_file: int = 2  # tests (modules) per benchmark file
    timeout_s: float = TEST_TIMEOUT_S
    python: str = sys.executable
    min_share: float = MIN_SHARE
    library: str = LIBRARY


@dataclass(frozen=True)
class NativeReport:
    """What sampling gave: rows (bench, test, function id, share), the tests sampled and failed,
    the match rate over all sampled tests, and the seconds it took."""

    rows: tuple[tuple[str, str, int, float], ...]
    tests: tuple[tuple[str, str, int, int], ...]  # (bench, test, samples in the library, mapped)
    sampled: int
    failed: tuple[str, ...]
    rate: MatchRate
    seconds: float

    def to_json(self) -> dict:
        return {"rows": len(self.rows), "sampled": self.sampled, "failed": list(self.failed),
                "rate": self.rate.to_json(), "seconds": round(self.seconds, 1)}

    def meta(self) -> dict[str, str]:
        """The index meta keys that ``perfq stats`` shows."""
        r = self.rate
        return {"native_tests": str(self.sampled), "native_failed": str(len(self.failed)),
                "native_samples": str(r.samples), "native_samples_mapped": str(r.samples_mapped),
                "native_frames": str(r.frames), "native_frames_mapped": str(r.frames_mapped),
                "native_seconds": f"{self.seconds:.1f}"}


def perf_problem() -> str:
    """Why ``perf record -e cpu-clock`` cannot sample here ('' when it can)."""
    tool = shutil.which("perf")
    if tool is None:
        return "perf is not installed"
    with proc.scratch_dir("native") as scratch:
        probe = proc.run([tool, "record", "-q", "-e", "cpu-clock", "-o", str(scratch / "probe.data"), "--", "true"],
                         timeout=60)
    if not probe.ok:
        return f"perf cannot record: {probe.error or probe.last_line()}"
    return ""


def choose_tests(repo: Path, benchmarks: list[tuple], bench_tests: list[tuple], per_file: int) -> list[NativeTest]:
    """Per operator_benchmark file (``benchmarks`` rows), the first traced real CPU forward test of
    each module (``bench_tests`` rows), up to ``per_file``; a module with none (only ``long``
    configs, traced on meta or sampled) its first CPU forward test whatever its trace's mode: a
    benchmark is sampled whenever it has a CPU test."""
    roots: dict[str, tuple[Path, str]] = {}
    for name, file, framework, *_ in benchmarks:
        root = operator_benchmark_root(repo / file) if framework == "operator_benchmark" else None
        if root is not None:
            roots[name] = (root, ".".join((repo / file).relative_to(root).with_suffix("").parts))
    chosen: dict[tuple[str, str], NativeTest] = {}
    per_bench: dict[str, int] = {}
    real_first = sorted(bench_tests, key=lambda row: (row[1], row[8] != "real", row[0]))
    for _, bench, test, module, _cls, _tag, backward, device, _mode, _seen in real_first:
        if bench not in roots or backward or device not in ("cpu", "") or (bench, module) in chosen:
            continue
        if per_bench.get(bench, 0) >= per_file:
            continue
        per_bench[bench] = per_bench.get(bench, 0) + 1
        root, py_module = roots[bench]
        chosen[(bench, module)] = NativeTest(bench, test, py_module, root)
    return list(chosen.values())


def record(launch: Launch, scratch: Path, cwd: Path, env: dict[str, str], timeout: float) -> list[Sample]:
    """Run ``launch`` (a command, its inherited descriptors) under ``perf record -e cpu-clock -g``
    (its data in ``scratch``); its samples.
    Raises RuntimeError when it fails or times out."""
    data = scratch / "perf.data"
    data.unlink(missing_ok=True)
    ran = proc.run(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", str(data), "--", *launch.argv],
                   cwd=cwd, env=env, timeout=timeout, pass_fds=launch.pass_fds)
    if not ran.ok or not data.is_file():
        raise RuntimeError(ran.error or f"exited {ran.returncode}: {ran.last_line()}")
    with proc.spawned(["perf", "script", "-i", str(data), "-F", "ip,sym,dso"], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        try:  # a perf that hangs is stopped (issue 37: `index --native` waited forever)
            samples = parse_perf_script(proc.lines(child.stdout, timeout))
        except TimeoutError:
            raise RuntimeError(f"perf script printed nothing for {timeout:g} s and was stopped") from None
    data.unlink(missing_ok=True)
    return renamed(samples, demangle(mangled_symbols(samples)))


def demangle(symbols: list[str], chunk: int = 64) -> dict[str, str]:
    """``symbols`` demangled by c++filt (those it cannot are left out; none without c++filt)."""
    tool = shutil.which("c++filt")
    out: dict[str, str] = {}
    for i in range(0, len(symbols) if tool else 0, chunk):
        part = symbols[i : i + chunk]
        ran = proc.run([tool, *part], timeout=60)
        lines = ran.stdout.splitlines()
        if ran.ok and len(lines) == len(part):
            out.update((m, d) for m, d in zip(part, lines, strict=True) if d != m)
    return out


def sample_test(test: NativeTest, opts: NativeOptions, scratch: Path) -> list[Sample]:
    """Run ``test`` alone (``--test-name``) in the sandbox under perf; its samples."""
    sandbox = Sandbox(scratch, (test.root, Path(opts.python).parent, Path(opts.python).resolve().parent.parent))
    env = sandbox.env(os.environ, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    bench = [opts.python, "-m", test.module, "--test-name", test.test, "--tag-filter", "all",
             "--warmup-iterations", "10"]
    with sandbox.launch(bench) as launch:
        return record(launch, scratch, test.root, env, opts.timeout_s)


def sample_native(repo: Path, rows: dict[str, list[tuple]], opts: NativeOptions | None = None,
                  on_test=None) -> NativeReport:
    """Sample the chosen tests of the index ``rows`` (tables as the build writes them) and map
    their stacks to its functions; ``on_test(test, error)`` sees each test as it ends."""
    opts = opts or NativeOptions()
    started = time.perf_counter()
    matcher = FunctionMatcher((fid, qualname) for fid, _file, qualname, *_ in rows.get("functions", []))
    tests = choose_tests(repo, rows.get("benchmarks", []), rows.get("bench_tests", []), opts.per_file)
    out: list[tuple[str, str, int, float]] = []
    sampled: list[tuple[str, str, int, int]] = []
    failed: list[str] = []
    symbols: set[str] = set()
    mapped_symbols: set[str] = set()
    samples_in = samples_mapped = 0
    with proc.scratch_dir("native") as scratch:
        for test in tests:
            try:
                prof = profile(sample_test(test, opts, scratch), matcher, opts.library, opts.min_share)
            except RuntimeError as exc:
                failed.append(f"{test.bench}/{test.test}: {exc}")
                if on_test:
                    on_test(test, str(exc))
                continue
            out += [(test.bench, test.test, fid, round(share, 4)) for fid, share in prof.shares]
            sampled.append((test.bench, test.test, prof.rate.samples, prof.rate.samples_mapped))
            symbols |= prof.symbols
            mapped_symbols |= prof.mapped_symbols
            samples_in += prof.rate.samples
            samples_mapped += prof.rate.samples_mapped
            if on_test:
                on_test(test, "")
    rate = MatchRate(samples_in, samples_mapped, len(symbols), len(mapped_symbols))
    return NativeReport(tuple(out), tuple(sampled), len(tests) - len(failed), tuple(failed), rate,
                        time.perf_counter() - started)
