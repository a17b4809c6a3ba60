"""Benchmark coverage of operators: pure facts -> ranked report rows and summary.

An operator is covered when some benchmark links to it directly (``bench_ops``, static or
traced: seen run by a trace, or inferred by it). Operators are grouped by base name (``add`` with
``add.Tensor``, ``add.Scalar``...).
Churn of a group is the number of commits of the period that changed a function reaching
any of its overloads through the reachability graph (``reach_edges``: ``src`` is affected
when ``dst`` changes). Without history in the period, ranking falls back to kernel size
(lines of the kernel functions) then number of dispatch keys.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from common.documents import to_json

NO_KERNEL_AREA = "(no kernel found)"


@dataclass(frozen=True)
class Overload:
    """One operator overload as the index knows it."""

    name: str
    base: str
    overload: str = ""
    namespace: str = "aten"
    schema: str = ""
    dispatch_keys: tuple[str, ...] = ()
    kernel_functions: tuple[int, ...] = ()  # function ids of its kernels (found definitions)


@dataclass
class CoverageFacts:
    """Everything the report needs, read from the index."""

    ops: dict[str, Overload] = field(default_factory=dict)
    function_lines: dict[int, int] = field(default_factory=dict)  # kernel function id -> lines
    function_paths: dict[int, str] = field(default_factory=dict)  # kernel function id -> file path
    function_starts: dict[int, int] = field(default_factory=dict)  # kernel function id -> first line
    bench_ops: dict[str, set[str]] = field(default_factory=dict)  # bench -> ops it links to
    bench_files: dict[str, str] = field(default_factory=dict)  # bench -> file
    link_sources: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (bench, op) -> static/traced
    traced_layouts: dict[str, set[str]] = field(default_factory=dict)  # op -> layouts traced tests run it on


class LinkSource(str, Enum):
    """How the index linked a benchmark to an operator."""

    static = "static"
    traced = "traced"  # a trace saw the benchmark run the operator
    inferred = "inferred"  # the trace only inferred it runs (inside an upstream operator, another device's kernel)


@dataclass(frozen=True)
class Link:
    bench: str
    op: str
    source: LinkSource


@dataclass(frozen=True)
class SourceRef:
    """A kernel function's file and first line."""

    path: str
    line: int


@dataclass(frozen=True)
class OpRow:
    """One operator group of the report."""

    op: str
    overloads: tuple[str, ...]
    benchmarks: tuple[str, ...]
    covered: bool
    churn: int | None
    kernel_lines: int
    dispatch_keys: tuple[str, ...]
    areas: tuple[str, ...]
    links: tuple[Link, ...] = ()
    kernel_sources: tuple[SourceRef, ...] = ()  # where the kernels are defined (for links to the code)
    benchmark_files: tuple[str, ...] = ()  # the files of ``benchmarks``, same order
    # dispatch keys of its kernels that no benchmark runs, though benchmarks run it on others (gap_keys_ran)
    gap_keys: tuple[str, ...] = ()
    gap_keys_ran: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return to_json(self)


PRIMARY_KEY = "CPU"  # a group whose dense CPU kernel no benchmark runs is NO BENCHMARK; other keys' gaps are noted
# the CPU dispatch keys a trace tells apart (traces run on the CPU), by the layout their kernels take
_TRACED_KEYS = {"CPU": "dense", "QuantizedCPU": "quantized", "SparseCPU": "sparse"}


def key_gaps(keys: Iterable[str], layouts: set[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the dispatch keys among ``keys`` whose kernels no benchmark runs, the keys they do run) when
    the traces run the operator only on the layouts ``layouts``: a QuantizedCPU test does not run
    the CPU kernel. Nothing when no trace runs it."""
    if not layouts:
        return (), ()
    missing = tuple(k for k in sorted(keys) if k in _TRACED_KEYS and _TRACED_KEYS[k] not in layouts)
    ran = tuple(k for k, layout in _TRACED_KEYS.items() if layout in layouts)
    return (missing, ran) if missing else ((), ())


def gap_text(row: OpRow) -> str:
    """'NO BENCHMARK on CPU (benchmarked only on QuantizedCPU)'; '' when the row has no key gap."""
    if not row.gap_keys:
        return ""
    return f"NO BENCHMARK on {', '.join(row.gap_keys)} (benchmarked only on {', '.join(row.gap_keys_ran)})"


def covered_text(row: OpRow, benches: str) -> str:
    """A covered row's benchmarks, with the dispatch keys they leave unbenchmarked (SparseCPU...)."""
    return f"{benches}; NO BENCHMARK on {', '.join(row.gap_keys)}" if row.gap_keys else benches


@dataclass(frozen=True)
class HistoryNote:
    """What the period's git history held (for the summary), and why churn is missing if it is."""

    since: str
    commits: int = 0
    commits_with_indexed_changes: int = 0
    total_commits: int | None = field(default=None, metadata={"omit_if_none": True})
    note: str | None = field(default=None, metadata={"omit_if_none": True})
    commits_touching_infrastructure: int | None = field(default=None, metadata={"omit_if_none": True})
    infra_ops: int | None = field(default=None, metadata={"omit_if_none": True})
    max_depth: int | None = field(default=None, metadata={"omit_if_none": True})


@dataclass(frozen=True)
class Ratio:
    total: int
    covered: int
    ratio: float


@dataclass(frozen=True)
class StaleBenchmark:
    """A benchmark file whose operators no longer exist."""

    bench: str
    file: str
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Filters:
    dispatch: tuple[str, ...]
    top: int | None
    uncovered_only: bool


@dataclass(frozen=True)
class CoverageSummary:
    """Totals over every selected operator group (not only the rows shown)."""

    ops_total: int
    ops_covered: int
    ops_ratio: float
    overloads_total: int
    overloads_covered: int
    benchmarks: int
    by_dispatch_key: dict[str, Ratio]
    by_area: dict[str, Ratio]
    stale_benchmarks: tuple[StaleBenchmark, ...]
    unlinked_benchmarks: tuple[str, ...]
    history: HistoryNote | None
    ranking: str
    filters: Filters


@dataclass(frozen=True)
class CoverageReport:
    """Ranked rows (after ``top``) and the summary over all selected operators."""

    summary: CoverageSummary
    rows: tuple[OpRow, ...] = field(metadata={"json": "ops"})
    ranked: tuple[OpRow, ...] = field(default=(), metadata={"internal": True})  # every selected group, before top

    def to_json(self) -> dict[str, Any]:
        """``{"summary", "ops"}``: the documented shape (``ranked`` is not part of it)."""
        return to_json(self)


# --- churn -----------------------------------------------------------------------------


def functions_touched(
    changes: Iterable[tuple[str, str, Sequence[tuple[int, int]]]],
    extents: Mapping[str, Sequence[tuple[int, int, int]]],
) -> dict[str, set[int]]:
    """Map (commit, path, line ranges) onto function extents: commit -> ids of functions touched.

    ``extents[path]`` is a list of (start_line, end_line, function_id) sorted by start line.
    A function is touched when a changed range overlaps its extent (nested functions too).
    """
    starts = {path: [e[0] for e in ext] for path, ext in extents.items()}
    touched: dict[str, set[int]] = defaultdict(set)
    for commit, path, ranges in changes:
        ext = extents.get(path)
        if not ext:
            continue
        for lo, hi in ranges:
            upto = bisect.bisect_right(starts[path], hi)
            for start, end, fid in ext[:upto]:
                if end >= lo and start <= hi:
                    touched[commit].add(fid)
    return dict(touched)


@dataclass
class Reach:
    """Operators reached per commit, and the commits' shared-infrastructure functions."""

    ops: dict[str, set[str]]
    infrastructure: dict[str, set[int]]  # commit -> start nodes reaching more than ``reach_bound`` ops


def ops_reached(
    edges: Iterable[tuple[int, int]],
    op_of_node: Mapping[int, str],
    start_sets: Mapping[str, Iterable[int]],
    max_depth: int | None = None,
    reach_bound: int | None = None,
) -> Reach:
    """For each key of ``start_sets`` (a commit), the ops whose nodes are reachable from its nodes.

    ``edges`` are (dst, src) pairs: src is affected when dst changes, so the walk goes
    dst -> src, at most ``max_depth`` edges deep. A start node reaching more than
    ``reach_bound`` ops is shared infrastructure (a canary matter, not churn of each op):
    it is reported in ``infrastructure`` and adds no op. Walks are cached per start node.
    """
    adj: dict[int, list[int]] = defaultdict(list)
    for dst, src in edges:
        adj[dst].append(src)
    cache: dict[int, frozenset[str] | None] = {}

    # node -> a depth within which it reaches more than ``reach_bound`` ops: a walk meeting
    # that node at depth d with d + k <= max_depth is infrastructure too (exact shortcut)
    infra_at: dict[int, int] = {}
    limit = max_depth if max_depth is not None else 1 << 30

    def walk(start: int) -> frozenset[str] | None:
        found: set[str] = set()
        seen = {start}
        frontier = [start]
        depth = 0
        while frontier:
            for n in frontier:
                if n in op_of_node:
                    found.add(op_of_node[n])
            if reach_bound is not None and len(found) > reach_bound:
                infra_at[start] = depth
                return None
            if depth >= limit:
                break
            depth += 1
            nxt = []
            for n in frontier:
                for m in adj.get(n, ()):
                    if m in seen:
                        continue
                    k = infra_at.get(m)
                    if k is not None and depth + k <= limit:
                        infra_at[start] = depth + k
                        return None
                    seen.add(m)
                    nxt.append(m)
            frontier = nxt
        return frozenset(found)

    result = Reach(ops={}, infrastructure={})
    for key, nodes in start_sets.items():
        ops: set[str] = set()
        for n in nodes:
            if n not in cache:
                cache[n] = walk(n)
            got = cache[n]
            if got is None:
                result.infrastructure.setdefault(key, set()).add(n)
            else:
                ops |= got
        result.ops[key] = ops
    return result


def churn_by_op(commit_ops: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """Invert commit -> ops into op -> commits."""
    out: dict[str, set[str]] = defaultdict(set)
    for commit, ops in commit_ops.items():
        for op in ops:
            out[op].add(commit)
    return dict(out)


# --- report ----------------------------------------------------------------------------


def _area(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."


def group_name(fact: Overload) -> str:
    """The group of an overload: its base name, namespace-qualified outside aten (quantized::add)."""
    return fact.base if fact.namespace in ("aten", "") else f"{fact.namespace}::{fact.base}"


def build_report(
    facts: CoverageFacts,
    op_commits: Mapping[str, set[str]] | None,
    *,
    dispatch: Sequence[str] = (),
    top: int | None = None,
    uncovered_only: bool = False,
    history_note: HistoryNote | None = None,
) -> CoverageReport:
    """Group, rank and summarise.

    ``op_commits`` (op -> commits that changed a function reaching it) is None when there
    is no history in the period: rows then carry ``churn=None`` and rank by kernel size.
    ``dispatch`` keeps overloads having any of those dispatch keys. ``top`` cuts the rows
    (the summary covers every selected operator). ``uncovered_only`` keeps uncovered rows.
    """
    wanted = set(dispatch)
    covered_by: dict[str, set[str]] = defaultdict(set)
    for bench, ops in facts.bench_ops.items():
        for op in ops:
            covered_by[op].add(bench)

    groups: dict[str, list[Overload]] = defaultdict(list)
    for fact in facts.ops.values():
        if wanted and not wanted.intersection(fact.dispatch_keys):
            continue
        groups[group_name(fact)].append(fact)

    rows: list[OpRow] = []
    for base, members in groups.items():
        members.sort(key=lambda f: (f.overload != "", f.overload))
        benches: set[str] = set()
        keys: set[str] = set()
        kfuncs: set[int] = set()
        commits: set[str] = set()
        for fact in members:
            benches |= covered_by.get(fact.name, set())
            keys.update(fact.dispatch_keys)
            kfuncs.update(fact.kernel_functions)
            if op_commits is not None:
                commits |= op_commits.get(fact.name, set())
        areas = sorted({_area(facts.function_paths[f]) for f in kfuncs if f in facts.function_paths})
        links = tuple(
            Link(b, f.name, LinkSource(src))
            for f in members
            for b in sorted(covered_by.get(f.name, ()))
            for src in sorted(facts.link_sources.get((b, f.name), {"static"}))
        )
        # judged on the traces when every benchmark linking the group is traced running it
        untraced = {link.bench for link in links} - {link.bench for link in links if link.source != LinkSource.static}
        layouts = set().union(*(facts.traced_layouts.get(f.name, set()) for f in members))
        gaps, ran = ((), ()) if untraced else key_gaps(keys, layouts)
        rows.append(
            OpRow(
                op=base,
                overloads=tuple(f.name for f in members),
                benchmarks=tuple(sorted(benches)),
                covered=bool(benches) and PRIMARY_KEY not in gaps,
                gap_keys=gaps,
                gap_keys_ran=ran,
                churn=len(commits) if op_commits is not None else None,
                kernel_lines=sum(facts.function_lines.get(f, 0) for f in kfuncs),
                dispatch_keys=tuple(sorted(keys)),
                areas=tuple(areas or [NO_KERNEL_AREA]),
                links=links,
                kernel_sources=tuple(sorted({SourceRef(facts.function_paths[f], facts.function_starts.get(f, 0))
                                             for f in kfuncs if f in facts.function_paths},
                                            key=lambda r: (r.path, r.line))),
                benchmark_files=tuple(facts.bench_files.get(b, "") for b in sorted(benches)),
            )
        )
    rows.sort(key=lambda r: (-(r.churn or 0), -r.kernel_lines, -len(r.dispatch_keys), r.op))

    ranking = "churn, kernel_lines, dispatch_keys" if op_commits is not None else "kernel_lines, dispatch_keys"
    summary = _summary(rows, facts, covered_by, groups, history_note, ranking,
                       Filters(tuple(sorted(wanted)), top, uncovered_only))
    selected = [r for r in rows if not (uncovered_only and r.covered)]
    if top is not None:
        selected = selected[: max(top, 0)]
    return CoverageReport(summary=summary, rows=tuple(selected), ranked=tuple(rows))


def _summary(
    rows: list[OpRow],
    facts: CoverageFacts,
    covered_by: Mapping[str, set[str]],
    groups: Mapping[str, list[Overload]],
    history: HistoryNote | None,
    ranking: str,
    filters: Filters,
) -> CoverageSummary:
    by_key: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_area: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        for key in row.dispatch_keys or ["(none)"]:
            by_key[key][0] += 1
            by_key[key][1] += row.covered
        for area in row.areas:
            by_area[area][0] += 1
            by_area[area][1] += row.covered
    overloads = [f for members in groups.values() for f in members]
    stale = []
    for bench in sorted(facts.bench_ops):
        ops = facts.bench_ops[bench]
        if ops and not any(op in facts.ops for op in ops):
            stale.append(StaleBenchmark(bench, facts.bench_files.get(bench, ""), tuple(sorted(ops))))
    unlinked = sorted(b for b in facts.bench_files if not facts.bench_ops.get(b))

    def table(d: Mapping[str, list[int]]) -> dict[str, Ratio]:
        ordered = sorted(d.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return {k: Ratio(t, c, round(c / t, 4) if t else 0.0) for k, (t, c) in ordered}

    covered = sum(r.covered for r in rows)
    return CoverageSummary(
        ops_total=len(rows),
        ops_covered=covered,
        ops_ratio=round(covered / len(rows), 4) if rows else 0.0,
        overloads_total=len(overloads),
        overloads_covered=sum(1 for f in overloads if covered_by.get(f.name)),
        benchmarks=len(facts.bench_files),
        by_dispatch_key=table(by_key),
        by_area=table(by_area),
        stale_benchmarks=tuple(stale),
        unlinked_benchmarks=tuple(unlinked),
        history=history,
        ranking=ranking,
        filters=filters,
    )
