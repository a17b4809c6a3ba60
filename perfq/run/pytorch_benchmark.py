"""PyTorch's OSS benchmark database format: `perfq compare --format pytorch-benchmark`, `perfq import`.

A file is a JSON list of records, one per (side, run, benchmark test, metric): ``benchmark``
(name, mode, dtype, extra_info), ``model`` (the test), ``metric`` (name, unit,
``benchmark_values``: the samples) and ``runners`` (the host). This is the format of the upstream
wiki page "How to integrate with PyTorch OSS benchmark database" and of the operator benchmark
runner's ``--output-json-for-dashboard``: its forward and backward times are metric ``latency``
with mode ``inference`` / ``training``, as perfq writes them too. perfq adds what the database has
no column for under ``benchmark.extra_info.perfq``: the run (id, label, side, ref, commit, ...),
the sample order and the comparison's verdict and resolution, so that a file perfq wrote imports
back to the same runs and samples.

A file the upstream runner wrote carries none of that: it imports as one run of side ``head``,
labelled after the file (``pytorch-benchmark:<stem>``), with a run id derived from the file's
bytes (so importing it twice adds nothing); a test's benchmark is its ``operator_name``.

Pure: no processes, no database; the rows are plain dicts in the lines of
:mod:`perfq.run.results` (version 2), which validates and merges them. :mod:`perfq.run.opbench`
reads the runner's records with :func:`record_fields` too.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, NamedTuple, Protocol

BENCHMARK_NAME = "PyTorch operator benchmark"
MODEL_TYPE = "micro-benchmark"
LATENCY = "latency"
# perfq's metric <-> the database's (metric, benchmark.mode), for the runner's two timings
_TIMINGS = {"forward_time": "inference", "backward_time": "training"}
_IMPORTED_LABEL = "pytorch-benchmark:"
_RUN_NAMESPACE = uuid.UUID("6f1d5c1e-3a57-4f0b-9a43-41c1f6a0b7d2")


@dataclass(frozen=True)
class BenchmarkInfo:
    name: str
    mode: str | None
    dtype: str
    extra_info: dict[str, Any]


@dataclass(frozen=True)
class ModelInfo:
    name: str
    type: str
    origins: list[str]
    extra_info: dict[str, Any]


@dataclass(frozen=True)
class MetricInfo:
    name: str
    unit: str
    benchmark_values: list[float]
    target_value: float | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    cpu_info: str


@dataclass(frozen=True)
class BenchmarkRecord:
    """One record of the database: one test's samples of one metric on one run."""

    benchmark: BenchmarkInfo
    model: ModelInfo
    metric: MetricInfo
    runners: list[RunnerInfo]


# ---- writing ----

class ComparedTest(Protocol):
    """A test of a comparison (perfq.run.report.TestRow)."""

    benchmark: str
    test: str
    mode: str
    device: str
    metric: str
    unit: str
    verdict: Enum
    resolution: float | None
    change: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    min_effect: float


class Comparison(Protocol):
    """A comparison (perfq.run.report.ComparisonDocument)."""

    label: str
    tests: tuple[ComparedTest, ...]


_RUN_FIELDS = ("id", "label", "side", "ref", "commit_sha", "torch_version", "python", "host", "cpu", "started_at",
               "ended_at", "command", "status", "notes", "env", "max_samples", "sample_ceiling")


def _plain(value: Any) -> Any:
    """A run field as JSON has it: an Enum (side, status) as its value."""
    return value.value if isinstance(value, Enum) else value


def _verdict(row: ComparedTest | None) -> dict[str, Any]:
    """The comparison's word on a test, as extra_info carries it."""
    if row is None:
        return {}
    return {"verdict": row.verdict.value, "resolution": row.resolution, "change": row.change,
            "ci": list(row.ci) if row.ci else None, "p_value": row.p_value, "min_effect": row.min_effect}


def _grouped(samples: Iterable[Any]) -> dict[tuple[str, str, str, str, str, str], list[Any]]:
    """A run's samples by (benchmark, test, mode, device, metric, unit), in stored order."""
    groups: dict[tuple[str, str, str, str, str, str], list[Any]] = {}
    for s in samples:
        groups.setdefault((s.benchmark, s.test, s.mode, s.device, s.metric, s.unit), []).append(s)
    return groups


def _record(run: Any, key: tuple[str, str, str, str, str, str], samples: list[Any], comparison: str,
            row: ComparedTest | None) -> BenchmarkRecord:
    benchmark, test, mode, device, metric, unit = key
    perfq = {
        "comparison": comparison,
        "run": {name: _plain(getattr(run, name)) for name in _RUN_FIELDS},
        "benchmark": benchmark, "mode": mode, "metric": metric,
        "seq": [s.seq for s in samples], "repeat_index": [s.repeat_index for s in samples],
        **_verdict(row),
    }
    return BenchmarkRecord(
        benchmark=BenchmarkInfo(BENCHMARK_NAME, _TIMINGS.get(metric), "", {
            "device": device, "use_compile": mode == "compile", "operator_name": benchmark, "perfq": perfq}),
        model=ModelInfo(test, MODEL_TYPE, ["pytorch"], {"operator_name": benchmark}),
        metric=MetricInfo(LATENCY if metric in _TIMINGS else metric, unit, [s.value for s in samples]),
        runners=[RunnerInfo(run.host, run.cpu)],
    )


def comparison_records(doc: Comparison, runs: Iterable[Any]) -> list[BenchmarkRecord]:
    """The records of a comparison: every sample of the runs of both sides (``runs`` with their samples,
    schema.results_store.Run), each test's verdict and resolution beside its samples."""
    rows = {(r.benchmark, r.test, r.mode, r.device, r.metric, r.unit): r for r in doc.tests}
    return [_record(run, key, samples, doc.label, rows.get(key))
            for run in runs for key, samples in _grouped(run.samples).items()]


def dumps(records: list[BenchmarkRecord]) -> str:
    """The file's text: a JSON list, one record per line of the list."""
    items = ",\n".join(json.dumps(asdict(r), allow_nan=False, sort_keys=True) for r in records)
    return f"[\n{items}\n]\n" if records else "[]\n"


# ---- reading ----

class FormatError(ValueError):
    """The file is a JSON list but not of benchmark database records."""


def is_records(value: Any) -> bool:
    """Whether a parsed JSON document is a non-empty list of benchmark database records."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(r, dict) and "metric" in r and "model" in r for r in value))


def _dict(record: dict[str, Any], *path: str) -> dict[str, Any]:
    value: Any = record
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def _imported_run(name: str, digest: str) -> dict[str, Any]:
    """The run a foreign file becomes: side head, labelled after the file, its id from the file's bytes."""
    return {"id": str(uuid.uuid5(_RUN_NAMESPACE, digest)), "label": _IMPORTED_LABEL + name, "side": "head",
            "status": "complete", "notes": "imported from a PyTorch benchmark database file"}


class RecordFields(NamedTuple):
    """What one record says about its samples, in perfq's terms."""

    benchmark: str
    test: str
    mode: str
    device: str
    metric: str
    unit: str
    values: list[Any]  # as written: numbers, or null where nothing was measured
    run: dict[str, Any]  # the perfq run the record came from ({} in a runner's record)
    order: list[tuple[Any, Any]] | None  # (seq, repeat_index) per value, when perfq wrote the record


def _perfq_metric(record: dict[str, Any], perfq: dict[str, Any]) -> str:
    """perfq's metric name: its own when it wrote the record, else from the runner's metric and mode."""
    if isinstance(perfq.get("metric"), str):
        return perfq["metric"]
    name = str(_dict(record, "metric").get("name", ""))
    if name != LATENCY:
        return name
    return "backward_time" if _dict(record, "benchmark").get("mode") == "training" else "forward_time"


def _benchmark_of(perfq: dict[str, Any], record: dict[str, Any], test: str) -> str:
    """perfq's benchmark (file stem) when it wrote the record, else the runner's operator name."""
    for value in (perfq.get("benchmark"), _dict(record, "benchmark", "extra_info").get("operator_name"),
                  _dict(record, "model", "extra_info").get("operator_name")):
        if isinstance(value, str) and value:
            return value
    return test.split("_")[0]


def _test_of(record: dict[str, Any]) -> str | None:
    model = record.get("model")
    name = model.get("name") if isinstance(model, dict) else model
    return name if isinstance(name, str) and name else None


def record_fields(record: Any) -> RecordFields | None:
    """A record's fields; None when it is not a dict with a test name and a list of values."""
    if not isinstance(record, dict):
        return None
    metric, bench_extra = _dict(record, "metric"), _dict(record, "benchmark", "extra_info")
    perfq = _dict(record, "benchmark", "extra_info", "perfq")
    values, test = metric.get("benchmark_values"), _test_of(record)
    if not isinstance(values, list) or test is None:
        return None
    seqs, repeats = perfq.get("seq"), perfq.get("repeat_index")
    own = isinstance(seqs, list) and isinstance(repeats, list) and len(seqs) == len(repeats) == len(values)
    name = _perfq_metric(record, perfq)
    return RecordFields(
        benchmark=_benchmark_of(perfq, record, test),
        test=test,
        mode=str(perfq.get("mode") or ("compile" if bench_extra.get("use_compile") else "eager")),
        device=str(bench_extra.get("device") or ""),
        metric=name,
        unit=str(metric.get("unit", "us" if name in _TIMINGS else "")),
        values=values,
        run=_dict(perfq, "run"),
        order=list(zip(seqs, repeats, strict=True)) if own else None,
    )


def _sample_lines(record: Any, index: int) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(run fields, sample line, seq None for a runner's record) per value of one record; a FormatError
    when the record has no list of values or no test name."""
    fields = record_fields(record)
    if fields is None:
        values = _dict(record, "metric").get("benchmark_values") if isinstance(record, dict) else None
        what = "metric.benchmark_values is not a list" if not isinstance(values, list) else "model.name is missing"
        raise FormatError(f"record {index}: {what}")
    for i, value in enumerate(fields.values):
        if value is None:  # the runner writes null where it measured nothing (memory bandwidth, say)
            continue
        seq, repeat = fields.order[i] if fields.order else (None, i)
        yield fields.run, {"type": "sample", "seq": seq, "repeat_index": repeat, "benchmark": fields.benchmark,
                           "test": fields.test, "mode": fields.mode, "device": fields.device, "metric": fields.metric,
                           "unit": fields.unit, "value": value}


def result_lines(records: list[dict[str, Any]], name: str, content: bytes) -> Iterator[dict[str, Any]]:
    """The perfq result lines (header, runs, samples) of a benchmark database file's records.

    ``name`` (the file's stem) and ``content`` (its bytes) name and identify the run of records
    that carry no perfq run. A record without a list of values or a test name is a FormatError.
    """
    foreign = _imported_run(name, hashlib.sha256(content).hexdigest())
    runs: dict[str, tuple[int, dict[str, Any]]] = {}
    samples: list[dict[str, Any]] = []
    for index, record in enumerate(records):
        for run, sample in _sample_lines(record, index):
            run = {k: v for k, v in run.items() if v is not None} or foreign
            ordinal, _ = runs.setdefault(run["id"], (len(runs), run))
            samples.append({**sample, "run": ordinal})
    next_seq: dict[int, int] = {}
    yield {"format": "perfq-results", "version": 2}
    for _, run in runs.values():
        yield {"type": "run", **run}
    for sample in samples:
        if sample["seq"] is None:  # a foreign file's values: numbered in file order, per run
            sample["seq"] = next_seq.get(sample["run"], 0)
            next_seq[sample["run"]] = sample["seq"] + 1
        yield sample
