"""The queries of an in-place patch of the index (indexer/incremental.py): what it reads to
decide and resolve, and what it deletes, inserts and updates, on the scratch copy's one
connection."""

from __future__ import annotations

import json
from collections.abc import Iterable

from schema.engine import duckdb
from schema.model import EdgeKind, FunctionRow, Lang, NodeKind, NodeRow, Origin, row_tuple
from schema.packed_graph import Edge
from schema.writer import insert_rows

_IDS = "(SELECT unnest(?::INTEGER[]))"
_NAMES = "(SELECT unnest(?::TEXT[]))"

# what the link makes of a function's calls: each table, by the column naming the caller
LINKED_TABLES = ("calls", "call_edges", "op_calls", "reach_edges")
_LINKED_BY = {"calls": "caller_id", "call_edges": "caller_id", "op_calls": "function_id", "reach_edges": "src"}
CALLER_AT = {"calls": 0, "call_edges": 0, "op_calls": 0, "reach_edges": 1}  # the caller's place in a row
_LINKED_KINDS = dict.fromkeys(LINKED_TABLES, "") | {
    "reach_edges": f" AND kind IN ('{EdgeKind.CALL}', '{EdgeKind.STUB_CALL}', '{EdgeKind.OP_CALL}')"
}


class NotAnIndex(Exception):
    """The file holds no perfq index of this schema (a query failed)."""


class PatchStore:
    """Reads and writes of one patch, over the connection to the index copy it patches."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def _rows(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    # ---- what decides whether a patch can do
    def indexed_state(self) -> tuple[dict[str, str], dict[str, tuple], dict[str, str]]:
        """The index's meta, its repo files (path -> id, digest, structure and registration
        signatures) and its benchmark files' digests; NotAnIndex when it has no such tables."""
        try:
            meta = dict(self._rows("SELECT key, value FROM meta"))
            files = {
                p: (i, sha, sig, reg)
                for i, p, sha, sig, reg in self._rows(
                    f"SELECT id, path, sha256, signature, registrations FROM files WHERE origin = '{Origin.REPO}'"
                )
            }
            benches = dict(self._rows("SELECT file, sha256 FROM benchmarks"))
        except duckdb.Error:
            raise NotAnIndex from None
        return meta, files, benches

    # ---- functions of a changed file
    def file_functions(self, file_id: int) -> list[tuple]:
        """(id, qualname, name, kind, internal, usr, start_line, end_line) of a file's functions, by id."""
        return self._rows(
            "SELECT id, qualname, name, kind, internal, usr, start_line, end_line FROM functions WHERE file_id = ?"
            " ORDER BY id",
            [file_id],
        )

    def linked_rows(self, ids: list[int]) -> dict[str, list[tuple]]:
        """The rows the link made for the calls of functions ``ids``: their ``calls``,
        ``call_edges``, ``op_calls`` and call ``reach_edges``, in the order of their columns."""
        if not ids:
            return dict.fromkeys(LINKED_TABLES, [])
        return {
            table: self._rows(f"SELECT * FROM {table} WHERE {_LINKED_BY[table]} IN {_IDS}{_LINKED_KINDS[table]}", [ids])
            for table in LINKED_TABLES
        }

    def unlink_calls(self, ids: list[int]) -> list[Edge]:
        """Remove the calls of functions ``ids`` (linked again by the caller); returns the
        reachability edges removed."""
        if not ids:
            return []
        for table in LINKED_TABLES[:-1]:
            self.con.execute(f"DELETE FROM {table} WHERE {_LINKED_BY[table]} IN {_IDS}", [ids])
        return self._rows(
            f"DELETE FROM reach_edges WHERE src IN {_IDS}{_LINKED_KINDS['reach_edges']}"
            " RETURNING dst, src, kind, detail",
            [ids],
        )

    def move_functions(self, ids: list[int], lines: list[tuple[int, int]]) -> None:
        """Give functions ``ids`` their new extents ``lines`` (start, end)."""
        if not ids:
            return
        self.con.execute(
            "UPDATE functions SET start_line = moved.start_line, end_line = moved.end_line FROM"
            " (SELECT unnest(?::INTEGER[]) AS id, unnest(?::INTEGER[]) AS start_line,"
            " unnest(?::INTEGER[]) AS end_line) AS moved WHERE functions.id = moved.id",
            [ids, [start for start, _ in lines], [end for _, end in lines]],
        )

    def drop_functions(self, ids: list[int]) -> tuple[list[Edge], list[tuple[int, str]]]:
        """Remove functions and everything that refers to them; returns the reachability edges
        and the nodes (id, kind) removed."""
        if not ids:
            return [], []
        edges = self._rows(
            f"DELETE FROM reach_edges WHERE src IN {_IDS} OR dst IN {_IDS} RETURNING dst, src, kind, detail",
            [ids, ids],
        )
        nodes = self._rows(f"DELETE FROM nodes WHERE id IN {_IDS} RETURNING id, kind", [ids])
        for sql in (
            f"DELETE FROM calls WHERE caller_id IN {_IDS}",
            f"DELETE FROM call_edges WHERE caller_id IN {_IDS} OR callee_id IN {_IDS}",
            f"DELETE FROM op_calls WHERE function_id IN {_IDS}",
            f"DELETE FROM native_samples WHERE function_id IN {_IDS}",
            f"DELETE FROM functions WHERE id IN {_IDS}",
            f"UPDATE kernels SET function_id = NULL WHERE function_id IN {_IDS}",
            f"UPDATE stub_impls SET function_id = NULL WHERE function_id IN {_IDS}",
            f"UPDATE library_impls SET function_id = NULL WHERE function_id IN {_IDS}",
        ):
            self.con.execute(sql, [ids] * sql.count("?"))
        return edges, nodes

    def next_function_id(self) -> int:
        """The first id neither a node nor a function has."""
        return self._rows(
            "SELECT greatest((SELECT coalesce(max(id), -1) FROM nodes), (SELECT coalesce(max(id), -1) FROM functions))"
            " + 1"
        )[0][0]

    def add_functions(self, file_id: int, functions: list[tuple]) -> None:
        """Insert ``functions`` (id, facts' Function) of a file, and their nodes."""
        rows = [row_tuple(FunctionRow(i, file_id, f.qualname, f.name, f.kind, f.start_line, f.end_line, f.internal,
                                      f.usr)) for i, f in functions]
        insert_rows(self.con, "functions", rows)
        insert_rows(self.con, "nodes", [row_tuple(NodeRow(i, NodeKind.FUNCTION, str(i), f.qualname))
                                        for i, f in functions])

    # ---- what the linker needs
    def linker_functions(self, names: set[str], file_ids: Iterable[int], callers_of: set[str]) -> list[tuple]:
        """The functions named ``names``, those of ``file_ids``, and those calling a name of
        ``callers_of``, as CppCallLinker rows."""
        return self._rows(
            f"SELECT f.id, f.file_id, f.qualname, f.name, f.kind, f.internal, fi.lang <> '{Lang.PYTHON}',"
            " fi.path LIKE '%.h' OR fi.path LIKE '%.hpp' OR fi.path LIKE '%.cuh', f.usr"
            f" FROM functions f JOIN files fi ON fi.id = f.file_id WHERE f.name IN {_NAMES} OR f.file_id IN {_IDS}"
            f" OR f.id IN (SELECT caller_id FROM calls WHERE callee_name IN {_NAMES})",
            [sorted(names), list(file_ids), sorted(callers_of)],
        )

    def aten_ops(self) -> list[tuple]:
        return self._rows("SELECT name, base, overload, variants FROM ops WHERE namespace = 'aten'")

    def ops(self) -> list[tuple]:
        return self._rows("SELECT name, base, overload FROM ops")

    def stub_names(self) -> set[str]:
        return {r[0] for r in self._rows("SELECT stub FROM stubs UNION SELECT stub FROM stub_impls")}

    def op_and_stub_nodes(self) -> dict[tuple[NodeKind, str], int]:
        sql = f"SELECT id, kind, key FROM nodes WHERE kind IN ('{NodeKind.OP}', '{NodeKind.STUB}')"
        return {(NodeKind(k), key): i for i, k, key in self._rows(sql)}

    def next_node_id(self) -> int:
        return self._rows("SELECT coalesce(max(id), -1) + 1 FROM nodes")[0][0]

    def paths(self, file_ids: list[int]) -> dict[int, str]:
        return dict(self._rows(f"SELECT id, path FROM files WHERE id IN {_IDS}", [file_ids]))

    def calls_named(self, names: list[str], outside_file: int) -> list[tuple]:
        """(caller, callee name, qualifier, kind, line, caller's file, its usings) of the C++
        calls of ``names`` made outside the file ``outside_file``."""
        return self._rows(
            "SELECT c.caller_id, c.callee_name, c.qualifier, c.kind, c.line, f.file_id, fi.usings FROM calls c"
            " JOIN functions f ON f.id = c.caller_id JOIN files fi ON fi.id = f.file_id"
            f" WHERE c.callee_name IN {_NAMES} AND f.file_id <> ? AND fi.lang <> '{Lang.PYTHON}'",
            [names, outside_file],
        )

    def class_hierarchy(self) -> list[tuple[int, str, tuple[str, ...], tuple[str, ...]]]:
        """(file id, class, its bases, its virtual methods) of every class the index records."""
        classes: dict[tuple[int, str], tuple[list[str], list[str]]] = {}
        for file_id, qualname, base in self._rows("SELECT file_id, qualname, base FROM class_bases ORDER BY ALL"):
            classes.setdefault((file_id, qualname), ([], []))[0].append(base)
        for file_id, qualname, name in self._rows("SELECT file_id, qualname, name FROM virtual_methods ORDER BY ALL"):
            classes.setdefault((file_id, qualname), ([], []))[1].append(name)
        return [(f, q, tuple(b), tuple(v)) for (f, q), (b, v) in sorted(classes.items())]

    def kernels(self) -> list[tuple]:
        return self._rows("SELECT op, dispatch_key, kernel_name FROM kernels")

    def include_graph(self) -> dict[int, list[int]]:
        """file id -> the indexed files it includes (those resolved to one)."""
        out: dict[int, list[int]] = {}
        for file_id, target in self._rows(
            "SELECT file_id, target_file_id FROM includes WHERE target_file_id IS NOT NULL ORDER BY ALL"
        ):
            out.setdefault(file_id, []).append(target)
        return out

    def kernels_around(self, ids: list[int]) -> list[tuple[str, str]]:
        """(dispatch key, op) of the kernels that are one of functions ``ids`` or call one
        directly (what the link reads to infer the operators a device's kernels run)."""
        if not ids:
            return []
        return self._rows(
            f"SELECT dispatch_key, op FROM kernels WHERE function_id IN {_IDS} UNION SELECT k.dispatch_key, k.op"
            f" FROM kernels k SEMI JOIN call_edges c ON c.caller_id = k.function_id AND c.callee_id IN {_IDS}",
            [ids, ids],
        )

    def stub_impls_around(self, ids: list[int]) -> list[tuple[str, str]]:
        """(stub, arch) of the DispatchStub impls that are one of functions ``ids`` or call one
        directly."""
        if not ids:
            return []
        return self._rows(
            f"SELECT stub, arch FROM stub_impls WHERE function_id IN {_IDS} UNION SELECT s.stub, s.arch"
            f" FROM stub_impls s SEMI JOIN call_edges c ON c.caller_id = s.function_id AND c.callee_id IN {_IDS}",
            [ids, ids],
        )

    def stub_links(self, stubs: list[str]) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
        """What links DispatchStubs ``stubs`` to operators: (stub, operator, layout hint) of the
        operators named like a stub an upstream declares, and (stub, operator, dispatch key) of
        the kernels that call one."""
        if not stubs:
            return [], []
        named = self._rows(
            "SELECT n.key, o.key, e.detail FROM reach_edges e JOIN nodes n ON n.id = e.dst JOIN nodes o ON o.id = e.src"
            f" WHERE e.kind = '{EdgeKind.STUB_NAME}' AND n.kind = '{NodeKind.STUB}' AND o.kind = '{NodeKind.OP}'"
            f" AND n.key IN {_NAMES}",
            [stubs],
        )
        called = self._rows(
            "SELECT n.key, k.op, k.dispatch_key FROM reach_edges e JOIN nodes n ON n.id = e.dst"
            " JOIN kernels k ON k.function_id = e.src"
            f" WHERE e.kind = '{EdgeKind.STUB_CALL}' AND n.kind = '{NodeKind.STUB}' AND n.key IN {_NAMES}",
            [stubs],
        )
        return named, called

    def devices_running(self, bases: list[str]) -> list[tuple[str, str]]:
        """(test device, op base) of the traced tests that run aten operators ``bases``."""
        return self._rows(
            "SELECT DISTINCT bt.device, t.base FROM trace_ops t JOIN bench_tests bt ON bt.bench = t.bench"
            f" AND bt.test = t.test WHERE t.namespace = 'aten' AND t.base IN {_NAMES}",
            [bases],
        )

    def stub_impls(self) -> list[tuple]:
        return self._rows("SELECT stub, arch, impl_name, file_id, line FROM stub_impls")

    def library_impls(self) -> list[tuple]:
        return self._rows("SELECT namespace, dispatch_key, op, kernel_name, file_id, line FROM library_impls")

    def values_in_use(self, table: str, column: str, values: Iterable[str]) -> set[str]:
        """Those of ``values`` that some row of ``table`` holds in ``column``."""
        return {
            r[0]
            for r in self._rows(
                f"SELECT DISTINCT {column} FROM {table} WHERE {column} IN {_NAMES}", [sorted(values)]
            )
        }

    # ---- writes
    def set_function_ids(self, table: str, keys: tuple[str, ...], rows: list[tuple]) -> None:
        """Set the function_id of the ``table`` rows named by ``keys``, in one statement
        (``rows``: the function id, or None, then the values of ``keys``)."""
        if not rows:
            return
        columns = ", ".join(f"unnest(?) AS {c}" for c in keys)
        matched = " AND ".join(f"{table}.{c} = fix.{c}" for c in keys)
        self.con.execute(
            f"UPDATE {table} SET function_id = fix.function_id FROM (SELECT unnest(?::INTEGER[]) AS function_id,"
            f" {columns}) AS fix WHERE {matched}",
            [list(column) for column in zip(*rows, strict=True)],
        )

    def insert(self, table: str, rows: list[tuple]) -> None:
        insert_rows(self.con, table, rows)

    def update_file(self, file_id: int, sha256: str, n_lines: int, signature: str, usings: Iterable[str]) -> None:
        self.con.execute(
            "UPDATE files SET sha256 = ?, n_lines = ?, signature = ?, usings = ? WHERE id = ?",
            [sha256, n_lines, signature, json.dumps(list(usings)), file_id],
        )

    def update_meta(self, meta: dict[str, str]) -> None:
        self.con.execute(
            "INSERT OR REPLACE INTO meta SELECT unnest(?::TEXT[]), unnest(?::TEXT[])", [list(meta), list(meta.values())]
        )
