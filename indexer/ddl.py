"""index.sql, generated from the row types of the index's tables: those of schema/model.py (in its
order), then those the rules of indexer/rules/ declare in their own modules (``Rule.writes``, in the
rules' order). Each table's docstring is its comment, each field a column of its DuckDB type,
``NOT NULL`` unless ``X | None``, and what ``column(doc, key)`` says. The generator sits here, above
schema/, because it reads the rules; schema/ reads the checked-in text (the writer's columns, the
schema version). ``tests/test_index_model.py`` checks the file is this text; after changing a row
type, write it again:

    python -m indexer.ddl > schema/index.sql
"""

from __future__ import annotations

import dataclasses

from indexer.rules import RULES
from schema.model import ROW_TYPES, column_name, column_types, nullable

HEADER = """\
-- perfq index schema (rebuilt by `perfq index`, swapped in atomically). GENERATED from the row
-- types (schema/model.py, then the rules' own in indexer/rules/) by `python -m indexer.ddl`: edit
-- those, not this file.
-- Vocabulary follows torchgen / ATen: operators are `name.overload` (overload '' for the
-- default one), dispatch keys as in native_functions.yaml (CPU, CUDA, CompositeImplicitAutograd...).
"""


def row_types() -> dict[str, type]:
    """Every table's row type by its table's name, in the DDL's order: schema/model.py's, then
    the rules' own (a row type a rule declares in its module)."""
    tables = dict(ROW_TYPES)
    for rule in RULES:
        for row_type in rule.writes:
            tables.setdefault(row_type.TABLE, row_type)
    return tables


def _column(field: dataclasses.Field, sql_type: str, optional: bool) -> tuple[str, str]:
    """A column's definition and its comment."""
    key = field.metadata.get("key", "")
    words = [column_name(field), sql_type, key or ("" if optional else "NOT NULL")]
    if key == "UNIQUE" and not optional:
        words[2] = "NOT NULL UNIQUE"
    return " ".join(w for w in words if w), field.metadata.get("doc", "")


def table_ddl(row_type: type) -> str:
    """The CREATE TABLE statement of ``row_type``'s table, with its comments."""
    doc = (row_type.__doc__ or "").strip()
    doc = "" if doc.startswith(f"{row_type.__name__}(") else doc  # dataclass's own: its signature
    fields = dataclasses.fields(row_type)
    cols = [
        _column(f, t, n) for f, t, n in zip(fields, column_types(row_type), nullable(row_type), strict=True)
    ]
    lines = [f"-- {line.strip()}".rstrip() for line in doc.splitlines()] if doc else []
    lines.append(f"CREATE TABLE {row_type.TABLE} (")
    for i, (definition, comment) in enumerate(cols):
        text = f"  {definition}{',' if i < len(cols) - 1 else ''}"
        lines.append(f"{text:<34} -- {comment}" if comment else text)
    lines.append(");")
    return "\n".join(lines)


def generate() -> str:
    """The text of schema/index.sql."""
    return HEADER + "".join(f"\n{table_ddl(row_type)}\n" for row_type in row_types().values())


if __name__ == "__main__":
    print(generate(), end="")
