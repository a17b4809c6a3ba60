"""Bulk inserts: the rows read back are the rows written, on both paths (list parameters for a
few thousand rows, numpy columns typed by the table's columns for more)."""

from __future__ import annotations

import duckdb
import pytest

from schema import writer


@pytest.mark.parametrize("n", [10, writer._AS_LISTS + 1])
def test_inserted_rows_read_back_as_written(n: int):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (i INTEGER, j INTEGER, b BOOLEAN, c BOOLEAN, s TEXT, big BIGINT)")
    rows = [
        (k, None if k % 7 == 0 else -k, k % 2 == 0, None if k % 5 == 0 else k % 3 == 0,
         None if k % 11 == 0 else f"name {k} é", 2**40 + k)
        for k in range(n)
    ]
    writer.insert_rows(con, "t", rows)
    assert con.execute("SELECT * FROM t ORDER BY i").fetchall() == rows
