"""The store of an in-place patch of the index (indexer/incremental.py), on the scratch copy's one
connection: the named statements of schema/patch.sql (each rule of indexer/rules/ runs those of its
construct), and the generic deltas: rows inserted by row type, a removed function's cascade, the
function ids of registrations set, the meta updated."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from schema.engine import duckdb
from schema.model import EdgeKind, Lang, NodeKind, Origin
from schema.packed_graph import Edge
from schema.writer import insert_rows


class NotAnIndex(Exception):
    """The file holds no perfq index of this schema (a query failed)."""


def _statements(text: str) -> dict[str, tuple[str, ...]]:
    """The named statements of a ``-- name: X`` file, each its ``;``-separated statements, with
    the model's vocabularies filled in."""
    vocabularies = {"EdgeKind": EdgeKind, "Lang": Lang, "NodeKind": NodeKind, "Origin": Origin}
    named: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("-- name: "):
            lines = named.setdefault(line.removeprefix("-- name: ").strip(), [])
        elif line and not line.startswith("--"):
            lines.append(line)
    return {
        name: tuple(s.strip() for s in "\n".join(body).format(**vocabularies).split(";\n"))
        for name, body in named.items()
    }


STATEMENTS = _statements(resources.files("schema").joinpath("patch.sql").read_text())


class PatchStore:
    """Reads and writes of one patch, over the connection to the index copy it patches."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def rows(self, name: str, **params: object) -> list[tuple]:
        """The rows of the named statement ``name`` (its last statement's) with ``params``."""
        out: list[tuple] = []
        for sql in STATEMENTS[name]:
            out = self.con.execute(sql, params).fetchall()
        return out

    def value(self, name: str, **params: object) -> int:
        """The one value of the named statement ``name``."""
        return self.rows(name, **params)[0][0]

    def insert(self, row_type: type, rows: list[tuple]) -> None:
        """Insert ``rows`` (tuples in ``row_type``'s field order) into its table."""
        insert_rows(self.con, row_type.TABLE, rows)

    def indexed_state(self) -> tuple[dict[str, str], dict[str, tuple], dict[str, str]]:
        """The index's meta, its repo files (path -> id, digest, structure and registration
        signatures) and its benchmark files' digests; NotAnIndex when it has no such tables."""
        try:
            meta = dict(self.rows("meta"))
            files = {p: (i, sha, sig, reg) for i, p, sha, sig, reg in self.rows("repo_files")}
            benches = dict(self.rows("benchmark_digests"))
        except duckdb.Error:
            raise NotAnIndex from None
        return meta, files, benches

    def drop_functions(self, ids: list[int]) -> tuple[list[Edge], list[tuple[int, str]]]:
        """Remove functions and everything that refers to them; returns the reachability edges
        and the nodes (id, kind) removed."""
        if not ids:
            return [], []
        edges, nodes = self.rows("drop_reach_edges", ids=ids), self.rows("drop_nodes", ids=ids)
        self.rows("drop_function_rows", ids=ids)
        return edges, nodes

    def set_function_ids(self, row_type: type, keys: tuple[str, ...], rows: list[tuple]) -> None:
        """Set the function_id of the rows of ``row_type``'s table named by ``keys``, in one
        statement (``rows``: the function id, or None, then the values of ``keys``)."""
        if not rows:
            return
        table = row_type.TABLE
        columns = ", ".join(f"unnest(?) AS {c}" for c in keys)
        matched = " AND ".join(f"{table}.{c} = fix.{c}" for c in keys)
        self.con.execute(
            f"UPDATE {table} SET function_id = fix.function_id FROM (SELECT unnest(?::INTEGER[]) AS function_id,"
            f" {columns}) AS fix WHERE {matched}",
            [list(column) for column in zip(*rows, strict=True)],
        )

    def replace_file_rows(self, row_type: type, file_ids: list[int], rows: list[tuple]) -> None:
        """Replace the rows of ``row_type``'s table (one with a ``file_id`` column) that name the files
        ``file_ids`` by ``rows``: the generic patch of a construct whose rows are each one file's."""
        self.con.execute(f"DELETE FROM {row_type.TABLE} WHERE file_id IN (SELECT unnest(?::INTEGER[]))", [file_ids])
        insert_rows(self.con, row_type.TABLE, rows)

    def values_in_use(self, table: str, column: str, values: Iterable[str]) -> set[str]:
        """Those of ``values`` that some row of ``table`` holds in ``column``."""
        sql = f"SELECT DISTINCT {column} FROM {table} WHERE {column} IN (SELECT unnest(?::TEXT[]))"
        return {r[0] for r in self.con.execute(sql, [sorted(values)]).fetchall()}

    def update_meta(self, meta: dict[str, str]) -> None:
        self.rows("update_meta", keys=list(meta), values=list(meta.values()))
