"""The portable result file (``perfq run --out``) and ``perfq import``.

Version 2 is JSON lines, so a file of millions of samples is read by DuckDB's own reader with
bounded memory: a header line ``{"format": "perfq-results", "version": 2}``, then per run one
``{"type": "run", ...}`` line (the run's fields), its ``{"type": "sample", "run": N, ...}`` and
``{"type": "failure", "run": N, ...}`` lines, where ``N`` is the run's ordinal among the run lines.
Every line is validated against the JSON Schema generated from the result types
(:func:`line_schemas`); NaN, ``Infinity``, an unknown side or status is rejected with a one-line
error before anything is written. Version 1 files (one JSON document, samples nested in their
runs) are still read, and so are PyTorch's benchmark database files (a JSON list of records,
:mod:`perfq.run.pytorch_benchmark`), both converted to version 2 lines first. A run's id travels
with the file, so merging the result files of many CI jobs into one history is idempotent (see
:mod:`schema.result_file_store`).
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import jsonschema

from common import files
from common.documents import json_schema
from common.errors import PerfqError
from common.paths import write_atomically
from perfq.run import pytorch_benchmark
from perfq.run.runs import Run
from schema.result_file_store import RUN_REF, ImportCounts, ImportFile, SourceKind, merge_result_files
from schema.results_rows import Failure, Sample

EXPORT_FORMAT = "perfq-results"
EXPORT_VERSION = 2
LINE_KINDS = ("run", "sample", "failure")
_DUCKDB_MAGIC = b"DUCK"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_HEADER_MAX = 4096  # bytes of the first line looked at to tell the format


def _line_schema(tp: type, kind: str) -> dict[str, Any]:
    """The JSON Schema of one line: the type's own schema with ``type`` (and the run ordinal) added."""
    schema = json_schema(tp)
    root = schema["$defs"][tp.__name__]
    root["properties"] = {"type": {"const": kind}, **root["properties"]}
    root["required"] = ["type", *root["required"]]
    for prop in root["properties"].values():  # the history stores integers as 32-bit INTEGER columns
        for option in prop.get("anyOf", [prop]):
            if option.get("type") == "integer":
                option.update(minimum=INT32_MIN, maximum=INT32_MAX)
    if kind != "run":
        root["properties"][RUN_REF] = {"type": "integer", "minimum": 0}
        root["required"].append(RUN_REF)
    return schema


def line_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of each kind of line, generated from ``Run``, ``Sample`` and ``Failure``."""
    return {"run": _line_schema(Run, "run"), "sample": _line_schema(Sample, "sample"),
            "failure": _line_schema(Failure, "failure")}


HEADER_SCHEMA = {
    "type": "object",
    "properties": {"format": {"const": EXPORT_FORMAT}, "version": {"enum": [1, EXPORT_VERSION]}},
    "required": ["format", "version"],
}


class LineValidator:
    """Validates result lines against their schemas; raises a one-line PerfqError naming the file."""

    def __init__(self) -> None:
        self.validators = {kind: jsonschema.Draft202012Validator(s) for kind, s in line_schemas().items()}

    def __call__(self, path: Path, kind: str, record: Any) -> None:
        validator = self.validators.get(kind)
        if validator is None or not isinstance(record, dict):
            shown = json.dumps(record, default=str)[:80]
            raise PerfqError(f"{path}: not a perfq result line (no \"type\": run|sample|failure): {shown}")
        error = jsonschema.exceptions.best_match(validator.iter_errors(record))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "line"
            raise PerfqError(f"{path}: {kind} line: {where}: {error.message}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    """JSON without NaN/Infinity (Python's json accepts them; JSON does not); a document nested
    too deeply for the parser is a ValueError, like any other bad JSON."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


# ---- writing ----

def _lines(runs: list[Run]) -> Iterator[dict[str, Any]]:
    yield {"format": EXPORT_FORMAT, "version": EXPORT_VERSION}
    for ordinal, run in enumerate(runs):
        yield {"type": "run", **{f.name: getattr(run, f.name) for f in fields(run) if not f.metadata.get("internal")}}
        for s in run.samples:
            yield {"type": "sample", RUN_REF: ordinal, **asdict(s)}
        for f in run.failures:
            yield {"type": "failure", RUN_REF: ordinal, **asdict(f)}


def export_runs(runs: list[Run], path: Path) -> None:
    """Write the portable result file (``perfq run --out``) atomically (``write_atomically``: a
    symlink or a device is written through, never replaced). An unwritable location is a one-line PerfqError.
    """
    lines = (json.dumps(line, separators=(",", ":"), allow_nan=False, default=str) + "\n" for line in _lines(runs))
    try:
        write_atomically(path, lines)
    except OSError as exc:
        raise PerfqError(f"cannot write the result file {path}: {exc.strerror or exc}") from None


# ---- reading ----

def _first_line(path: Path) -> tuple[bytes, bytes]:
    """The first 16 bytes (a DuckDB file's magic) and the first line of ``path``."""
    try:
        with files.open_input(path, files.InputKind.results) as (fd, _), open(fd, "rb", closefd=False) as fh:
            line = fh.readline(_HEADER_MAX)
            fh.seek(0)
            return fh.read(16), line
    except OSError as exc:
        raise PerfqError(f"cannot read {path}: {exc.strerror or exc}") from None


def _header(path: Path, line: bytes) -> dict[str, Any] | None:
    """The parsed header line of a version 2 file, or None when the first line is not a whole JSON value."""
    try:
        value = _loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _check_header(path: Path, header: dict[str, Any]) -> None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(HEADER_SCHEMA).iter_errors(header))
    if error is not None:
        raise PerfqError(f"{path}: not a perfq result file (expected a first line with format {EXPORT_FORMAT!r} "
                         f"and version {EXPORT_VERSION}: {error.message})")


def _v1_as_lines(path: Path, tmp: Path) -> Path:
    """A version 1 file (one document, samples nested in runs) rewritten as version 2 lines in ``tmp``."""
    try:
        doc = _loads(files.input_text(path, files.InputKind.results_v1))
    except OSError as exc:
        raise PerfqError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PerfqError(f"{path}: not a perfq result file (bad JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT or not isinstance(doc.get("runs"), list):
        raise PerfqError(f"{path}: not a perfq result file (expected format {EXPORT_FORMAT!r})")
    _check_header(path, {"format": doc["format"], "version": doc.get("version")})
    out = tmp / f"{len(list(tmp.iterdir()))}.jsonl"
    with out.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION}) + "\n")
        for ordinal, run in enumerate(doc["runs"]):
            run = copy.copy(run) if isinstance(run, dict) else run
            nested = {k: run.pop(k, []) for k in ("samples", "failures")} if isinstance(run, dict) else {}
            fh.write(_v1_line({"type": "run", **run} if isinstance(run, dict) else run, path))
            for kind, key in (("sample", "samples"), ("failure", "failures")):
                items = nested.get(key)
                if not isinstance(items, list):
                    raise PerfqError(f"{path}: run {ordinal}: {key} must be a list")
                for item in items:
                    fh.write(_v1_line({"type": kind, RUN_REF: ordinal, **item} if isinstance(item, dict) else item,
                                      path))
    return out


def _v1_line(value: Any, path: Path) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False) + "\n"
    except ValueError:
        raise PerfqError(f"{path}: a value is not a finite number") from None


def _records_as_lines(path: Path, tmp: Path) -> Path:
    """A PyTorch benchmark database file (a JSON list of records) rewritten as version 2 lines in ``tmp``."""
    try:
        content = files.read_input(path, files.InputKind.results_v1)
        records = _loads(content.decode("utf-8"))
    except OSError as exc:
        raise PerfqError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PerfqError(f"{path}: not a PyTorch benchmark file (bad JSON: {exc})") from None
    if not pytorch_benchmark.is_records(records):
        raise PerfqError(f"{path}: not a list of PyTorch benchmark records (each with metric and model)")
    out = tmp / f"{len(list(tmp.iterdir()))}.jsonl"
    try:
        with out.open("w", encoding="utf-8") as fh:
            for line in pytorch_benchmark.result_lines(records, path.stem, content):
                fh.write(_v1_line(line, path))
    except pytorch_benchmark.FormatError as exc:
        raise PerfqError(f"{path}: {exc}") from None
    return out


def _source(path: Path, tmp: Path) -> ImportFile:
    """How to read ``path``: a history database, a version 2 file, a PyTorch benchmark database file or a
    version 1 file, the last two converted to lines."""
    if not path.exists():
        raise PerfqError(f"no such result file: {path}")
    magic, line = _first_line(path)
    if magic[8:12] == _DUCKDB_MAGIC:
        return ImportFile(path, SourceKind.duckdb)
    if line.lstrip().startswith(b"["):
        return ImportFile(_records_as_lines(path, tmp), SourceKind.lines, name=path)
    header = _header(path, line)
    if header is not None and header.get("version") != 1:
        _check_header(path, header)
        return ImportFile(path, SourceKind.lines)
    return ImportFile(_v1_as_lines(path, tmp), SourceKind.lines, name=path)


def import_files(history: Path, files: list[Path]) -> ImportCounts:
    """Merge result files into the history; re-importing the same file adds nothing.

    Every file is validated first; one bad file and nothing is written.
    """
    with tempfile.TemporaryDirectory(prefix="perfq-v1-") as tmp:
        sources = [_source(path, Path(tmp)) for path in files]
        return merge_result_files(history, sources, line_schemas()["sample"], LineValidator())
