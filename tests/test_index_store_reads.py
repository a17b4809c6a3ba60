"""IndexStore reads each row a query of ``perfq affected`` asks for once per store: a second
ask for the same functions' paths answers from what was read, and the changed files' functions
(functions_in) already give theirs."""

from __future__ import annotations

import duckdb

from schema.index_store import IndexStore
from schema.writer import index_ddl


class CountingConnection:
    """A DuckDB connection that counts the statements it is given."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.statements = con, 0

    def execute(self, *args):
        self.statements += 1
        return self.con.execute(*args)


def _store() -> tuple[IndexStore, CountingConnection]:
    con = duckdb.connect()
    con.execute(index_ddl())
    for file_id, path in ((1, "aten/a.cpp"), (2, "aten/b.cpp")):
        con.execute("INSERT INTO files VALUES (?, ?, 'sha', 'cpp', 10, 'ok', NULL, '', '', '[]', 'repo')",
                    [file_id, path])
    for fid, file_id, name in ((10, 1, "f"), (11, 1, "g"), (20, 2, "h")):
        con.execute("INSERT INTO functions VALUES (?, ?, ?, ?, 'function', 1, 2, false, '', 0, NULL)",
                    [fid, file_id, f"at::{name}", name])
    counting = CountingConnection(con)
    return IndexStore(counting), counting  # type: ignore[arg-type]


def test_function_paths_answers_each_function_once_and_skips_ids_that_are_not_functions():
    store, con = _store()
    assert store.function_paths([20, 10, 99]) == {20: "aten/b.cpp", 10: "aten/a.cpp"}
    assert con.statements == 1
    assert store.function_paths([10, 20, 99]) == {10: "aten/a.cpp", 20: "aten/b.cpp"}
    assert con.statements == 1  # every id was read (99 as no function)
    assert store.function_paths([11]) == {11: "aten/a.cpp"}
    assert con.statements == 2
    assert store.function_paths([]) == {}


def test_the_functions_of_a_read_file_know_their_path_without_another_query():
    store, con = _store()
    assert [r.id for r in store.functions_in(["aten/a.cpp"])] == [10, 11]
    assert store.function_paths([11, 10]) == {11: "aten/a.cpp", 10: "aten/a.cpp"}
    assert con.statements == 1
