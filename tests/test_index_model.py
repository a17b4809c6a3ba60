"""The index's row types (schema/model.py's and the rules' own, indexer/ddl.py ``row_types``) are its
tables (schema/index.sql): the same tables, columns in the same order, of the same types and
nullability, as DuckDB creates them; the writer's columns are the DDL's."""

from __future__ import annotations

import dataclasses
import types
import typing

import duckdb

from indexer.ddl import row_types
from schema.model import (
    EdgeKind,
    NodeKind,
    NodeRow,
    ReachEdgeRow,
    column_types,
    columns,
    nullable,
    row_tuple,
)
from schema.writer import index_ddl, index_tables, insert_rows, table_columns

ROW_TYPES = row_types()  # every table's, a rule's own included


def _schema_columns() -> dict[str, list[tuple[str, str, bool]]]:
    con = duckdb.connect()
    con.execute(index_ddl())
    out: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, data_type, is_nullable in con.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        out.setdefault(table, []).append((column, data_type, is_nullable == "YES"))
    return out


def test_every_table_has_a_row_type_and_no_row_type_lacks_a_table():
    assert set(ROW_TYPES) == set(_schema_columns()) == set(index_tables())


def test_row_type_fields_are_the_table_columns_in_order():
    for table, cols in _schema_columns().items():
        row_type = ROW_TYPES[table]
        assert columns(row_type) == tuple(c for c, _, _ in cols), table
        assert column_types(row_type) == tuple(t for _, t, _ in cols), table
        assert table_columns()[table] == tuple((c, t) for c, t, _ in cols), table  # what the writer inserts


def test_a_field_is_optional_exactly_when_its_column_is_nullable():
    for table, cols in _schema_columns().items():
        assert nullable(ROW_TYPES[table]) == tuple(n for _, _, n in cols), table


def test_rows_of_enum_members_are_written_as_their_values():
    con = duckdb.connect()
    con.execute(index_ddl())
    insert_rows(con, "nodes", [row_tuple(NodeRow(0, NodeKind.OP, "add.Tensor", "add.Tensor"))])
    insert_rows(con, "reach_edges", [row_tuple(ReachEdgeRow(1, 0, EdgeKind.STUB_CALL, "line 3"))])
    assert con.execute("SELECT * FROM nodes").fetchall() == [(0, "op", "add.Tensor", "add.Tensor")]
    (row,) = con.execute("SELECT * FROM reach_edges").fetchall()
    assert ReachEdgeRow(*row) == ReachEdgeRow(1, 0, EdgeKind.STUB_CALL, "line 3")
    assert row[2] == "stub_call" and type(row[2]) is str


def test_digests_of_facts_hold_the_values_of_their_enums():
    """An index's files.registrations digest is the same whether a status is a member or its
    value (as earlier builds and the facts cache hold it): an Enum's repr must not reach it."""
    from indexer.facts import FileFacts, registration_signature
    from schema.model import FileStatus, Lang

    member = FileFacts("a.cpp", Lang.CPP, "0" * 64, 3, status=FileStatus.WARNING, includes=["x.h"])
    value = FileFacts("a.cpp", "cpp", "0" * 64, 3, status="warning", includes=["x.h"])
    assert registration_signature(member) == registration_signature(value)


def test_the_structure_digest_holds_a_function_kind_s_value():
    """files.signature is the same for freshly extracted facts (FunctionKind members) and cached
    ones (the values read back from JSON): a patched index and a full link agree on it."""
    from indexer.facts import FileFacts, Function, structure_signature
    from schema.model import FunctionKind, Lang

    def facts(kind: str) -> FileFacts:
        return FileFacts("a.cpp", Lang.CPP, "0" * 64, 3, functions=[Function("at::f", "f", kind, 1, 2, False)])

    assert structure_signature(facts(FunctionKind.METHOD)) == structure_signature(facts("method"))


CPP = """
namespace at::native {
static void relu_kernel(float* x, int n) { for (int i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0; }
Tensor relu(const Tensor& self) {
  auto kernel = &relu_kernel;  // an address taken: a call of kind address
  relu_kernel(nullptr, 0);
  return at::clamp_min(self, 0);
}
}  // namespace at::native
"""

PY = """
import torch

def run(x):
    return torch.relu(x)
"""


def _is_a(value: object, tp: object) -> bool:
    if isinstance(tp, types.UnionType):
        return any(_is_a(value, arm) for arm in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, int | float)
    return isinstance(value, tp)  # an Enum-typed field holds the member, not only its value


def test_the_link_makes_each_table_s_rows_in_its_row_type_s_field_order():
    from indexer.extract import file_facts
    from indexer.link import link
    from indexer.native_yaml import OpFacts
    from tests.cpp_facts import cpp_facts

    ops = [OpFacts(name, name, "", f"{name}(Tensor self) -> Tensor", False, None, "function", "", None,
                   [("CPU", name)]) for name in ("relu", "clamp_min")]
    python = file_facts("python", "pkg/use.py", PY.encode())
    tables = link([cpp_facts("aten/src/ATen/native/Relu.cpp", CPP), python], [], ops, [], {}, [])
    filled = {table for table, rows in tables.rows.items() if rows}
    assert {"files", "functions", "calls", "call_edges", "kernels", "op_calls", "nodes", "reach_edges"} <= filled
    for table, rows in tables.rows.items():
        row_type = ROW_TYPES[table]
        hints = typing.get_type_hints(row_type)
        for row in rows:
            typed = row_type(*row)  # as many columns as fields
            for f in dataclasses.fields(row_type):
                assert _is_a(getattr(typed, f.name), hints[f.name]), (table, f.name, row)


def test_index_sql_is_generated_from_the_row_types():
    """schema/index.sql is what `python -m indexer.ddl` writes: a row type changed without
    writing it again fails here."""
    from indexer.ddl import generate

    assert generate() == index_ddl()


def test_schema_version_follows_the_tables_not_their_comments():
    from schema.version import SCHEMA_VERSION, schema_version

    ddl = index_ddl()
    assert schema_version(ddl) == SCHEMA_VERSION
    assert schema_version(ddl.replace("-- repo-relative", "-- relative to the repo")) == SCHEMA_VERSION
    assert schema_version(ddl.replace("  usr VARCHAR NOT NULL", "  usr VARCHAR")) != SCHEMA_VERSION
