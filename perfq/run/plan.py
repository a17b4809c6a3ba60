"""Budgeted test plans: which selected tests run within a time budget, and why the others do not.

Pure: candidates (a test, the reached operators its trace executes, its config, its cost) in, a
``TestPlan`` out. The plan

1. covers every reached (operator, dispatch key, dtype class) pair some candidate executes with
   at least one test (operators alone for tests whose trace has no dtypes): a greedy set cover
   weighted by cost (the test adding the most uncovered pairs per second first), each test taken
   only while it fits the budget, tests of a size that times the kernel before those of a few
   elements (``MIN_TIMED_ELEMENTS``: a 1-element config times the dispatcher, not the kernel);
2. spreads tests over configs (dtype, size, device, forward/backward) of the operator modules it
   runs, with the budget left (``SPREAD_SHARE`` of it), the most new configs per second first;
3. for shared infrastructure, lets the canary benchmarks' tests stand in for the full set: only
   they (and tests of operators no canary test executes) are candidates, sized to the budget.

The budget is for the whole run: ``rounds`` invocations per side (the statistics' minimum
samples), both sides, process starts included. ``split`` cuts a plan into shards balanced by
cost (LPT: the costliest benchmark, or test of a benchmark heavier than a shard, first onto the
least loaded shard).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from common.documents import to_json
from common.errors import PerfqError
from perfq.run import defaults

EXIT_USAGE = 2
DEFAULT_BUDGET = "15m"  # `perfq run --affected` and `perfq affected --budget/--shards`
HEADROOM = 0.85  # the plan fills this share of the budget: estimates err, and adaptive rounds need room
SPREAD_SHARE = 0.8  # spreading over configs stops at this share of the planned budget
# The default estimate of a test never run (2-core machine): set-up and printing, plus the timed
# iterations (warm-up + iterations x runs: defaults.TIMED_ITERATIONS) at a time per iteration
# proportional to the input elements its name gives (M8_N32 -> 256). Measured there:
# 1.3e-9 (gelu) to 3.4e-8 (FakeQuantize) seconds per element and iteration.
DEFAULT_TEST_SECONDS = 0.2
DEFAULT_SECONDS_PER_ELEMENT_ITERATION = 1e-8
DEFAULT_BACKWARD_FACTOR = 2.0
DEFAULT_TEST_CEILING = 600.0
DEFAULT_PROCESS_START = 4.0  # seconds to start a benchmark process (torch import) on a loaded 2-core machine
DEFAULT_FILE_SECONDS = 1.0  # import of a benchmark file and building its configs, per invocation
MIN_TIMED_ELEMENTS = 4096  # a test of fewer input elements times call overhead more than the kernel
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|sec|m|min|h)?\s*$")
_UNIT = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


class Pick(str, Enum):
    """Why a test is in the plan."""

    covers = "covers"  # it executes reached operators no earlier pick executes
    spread = "spread"  # it adds a config (dtype, size, device, direction) of a module already run
    all = "all"  # --all: everything selected runs


class LeftOut(str, Enum):
    """Why a selected test is not in the plan."""

    over_budget = "over_budget"  # it would add operators or configs, but does not fit the budget
    redundant = "redundant"  # its operators and configs are covered by the tests that run
    canary_stands_in = "canary_stands_in"  # shared infrastructure: the canary set runs instead of the full set
    other_device = "other_device"  # configured for another device than the run's


class CostSource(str, Enum):
    """Where a test's cost comes from."""

    history = "history"  # median wall per test of earlier invocations (process start included)
    default = "default"  # the default estimate (DEFAULT_* constants), no measurement yet


@dataclass(frozen=True)
class TestConfig:
    """What a test's config varies: dtype, size bucket, device, forward or backward."""

    dtype: str = ""
    size: str = ""
    device: str = ""
    direction: str = "forward"

    def features(self, module: str) -> set[tuple[str, str, str]]:
        return {(module, k, v) for k, v in (("dtype", self.dtype), ("size", self.size), ("device", self.device),
                                               ("direction", self.direction)) if v}


@dataclass(frozen=True)
class Candidate:
    """A selected test with the reached operators it executes and its cost per invocation (seconds)."""

    benchmark: str
    test: str  # '' : the whole file (no per-test trace)
    module: str
    ops: frozenset[str]
    config: TestConfig
    cost: float
    cost_source: CostSource
    canary: bool = False
    # the (operator, dispatch key, dtype class) pairs its trace runs, 'remainder [CPU, integral]'; empty: ``ops``
    units: frozenset[str] = frozenset()

    @property
    def covers(self) -> frozenset[str]:
        """What the plan counts this test as covering: its pairs, else its operators."""
        return self.units or self.ops

    @property
    def timed(self) -> bool:
        """Whether its size times the kernel (or no size is known from its name)."""
        elements = elements_of(self.test)
        return elements == 0 or elements >= MIN_TIMED_ELEMENTS


@dataclass(frozen=True)
class PlannedTest:
    benchmark: str
    test: str
    module: str
    ops: tuple[str, ...]
    config: TestConfig
    cost_seconds: float
    cost_source: CostSource
    pick: Pick

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class LeftOutGroup:
    """Tests of one benchmark left out for one reason (a few named)."""

    benchmark: str
    reason: LeftOut
    tests: int
    examples: tuple[str, ...]

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as --shard K
    tests: tuple[PlannedTest, ...]
    estimated_seconds: float

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.benchmark for t in self.tests))

    def to_json(self) -> dict:
        return {"shard": self.index, "benchmarks": list(self.benchmarks), "tests": len(self.tests),
                "estimated_seconds": round(self.estimated_seconds, 1)}


@dataclass(frozen=True)
class RunShape:
    """How the plan's tests are run: rounds (samples per side), sides, one process per round or per file."""

    rounds: int = defaults.ADAPTIVE_REPEAT  # `perfq run --ab`'s first rounds (sequential sampling adds more)
    sides: int = 2
    batch: bool = True
    shards: int = 1
    process_start: float = DEFAULT_PROCESS_START
    device: str = "cpu"
    iterations: int = defaults.TIMED_ITERATIONS  # timed per test and invocation, warm-up included


DEFAULT_SHAPE = RunShape()


@dataclass(frozen=True)
class TestPlan:
    """The plan (README "perfq affected", docs/run.md "Budgeted plans")."""

    budget_seconds: float | None  # None: --all
    estimated_seconds: float  # per shard (the longest one), whole run: rounds x sides, process starts included
    rounds: int
    sides: int
    shards: int
    tests: tuple[PlannedTest, ...]
    left_out: tuple[LeftOutGroup, ...]
    selected_tests: int  # the full selection the plan was made from
    ops_reached: int
    ops_executable: int  # reached operators some selected test executes
    ops_covered: int
    uncovered_ops: tuple[str, ...]  # executable but not run (over budget)
    shared_infrastructure: bool
    canary_stand_in: bool
    canary_benchmarks: tuple[str, ...]
    cost_sources: dict[str, int]  # tests of the plan by where their cost comes from
    notes: tuple[str, ...] = field(default_factory=tuple)
    # (operator, dispatch key, dtype class) pairs some selected test runs, and those the plan runs
    pairs_executable: int = 0
    pairs_covered: int = 0
    uncovered_pairs: tuple[str, ...] = ()

    @property
    def coverage(self) -> float:
        """Share of the executable (operator, dispatch key, dtype) pairs the plan runs, of the
        executable reached operators when no trace has dtypes (1 when none is executable)."""
        if self.pairs_executable:
            return self.pairs_covered / self.pairs_executable
        return self.ops_covered / self.ops_executable if self.ops_executable else 1.0

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.benchmark for t in self.tests))

    def tests_of(self, benchmark: str) -> tuple[str, ...]:
        return tuple(t.test for t in self.tests if t.benchmark == benchmark and t.test)

    def to_json(self) -> dict:
        out = to_json(self)
        out["coverage"] = round(self.coverage, 4)
        return out


# ---------------------------------------------------------------------- parsing


def parse_duration(text: str, option: str = "--budget") -> float:
    """``15m``, ``90s``, ``1h``, ``1.5h`` or plain seconds (``1800``) as seconds; one-line usage error otherwise."""
    m = _DURATION.match(str(text))
    if m is None:
        raise PerfqError(f"{option}: {text!r} is not a duration (e.g. 15m, 90s, 1h, or seconds)", exit_code=EXIT_USAGE)
    seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not math.isfinite(seconds) or seconds <= 0:
        raise PerfqError(f"{option}: the duration must be more than 0, got {text!r}", exit_code=EXIT_USAGE)
    return seconds


def check_shard(shard: int | None, shards: int | None) -> tuple[int, int]:
    """(K, N) of ``--shard K --shards N`` (1 <= K <= N); (1, 1) when neither is given."""
    if shard is None and shards is None:
        return 1, 1
    if shards is None:
        raise PerfqError("--shard K needs --shards N (N >= 1)", exit_code=EXIT_USAGE)
    if shards < 1:
        raise PerfqError(f"--shards must be 1 or more, got {shards}", exit_code=EXIT_USAGE)
    k = 1 if shard is None else shard
    if not 1 <= k <= shards:
        raise PerfqError(f"--shard {k} is not one of 1..{shards} (--shards {shards})", exit_code=EXIT_USAGE)
    return k, shards


def format_duration(seconds: float) -> str:
    """``4m 30s`` / ``45s`` / ``1h 05m``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


_DTYPE = re.compile(r"(?:torch\.|dtype_?)(q?u?int\d+|float\d*|bfloat16|half|double|bool|complex\d*|qint\d+|quint\d+)")
_NUMBER_PARAM = re.compile(r"(?:^|_)[A-Za-z]+?(\d+)(?=_|$)|\((\d+(?:,\s*\d+)*)\)")


def config_of(test: str, device: str = "", backward: bool = False) -> TestConfig:
    """The config a test's name states: dtype, size bucket (elements of its sizes), device, direction."""
    dtype = m.group(1) if (m := _DTYPE.search(test)) else ""
    return TestConfig(dtype, size_bucket(elements_of(test)), device, "backward" if backward else "forward")


def elements_of(test: str) -> int:
    """Product of the sizes in a test's name (``M8_N32_K256`` -> 65536; ``sizes(1024,2)`` -> 2048); 0 when none."""
    name = re.sub(r"dtype\w*", "", test)
    sizes = []
    for single, group in _NUMBER_PARAM.findall(name):
        if single:
            sizes.append(int(single))
        else:
            sizes += [int(x) for x in group.split(",")]
    sizes = [s for s in sizes if s > 0]
    return math.prod(sizes) if sizes else 0


def size_bucket(elements: int) -> str:
    if elements <= 0:
        return ""
    return "small" if elements < 10_000 else "medium" if elements < 1_000_000 else "large"


def default_cost(test: str, backward: bool, iterations: int = defaults.TIMED_ITERATIONS) -> float:
    """The default estimate of one test's seconds per invocation (no history yet)."""
    timed = DEFAULT_SECONDS_PER_ELEMENT_ITERATION * elements_of(test) * iterations
    seconds = DEFAULT_TEST_SECONDS + timed * (DEFAULT_BACKWARD_FACTOR if backward else 1.0)
    return min(DEFAULT_TEST_CEILING, seconds)


# ---------------------------------------------------------------------- planning


FILE_OP = "file:"  # a whole-file candidate whose operators are unknown covers this one (not counted as an operator)


def file_op(benchmark: str) -> str:
    return FILE_OP + benchmark


def _round_seconds(tests: Iterable[Candidate | PlannedTest], shape: RunShape) -> float:
    """Seconds of one round on one side: the tests, plus process starts and file imports for default costs."""
    tests = list(tests)
    if not tests:
        return 0.0
    cost = sum(t.cost if isinstance(t, Candidate) else t.cost_seconds for t in tests)
    files = {t.benchmark for t in tests if t.cost_source == CostSource.default}
    processes = (1 if files else 0) if shape.batch else len(files)
    return cost + processes * shape.process_start + len(files) * DEFAULT_FILE_SECONDS


def estimate(tests: Iterable[Candidate | PlannedTest], shape: RunShape) -> float:
    """The whole run's seconds for ``tests``: rounds x sides x one round."""
    return shape.rounds * shape.sides * _round_seconds(tests, shape)


@dataclass
class _Greedy:
    """Picks under a per-round budget: what is spent, the operators and configs covered so far.
    A file not yet in the plan costs its import (and a process when files are not batched)."""

    shape: RunShape
    spent: float = 0.0
    files: set[str] = field(default_factory=set)
    covered: set[str] = field(default_factory=set)
    features: set[tuple[str, str, str]] = field(default_factory=set)
    picked: list[tuple[Candidate, Pick]] = field(default_factory=list)

    def price(self, c: Candidate) -> float:
        if c.cost_source != CostSource.default or c.benchmark in self.files:
            return c.cost
        start = self.shape.process_start if not self.shape.batch or not self.files else 0.0
        return c.cost + DEFAULT_FILE_SECONDS + start

    def take(self, c: Candidate, pick: Pick) -> None:
        self.spent += self.price(c)
        self.files.add(c.benchmark)
        self.covered |= c.covers
        self.features |= c.config.features(c.module)
        self.picked.append((c, pick))

    def new_ops(self, c: Candidate) -> int:
        # a test without traced operators (untraced file, script) stands for its benchmark: one of them runs
        return len(c.covers - self.covered) if c.ops else int(c.benchmark not in self.files)

    def new_configs(self, c: Candidate) -> int:
        return len(c.config.features(c.module) - self.features) if c.ops else 0


def _greedy(pool: list[Candidate], gain, state: _Greedy, pick: Pick, limit: float) -> set[int]:
    """Lazy greedy: take the candidate with the most ``gain`` per second that fits ``limit`` (seconds per
    round and side), until none gains; gains only shrink, so a stale top is re-scored and pushed back.
    Returns the candidates that would have gained but did not fit."""
    heap = [(-gain(c) / max(state.price(c), 1e-6), i) for i, c in enumerate(pool) if gain(c)]
    heapq.heapify(heap)
    unfit: set[int] = set()
    while heap:
        stale, i = heapq.heappop(heap)
        c = pool[i]
        g = gain(c)
        if not g:
            continue
        ratio = -g / max(state.price(c), 1e-6)
        if ratio > stale + 1e-12:
            heapq.heappush(heap, (ratio, i))
        elif state.spent + state.price(c) > limit:
            unfit.add(i)
        else:
            state.take(c, pick)
    return unfit


def _stand_in(here: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """(pool, replaced): the canary tests and the tests of operators no canary test executes; the rest."""
    canary_ops = set().union(*(c.ops for c in here if c.canary))
    pool = [c for c in here if c.canary or (c.ops - canary_ops)]
    kept = {id(c) for c in pool}
    return pool, [c for c in here if id(c) not in kept]


def fit_plan(
    candidates: list[Candidate],
    ops_reached: int,
    budget_seconds: float | None,
    shape: RunShape = DEFAULT_SHAPE,
    shared: bool = False,
    notes: Iterable[str] = (),
) -> TestPlan:
    """The plan for ``candidates`` within ``budget_seconds`` (None: everything runs).

    With ``shape.shards`` N, the plan holds N budgets (each shard runs one)."""
    left: dict[tuple[str, str, str], LeftOut] = {}
    here = []
    for c in candidates:
        if c.config.device and shape.device and c.config.device != shape.device:
            left[(c.benchmark, c.test, c.module)] = LeftOut.other_device
        else:
            here.append(c)
    # on any device (what this run cannot reach counts too); a file standing for itself is no operator
    executable = {op for c in candidates for op in c.ops if not op.startswith(FILE_OP)}
    pairs = {u for c in candidates for u in c.units}
    canary_names = tuple(dict.fromkeys(c.benchmark for c in here if c.canary))
    stand_in = shared and bool(canary_names) and budget_seconds is not None
    pool = here
    if stand_in:
        pool, replaced = _stand_in(here)
        left.update({(c.benchmark, c.test, c.module): LeftOut.canary_stands_in for c in replaced})
    state = _Greedy(shape)
    if budget_seconds is None:
        for c in pool:
            state.take(c, Pick.all)
    else:
        limit = budget_seconds * shape.shards * HEADROOM / (shape.rounds * shape.sides)
        timed = [c for c in pool if c.timed]
        unfit_ids = {id(timed[i]) for i in _greedy(timed, state.new_ops, state, Pick.covers, limit)}
        small = [c for c in pool if not c.timed]
        unfit_ids |= {id(small[i]) for i in _greedy(small, state.new_ops, state, Pick.covers, limit)}
        chosen = {id(c) for c, _ in state.picked}
        rest = [c for c in pool if id(c) not in chosen]
        unfit_ids |= {id(rest[i]) for i in _greedy(rest, state.new_configs, state, Pick.spread, limit * SPREAD_SHARE)}
        chosen = {id(c) for c, _ in state.picked}
        for c in pool:
            if id(c) not in chosen:
                gains = id(c) in unfit_ids or state.new_ops(c) or state.new_configs(c)
                left[(c.benchmark, c.test, c.module)] = LeftOut.over_budget if gains else LeftOut.redundant
    planned = tuple(PlannedTest(c.benchmark, c.test, c.module, tuple(sorted(c.ops)), c.config, round(c.cost, 3),
                                c.cost_source, pick) for c, pick in state.picked)
    sources: dict[str, int] = {}
    for t in planned:
        sources[t.cost_source.value] = sources.get(t.cost_source.value, 0) + 1
    plan = TestPlan(
        budget_seconds=budget_seconds,
        estimated_seconds=0.0,
        rounds=shape.rounds,
        sides=shape.sides,
        shards=shape.shards,
        tests=planned,
        left_out=_groups(left),
        selected_tests=len(candidates),
        ops_reached=ops_reached,
        ops_executable=len(executable),
        ops_covered=len({op for c, _ in state.picked for op in c.ops} & executable),
        uncovered_ops=tuple(sorted(executable - {op for c, _ in state.picked for op in c.ops})),
        shared_infrastructure=shared,
        canary_stand_in=stand_in,
        canary_benchmarks=canary_names,
        cost_sources=sources,
        notes=tuple(notes),
        pairs_executable=len(pairs),
        pairs_covered=len(pairs & state.covered),
        uncovered_pairs=tuple(sorted(pairs - state.covered)),
    )
    longest = max((s.estimated_seconds for s in split(plan, shape)), default=0.0)
    return replace(plan, estimated_seconds=round(longest, 1))


def _groups(left: dict[tuple[str, str, str], LeftOut]) -> tuple[LeftOutGroup, ...]:
    grouped: dict[tuple[str, LeftOut], list[str]] = {}
    for (bench, test, _module), reason in left.items():
        grouped.setdefault((bench, reason), []).append(test)
    return tuple(LeftOutGroup(bench, reason, len(tests), tuple(sorted(tests)[:3]))
                 for (bench, reason), tests in sorted(grouped.items(), key=lambda kv: (kv[0][1].value, kv[0][0])))


def _units(tests: tuple[PlannedTest, ...], n: int) -> list[tuple[float, list[PlannedTest]]]:
    """What shards are made of: a benchmark's tests together (one file import per shard), or one by one
    when the benchmark alone weighs more than a shard's share."""
    groups: dict[str, list[PlannedTest]] = {}
    for t in tests:
        groups.setdefault(t.benchmark, []).append(t)
    share = sum(t.cost_seconds for t in tests) / n
    units = []
    for members in groups.values():
        cost = sum(t.cost_seconds for t in members)
        if cost > share and len(members) > 1:
            units += [(t.cost_seconds, [t]) for t in members]
        else:
            units.append((cost, members))
    return units


def split(plan: TestPlan, shape: RunShape) -> list[Shard]:
    """The plan's tests in ``shape.shards`` shards balanced by cost (LPT: the costliest unit first, onto the
    least loaded shard); a benchmark's tests stay together unless it alone outweighs a shard."""
    n = max(1, shape.shards)
    loads = [(0.0, k) for k in range(n)]
    heapq.heapify(loads)
    members: list[list[PlannedTest]] = [[] for _ in range(n)]
    for cost, unit in sorted(_units(plan.tests, n), key=lambda u: (-u[0], u[1][0].benchmark, u[1][0].test)):
        load, k = heapq.heappop(loads)
        members[k] += unit
        heapq.heappush(loads, (load + cost, k))
    order = {(t.benchmark, t.test, t.module): i for i, t in enumerate(plan.tests)}
    shards = []
    for k, tests in enumerate(members):
        tests.sort(key=lambda t: order[(t.benchmark, t.test, t.module)])
        shards.append(Shard(k + 1, tuple(tests), estimate(tests, shape)))
    return shards


def shard_of(plan: TestPlan, shape: RunShape, k: int) -> TestPlan:
    """The plan narrowed to shard ``k`` (1-based) of ``shape.shards``."""
    shard = split(plan, shape)[k - 1]
    return replace(plan, tests=shard.tests, estimated_seconds=round(shard.estimated_seconds, 1))
