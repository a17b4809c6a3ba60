"""Gather a budgeted plan's inputs: the affected document's tests with the reached operators each
one's trace executes (the index), and what each test cost before (the results history).

The planning itself is pure (:mod:`perfq.run.plan`); this module only reads.
"""

from __future__ import annotations

from pathlib import Path

from common.paths import default_history_path, default_index_path
from indexer.dtypes import dtype_class
from perfq.run.opbench import normalize_name
from perfq.run.plan import (
    DEFAULT_SHAPE,
    Candidate,
    CostSource,
    RunShape,
    TestPlan,
    config_of,
    default_cost,
    file_op,
    fit_plan,
)
from query.document import AffectedDoc, SelectedBenchmark
from query.dtype_gaps import dispatch_key
from schema.index_store import IndexStore, TracedDtype, TracedTestOps
from schema.reader import open_index
from schema.results_store import test_walls

WHOLE_FILE_SECONDS = 10.0  # default estimate of a benchmark file run whole (no per-test trace)


def _entries(doc: AffectedDoc) -> tuple[dict[str, SelectedBenchmark], set[str]]:
    """name -> selected benchmark and the canary benchmarks' names."""
    entries = {normalize_name(b.name): b for b in doc.benchmarks}
    canary = {normalize_name(b.name) for hit in doc.canary for b in hit.benchmarks}
    return entries, canary


def candidates_from(doc: AffectedDoc, rows: list[TracedTestOps], walls: dict[tuple[str, str], float],
                    shape: RunShape = DEFAULT_SHAPE,
                    units: dict[tuple[str, str], frozenset[str]] | None = None) -> list[Candidate]:
    """The tests a plan chooses from: a selected benchmark's traced ``tests``; every test of a canary
    benchmark that executes a reached operator; a benchmark without per-test traces as one whole-file
    candidate. Cost: the history's median wall per test, else the default estimate."""
    entries, canary = _entries(doc)
    by_bench: dict[str, list[TracedTestOps]] = {}
    for r in rows:
        by_bench.setdefault(r.bench, []).append(r)
    out: list[Candidate] = []
    for name in dict.fromkeys([*entries, *sorted(canary)]):
        entry = entries.get(name)
        wanted = set(entry.tests) if entry is not None and entry.modules else set()
        traced = [r for r in by_bench.get(name, []) if (r.test in wanted) or (name in canary and r.ops)]
        if traced:
            out += [_candidate(r, walls, name in canary, shape.iterations, (units or {}).get((r.bench, r.test),
                                                                                              frozenset()))
                    for r in traced]
        else:  # no per-test trace: the file runs whole; with no operator known, it stands for itself
            ops = frozenset(entry.ops if entry is not None else ()) or frozenset({file_op(name)})
            known = (name, "") in walls
            cost = walls.get((name, ""), WHOLE_FILE_SECONDS)
            out.append(Candidate(name, "", "", ops, config_of("", shape.device), cost,
                                 CostSource.history if known else CostSource.default, name in canary))
    return out


def _candidate(r: TracedTestOps, walls: dict[tuple[str, str], float], canary: bool, iterations: int,
               units: frozenset[str] = frozenset()) -> Candidate:
    wall = walls.get((r.bench, r.test))
    return Candidate(r.bench, r.test, r.module, frozenset(r.ops), config_of(r.test, r.device, r.backward),
                     wall if wall is not None else default_cost(r.test, r.backward, iterations),
                     CostSource.history if wall is not None else CostSource.default, canary, units)


def dtype_units(rows: list[TracedDtype]) -> dict[tuple[str, str], frozenset[str]]:
    """(bench, test) -> the (operator, dispatch key, dtype class) pairs its trace runs of the asked
    operators, as 'remainder [CPU, integral]' (the dispatch key of the layout on the CPU, where
    tests are traced)."""
    out: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        klass = dtype_class(row.dtype)
        shown = klass.value if klass is not None else row.dtype
        out.setdefault((row.bench, row.test), set()).add(
            f"{row.op.split('.')[0]} [{dispatch_key(row.layout, 'cpu')}, {shown}]")
    return {key: frozenset(units) for key, units in out.items()}


def plan_for(repo: Path, doc: AffectedDoc, budget_seconds: float | None, shape: RunShape,
             db: Path | None = None, history: Path | None = None) -> TestPlan:
    """The budgeted plan of an affected document, from the index's traces and the history's walls."""
    entries, canary = _entries(doc)
    index = db or default_index_path(repo)
    rows: list[TracedTestOps] = []
    units: dict[tuple[str, str], frozenset[str]] = {}
    if index.exists():  # (the affected document came from it; without one, every file runs whole)
        with open_index(index, threads=1) as con:
            store = IndexStore(con)
            rows = store.test_ops(sorted(set(entries) | canary), list(doc.ops))
            units = dtype_units(store.traced_dtypes(list(doc.ops)))
    walls = test_walls(history or default_history_path(repo))
    candidates = candidates_from(doc, rows, walls, shape, units)
    notes = []
    if any(c.cost_source == CostSource.default for c in candidates):
        notes.append("costs without history are default estimates; a run records the real ones")
    return fit_plan(candidates, len(doc.ops), budget_seconds, shape, shared=doc.shared_infrastructure, notes=notes)
