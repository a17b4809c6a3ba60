"""Native truth, the side effects (opt-in: ``perfq index --native``): run benchmark tests under
``perf record -e cpu-clock -g`` and map their sampled stacks to index functions
(indexer/native_frames.py), giving the ``native_samples`` rows.

One process per test (``--test-name``), at most ``per_file`` tests per benchmark file: the first
traced real CPU forward test of each of its modules. perf runs outside the sandbox and follows
the benchmark's Python inside it (common.sandbox, as tracing does); each test has a time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common import proc
from common.errors import PerfqError
from common.sandbox import Launch, Sandbox
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
class Shard:
    """One of ``count`` shards of the tests to sample (1-based ``index``): the nightly samples
    each on its own runner of a matrix, and merges their files (``perfq index --native-from``)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` as a shard; a PerfqError when it is not one."""
        first, _, second = text.partition("/")
        if not (first.isdigit() and second.isdigit() and 1 <= int(first) <= int(second)):
            raise PerfqError(f"--native-shard {text!r}: give I/N with 1 <= I <= N (2/4)")
        return cls(int(first), int(second))

    def take(self, tests: list[NativeTest]) -> list[NativeTest]:
        """This shard's tests: every count-th one from its index (the choice is deterministic)."""
        return tests[self.index - 1 :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


_SHARD_FORMAT = "perfq-native-shard/1"


@dataclass(frozen=True)
class NativeRun:
    """How a build's native pass runs beyond ``--native``: one ``shard`` of the tests, the samples
    also written to ``out`` (a shard file); or no sampling, the shard files ``merge`` read instead."""

    shard: Shard | None = None
    out: Path | None = None
    merge: tuple[Path, ...] = ()


@dataclass(frozen=True)
class NativeOptions:
    per_file: int = 2  # tests (modules) per benchmark file
    timeout_s: float = TEST_TIMEOUT_S
    python: str = sys.executable
    min_share: float = MIN_SHARE
    library: str = LIBRARY
    shard: Shard | None = None  # sample this shard of the chosen tests only


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
    if opts.shard is not None:
        tests = opts.shard.take(tests)
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


def _function_names(rows: dict[str, list[tuple]]) -> dict[int, tuple[str, str]]:
    """Function id -> (file path, qualname) in the index ``rows``."""
    paths = {fid: path for fid, path, *_ in rows.get("files", [])}
    return {fid: (paths.get(file_id, ""), qualname) for fid, file_id, qualname, *_ in rows.get("functions", [])}


def save_shard(path: Path, report: NativeReport, rows: dict[str, list[tuple]], shard: Shard | None) -> None:
    """Write what sampling ``report`` gave as a shard file: functions by (file, qualname), which
    another build of the same commit maps back to its own ids."""
    names = _function_names(rows)
    doc = {
        "format": _SHARD_FORMAT,
        "shard": str(shard) if shard else "1/1",
        "samples": [[bench, test, *names[fid], share] for bench, test, fid, share in report.rows if fid in names],
        "tests": [list(t) for t in report.tests],
        "failed": list(report.failed),
        "rate": report.rate.to_json(),
        "seconds": report.seconds,
    }
    try:
        path.write_text(json.dumps(doc), encoding="utf-8")
    except OSError as exc:
        raise PerfqError(f"cannot write {path}: {exc.strerror or exc}") from exc


def load_shards(paths: list[Path], rows: dict[str, list[tuple]]) -> NativeReport:
    """The shard files ``paths`` merged as one report, their functions mapped to the ids of ``rows``
    (a function this index lacks is dropped)."""
    ids = {name: fid for fid, name in _function_names(rows).items()}
    out: list[tuple[str, str, int, float]] = []
    tests: list[tuple[str, str, int, int]] = []
    failed: list[str] = []
    rate, seconds = MatchRate(0, 0, 0, 0), 0.0
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise PerfqError(f"cannot read the native shard {path}: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != _SHARD_FORMAT:
            raise PerfqError(f"{path} is not a native shard file (perfq index --native-out)")
        try:
            out += [(str(b), str(t), ids[(str(f), str(q))], float(share))
                    for b, t, f, q, share in doc["samples"] if (str(f), str(q)) in ids]
            tests += [(str(b), str(t), int(n), int(m)) for b, t, n, m in doc["tests"]]
            failed += [str(f) for f in doc["failed"]]
            rate = rate + MatchRate(**{k: int(v) for k, v in doc["rate"].items()})
            seconds += float(doc["seconds"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PerfqError(f"malformed native shard {path}: {exc}") from exc
    return NativeReport(tuple(out), tuple(tests), len(tests), tuple(failed), rate, seconds)
