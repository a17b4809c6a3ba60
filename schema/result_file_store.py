"""Merging result files into the results history, in bulk and validated before anything is written.

Two kinds of source:

* a JSON-lines result file (``perfq run --out``): one header line, then ``run``, ``sample`` and
  ``failure`` lines; a sample or failure line names its run by the run's ordinal among the run
  lines of the file. The sample lines (the bulk: millions) are read by DuckDB's own JSON reader
  into a staging table in one pass; every value is checked there against the JSON Schema of a
  sample line (required keys, JSON types, enums, finite numbers) with SQL generated from that
  schema. The few other lines are handed to a Python validator.
* another machine's history DuckDB file, attached read-only and checked the same way.

Staging happens in an in-memory DuckDB (spilling to a temporary directory beyond
``MEMORY_LIMIT``); the history is attached, migrated and written only after every source passed,
in one transaction: a bad file leaves the history as it was. Rows are keyed by (run id, seq), so
importing a file twice adds nothing; a run without an id gets one derived from its content.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from common.errors import PerfqError
from schema.db import DatabaseLocked, transaction
from schema.engine import duckdb
from schema.history import LOCK_WAIT, connect_history, open_waiting, tables
from schema.results_rows import FAILURE_FIELDS, RUN_FIELDS, SAMPLE_FIELDS, RunStatus
from schema.results_store import RESULT_TABLES

MEMORY_LIMIT = "256MB"
RUN_REF = "run"  # key of a sample/failure line naming its run's ordinal
CONTENT_ID = uuid.UUID("5b0c1d2e-7f3a-4e59-9c61-0d8f2a7b4e10")  # uuid5 namespace of content-derived run ids


class SourceKind(str, Enum):
    lines = "lines"  # JSON-lines result file
    duckdb = "duckdb"  # another history database


@dataclass(frozen=True)
class ImportFile:
    """One file to import (``name``: the file the user gave, when ``path`` is a converted copy)."""

    path: Path
    kind: SourceKind
    name: Path | None = None

    @property
    def shown(self) -> Path:
        return self.name or self.path


@dataclass(frozen=True)
class ImportCounts:
    """What an import added."""

    files: int
    runs_seen: int
    runs_added: int
    samples_added: int
    failures_added: int


# (file, kind, record) -> None; raises PerfqError for a record that does not match its schema
RecordCheck = Callable[[Path, str, Any], None]

_JSON_TYPES = {
    "string": ("VARCHAR",),
    "integer": ("UBIGINT", "BIGINT", "HUGEINT"),
    "number": ("UBIGINT", "BIGINT", "HUGEINT", "DOUBLE"),
    "boolean": ("BOOLEAN",),
    "null": ("NULL",),
}
_CASTS = {"string": "{c}->>'$'", "integer": "CAST({c} AS DOUBLE)::BIGINT", "number": "CAST({c} AS DOUBLE)",
          "boolean": "CAST({c} AS BOOLEAN)"}
_SQL_TYPES = {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


def _sql_list(values: list[Any]) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)


def _column_check(name: str, prop: dict[str, Any], required: bool, col: str) -> tuple[str, str]:
    """(SQL expression that validates and casts JSON column ``col``, SQL type) for one schema property.

    The expression raises (DuckDB ``error()``) naming the key, the expected type and the value.
    """
    kind = prop.get("type", "string")
    jt = f"json_type({col})"
    allowed = list(_JSON_TYPES[kind])
    bad = [f"{jt} NOT IN ({_sql_list(allowed)})"]
    if kind == "integer":  # JSON Schema: 5.0 is an integer
        bad[0] = f"({bad[0]} AND NOT ({jt} = 'DOUBLE' AND CAST({col} AS DOUBLE) = floor(CAST({col} AS DOUBLE))))"
    if kind == "number":
        bad.append(f"NOT isfinite(CAST({col} AS DOUBLE))")
    if "enum" in prop:
        bad.append(f"{col}->>'$' NOT IN ({_sql_list(prop['enum'])})")
    for key, op in (("minimum", "<"), ("maximum", ">")):
        if key in prop:
            bad.append(f"coalesce(TRY_CAST({col} AS DOUBLE) {op} {prop[key]}, false)")
    expect = "one of " + "|".join(map(str, prop["enum"])) if "enum" in prop else (
        "a finite number" if kind == "number" else f"a JSON {kind}")
    if "minimum" in prop and "maximum" in prop:
        expect += f" in [{prop['minimum']}, {prop['maximum']}]"
    missing = f"{jt} IS NULL OR {jt} = 'NULL'"
    message = (f"error(printf('%s: %s line: {name} must be {expect}, not %s', $shown, $kind, "
               f"coalesce(CAST({col} AS VARCHAR), 'missing')))")
    cast = _CASTS[kind].format(c=col)
    if not required:
        return f"CASE WHEN {missing} THEN NULL WHEN {' OR '.join(bad)} THEN {message} ELSE {cast} END", _SQL_TYPES[kind]
    return f"CASE WHEN {missing} OR {' OR '.join(bad)} THEN {message} ELSE {cast} END", _SQL_TYPES[kind]


def _property_type(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's schema with ``$ref`` resolved and ``X | None`` reduced to X."""
    if "$ref" in prop:
        prop = defs[prop["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in prop:
        options = [p for p in prop["anyOf"] if p.get("type") != "null"]
        if len(options) == 1:
            return _property_type(options[0], defs)
    if "enum" in prop and "type" not in prop:
        prop = {**prop, "type": "string"}
    return prop


def _nullable(prop: dict[str, Any]) -> bool:
    return any(p.get("type") == "null" for p in prop.get("anyOf", ()))


def sample_select(schema: dict[str, Any], columns: tuple[str, ...]) -> list[str]:
    """SQL select items that check and cast each of ``columns`` (JSON values) against a sample line schema."""
    defs = schema.get("$defs", {})
    root = defs[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema
    required = set(root.get("required", ()))
    items = []
    for name in columns:
        prop = root["properties"][name]
        expr, _ = _column_check(name, _property_type(prop, defs), name in required and not _nullable(prop),
                                f'"{name}"')
        items.append(f'{expr} AS "{name}"')
    return items


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[list[Any]]) -> None:
    if rows:
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' for _ in rows[0])})", rows)


class _Staging:
    """The in-memory DuckDB where sources are read and checked."""

    def __init__(self, sample_schema: dict[str, Any], check: RecordCheck, tmp: Path) -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        self.con.execute(f"SET temp_directory = '{tmp.as_posix()}'")
        self.check = check
        self.sample_items = sample_select(sample_schema, (RUN_REF, *SAMPLE_FIELDS))
        self.con.execute(
            "CREATE TEMP TABLE import_samples (source INTEGER, run BIGINT, seq BIGINT, repeat_index BIGINT,"
            " benchmark VARCHAR, test VARCHAR, mode VARCHAR, device VARCHAR, metric VARCHAR, unit VARCHAR,"
            " value DOUBLE)")
        self.runs: list[tuple[int, int, dict[str, Any]]] = []  # (source, ordinal, run record)
        self.failures: list[tuple[int, dict[str, Any]]] = []  # (source, failure record with its run ordinal)

    def close(self) -> None:
        self.con.close()

    # ---- JSON-lines result files ----

    def add_lines(self, source: int, src: ImportFile) -> None:
        """Stage a JSON-lines result file: other lines validated in Python, sample lines in SQL."""
        path = src.shown
        self.con.execute("SET preserve_insertion_order = true")  # run ordinals follow the file
        others = self.con.execute(
            "SELECT json FROM read_json_objects($path, format = 'newline_delimited') "
            "WHERE json->>'$.type' IS DISTINCT FROM 'sample'", {"path": str(src.path)}).fetchall()
        runs = 0
        for (text,) in others[1:]:  # the first is the header, checked when the file was opened
            record = json.loads(text)
            kind = record.get("type") if isinstance(record, dict) else None
            self.check(path, str(kind), record)
            if kind == "run":
                self.runs.append((source, runs, record))
                runs += 1
            else:
                self.failures.append((source, record))
        self._check_refs(path, runs, [f[RUN_REF] for s, f in self.failures if s == source], "failure")
        self.con.execute("SET preserve_insertion_order = false")
        columns = ", ".join(f"'{c}': 'JSON'" for c in (RUN_REF, *SAMPLE_FIELDS))
        self.con.execute(
            f"INSERT INTO import_samples SELECT $source, {', '.join(self.sample_items)} FROM read_json($path, "
            f"format = 'newline_delimited', columns = {{'type': 'VARCHAR', {columns}}}) WHERE type = 'sample'",
            {"path": str(src.path), "source": source, "kind": "sample", "shown": str(path)})
        bad = self.con.execute("SELECT run FROM import_samples WHERE source = $source AND (run < 0 OR run >= $n) "
                               "LIMIT 1", {"source": source, "n": runs}).fetchone()
        if bad:
            raise PerfqError(f"{path}: a sample line names run {bad[0]}, but the file has {runs} run line(s)")

    @staticmethod
    def _check_refs(path: Path, runs: int, refs: list[Any], kind: str) -> None:
        for ref in refs:
            if not 0 <= ref < runs:
                raise PerfqError(f"{path}: a {kind} line names run {ref}, but the file has {runs} run line(s)")

    # ---- another history database ----

    def add_duckdb(self, source: int, src: ImportFile) -> None:
        """Stage another machine's history: its runs and failures validated in Python, samples in SQL."""
        alias, path = f"src{source}", src.path
        try:
            self.con.execute(f"ATTACH $path AS {alias} (READ_ONLY)", {"path": str(path)})
        except duckdb.Error as exc:
            raise PerfqError(f"cannot open {path}: {str(exc).splitlines()[0]}") from None
        try:
            found = {r[0] for r in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = $db", {"db": alias}).fetchall()}
            if not found >= RESULT_TABLES:
                raise PerfqError(f"{path}: no perfq runs in this database")
            ordinal = self._attached_runs(source, alias, path)
            self.con.execute("CREATE OR REPLACE TEMP TABLE run_ordinals (id VARCHAR, ordinal BIGINT)")
            _insert(self.con, "run_ordinals", [list(item) for item in ordinal.items()])
            for row in self._records(f"SELECT run_id, {', '.join(FAILURE_FIELDS)} FROM {alias}.failures"):
                if row["run_id"] in ordinal:
                    record = {"type": "failure", RUN_REF: ordinal[row.pop("run_id")], **row}
                    self.check(path, "failure", record)
                    self.failures.append((source, record))
            self.con.execute("SET preserve_insertion_order = false")
            as_json = ", ".join(f'to_json(s."{c}") AS "{c}"' for c in SAMPLE_FIELDS)
            self.con.execute(
                f"INSERT INTO import_samples SELECT $source, {', '.join(self.sample_items)} FROM ("
                f"SELECT to_json(o.ordinal) AS {RUN_REF}, {as_json} FROM {alias}.samples s "
                f"JOIN run_ordinals o ON o.id = s.run_id)",
                {"source": source, "kind": "sample", "shown": str(path)})
        finally:
            self.con.execute(f"DETACH {alias}")

    def _attached_runs(self, source: int, alias: str, path: Path) -> dict[str, int]:
        """The runs of an attached history (the columns it has: an older one may lack later ones)."""
        have = {r[0] for r in self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = $db AND table_name = 'runs'",
            {"db": alias}).fetchall()}
        columns = ", ".join(f for f in RUN_FIELDS if f in have)
        ordinal: dict[str, int] = {}
        for row in self._records(f"SELECT {columns} FROM {alias}.runs ORDER BY started_at, id", nulls=False):
            record = {"type": "run", **row}
            self.check(path, "run", record)
            ordinal[row["id"]] = len(ordinal)
            self.runs.append((source, ordinal[row["id"]], record))
        return ordinal

    def _records(self, sql: str, nulls: bool = True) -> list[dict[str, Any]]:
        """Rows as records (timestamps as ISO text); ``nulls=False``: a NULL column is a key the record lacks."""
        cur = self.con.execute(sql)
        names = [d[0] for d in cur.description]
        return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in zip(names, row, strict=True)
                 if nulls or v is not None} for row in cur.fetchall()]

    # ---- after staging ----

    def check_duplicates(self, paths: list[Path]) -> None:
        dup = self.con.execute("SELECT source, run, seq FROM import_samples GROUP BY ALL HAVING count(*) > 1 "
                               "LIMIT 1").fetchone()
        if dup:
            raise PerfqError(f"{paths[dup[0]]}: run {dup[1]} has two samples with seq {dup[2]}")

    def run_ids(self) -> list[str]:
        """The id of every staged run: its own, or one derived from its content (the same every time)."""
        ids = []
        for source, ordinal, record in self.runs:
            if record.get("id"):
                ids.append(str(record["id"]))
                continue
            digest = self.con.execute(
                "SELECT md5(coalesce(string_agg(concat_ws(chr(31), seq, repeat_index, benchmark, test, mode, device,"
                " metric, unit, value), chr(30) ORDER BY seq), '')) FROM import_samples"
                " WHERE source = $source AND run = $run", {"source": source, "run": ordinal}).fetchone()[0]
            content = json.dumps({k: v for k, v in record.items() if k != "id"}, sort_keys=True, default=str)
            ids.append(str(uuid.uuid5(CONTENT_ID, hashlib.sha256(f"{content}\n{digest}".encode()).hexdigest())))
        self.con.execute("CREATE OR REPLACE TEMP TABLE import_runs (source INTEGER, run BIGINT, id VARCHAR)")
        _insert(self.con, "import_runs", [[s, o, i] for (s, o, _), i in zip(self.runs, ids, strict=True)])
        return ids


def merge_result_files(history: Path, sources: list[ImportFile], sample_schema: dict[str, Any], check: RecordCheck,
                       wait: float = LOCK_WAIT) -> ImportCounts:
    """Validate every source, then merge them into ``history`` in one transaction (nothing written on error)."""
    with tempfile.TemporaryDirectory(prefix="perfq-import-") as tmp:
        staging = _Staging(sample_schema, check, Path(tmp))
        try:
            for i, src in enumerate(sources):
                _stage(staging, i, src)
            staging.check_duplicates([s.shown for s in sources])
            ids = staging.run_ids()
            connect_history(history, wait=wait).close()  # create, migrate, refuse a non-history
            added = _merge(staging, history, ids, wait)
        finally:
            staging.close()
    return ImportCounts(len(sources), len(staging.runs), *added)


def _stage(staging: _Staging, index: int, src: ImportFile) -> None:
    try:
        if src.kind == SourceKind.duckdb:
            staging.add_duckdb(index, src)
        else:
            staging.add_lines(index, src)
    except duckdb.Error as exc:
        raise PerfqError(_one_line(src.shown, exc)) from None
    except UnicodeDecodeError:  # DuckDB's message about a bad value cut a character in two: not even it decodes
        raise PerfqError(f"{src.shown}: a result line holds a value DuckDB cannot read") from None


def _one_line(path: Path, exc: duckdb.Error) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for prefix in ("Invalid Input Error: ", "Conversion Error: "):
        text = text.removeprefix(prefix)
    return text if text.startswith(str(path)) else f"{path}: {text}"


def _attach(con: duckdb.DuckDBPyConnection, history: Path, wait: float) -> None:
    """ATTACH the history as ``h``, waiting like every other open for another process's hold."""

    def attach() -> duckdb.DuckDBPyConnection:
        try:
            con.execute("ATTACH $path AS h", {"path": str(history)})
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseLocked(f"{history} is locked by another process; try again when it has finished"
                                     ) from None
            raise
        return con

    open_waiting(history, False, wait, opener=attach)


def _merge(staging: _Staging, history: Path, ids: list[str], wait: float) -> tuple[int, int, int]:
    con = staging.con
    _attach(con, history, wait)
    try:
        if not tables(con, "h") >= RESULT_TABLES:
            raise PerfqError(f"{history}: the results tables are missing")
        with transaction(con):
            runs_added, stored = _merge_runs(con, staging, ids)
            counts = (runs_added, _merge_samples(con, ids, stored), _merge_failures(con, staging, ids))
        con.execute("DETACH h")  # checkpoints the history: a full disk fails here
    except duckdb.Error as exc:
        raise PerfqError(f"cannot write results to {history}: {str(exc).splitlines()[0]}") from None
    finally:
        with contextlib.suppress(duckdb.Error):  # detached already, or invalidated by a failed checkpoint
            con.execute("DETACH DATABASE IF EXISTS h")
    return counts


def _merge_runs(con: duckdb.DuckDBPyConnection, staging: _Staging, ids: list[str]) -> tuple[int, set[str]]:
    """Insert new runs; a stored run that is not complete takes the status of an imported copy.

    Returns the number of new runs and the ids that were stored already.
    """
    added, stored = 0, set()
    for (_, _, record), run_id in zip(staging.runs, ids, strict=True):
        row = {**{k: record.get(k) for k in RUN_FIELDS}, "id": run_id}
        row["status"] = row["status"] or RunStatus.running.value
        existing = con.execute("SELECT status FROM h.runs WHERE id = ?", [run_id]).fetchone()
        if existing is None:
            con.execute(f"INSERT INTO h.runs ({', '.join(RUN_FIELDS)}) VALUES ({', '.join('?' for _ in RUN_FIELDS)})",
                        [row[k] for k in RUN_FIELDS])
            added += 1
            continue
        stored.add(run_id)
        if existing[0] != RunStatus.complete.value and row["status"] != existing[0]:
            con.execute("UPDATE h.runs SET status = ?, ended_at = ?, notes = ? WHERE id = ?",
                        [row["status"], row["ended_at"], row["notes"], run_id])
    return added, stored


def _merge_samples(con: duckdb.DuckDBPyConnection, ids: list[str], stored: set[str]) -> int:
    """Insert the staged samples whose (run id, seq) is not stored yet (the first copy of a duplicate wins).

    Runs new to the history take a plain bulk insert; only runs stored before (a re-import, a later
    export of the same run) and runs given twice are checked sample by sample.
    """
    cols = ", ".join(SAMPLE_FIELDS)
    picked = f"SELECT r.id, {', '.join(f's.{c}' for c in SAMPLE_FIELDS)} FROM import_samples s JOIN import_runs r "
    twice = {i for i in ids if ids.count(i) > 1}
    careful = sorted(stored | twice)
    added = con.execute(f"INSERT INTO h.samples (run_id, {cols}) {picked} USING (source, run) "
                        "WHERE NOT list_contains($careful, r.id)", {"careful": careful}).fetchone()[0]
    if careful:
        added += con.execute(
            f"INSERT INTO h.samples (run_id, {cols}) {picked} USING (source, run) WHERE list_contains($careful, r.id) "
            "AND NOT EXISTS (SELECT 1 FROM h.samples x WHERE x.run_id = r.id AND x.seq = s.seq) "
            "QUALIFY row_number() OVER (PARTITION BY r.id, s.seq ORDER BY s.source) = 1",
            {"careful": careful}).fetchone()[0]
    return added


def _merge_failures(con: duckdb.DuckDBPyConnection, staging: _Staging, ids: list[str]) -> int:
    by_ordinal = {(s, o): i for (s, o, _), i in zip(staging.runs, ids, strict=True)}
    added = 0
    for source, record in staging.failures:
        run_id = by_ordinal[(source, record[RUN_REF])]
        if con.execute("SELECT 1 FROM h.failures WHERE run_id = ? AND seq = ?", [run_id, record["seq"]]).fetchone():
            continue
        con.execute(f"INSERT INTO h.failures (run_id, {', '.join(FAILURE_FIELDS)}) VALUES (?, "
                    f"{', '.join('?' for _ in FAILURE_FIELDS)})", [run_id, *[record.get(k) for k in FAILURE_FIELDS]])
        added += 1
    return added
