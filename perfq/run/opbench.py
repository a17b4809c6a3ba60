"""Adapter for PyTorch's ``benchmarks/operator_benchmark``: build the command, parse its output.

One invocation is ``python -m pt.<name>`` run from the benchmark root. The runner's own
filters (``--operators``, ``--test-name``) restrict it to the selected tests; what the
runner supports (``--use-compile``, ``--output-json``, ``--output-csv``) is read from its
source, because ``benchmark_runner.py`` uses ``parse_known_args`` and would silently
ignore an unknown flag. Parsing understands the plain text of PyTorch 2.6.0
(``# Name:`` / ``Forward Execution Time (us) : ...``) and the JSON/CSV files of newer runners.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common.test_names import ADDRESS, names_an_object, stable_test_name
from perfq.run import pytorch_benchmark

DEFAULT_ROOT = "benchmarks/operator_benchmark"


@dataclass(frozen=True)
class Measurement:
    """One value reported by a benchmark process for one test."""

    test: str
    value: float
    metric: str = "forward_time"
    unit: str = "us"
    mode: str = "eager"
    device: str = ""


@dataclass(frozen=True)
class RunnerCaps:
    """Which optional flags the benchmark runner at a root understands."""

    use_compile: bool = False
    output_json: bool = False
    output_csv: bool = False
    warmup_iterations: bool = True


@dataclass(frozen=True)
class OpBenchSpec:
    """What to run from one benchmark file (``pt/<name>.py``)."""

    name: str
    tests: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    mode: str = "eager"
    device: str = "cpu"
    tag_filter: str = "short"
    iterations: int | None = None
    num_runs: int | None = None
    warmup_iterations: int | None = None
    omp_num_threads: int | None = None
    mkl_num_threads: int | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def default_root(benchmark_roots: tuple[str, ...]) -> str:
    """The runner root from config ``benchmark_roots`` (``.../operator_benchmark/pt`` -> its parent)."""
    for entry in benchmark_roots:
        path = Path(entry)
        if "operator_benchmark" in path.parts:
            return str(path.parent if path.name == "pt" else path)
    return DEFAULT_ROOT


def normalize_name(name: str) -> str:
    """``softmax`` / ``softmax_test`` / ``pt/softmax_test.py`` -> ``softmax_test``."""
    stem = Path(name).name
    if stem.endswith(".py"):
        stem = stem[:-3]
    return stem


def module_file(root: Path, name: str) -> Path | None:
    """The ``pt/<name>.py`` file for a benchmark name (with or without ``_test``), if any."""
    stem = normalize_name(name)
    for candidate in (stem, f"{stem}_test"):
        path = root / "pt" / f"{candidate}.py"
        if path.is_file():
            return path
    return None


def detect_caps(root: Path) -> RunnerCaps:
    """Read the runner's argument parser source to see which flags it accepts."""
    text = ""
    for fname in ("benchmark_runner.py", "benchmark_core.py"):
        path = root / fname
        if path.is_file():
            text += path.read_text(encoding="utf-8", errors="replace")
    return RunnerCaps(
        use_compile='"--use-compile"' in text or "'--use-compile'" in text,
        output_json='"--output-json"' in text or "'--output-json'" in text,
        output_csv='"--output-csv"' in text or "'--output-csv'" in text,
        warmup_iterations="--warmup-iterations" in text or not text,
    )


def build_command(
    python: str, spec: OpBenchSpec, caps: RunnerCaps, json_out: Path | None = None
) -> tuple[list[str], list[str]]:
    """The argv for one invocation and notes about what could not be honoured.

    Raises ValueError when ``spec.mode == "compile"`` and the runner has no ``--use-compile``.
    """
    notes: list[str] = []
    argv = [python, "-m", f"pt.{normalize_name(spec.name)}"]
    if not runs_wrapped(spec):
        argv += ["--test-name", spec.tests[0]]
    else:
        argv += ["--tag-filter", "all" if spec.tests else spec.tag_filter]  # a selected test is never dropped
        if len(spec.tests) > 1:
            notes.append(
                f"{spec.name}: runner filters one --test-name at a time; {len(spec.tests)} tests kept by parsing"
            )
    if spec.ops:
        argv += ["--operators", ",".join(spec.ops)]
    if spec.device:
        argv += ["--device", spec.device]
    if spec.iterations:
        argv += ["--iterations", str(spec.iterations)]
    if spec.num_runs:
        argv += ["--num-runs", str(spec.num_runs)]
    if spec.warmup_iterations is not None and caps.warmup_iterations:
        argv += ["--warmup-iterations", str(spec.warmup_iterations)]
    if spec.omp_num_threads:
        argv += ["--omp-num-threads", str(spec.omp_num_threads)]
    if spec.mkl_num_threads:
        argv += ["--mkl-num-threads", str(spec.mkl_num_threads)]
    if spec.mode == "compile":
        if not caps.use_compile:
            raise ValueError(
                f"{spec.name}: this operator_benchmark runner has no --use-compile flag "
                "(PyTorch <= 2.6 runner); compile mode not run"
            )
        argv.append("--use-compile")
    if json_out is not None and caps.output_json:
        argv += ["--output-json", str(json_out)]
    argv += list(spec.extra_args)
    return argv, notes


def thread_env(spec: OpBenchSpec) -> dict[str, str]:
    """Environment variables that must be set before the process starts (OpenMP reads them once)."""
    env: dict[str, str] = {}
    if spec.omp_num_threads:
        env["OMP_NUM_THREADS"] = str(spec.omp_num_threads)
    if spec.mkl_num_threads:
        env["MKL_NUM_THREADS"] = str(spec.mkl_num_threads)
    return env


_NAME = re.compile(r"^# Name:\s*(\S+)\s*$")
_INPUT = re.compile(r"^# Input:\s*(.*)$")
_MODE = re.compile(r"^# Mode:\s*(\S+)")
_TIME = re.compile(r"^(?:Run:\s*(\d+),\s*)?(Forward|Backward) Execution Time \((\w+)\)\s*:\s*([-+0-9.eE]+|nan|inf)\s*$")
_DEVICE = re.compile(r"(?:^|,\s*)device:\s*([\w:]+)")


def output_line_needed(line: str) -> bool:
    """Whether the text and batch parsers read ``line`` (kept from the middle of capped output)."""
    return line.startswith("#") or "Execution Time" in line


def _mode_name(runtime: str | None) -> str:
    runtime = (runtime or "eager").lower()
    return "compile" if runtime.startswith("compile") else runtime


def parse_text(output: str, default_device: str = "") -> list[Measurement]:
    """Measurements from the plain text output of ``benchmark_core`` (PyTorch 2.6.0 and later)."""
    found: list[Measurement] = []
    name: str | None = None
    device = default_device
    mode = "eager"
    for line in output.splitlines():
        line = line.rstrip()
        if m := _MODE.match(line):
            mode = _mode_name(m.group(1))
        elif m := _NAME.match(line):
            name, device = m.group(1), default_device
        elif m := _INPUT.match(line):
            if d := _DEVICE.search(m.group(1)):
                device = d.group(1)
        elif (m := _TIME.match(line)) and name is not None:
            try:
                value = float(m.group(4))
            except ValueError:
                continue
            metric = "forward_time" if m.group(2) == "Forward" else "backward_time"
            found.append(Measurement(name, value, metric, m.group(3), mode, device))
    return found


def _number(value: Any) -> float | None:
    """A JSON number (or numeric text) as a float; anything else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _dashboard_record(item: dict[str, Any], default_device: str) -> list[Measurement]:
    """The timings of one ``--output-json-for-dashboard`` record (none when it is malformed or another metric)."""
    fields = pytorch_benchmark.record_fields(item)
    if fields is None or fields.metric not in ("forward_time", "backward_time"):
        return []
    numbers = [_number(v) for v in fields.values]
    return [Measurement(fields.test, v, fields.metric, fields.unit, fields.mode, fields.device or default_device)
            for v in numbers if v is not None]


def _runner_record(item: dict[str, Any], default_device: str) -> Measurement | None:
    """The measurement of one ``--output-json`` record (None when it is malformed)."""
    value = _number(item["latency"])
    if value is None or item["test_name"] is None:
        return None
    runtime = item.get("runtime")
    return Measurement(
        str(item["test_name"]),
        value,
        "backward_time" if item.get("run") == "Backward" else "forward_time",
        str(item.get("latency unit", "us")),
        _mode_name(runtime if isinstance(runtime, str) else None),
        str(item.get("device") or default_device),
    )


def parse_json(data: Any, default_device: str = "") -> list[Measurement]:
    """Measurements from a newer runner's ``--output-json`` list or dashboard records; malformed records skipped."""
    found: list[Measurement] = []
    if isinstance(data, dict):
        data = data.get("records") or data.get("results") or [data]
    if not isinstance(data, list):
        return found
    for item in data:
        if not isinstance(item, dict):
            continue
        if "metric" in item and "model" in item:  # --output-json-for-dashboard record
            found += _dashboard_record(item, default_device)
        elif "test_name" in item and "latency" in item:  # --output-json list
            m = _runner_record(item, default_device)
            if m is not None:
                found.append(m)
    return found


def parse_csv(text: str, default_device: str = "", mode: str = "eager") -> list[Measurement]:
    """Measurements from a newer runner's ``--output-csv`` file (rows after a malformed one are dropped)."""
    found: list[Measurement] = []
    try:
        for row in csv.DictReader(io.StringIO(text, newline="")):
            m = _csv_row(row, default_device, mode)
            if m is not None:
                found.append(m)
    except csv.Error:
        pass
    return found


def _csv_row(row: dict[str | None, Any], default_device: str, mode: str) -> Measurement | None:
    name, value = row.get("Case Name") or "", _number(row.get("Execution Time"))
    if not name or value is None:
        return None
    backward = str(row.get("run_backward", "")).lower() == "true"
    if backward and name.endswith("_BACKWARD"):
        name = name[: -len("_BACKWARD")]
    device = default_device
    if m := re.search(r"_(cpu|cuda|mps|xpu)(?:_|$)", name):
        device = m.group(1)
    return Measurement(name, value, "backward_time" if backward else "forward_time", "us", mode, device)


def keep_selected(found: list[Measurement], spec: OpBenchSpec) -> list[Measurement]:
    """Drop measurements of tests not asked for (the runner filters one test name at most); names compare in
    their stable form (:mod:`common.test_names`)."""
    if not spec.tests:
        return found
    wanted = {stable_test_name(t) for t in spec.tests}
    return [m for m in found if stable_test_name(m.test) in wanted]


def harness_measurements(found: list[Measurement], spec: OpBenchSpec) -> list[Measurement]:
    """What one invocation measured of the selected tests, one value per test, under stable names: the one
    place a test name read from the harness is masked (``<function<lambda>at0x7f...>`` -> ``<function<lambda>>``,
    :mod:`common.test_names`), so runs, history, compare and the tracer's tests name a test alike in every process."""
    stable = [replace(m, test=stable_test_name(m.test)) for m in found]
    return collapse(keep_selected(stable, spec))


def collapse(found: list[Measurement], how: str = "min") -> list[Measurement]:
    """One value per test and metric per invocation, from the runs of ``--num-runs``.

    Runs inside one process are not independent samples. ``min`` (default): interference
    from other work only ever adds time, so the fastest run is the best estimate of the
    uncontended cost; ``median`` is the alternative. Process-level values feed the statistics.
    """
    pick = min if how == "min" else statistics.median
    groups: dict[tuple[str, str, str, str, str], list[float]] = {}
    for m in found:
        groups.setdefault((m.test, m.metric, m.unit, m.mode, m.device), []).append(m.value)
    return [
        Measurement(test, float(pick(values)), metric, unit, mode, device)
        for (test, metric, unit, mode, device), values in groups.items()
    ]


def parse_invocation(stdout: str, spec: OpBenchSpec, json_file: Path | None = None) -> list[Measurement]:
    """Measurements of one invocation (JSON file when the runner wrote one, else stdout), one per test."""
    found: list[Measurement] = []
    if json_file is not None and json_file.is_file():
        try:
            found = parse_json(json.loads(json_file.read_text(encoding="utf-8")), spec.device)
        except (ValueError, OSError):
            found = []
    if not found:
        found = parse_text(stdout, spec.device)
    return harness_measurements(found, spec)


# ---- batch: several benchmark files in one process (one torch import) -------------------

BATCH_ENV = "PERFQ_OPBENCH_BATCH"
BATCH_MARK = "# perfq-module: "
BATCH_FAILED = "# perfq-module-failed: "

BATCH_TAG_FALLBACK = "# perfq-tag-fallback: "

# Runs each pt module's tests with the runner's own BenchmarkRunner, one module at a time, so
# the output of each module is delimited and a module that fails does not stop the others.
# Selected tests are never dropped by a tag filter: they run with tag "all", several of them
# through the runner's one --test-name filter (a name set that equals each of its names); a
# whole module with no test of the asked tag (gelu_test has only "long" configs) runs them all.
# Only the selected tests' configs are built (the runner builds every config, tensors included, before
# it filters by name: add_test builds hundreds of inputs to time two).
_BATCH_SCRIPT = """
import contextlib, copy, importlib, json, os, re, sys, traceback
import benchmark_core, benchmark_runner

ADDRESS = re.compile(@ADDRESS@)


def stable(name):
    # a test name with its objects' addresses masked (perfq's common.test_names)
    return ADDRESS.sub(">", name)


class AnyOf(frozenset):
    __hash__ = frozenset.__hash__

    def __eq__(self, other):
        return stable(other) in self if isinstance(other, str) else frozenset.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)


class Watch:
    def __init__(self, out):
        self.out, self.named = out, False

    def write(self, text):
        self.named = self.named or "# Name:" in text
        return self.out.write(text)

    def __getattr__(self, name):
        return getattr(self.out, name)


def config_suffix(config):
    # the part of a test's name its config gives, as benchmark_core names it: _N1_C3_cpu
    attrs = {}
    for attr in config:
        if "tags" not in attr:
            attrs.update(attr)
    parts = [("" if key == "device" else key) + str(value) for key, value in attrs.items()]
    return ("_" + "_".join(parts)).replace(" ", "")


def narrow(tests):
    # builds only the configs of the selected tests: the runner builds every config (its tensors
    # included) before it filters by name; a runner whose registry differs is left as it is
    wanted = [stable(t.replace(" ", "")) for t in tests]
    try:
        narrowed = []
        for meta in benchmark_core.BENCHMARK_TESTER:
            backward = bool(meta[3]) if len(meta) > 3 else True  # a backward test's name may end in _bwdall
            kept = [c for c in meta[0] if any(t.endswith(s) or (backward and s + "_bwd" in t)
                                              for s in (stable(config_suffix(c)),) for t in wanted)]
            narrowed.append((kept, *meta[1:]))
    except Exception:
        return
    if any(meta[0] for meta in narrowed):
        benchmark_core.BENCHMARK_TESTER[:] = narrowed


def run_module(margs):
    watch = Watch(sys.stdout)
    with contextlib.redirect_stdout(watch):
        benchmark_core.BenchmarkRunner(margs).run()
    return watch.named


members = json.loads(os.environ["PERFQ_OPBENCH_BATCH"])
args = benchmark_runner.parse_args()
for module, tests, operators, tag in members:
    del benchmark_core.BENCHMARK_TESTER[:]
    print("# perfq-module: " + module, flush=True)
    try:
        importlib.import_module("pt." + module)
        if tests:
            narrow(tests)
        margs = copy.copy(args)
        margs.test_name = AnyOf(stable(t) for t in tests) if tests else None
        margs.operators = operators
        margs.tag_filter = "all" if tests else tag
        if not run_module(copy.copy(margs)) and not tests and tag != "all":
            print("# perfq-tag-fallback: " + module + ": no test tagged " + str(tag) + "; all its tests run")
            margs.tag_filter = "all"
            run_module(margs)
    except Exception as exc:
        traceback.print_exc()
        print("# perfq-module-failed: " + module + ": " + type(exc).__name__ + ": " + str(exc), flush=True)
    sys.stdout.flush()
"""


def runs_wrapped(spec: OpBenchSpec) -> bool:
    """Whether a lone file runs through the batch wrapper: several tests (only those are timed), the
    whole file (its tests run with every tag when none has the asked one), or one test whose name holds
    an object (its address differs in the runner's process: the wrapper compares stable names); any other
    one test is ``--test-name``."""
    return len(spec.tests) != 1 or names_an_object(spec.tests[0])


def batch_key(spec: OpBenchSpec) -> tuple:
    """Specs with equal keys can share one process (same runner-wide flags; tests and tags are per file)."""
    return (
        spec.mode,
        spec.device,
        spec.iterations,
        spec.num_runs,
        spec.warmup_iterations,
        spec.omp_num_threads,
        spec.mkl_num_threads,
        spec.extra_args,
    )


def build_batch_command(python: str, specs: list[OpBenchSpec], caps: RunnerCaps) -> tuple[list[str], dict[str, str]]:
    """argv and extra environment running several benchmark files in one process."""
    first = specs[0]
    argv, _ = build_command(python, replace(first, tests=(), ops=()), caps)
    argv = [python, "-c", _BATCH_SCRIPT.replace("@ADDRESS@", repr(ADDRESS)), *argv[3:]]
    members = [[normalize_name(s.name), list(s.tests), ",".join(s.ops) or None, s.tag_filter] for s in specs]
    return argv, {BATCH_ENV: json.dumps(members), **thread_env(first)}


def parse_batch(stdout: str, specs: list[OpBenchSpec]) -> dict[str, tuple[list[Measurement], str]]:
    """Per benchmark file: its measurements and a failure message ('' when it ran)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(BATCH_MARK):
            current = sections.setdefault(line[len(BATCH_MARK) :].strip(), [])
        elif current is not None:
            current.append(line)
    result: dict[str, tuple[list[Measurement], str]] = {}
    for spec in specs:
        name = normalize_name(spec.name)
        lines = sections.get(name)
        if lines is None:
            result[name] = ([], "did not run (the batch process stopped earlier)")
            continue
        failed = next((ln[len(BATCH_FAILED) :] for ln in lines if ln.startswith(BATCH_FAILED)), "")
        found = harness_measurements(parse_text("\n".join(lines), spec.device), spec)
        result[name] = (found, failed)
    return result
