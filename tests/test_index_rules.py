"""The index's constructs as rules (indexer/rules/): each table is written by exactly one rule,
a rule writes only the tables it declares, and a link over facts runs every rule's steps."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import duckdb
import pytest

import indexer.rules
from common.config import Config
from indexer.build import build_index
from indexer.build_info import linker_sources
from indexer.link import link
from indexer.rules import RULES
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule
from schema.model import KernelRow, MetaRow, OpRow, WarningRow
from schema.patch_store import PatchStore
from schema.writer import index_tables
from tests.aten_fixture import make_repo, replace_in
from tests.cpp_facts import cpp_facts

BUILD_OWN = {MetaRow.TABLE, WarningRow.TABLE}  # the writer's meta, the build's warnings of every pass


def test_each_table_is_written_by_exactly_one_rule():
    writers: dict[str, list[str]] = {}
    for rule in RULES:
        for row_type in rule.writes:
            writers.setdefault(row_type.TABLE, []).append(rule.name)
    assert {table: names for table, names in writers.items() if len(names) != 1} == {}
    assert set(writers) == set(index_tables()) - BUILD_OWN


def test_every_rule_module_is_scheduled_once():
    modules = {m.name for m in pkgutil.iter_modules(indexer.rules.__path__)} - {"base"}
    assert len(RULES) == len(modules) == len({rule.name for rule in RULES})


def test_rules_are_found_and_run_in_distinct_places():
    """RULES is every rule module's RULE (none is listed), in the order of their places."""
    places = [rule.place for rule in RULES]
    assert places == sorted(set(places))
    modules = [m.name for m in pkgutil.iter_modules(indexer.rules.__path__) if m.name != "base"]
    assert sorted(importlib.import_module(f"indexer.rules.{name}").RULE.name for name in modules) == sorted(
        rule.name for rule in RULES
    )


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


def test_a_rule_cannot_patch_a_table_it_does_not_declare():
    def sneaky(ctx: PatchContext) -> None:
        ctx.insert(KernelRow, [("add", "CPU", "add_cpu", None)])

    con = duckdb.connect()
    ctx = PatchContext(PatchStore(con), {})
    with pytest.raises(AssertionError, match="kernels"):
        ctx.run(Rule("sneaky", (OpRow,), (), {}, {PatchPhase.RECORD: sneaky}), PatchPhase.RECORD)


SOFTMAX_OP = "aten/src/ATen/native/SoftmaxOp.cpp"
BY_NAME = {  # a patch numbers new functions after the others, a full link in file order: compared by name
    "functions": "SELECT qualname, kind, start_line, end_line FROM functions",
    "calls": "SELECT f.qualname, c.callee_name, c.kind, c.line FROM calls c JOIN functions f ON f.id = c.caller_id",
    "call_edges": "SELECT a.qualname, b.qualname, e.kind, e.line FROM call_edges e"
    " JOIN functions a ON a.id = e.caller_id JOIN functions b ON b.id = e.callee_id",
    "reach_edges": "SELECT d.kind, d.label, s.kind, s.label, e.kind, e.detail FROM reach_edges e"
    " JOIN nodes d ON d.id = e.dst JOIN nodes s ON s.id = e.src",
    "kernels": "SELECT k.op, k.dispatch_key, f.qualname FROM kernels k LEFT JOIN functions f ON f.id = k.function_id",
}


def _by_name(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {table: sorted(con.execute(sql).fetchall()) for table, sql in BY_NAME.items()}
    finally:
        con.close()


def test_each_table_is_patched_only_by_the_rule_that_writes_it(tmp_path, monkeypatch):
    """A patch of a body edit, a new function and a removed one: every table a rule's patch step
    writes is one it declares (so the one rule that writes it), and the patched index is the
    full link's."""
    repo, db = make_repo(tmp_path / "repo"), tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    replace_in(repo, SOFTMAX_OP, "  make_size(3);\n", "  make_size(4);\n  fancy(self);\n")
    replace_in(repo, SOFTMAX_OP, "Tensor composite_thing(const Tensor& self) {\n  return self;\n}\n",
               "Tensor fresh_helper(const Tensor& self) {\n  return lonely_kernel(self);\n}\n")
    written: set[tuple[str, str]] = set()
    running: list[str] = []
    run, own = PatchContext.run, PatchContext._own

    def recorded_run(self: PatchContext, rule: Rule, phase: PatchPhase) -> None:
        running.append(rule.name)
        run(self, rule, phase)

    def recorded_own(self: PatchContext, row_type: type) -> str:
        written.add((running[-1], row_type.TABLE))
        return own(self, row_type)

    monkeypatch.setattr(PatchContext, "run", recorded_run)
    monkeypatch.setattr(PatchContext, "_own", recorded_own)
    assert build_index(repo, Config(), db, jobs=1, quiet=True, trace=False).mode == "patched"

    writer = {row_type.TABLE: rule.name for rule in RULES for row_type in rule.writes}
    assert {(rule, table) for rule, table in written if writer[table] != rule} == set()
    assert {"functions", "calls", "call_edges", "nodes", "reach_edges", "files", "kernels"} <= {t for _, t in written}
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True, trace=False)
    assert _by_name(db) == _by_name(full)


def test_the_linker_version_covers_every_rule_and_the_patch_statements():
    """A change of a rule's link or patch re-links an index linked before it (rules are found,
    not listed: a new rule module is covered)."""
    digested = {source.name for source in linker_sources()}
    rule_modules = {f"{m.name}.py" for m in pkgutil.iter_modules(indexer.rules.__path__)}
    assert rule_modules | {"__init__.py", "incremental.py", "link.py", "patch.sql"} <= digested


def test_a_rule_cannot_read_a_table_it_does_not_declare():
    def nosy(ctx: LinkContext) -> None:
        ctx.read(KernelRow)

    ctx = LinkContext([], [])
    with pytest.raises(AssertionError, match="kernels is not read"):
        ctx.run(Rule("nosy", writes=(OpRow,), reads=(), link={Phase.DECLARE: nosy}), Phase.DECLARE)
    ctx.run(Rule("reader", writes=(OpRow,), reads=(KernelRow,), link={Phase.DECLARE: nosy}), Phase.DECLARE)


def test_each_rule_reads_what_it_declares_after_an_earlier_step_wrote_it(tmp_path, monkeypatch):
    """A link of the fixture, step by step: every table a rule reads of another's is one it declares
    (``Rule.reads``), and a step scheduled before it (an earlier phase, or an earlier place in the
    same phase) wrote rows into it, the graph's through ``ctx.graph`` included."""
    steps: list[tuple[str, set[str]]] = []  # (rule, the tables its step changed), in the order they ran
    reads: list[tuple[int, str, str]] = []  # (step, rule, table)
    run, read = LinkContext.run, LinkContext.read

    def recorded_run(self: LinkContext, rule: Rule, phase: Phase) -> None:
        if phase not in rule.link:
            return
        before = {table: (id(rows), len(rows)) for table, rows in self.tables.rows.items()}
        steps.append((rule.name, set()))
        run(self, rule, phase)
        steps[-1][1].update(t for t, rows in self.tables.rows.items() if before.get(t) != (id(rows), len(rows)))

    def recorded_read(self: LinkContext, row_type: type) -> list[tuple]:
        reads.append((len(steps) - 1, steps[-1][0], row_type.TABLE))
        return read(self, row_type)

    monkeypatch.setattr(LinkContext, "run", recorded_run)
    monkeypatch.setattr(LinkContext, "read", recorded_read)
    build_index(make_repo(tmp_path / "repo"), Config(), tmp_path / "index.duckdb", jobs=1, quiet=True, trace=False)
    declared = {rule.name: {t.TABLE for t in rule.reads} for rule in RULES}
    own = {rule.name: {t.TABLE for t in rule.writes} for rule in RULES}
    foreign = {(step, rule, table) for step, rule, table in reads if table not in own[rule]}
    assert foreign and {(rule, table) for _, rule, table in foreign if table not in declared[rule]} == set()
    unwritten = {(rule, table) for step, rule, table in foreign if not any(table in w for _, w in steps[:step])}
    assert unwritten == set()
