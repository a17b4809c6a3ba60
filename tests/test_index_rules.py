"""The index's constructs as rules (indexer/rules/): each table is written by exactly one rule,
a rule writes only the tables it declares, and a link over facts runs every rule's steps."""

from __future__ import annotations

import pkgutil

import pytest

import indexer.rules
from indexer.link import link
from indexer.rules import RULES
from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import ROW_TYPES, KernelRow, MetaRow, OpRow, WarningRow
from tests.cpp_facts import cpp_facts

BUILD_OWN = {MetaRow.TABLE, WarningRow.TABLE}  # the writer's meta, the build's warnings of every pass


def test_each_table_is_written_by_exactly_one_rule():
    writers: dict[str, list[str]] = {}
    for rule in RULES:
        for row_type in rule.writes:
            writers.setdefault(row_type.TABLE, []).append(rule.name)
    assert {table: names for table, names in writers.items() if len(names) != 1} == {}
    assert set(writers) == set(ROW_TYPES) - BUILD_OWN


def test_every_rule_module_is_scheduled_once():
    modules = {m.name for m in pkgutil.iter_modules(indexer.rules.__path__)} - {"base"}
    assert len(RULES) == len(modules) == len({rule.name for rule in RULES})


def test_a_rule_cannot_write_a_table_it_does_not_declare():
    def sneaky(ctx: LinkContext) -> None:
        ctx.out(KernelRow).append(("add", "CPU", "add_cpu", None))

    ctx = LinkContext([], [])
    with pytest.raises(AssertionError, match="kernels"):
        ctx.run(Rule("sneaky", writes=(OpRow,), reads=(), link={Phase.DECLARE: sneaky}), Phase.DECLARE)
    assert ctx.tables.rows[KernelRow.TABLE] == []


def test_a_link_fills_the_tables_of_the_rules_that_ran():
    cpp = cpp_facts(
        "aten/src/ATen/native/Relu.cpp",
        """
        namespace at::native {
        Tensor relu(const Tensor& s) { return at::clamp_min(s, 0); }
        }
        """,
    )
    tables = link([cpp], [], [], [{"name": "core", "paths": ["c10/**"]}])
    written = {table for table, rows in tables.rows.items() if rows}
    assert {"files", "functions", "calls", "nodes", "graph", "canary_sets"} <= written
