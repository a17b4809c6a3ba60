"""``perfq affected``: from changed functions to the benchmark tests that execute what they
change, the operators behind them, the operators with NO BENCHMARK, and why (reads the index).

Selection, in order of trust:

1. The operators the change implements: the walk from the changed functions up through
   calls, stubs, dispatch kernels and registrations, without entering code that merely calls
   an operator (``own ops``).
2. Traced truth: the benchmark tests whose traced timed region executes one of those
   operators (any overload), on the devices the change can be seen on.
3. Static links, for benchmarks that could not be traced and for Python changes: the walk
   on through composite callers (not out of hub operators) into benchmark code.
4. Shared infrastructure (a canary set's paths or functions, more own ops than
   ``reach_bound``, or own ops that ``shared_fraction`` of the traced benchmarks execute):
   flagged, with a canary set: the few traced benchmarks that cover the
   operators it reaches (greedy set cover), a quick first signal before the full selection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from common import globs
from common.config import Config
from indexer.devices import device_of_key, device_of_path
from indexer.dtypes import DtypeScope
from indexer.facts import scope_name
from indexer.generated_layer import WILDCARD
from query.bound_lines import TextOf, bound_calls, bound_truth, merged
from query.changes import ChangedFunction, ChangeSet
from query.document import (
    AffectedDoc,
    CanaryBenchmark,
    CanaryHit,
    Confidence,
    DispatchGap,
    Reason,
    SelectedBenchmark,
    Source,
    Unmapped,
    Unreached,
)
from query.dtype_gaps import CPP_SUFFIXES, callers_scope, gaps, on_scope
from query.model import Chain, ChainStep, StepKind
from query.py_lines import LineTruth
from query.reach import Reach, closure, fill_labels, op_backends, reaching_benchmarks, walk_up
from query.unused_deletions import drop_synthesized_operators, drop_unused_deletions
from schema.index_store import BenchmarkInfo, CanarySet, IndexStore, LayerHit, NativeHit, TracedDtype, TracedHit
from schema.kinds import EdgeKind, NodeKind, TraceStatus

_WEAK_EDGES = {EdgeKind.SUBCLASS, EdgeKind.METHOD_OF}
_TRACED = (TraceStatus.ok, TraceStatus.partial)
_NARROW_OPS = 10  # a change implementing at most this many operators is one kernel's family (README: 86 of 157)
_SHARED_MIN_BENCHMARKS = 10  # fewer benchmarks executing a change's operators are never "shared" by breadth
_REASONS_KEPT = 3
_MODES = ("eager", "compile")
# decorators that register a Python function as what torch.compile runs for an aten operator
_COMPILE_REGISTRARS = ("register_decomposition", "register_lowering", "_register_lowering")


@dataclass
class Start:
    node: int
    step: ChainStep  # what changed: a function, a file's lines, an operator
    confidence: Confidence
    why: str
    device: str = ""  # device family of the changed file ('' = any)

    @property
    def label(self) -> str:
        return self.step.label


@dataclass
class AffectedInput:
    base: str
    head: str
    changes: ChangeSet
    warnings: list[str] = field(default_factory=list)
    dtypes: DtypeScope = None  # the dtypes the changed lines run for (query.dtype_gaps.change_scope)
    lines: LineTruth = field(default_factory=LineTruth)  # Python lines the traces saw tests run
    source: TextOf | None = None  # a file of the base by its path (the Python lines calling a bound function)


# --------------------------------------------------------------------------- starts


_CALLER_EDGES = frozenset({EdgeKind.CALL, EdgeKind.PYTHON_CALL, EdgeKind.VIRTUAL_CALL})
_CPP_CALLS = frozenset({EdgeKind.CALL, EdgeKind.VIRTUAL_CALL})  # a C++ caller: a call, or a virtual call of an override


class _Matched(NamedTuple):
    """A changed function, its indexed ids (none: the index lacks it) and the name a caller calls it by."""

    cf: ChangedFunction
    ids: list[int]
    called_as: str


@dataclass(frozen=True)
class _Callers:
    """The callers of the changed functions the index lacks: by name, the files that may see a
    header's function (itself and its includers), and the callers' paths."""

    of: dict[str, list[int]]
    visible: dict[str, set[str]]
    paths: dict[int, str]

    def of_function(self, m: _Matched) -> list[int]:
        callers = self.of.get(m.called_as, [])
        if m.cf.path in self.visible:
            callers = [i for i in callers if self.paths.get(i) in self.visible[m.cf.path]]
        return callers


def _starts(
    store: IndexStore, cs: ChangeSet, other_tree: bool = False
) -> tuple[list[Start], list[Unmapped], list[str]]:
    """Index nodes the changes start from, what could not be mapped, and warnings. ``other_tree``:
    the index was built from a tree other than the change's head (a later commit, for a
    backtest or an old change): a function the change adds that the index holds already has
    that tree's callers there, not the base's (the change's own callers are changed functions,
    started from anyway), so only what registers it (a stub, an operator) is started from."""
    by_file, includers = _indexed_functions(store, cs)
    matched = _match_functions(cs, by_file)
    in_base = _base_callers(cs, by_file)
    starts, unmapped, later = _function_starts(store, matched, _callers(store, matched), other_tree, in_base)
    file_starts, file_unmapped, warnings = _file_level_starts(cs, by_file, includers, later)
    return starts + file_starts + _yaml_starts(store, cs), unmapped + file_unmapped, warnings


def _indexed_functions(store: IndexStore, cs: ChangeSet) -> tuple[dict[str, list], dict[str, list[str]]]:
    """The indexed functions of the changed files and of the files including a file-level change,
    by path; and the includers of each file-level change's file."""
    paths = sorted({cf.path for cf in cs.functions} | {p for p, _, _ in cs.file_level})
    includers = store.includers(sorted({p for p, _, _ in cs.file_level}))
    by_file: dict[str, list] = {}
    for row in store.functions_in(sorted(set(paths).union(*includers.values()))):
        by_file.setdefault(row.path, []).append(row)
    return by_file, includers


def _match_functions(cs: ChangeSet, by_file: dict[str, list]) -> list[_Matched]:
    """Each changed function with its indexed ids, by qualified name, else by name in its scope."""
    matched = []
    for cf in cs.functions:
        indexed = by_file.get(cf.path, [])
        scope = scope_name(cf.qualname)  # a method by its class too: a file has many operator()s
        ids = [r.id for r in indexed if r.qualname == cf.qualname] or [
            r.id for r in indexed if r.name == cf.name and scope_name(r.qualname) == scope
        ]
        # a functor's operator() is reached where the functor is made: by its class's name; a free
        # operator overload where the values it takes are made: by its first operand's class's name
        matched.append(_Matched(cf, ids, _called_as(cf, scope)))
    return matched


def _called_as(cf: ChangedFunction, scope: str) -> str:
    """The name calls reach a changed function by (see _match_functions)."""
    if not cf.name.startswith("operator") or not scope:
        return cf.name
    return cf.operands[0] if cf.operands and not cf.member else scope


def _callers(store: IndexStore, matched: list[_Matched]) -> _Callers:
    """The callers of the changed functions the index lacks, by the name they are called by."""
    callers_of = store.callers_named([m.called_as for m in matched if not m.ids])
    # a header function the index lacks: only callers in files that include its header, never
    # every function anywhere that calls something of its name (copy_, launch...)
    visible = _including_files(store, sorted({m.cf.path for m in matched if not m.ids and _is_header(m.cf.path)}))
    named = sorted({i for m in matched if m.cf.path in visible for i in callers_of.get(m.called_as, [])})
    return _Callers(callers_of, visible, store.function_paths(named) if named else {})


def _base_callers(cs: ChangeSet, by_file: dict[str, list]) -> dict[tuple[str, str], list[int]]:
    """(path, changed function) -> the indexed ids of the functions of its file that call it in the base."""
    out: dict[tuple[str, str], list[int]] = {}
    for (path, qualname), callers in cs.base_callers.items():
        ids = [r.id for r in by_file.get(path, []) if r.qualname in callers]
        if ids:
            out[path, qualname] = ids
    return out


def _function_starts(
    store: IndexStore, matched: list[_Matched], callers: _Callers, other_tree: bool,
    in_base: dict[tuple[str, str], list[int]],
) -> tuple[list[Start], list[Unmapped], set[int]]:
    """The starts of the changed functions (their ids, else their callers by name), those that map
    to nothing, and the functions the change adds that the index (of a later tree) holds."""
    starts: list[Start] = []
    unmapped: list[Unmapped] = []
    later: set[int] = set()
    for m in matched:
        cf, ids = m.cf, m.ids
        step, dev = ChainStep(StepKind.FUNCTION, cf.qualname, file=cf.path), device_of_path(cf.path)
        if cf.status == "added" and not other_tree:
            # its callers in the head are changed functions, started from anyway; a function of
            # the index with its name is another overload (or gone), whose callers it has not
            continue
        if ids and other_tree and cf.status == "added":
            later.update(ids)  # nor from the file's functions, when the file falls back
            upper = sorted({src for i in ids for src, kind in store.graph().into(i) if kind not in _CALLER_EDGES})
            starts += [Start(n, step, Confidence.high, "added function, where it is registered", dev) for n in upper]
        elif ids:
            starts += [Start(i, step, Confidence.high, f"{cf.status} function", dev) for i in ids]
        elif reached := callers.of_function(m):
            why = f"{cf.status} function, reached through callers of {m.called_as}"
            starts += [Start(i, step, Confidence.medium, why, dev) for i in reached]
        elif local := in_base.get((cf.path, cf.qualname)):  # renamed in the index's tree
            why = f"{cf.status} function not in the index, reached through its callers in the base's {cf.path}"
            starts += [Start(i, step, Confidence.medium, why, dev) for i in local]
        else:
            where = f"nothing that includes {cf.path} calls" if cf.path in callers.visible else "nothing calls"
            reason = f"{cf.status} function not in the index and {where} {m.called_as}"
            unmapped.append(Unmapped(cf.path, cf.qualname, tuple(cf.lines[:20]), reason))
    return starts, unmapped, later


def _file_level_starts(
    cs: ChangeSet, by_file: dict[str, list], includers: dict[str, list[str]], later: set[int]
) -> tuple[list[Start], list[Unmapped], list[str]]:
    """Changed lines outside any function: every function of the file and of its includers (low)."""
    starts: list[Start] = []
    unmapped: list[Unmapped] = []
    warnings: list[str] = []
    for path, lines, why in cs.file_level:
        own = [r.id for r in by_file.get(path, []) if r.id not in later]
        including = includers.get(path, [])
        from_includers = sorted(r.id for q in including for r in by_file.get(q, []) if r.id not in later)
        note = f"; falling back to the {len(own)} functions of the file" if own else ""
        if including:
            note += f" and of the {len(including)} files that include it"
        unmapped.append(Unmapped(path, None, tuple(lines), why + note))
        if own or from_includers:
            warnings.append(f"{path}: lines {lines[:6]} are outside any function; selection from the whole file (low)")
        dev = device_of_path(path)
        file_level, included = (ChainStep(StepKind.FILE, path, detail=d) for d in ("file level", "included by"))
        starts += [Start(i, file_level, Confidence.low, why, dev) for i in own]
        starts += [Start(i, included, Confidence.low, why, dev) for i in from_includers]
    return starts, unmapped, warnings


def _yaml_starts(store: IndexStore, cs: ChangeSet) -> list[Start]:
    """The operators a native_functions.yaml change names."""
    if not cs.yaml_ops:
        return []
    why_of = dict(reversed(cs.yaml_ops))
    return [Start(nid, ChainStep(StepKind.OP, key), Confidence.high, why_of.get(key) or why_of.get(base, ""))
            for nid, key, base in store.op_nodes(list(why_of))]


_HEADER_SUFFIXES = (".h", ".hpp", ".cuh")
INCLUDE_DEPTH = 4  # levels of headers including headers followed from a changed header


def _is_header(path: str) -> bool:
    return path.endswith(_HEADER_SUFFIXES)


def _including_files(store: IndexStore, headers: list[str]) -> dict[str, set[str]]:
    """header -> itself and the indexed files that include it, directly or through up to
    ``INCLUDE_DEPTH`` levels of other headers."""
    out = {h: {h} for h in headers}
    frontier = {h: {h} for h in headers}
    for _ in range(INCLUDE_DEPTH if headers else 0):
        includers = store.includers(sorted({p for paths in frontier.values() for p in paths}))
        frontier = {h: {q for p in paths for q in includers.get(p, [])} - out[h] for h, paths in frontier.items()}
        frontier = {h: paths for h, paths in frontier.items() if paths}
        if not frontier:
            break
        for h, paths in frontier.items():
            out[h] |= paths
    return out


# --------------------------------------------------------------------------- helpers


_STEP_OF_NODE = {NodeKind.OP: StepKind.OP, NodeKind.STUB: StepKind.STUB, NodeKind.BENCHMARK: StepKind.BENCHMARK}


def _step(r: Reach, node: int, files: dict[int, str], via: str) -> ChainStep:
    """The chain step of a node of the walk ``r``, reached by ``via``."""
    kind = r.kind.get(node)
    if kind == NodeKind.FUNCTION:
        return ChainStep(StepKind.FUNCTION, r.label.get(node, "?"), file=files.get(node, "?"), via=via)
    if kind == NodeKind.PYFUNCTION:
        return ChainStep(StepKind.FUNCTION, r.label.get(node, "?"), via=via)
    if kind not in _STEP_OF_NODE:  # a node the walk did not describe
        return ChainStep(StepKind.NOTE, f"? {r.key.get(node, '?')}", via=via)
    return ChainStep(_STEP_OF_NODE[kind], r.key.get(node, "?"), via=via)


def _chain(r: Reach, node: int, files: dict[int, str]) -> Chain:
    """The steps from the walk's start node to ``node``."""
    return tuple(_step(r, n, files, _via(kind, detail)) for n, kind, detail in r.chain(node))


def _via(kind: EdgeKind | None, detail: str) -> str:
    """How a chain's node is reached: the edge's kind, or for a virtual call which override it
    dispatches to (``virtual call, override in PackedLinearWeight (line 416)``), for a backward
    formula which formula calls what (``derivatives.yaml: addmm's formula calls mm_mat1_backward``);
    '' for the start."""
    if kind is None:
        return ""
    return detail if kind in (EdgeKind.VIRTUAL_CALL, EdgeKind.FORMULA) else kind.value


def _functions(r: Reach, nodes: set[int]) -> list[int]:
    """The C++ functions among ``nodes``."""
    return sorted(n for n in nodes if r.kind.get(n) == NodeKind.FUNCTION)


def _usable(hits: list[TracedHit], families: set[str], benches: dict[str, BenchmarkInfo]) -> list[TracedHit]:
    """The hits of indexed benchmarks on a device the change can reach."""
    device_ok = {d: _device_ok(d, families) for d in {h.device for h in hits}}
    return [h for h in hits if device_ok[h.device] and h.bench in benches]


def on_reached_devices(hits: list[TracedHit], devices: dict[str, set[str]]) -> list[TracedHit]:
    """The hits on a device family the walk reached their operators for: an operator reached
    only through another backend's registration (a Vulkan kernel of ``clamp``) is not what a
    CPU test of it runs. An operator reached through a composite or a device-neutral key (or
    not through a registration) runs on every device."""

    def reached_for(hit: TracedHit) -> bool:
        families = set().union(*(devices.get(op, {""}) for op in hit.ops))
        return "" in families or (device_of_key(hit.device) or "cpu") in families

    return [h for h in hits if reached_for(h)]


def _families(changed_paths: Iterable[str]) -> set[str]:
    """Device families a change can be seen on (empty: every device)."""
    families = {device_of_path(p) for p in changed_paths}
    return set() if not families or "" in families else families


def _traced_benchmarks(benches: dict[str, BenchmarkInfo], families: set[str]) -> set[str]:
    """Benchmarks with a usable trace on a device the change can reach."""
    return {
        name
        for name, b in benches.items()
        if b.trace_status in _TRACED and any(_device_ok(d, families) for d in b.devices or ("",))
    }


def _device_ok(device: str, families: set[str]) -> bool:
    family = device_of_key(device) if device else ""
    return not families or not family or family in families


def _devices(families: set[str], bench_devices: Iterable[str]) -> tuple[str, ...]:
    devices = tuple(bench_devices) or ("cpu",)
    wanted = tuple(d for d in devices if _device_ok(d, families))
    return wanted or devices


def set_cover(wanted: set[str], covers: dict[str, set[str]]) -> list[str]:
    """Greedy set cover: few benchmarks whose operators cover ``wanted`` (what any can)."""
    left = set(wanted) & set().union(*covers.values()) if covers else set()
    chosen: list[str] = []
    while left:
        best = max(sorted(covers), key=lambda b: len(covers[b] & left))
        gain = covers[best] & left
        if not gain:
            break
        chosen.append(best)
        left -= gain
    return chosen


# --------------------------------------------------------------------------- the query


@dataclass
class _Selection:
    """Benchmarks being assembled: name -> tests, modules, ops, reasons, confidence, source."""

    entries: dict[str, dict] = field(default_factory=dict)

    def add(
        self,
        name: str,
        source: Source,
        confidence: Confidence,
        reason: Reason,
        tests: Iterable[str] = (),
        modules: Iterable[str] = (),
        ops: Iterable[str] = (),
        distance: int = 0,
        modes: tuple[str, ...] = (),
    ) -> None:
        """Add ``name`` for ``reason``; ``modes``: only in these modes (default: the document's)."""
        e = self.entries.setdefault(
            name,
            {
                "tests": {},
                "modules": {},
                "ops": {},
                "reasons": [],
                "confidence": confidence,
                "source": source,
                "distance": distance,
                "modes": set(),
                "every_mode": False,
            },
        )
        e["modes"].update(modes)
        e["every_mode"] = e["every_mode"] or not modes
        e["tests"].update(dict.fromkeys(tests))
        e["modules"].update(dict.fromkeys(modules))
        e["ops"].update(dict.fromkeys(ops))
        if reason not in e["reasons"]:
            e["reasons"].append(reason)
        rank = [Confidence.high, Confidence.medium, Confidence.low, Confidence.canary]
        if rank.index(confidence) < rank.index(e["confidence"]):
            e["confidence"] = confidence
        e["distance"] = min(e["distance"], distance)


def _pattern_canaries(
    sets: list[CanarySet], paths: list[str], qualnames: list[str]
) -> list[tuple[CanarySet, str]]:
    """Canary sets whose path globs or function patterns match the change, with the match."""
    out = []
    for s in sets:
        hit = next((p for p in paths for g in s.paths if globs.match(p, g)), None)
        hit = hit or next((q for q in qualnames for g in s.functions if globs.match(q, g)), None)
        if hit:
            out.append((s, hit))
    return out


# the query's stages, each a function of the earlier stages' results: start -> reach -> observe
# (what the traces saw run) -> select -> canaries -> document


@dataclass(frozen=True)
class Started:
    """start: the index nodes the change starts from, and what it touches."""

    starts: list[Start]
    unmapped: list[Unmapped]
    warnings: list[str]
    changed_paths: list[str]
    families: set[str]  # device families of the changed files
    benches: dict[str, BenchmarkInfo]


@dataclass(frozen=True)
class Reached:
    """reach: the operators the change implements (``own``), how far the walk goes from them,
    and whether the change is shared infrastructure (a canary pattern, or too many operators)."""

    starts: list[Start]  # the start's, with the header fallback's when the functions reach no operator
    start_of: dict[int, Start]
    own: Reach
    own_ops: list[str]
    layouts: dict[str, set[str]]  # own operator -> the layouts the change runs for
    devices: dict[str, set[str]]  # own operator -> the device families of the kernels reached ('' any)
    sets: list[CanarySet]
    patterns: list[tuple[CanarySet, str]]
    unbounded: bool
    walk: Reach  # own, or on through composite callers
    reached_ops: int
    inner: Reach | None  # one composite step up (None for shared infrastructure)
    callers: list[str]  # inner's operators that are not own (a kernel calls an own one)
    warnings: list[str]


@dataclass(frozen=True)
class Observed:
    """observe: the traced tests that run what the change implements."""

    own_dtypes: list[TracedDtype]
    scoped_hits: list[TracedHit]  # own operators' hits on the change's dtypes
    hits: list[TracedHit]  # usable hits: own, then callers' (past no hub)
    executing: set[str]  # benchmarks executing the change's own operators
    nested: set[str]  # benchmarks the traces saw run them inside other operators
    traced: set[str]
    warnings: list[str]


@dataclass(frozen=True)
class Selected:
    """select: the benchmarks to run, and in which modes."""

    benchmarks: list[SelectedBenchmark]
    compiled: dict[str, str]  # operators whose decomposition or lowering changed
    compile_hits: list[TracedHit]
    compile_mode: bool
    unused_modules: list[str]
    warnings: list[str]
    layer: list[LayerHit]  # changed functions every generated operator wrapper runs
    layer_benches: frozenset[str] = frozenset()  # the traced benchmarks whose wrappers run them


def affected(store: IndexStore, inp: AffectedInput, cfg: Config) -> AffectedDoc:
    """The ``perfq affected`` document (see README for its JSON shape)."""
    started = start(store, inp)
    inp = _with_callers_scope(store, inp, started)
    reached = reach(store, inp, cfg, started)
    inp = replace(inp, lines=merged(inp.lines, bound_truth(store, bound_calls(store, reached.walk), _source(inp))))
    observed = observe(store, inp, cfg, started, reached)
    selected = select(store, inp, started, reached, observed)
    canary = canaries(inp, cfg, started, reached, observed, selected)
    if _shared(inp, reached, selected, canary[0]):
        selected = _runnable_only(selected, started.benches)
    return document(store, inp, cfg, (started, reached, observed, selected), canary)


def _shared(inp: AffectedInput, reached: Reached, selected: Selected, broad: str) -> bool:
    """Whether the change is shared infrastructure (a canary set's pattern, its breadth, a line
    every traced test runs, the generated operator wrappers)."""
    return bool(reached.patterns or broad or inp.lines.every_test or selected.layer)


def _runnable_only(selected: Selected, benches: dict[str, BenchmarkInfo]) -> Selected:
    """A shared change's selection less the benchmarks reached only statically whose trace ran
    no test (the file fails before its first test here: an import of a library the build lacks).
    Static reach through shared infrastructure touches almost every operator, so for them it says
    only that the benchmark calls some operator; what runs the change is what the traces saw, and
    the canary set carries the rest. A narrow change keeps them: its static chain is the evidence.
    Only where some benchmark's trace ran: when none did, the tracer could not run this tree (no
    harness), and a failed trace says nothing about the file."""
    if not any(b.trace_status in (TraceStatus.ok, TraceStatus.partial) for b in benches.values()):
        return selected
    dropped = sorted(
        b.name for b in selected.benchmarks
        if b.source == Source.static and benches.get(b.name) is not None
        and benches[b.name].trace_status == TraceStatus.failed
    )
    if not dropped:
        return selected
    why = (f"shared infrastructure: {', '.join(dropped)} not selected: reached only statically, and"
           " no test of it ran when traced")
    return replace(selected, benchmarks=[b for b in selected.benchmarks if b.name not in dropped],
                   warnings=[*selected.warnings, why])


def _with_callers_scope(store: IndexStore, inp: AffectedInput, started: Started) -> AffectedInput:
    """A change to C++ functions whose changed lines run for any dtype, but that only calls
    inside dtype constructs enter, runs for those calls' dtypes (query.dtype_gaps.callers_scope)."""
    cs = inp.changes
    plain = (
        inp.dtypes is None and inp.source is not None and cs.functions and not cs.file_level
        and all(cf.status == "modified" and cf.path.endswith(CPP_SUFFIXES) for cf in cs.functions)
        and all(s.confidence == Confidence.high for s in started.starts)
    )
    if not plain:
        return inp
    ids = sorted({s.node for s in started.starts})
    scope = callers_scope(ids, store.callers_with_extents(ids), _source(inp))
    return inp if scope is None else replace(inp, dtypes=scope)


def _source(inp: AffectedInput) -> TextOf:
    """The base's files by path (none when the input says no way to read them)."""
    return inp.source or (lambda path: None)


def start(store: IndexStore, inp: AffectedInput) -> Started:
    """Where the walk starts: the changed functions, files and operators as index nodes."""
    cs = inp.changes
    indexed = store.meta().get("indexed_commit", "")
    other_tree = bool(indexed) and indexed not in (inp.base, inp.head)
    if inp.source is not None:
        drop_synthesized_operators(cs, inp.source)
    drop_unused_deletions(store, cs, lambda headers: _including_files(store, headers))
    starts, unmapped, warnings = _starts(store, cs, other_tree)
    changed_paths = sorted({cf.path for cf in cs.functions} | {p for p, _, _ in cs.file_level})
    return Started(starts, unmapped, warnings, changed_paths, _families(changed_paths), store.benchmarks())


def reach(store: IndexStore, inp: AffectedInput, cfg: Config, started: Started) -> Reached:
    """The operators the change implements, whether it is shared infrastructure, and the walk on
    through composite callers when it is not."""
    cs = inp.changes
    backends = op_backends(store)
    starts, warnings = list(started.starts), []
    start_of = {s.node: s for s in starts}
    start_devices = {s.node: s.device for s in starts}
    own = walk_up(store, start_devices, cfg.max_depth, composite_hops=0, backends=backends)
    if not own.nodes_of(NodeKind.OP):
        fallback = _header_fallback(store, cs)
        if fallback:
            starts += fallback
            start_of.update({s.node: s for s in fallback if s.node not in start_of})
            start_devices.update({s.node: s.device for s in fallback if s.node not in start_devices})
            warnings.append("the changed header functions reach no operator: selection from their files (low)")
            own = walk_up(store, start_devices, cfg.max_depth, composite_hops=0, backends=backends)
    own_ops = sorted(own.key[n] for n in own.nodes_of(NodeKind.OP))
    sets = store.canary_sets()
    narrow = _narrow_paths(store, cs, starts) if len(own_ops) <= _NARROW_OPS else set()
    patterns = _pattern_canaries(
        sets,
        [p for p in started.changed_paths if p not in narrow],
        [cf.qualname for cf in cs.functions if cf.path not in narrow and cf.status != "added"],
    )
    unbounded = len(own_ops) > cfg.reach_bound
    inner: Reach | None = None
    if patterns or unbounded:
        walk, reached_ops = own, len(own_ops)
    else:
        walk, reached_ops, inner = _composite_walk(store, start_devices, cfg, backends, own)
    # the operators whose kernels call one the change implements (one step, no hubs); not
    # through a backward formula: a trace records the backward operators a test runs
    callers = [] if inner is None else sorted(
        {inner.key[n] for n in inner.nodes_of(NodeKind.OP)} - set(own_ops) - _via_backward(inner))
    own_devices = own.devices()
    devices = {own.key[n]: own_devices[n] for n in own.nodes_of(NodeKind.OP) if n in own_devices}
    return Reached(starts, start_of, own, own_ops, _own_layouts(store, own), devices, sets, patterns, unbounded, walk,
                   reached_ops, inner, callers, warnings)


def _own_layouts(store: IndexStore, own: Reach) -> dict[str, set[str]]:
    """Own operator -> the layouts the change runs for (from the walk, then the kernels' paths)."""
    own_layouts = own.layouts()
    layouts = {own.key[n]: own_layouts.get(n, {"any"}) for n in own.nodes_of(NodeKind.OP)}
    layouts.update(
        _layouts_from_paths(own, store.function_paths(_functions(own, own.chain_nodes(own.nodes_of(NodeKind.OP)))))
    )
    return layouts


def observe(store: IndexStore, inp: AffectedInput, cfg: Config, started: Started, reached: Reached) -> Observed:
    """The traced tests running the change's own operators (on its dtypes, its devices, not only
    through a hub) and, for tests traced without seeing inside kernels (meta/fake only) or when a
    plain C++ call (which no profiler records) reaches the change, its callers' operators."""
    families, benches = started.families, started.benches
    own, own_ops, inner = reached.own, reached.own_ops, reached.inner
    requests = [(own_ops, reached.layouts)]
    if inner is not None:
        inner_layouts = inner.layouts()
        requests.append(
            (reached.callers, {inner.key[n]: inner_layouts.get(n, {"any"}) for n in inner.nodes_of(NodeKind.OP)}))
    own_hits, *caller_hits = store.traced_hits(requests)
    own_hits, backward_warnings = _backward_runs(store, own, own_hits)
    own_dtypes = store.traced_dtypes(own_ops) if inp.dtypes is not None else []  # (none asked: any dtype)
    hits = scoped_hits = on_reached_devices(
        _usable(on_scope(own_hits, own_dtypes, inp.dtypes), families, benches), reached.devices)
    every = on_reached_devices(_usable(own_hits, families, benches), reached.devices)
    traced = _traced_benchmarks(benches, families)
    hits, branch_ops, hub_path = _drop_branch_hubs(own, own_ops, hits, traced, cfg, every)
    hub_names = tuple(f"called by {name} " for name in store.labels(sorted(hub_path)).values())
    hits = [h for h in hits if not (h.inferred and any(n in h.inferred for n in hub_names))]
    warnings = backward_warnings + ([] if not branch_ops else [
        f"{', '.join(sorted(branch_ops)[:6])}: reached only where other code calls the changed function,"
        " and run by most benchmarks: static, not observed (only tests running its own operators are selected)"
    ])
    executing = {h.bench for h in hits}  # benchmarks executing the change's own operators
    nested = store.nested_benchmarks(own_ops, reached.layouts) & traced  # ... inside other operators
    if inner is not None:
        hidden = _direct_callers(inner, reached.callers)
        past_hubs = {inner.key[n] for n in inner.nodes_of(NodeKind.OP) if hub_path & {m for m, _, _ in inner.chain(n)}}
        hits += _usable(
            [h for h in caller_hits[0] if (not h.kernels_seen or set(h.ops) & hidden) and not set(h.ops) <= past_hubs],
            families,
            benches,
        )
    return Observed(own_dtypes, scoped_hits, hits, executing, nested, traced, warnings)


def select(store: IndexStore, inp: AffectedInput, started: Started, reached: Reached, observed: Observed) -> Selected:
    """The benchmarks to run, most trusted source first: traced, compiled, static links, native
    samples, changed benchmark modules, executed Python lines."""
    families, benches, starts, start_of = started.families, started.benches, reached.starts, reached.start_of
    op_chains = reached.inner if reached.inner is not None else reached.own
    files = _chain_files(store, op_chains, reached.walk, observed.hits)
    compiled = _compiled_ops(store, starts)
    compile_hits = (  # a lowering replaces the operator where the compiled graph holds it, not inside kernels
        _usable(store.traced_hits([(sorted(compiled), None)], graph_level=True)[0], families, benches)
        if compiled else []
    )
    compile_mode = bool(inp.changes.compile_paths or compiled)
    sel = _Selection()
    op_node = {op_chains.key[n]: n for n in op_chains.nodes_of(NodeKind.OP)}
    _select_traced(sel, observed.hits, op_chains, op_node, start_of, files)
    _select_compiled(sel, compile_hits, compiled)
    warnings = [] if not compiled else [
        f"compile only: {', '.join(sorted({op.split('.')[0] for op in compiled})[:6])} run the changed Python"
        " under torch.compile (a decomposition or lowering); eager kernels are unchanged"
    ]
    _select_static(sel, reached.walk, start_of, files, benches)
    native_hits = store.native_hits(sorted(s.node for s in starts if s.confidence != Confidence.low))
    _select_sampled(sel, native_hits, start_of, families, benches)
    _mark_unobserved(sel, store, starts, native_hits, families)
    unused_modules = _select_changed_benchmarks(sel, inp.changes, benches)
    _select_executed(sel, inp.lines, benches)
    layer = store.generated_layer(sorted({s.node for s in starts}))
    layer_benches = _layer_benches(store, layer, observed.traced)
    _select_layer(sel, layer, layer_benches, benches)
    selected = _finish(sel, benches, families, ("eager", "compile") if compile_mode else ("eager",))
    return Selected(selected, compiled, compile_hits, compile_mode, unused_modules, warnings, layer, layer_benches)


def _chain_files(store: IndexStore, op_chains: Reach, walk: Reach, hits: list[TracedHit]) -> dict[int, str]:
    """The files of the functions on the chains to the traced operators and the benchmarks
    (explanations name them); the chains' labels are filled in."""
    hit_ops = {op for h in hits for op in h.ops}
    chains = [
        (op_chains, op_chains.chain_nodes([n for n in op_chains.nodes_of(NodeKind.OP) if op_chains.key[n] in hit_ops])),
        (walk, walk.chain_nodes(walk.nodes_of(NodeKind.BENCHMARK))),
    ]
    fill_labels(store, chains)
    return store.function_paths(sorted({n for r, nodes in chains for n in _functions(r, nodes)}))


def canaries(
    inp: AffectedInput, cfg: Config, started: Started, reached: Reached, observed: Observed, selected: Selected
) -> tuple[str, list[CanaryHit]]:
    """Why the change is broad ('' when it is not) and its canary sets: a quick first signal for
    shared infrastructure."""
    broad = _broad(reached.unbounded, len(reached.own_ops), observed.executing, observed.nested, observed.traced, cfg)
    canary = _canary_hits(reached.patterns, broad, reached.own_ops + sorted(selected.compiled),
                          observed.hits + selected.compile_hits, started.benches, reached.sets,
                          not reached.walk.truncated)
    layer = _layer_canaries(selected.layer, selected.layer_benches, started.benches, reached.sets)
    return broad, canary + _executed_canaries(inp.lines, started.benches, reached.sets) + layer


def document(
    store: IndexStore,
    inp: AffectedInput,
    cfg: Config,
    stages: tuple[Started, Reached, Observed, Selected],
    canary: tuple[str, list[CanaryHit]],
) -> AffectedDoc:
    """The document: the stages' results, the reached operators without a benchmark, the warnings."""
    started, reached, observed, selected = stages
    (broad, canary_hits), cs, walk = canary, inp.changes, reached.walk
    ops_reached = [k for _, k in sorted((walk.depth[n], walk.key[n]) for n in walk.nodes_of(NodeKind.OP))]
    covered, dispatch_gaps = _coverage(store, inp, started, reached, observed, ops_reached)
    return AffectedDoc(
        base=inp.base,
        head=inp.head,
        compile_mode=selected.compile_mode,
        shared_infrastructure=_shared(inp, reached, selected, broad),
        reach={
            "first_tier_ops": len(reached.own_ops),
            "ops": reached.reached_ops,
            "bound": cfg.reach_bound,
            "benchmarks_executing": len(observed.executing),
            "benchmarks_traced": len(observed.traced),
        },
        changed_functions=tuple(cs.functions),
        no_op_changes=tuple(cs.no_ops),
        benchmarks=tuple(selected.benchmarks),
        canary=tuple(canary_hits),
        ops=tuple(ops_reached),
        no_benchmark_ops=tuple(k for k in ops_reached if k not in covered),
        no_benchmark_gaps=tuple(dispatch_gaps),
        unmapped_changes=tuple(started.unmapped),
        unreached_functions=tuple(unreached(store, reached, selected, canary_hits)),
        ignored_files=tuple(cs.ignored + selected.unused_modules),
        warnings=tuple(
            inp.warnings + started.warnings + reached.warnings + observed.warnings + selected.warnings + cs.notes
            + inp.lines.warnings() + (["reach truncated at max_depth"] if walk.truncated else [])
        ),
    )


def unreached(store: IndexStore, reached: Reached, selected: Selected, canary_hits: list[CanaryHit]) -> list[Unreached]:
    """The changed functions of the index whose walk met no operator and no benchmark, and that no
    other source (a trace, line coverage, sampling, a canary set, a compile-mode registration)
    answered: perfq does not know what runs them, and says so rather than "no benchmark"."""
    walk = reached.walk
    if walk.truncated:
        return []
    answered = {r.function for b in selected.benchmarks for r in b.reasons}
    triggers = " ".join(h.trigger for h in canary_hits)
    by_label: dict[str, list[Start]] = {}
    for s in reached.starts:
        if s.step.kind != StepKind.FUNCTION or s.label in answered or s.step.name in triggers:
            continue
        if selected.compiled and ".py:" in s.label:
            continue  # a decomposition or lowering: answered in compile mode (_compiled_ops)
        by_label.setdefault(s.label, []).append(s)
    above = walk.up()
    ends = {n for n, k in walk.kind.items() if k in (NodeKind.OP, NodeKind.BENCHMARK)}
    ends |= {n for src, calls in walk.bound_callers.items() for n in (src, *(dst for dst, _ in calls))}
    answered_nodes = closure(walk.down(), ends)  # bound callers: Python lines answer them (bound_lines)
    out: list[Unreached] = []
    graph = store.graph()
    for starts in by_label.values():
        nodes = {s.node for s in starts}
        if nodes & answered_nodes:
            continue
        step, linked = starts[0].step, any(graph.into(n) for n in nodes)
        callers = len(closure(above, nodes)) - len(nodes)
        out.append(Unreached(step.file, step.name, callers, _unreached_reason(callers, linked)))
    return out


def _unreached_reason(callers: int, linked: bool) -> str:
    if not linked:
        return ("nothing in the index calls or registers it: whatever runs it (code generated at build time, "
                "a Python binding, a function pointer) is not linked, so perfq cannot tell which benchmarks do")
    if not callers:
        return "its callers and registrations in the index are for other devices or stop at shared hubs"
    return (f"the {callers} indexed function(s) above it reach no operator and no benchmark: what runs them is "
            "not linked, so perfq cannot tell which benchmarks do")


def _coverage(
    store: IndexStore, inp: AffectedInput, started: Started, reached: Reached, observed: Observed,
    ops_reached: list[str],
) -> tuple[set[str], list[DispatchGap]]:
    """The reached operators some benchmark covers, and the dispatch gaps: own operators no test
    runs on the change's layouts, dtypes or device (they count as uncovered)."""
    own_ops = reached.own_ops
    covered = _covered_ops(store, reached.walk, ops_reached)
    device = "cuda" if started.families == {"cuda"} else "cpu"
    run_ops = {o for h in observed.scoped_hits for o in h.ops}
    unrun = [op for op in own_ops if op not in run_ops]  # (an op a test runs: no gap)
    dispatch_gaps = gaps(unrun, reached.layouts, inp.dtypes, store.traced_layouts(unrun), observed.own_dtypes,
                         device) if unrun else []
    covered -= {op for op in own_ops if op.split(".")[0] in {g.op for g in dispatch_gaps}}
    return covered, dispatch_gaps


def _through_callers(own: Reach) -> set[str]:
    """The operators of ``own`` reached only because other code calls the changed function
    (a ``call`` edge on the way: the CUDA copy kernel calling the neg kernel on one branch)."""
    return {own.key[n] for n in own.nodes_of(NodeKind.OP) if any(kind in _CPP_CALLS for _, kind, _ in own.chain(n))}


def _drop_branch_hubs(
    own: Reach, own_ops: list[str], hits: list[TracedHit], traced: set[str], cfg: Config,
    every: list[TracedHit] | None = None,
) -> tuple[list[TracedHit], set[str], set[int]]:
    """Hits less those on operators a change reaches only through a caller (``_through_callers``)
    that most traced benchmarks run, when the change also implements operators of its own (a
    kernel registered for ``neg`` that ``copy_``'s kernel calls on its negative-bit branch): a
    widely run caller is a hub that selects only the tests running the change's own operators.
    Returns the hits kept, the hub operators left out and the functions on the way to them
    from the first caller (``copy_kernel_cuda``...: what runs the change only on a branch).
    ``every``: the hits before the change's dtypes narrowed them (a hub is one by every test
    running it, whatever its dtypes); ``hits`` when not given."""
    through = _through_callers(own)
    if not through or not set(own_ops) - through:
        return hits, set(), set()
    on_through = [h for h in hits if set(h.ops) <= through]
    benches = {h.bench for h in (hits if every is None else every) if set(h.ops) <= through}
    if len(benches) < max(_SHARED_MIN_BENCHMARKS, cfg.shared_fraction * len(traced)):
        return hits, set(), set()
    dropped = {op.split(".")[0] for h in on_through for op in h.ops}
    path: set[int] = set()
    for node in own.nodes_of(NodeKind.OP):
        if own.key[node] in through:
            chain = own.chain(node)
            first = next(i for i, (_, kind, _) in enumerate(chain) if kind in _CPP_CALLS)
            path |= {n for n, _, _ in chain[first:] if own.kind.get(n) == NodeKind.FUNCTION}
    return [h for h in hits if not set(h.ops) <= through], dropped, path


def _compiled_ops(store: IndexStore, starts: list[Start]) -> dict[str, str]:
    """Operator -> why, for the changed Python functions registered as an aten operator's
    decomposition or inductor lowering (``@register_decomposition(aten.hardswish)``,
    ``@register_lowering([aten.cat.default])``): what torch.compile runs for the operator."""
    functions = sorted({s.node for s in starts if s.confidence == Confidence.high and ".py:" in s.label})
    bases: dict[str, str] = {}
    for _, decorator, ref in store.decorator_refs(functions, list(_COMPILE_REGISTRARS)):
        parts = ref.split(".")
        if "aten" in parts[:-1]:
            base = parts[len(parts) - parts[::-1].index("aten")]
            bases.setdefault(base, f"@{decorator}(aten.{base})")
    return {name: bases[base] for _, name, base in store.op_nodes(sorted(bases)) if base in bases}


def _select_compiled(sel: _Selection, hits: list[TracedHit], compiled: dict[str, str]) -> None:
    """Benchmarks whose traced tests execute an operator the change decomposes or lowers: in
    compile mode only."""
    for h in hits:
        op = h.ops[0]
        chain = (ChainStep(StepKind.OP, op, via=compiled.get(op, "compile")),
                 ChainStep(StepKind.BENCHMARK, h.bench, via=f"traced: runs {op.split('.')[0]}"))
        sel.add(h.bench, Source.traced, Confidence.high, Reason(compiled.get(op, op), chain),
                tests=h.tests, modules=(h.module,), ops=h.ops, modes=("compile",))


def _via_backward(inner: Reach) -> set[str]:
    """The operators of ``inner`` reached from the change through a backward formula only (a
    forward operator whose derivative runs the changed backward operator or a function its
    formula calls)."""
    return {
        inner.key[n]
        for n in inner.nodes_of(NodeKind.OP)
        if any(kind in (EdgeKind.BACKWARD, EdgeKind.FORMULA) for _, kind, _ in inner.chain(n))
    }


def _via_formula(own: Reach) -> set[str]:
    """The operators of ``own`` only whose backward runs the change: reached through a function
    their derivatives.yaml formula calls (``addmm``'s ``mm_mat1_backward``), and by no explored
    edge from a node the walk reached without one (a kernel calling the changed code runs it forward)."""

    def via(node: int) -> bool:
        return any(kind == EdgeKind.FORMULA for _, kind, _ in own.chain(node))

    formula = {n for n in own.nodes_of(NodeKind.OP) if via(n)}
    forward = {src for dst, src, kind, _ in own.into_op if src in formula and kind != EdgeKind.FORMULA and not via(dst)}
    return {own.key[n] for n in formula - forward}


_IN_BACKWARD = "in their backward pass (their module's forward tests run it)"


def _backward_runs(store: IndexStore, own: Reach, hits: list[TracedHit]) -> tuple[list[TracedHit], list[str]]:
    """For the operators only whose backward runs the change (``_via_formula``), the traced tests
    that run their backward (IndexStore.backward_hits) in place of those that run them forward,
    which never run it. When no gradient test was traced (the traces cannot tell), the tests running
    them stay; a warning names the operators no traced test runs the backward of. Returns the hits
    and the warnings."""
    formula_ops = _via_formula(own)
    if not formula_ops:
        return hits, []
    backward = store.backward_hits(sorted(formula_ops), _IN_BACKWARD)
    covered = {op for h in backward for op in h.ops}
    unseen = sorted({op.split(".")[0] for op in formula_ops - covered})
    known = store.traced_gradient_tests() > 0
    warnings = [] if not unseen else [
        f"{', '.join(unseen[:6])}: the change runs in their backward (a derivatives.yaml formula calls it) and no"
        " traced test runs their backward: " + ("nothing selected for them" if known else
                                                  "no gradient test was traced, the tests running them are selected")
    ]
    dropped = formula_ops if known else covered
    return [h for h in hits if not set(h.ops) <= dropped] + backward, warnings


def _direct_callers(inner: Reach, callers: list[str]) -> set[str]:
    """Of the operators one composite step above the change, those whose kernels call the
    changed code as plain C++ functions (``at::native::split(...)``), past the dispatcher: a
    trace that saw inside kernels shows them run, never the operator the change implements."""
    node_of = {inner.key[n]: n for n in inner.nodes_of(NodeKind.OP)}
    return {
        op
        for op in callers
        if not any(kind in _THROUGH_DISPATCHER for _, kind, _ in inner.chain(node_of[op]))
    }


_THROUGH_DISPATCHER = (EdgeKind.OP_CALL, EdgeKind.UPSTREAM_COMPOSITE, EdgeKind.BACKWARD)


def _composite_walk(
    store: IndexStore, start_devices: dict[int, str], cfg: Config, backends: dict[str, set[str]], own: Reach
) -> tuple[Reach, int, Reach | None]:
    """The walk on through composite callers, except out of hub operators (called from more
    than ``hub_fanout`` C++ functions: their callers are most of ATen), with as many
    composite steps as keep it within ``reach_bound`` operators. Returns the walk, the
    operator count of the widest walk tried, and the one-step walk (None if over the bound).

    A walk with more steps reaches a superset, so the unbounded walk is tried right after
    the one-step walk: within the bound it is the answer, and the two- and three-step walks
    are only needed when it is not (the first of them over the bound stops the search)."""

    def walk(hops: int | None) -> Reach:
        return walk_up(
            store, start_devices, cfg.max_depth, composite_hops=hops, hub_fanout=cfg.hub_fanout, backends=backends
        )

    one_step = walk(1)
    if len(one_step.nodes_of(NodeKind.OP)) > cfg.reach_bound:
        return own, len(one_step.nodes_of(NodeKind.OP)), None
    best = one_step
    unbounded = walk(None)
    if len(unbounded.nodes_of(NodeKind.OP)) <= cfg.reach_bound:
        return unbounded, len(unbounded.nodes_of(NodeKind.OP)), one_step
    for hops in (2, 3):
        wider = walk(hops)
        if len(wider.nodes_of(NodeKind.OP)) > cfg.reach_bound:
            return best, len(wider.nodes_of(NodeKind.OP)), one_step
        best = wider
    return best, len(unbounded.nodes_of(NodeKind.OP)), one_step


_LAYOUT_DIRS = (("/quantized/", "quantized"), ("/sparse/", "sparse"), ("/nested/", "nested"))


def _layout_dir(path: str) -> str:
    return next((layout for part, layout in _LAYOUT_DIRS if part in path), "")


def _layouts_from_paths(own: Reach, paths: dict[int, str]) -> dict[str, set[str]]:
    """A change in quantized (sparse, nested) code that reaches a general operator through a
    general kernel (copy_ through copy_impl's quantized branch) only changes that operator on
    quantized tensors; an operator whose kernel is itself quantized code keeps its layouts, and
    so does one reached through a virtual call (the quantized RNN cells calling packed weights'
    ``apply_dynamic``: dispatched on the weights' class, on dense inputs)."""
    out: dict[str, set[str]] = {}
    for node in own.nodes_of(NodeKind.OP):
        chain = own.chain(node)
        hint = _layout_dir(paths.get(chain[0][0], ""))
        kernels = [n for n, _, _ in chain if own.kind.get(n) == NodeKind.FUNCTION]
        if any(kind == EdgeKind.VIRTUAL_CALL for _, kind, _ in chain):
            continue
        if hint and kernels and not _layout_dir(paths.get(kernels[-1], "")):
            out[own.key[node]] = {hint}
    return out


def _narrow_paths(store: IndexStore, cs: ChangeSet, starts: list[Start]) -> set[str]:
    """Changed files whose changes are narrow whatever their path says: only functions the
    change adds or that at most one function calls, no line outside them (a pstl helper with
    one caller, new launch overloads in a device-runtime header). When the change implements
    few operators (``_NARROW_OPS``), their path does not make it shared infrastructure; what
    they reach still can (the breadth rules)."""
    wide = {p for p, _, _ in cs.file_level}
    graph = store.graph()
    for s in starts:
        path = s.label.split(":", 1)[0]
        callers = {src for src, kind in graph.into(s.node) if kind in _CPP_CALLS}
        if s.confidence != Confidence.high or len(callers) > 1:
            wide.add(path)
    # (a Python module of the compiler acts through torch.compile, which no call graph shows)
    return {cf.path for cf in cs.functions if not cf.path.endswith(".py")} - wide


def _header_fallback(store: IndexStore, cs: ChangeSet) -> list[Start]:
    """Starts for changed header functions whose callers are not linked (templates called
    through overloads, functors): every function of their headers and of the headers' includers."""
    headers = sorted(
        {cf.path for cf in cs.functions if _is_header(cf.path) and cf.status != "added"}
    )
    if not headers:
        return []
    rows = store.functions_in(sorted(set(headers).union(*store.includers(headers).values())))
    why = "a changed header function whose callers the index does not link"
    return [Start(r.id, ChainStep(StepKind.FILE, r.path, detail="header fallback"), Confidence.low, why,
                  device_of_path(r.path)) for r in rows]


def _select_traced(
    sel: _Selection,
    hits: list[TracedHit],
    own: Reach,
    op_node: dict[str, int],
    start_of: dict[int, Start],
    files: dict[int, str],
) -> None:
    """Benchmarks whose traced tests (usable hits) execute an operator the change implements."""
    by_bench: dict[str, list[TracedHit]] = {}
    for h in hits:
        by_bench.setdefault(h.bench, []).append(h)
    for bench, bench_hits in by_bench.items():
        ops = list(dict.fromkeys(op for h in bench_hits for op in h.ops))
        source = Source.inferred if all(h.inferred for h in bench_hits) else Source.traced
        tests = [t for h in bench_hits for t in h.tests]
        modules = [h.module for h in bench_hits]
        for op in ops[:_REASONS_KEPT]:
            node = op_node[op]
            chain = own.chain(node)
            start = start_of.get(chain[0][0])
            how, inferred = _hit_text(bench_hits, op)
            steps = _chain(own, node, files) + (ChainStep(StepKind.BENCHMARK, bench, via=how),)
            weak = inferred or any(kind in _WEAK_EDGES for _, kind, _ in chain)
            confidence = start.confidence if start else Confidence.low
            if weak and confidence == Confidence.high:
                confidence = Confidence.medium
            sel.add(
                bench,
                source,
                confidence,
                Reason(start.label if start else steps[0].text, steps),
                tests=tests,
                modules=modules,
                ops=ops,
                distance=own.depth.get(node, 0),
            )


def _select_sampled(
    sel: _Selection, hits: list[NativeHit], start_of: dict[int, Start], families: set[str],
    benches: dict[str, BenchmarkInfo],
) -> None:
    """Benchmarks whose sampled tests (CPU, perf) have a changed function on their stacks: seen
    run, even where no static link reaches it (virtual calls, lambdas, function pointers)."""
    if not _device_ok("cpu", families):
        return
    for hit in hits:
        start = start_of.get(hit.function_id)
        if start is None or hit.bench not in benches:
            continue
        seen = ChainStep(StepKind.NOTE, f"sampled: {hit.share:.0%} of test {hit.test}'s samples")
        sel.add(hit.bench, Source.sampled, start.confidence, Reason(start.label, (start.step, seen)),
                tests=(hit.test,), modules=(hit.module,) if hit.module else ())


_COMPILED_SOURCES = (".cpp", ".cc")  # a function defined in a header may be inlined: never seen alone


def _mark_unobserved(
    sel: _Selection, store: IndexStore, starts: list[Start], hits: list[NativeHit], families: set[str]
) -> None:
    """Benchmarks selected through a static chain or a trace whose sampled tests (those that run
    the reached operators, when the trace names them) never have a changed C++ function on their
    stacks: "static, not observed", kept at a lower confidence."""
    functions = [s.node for s in starts if s.confidence == Confidence.high]
    paths = store.function_paths(functions)
    if not _device_ok("cpu", families) or not functions or len(paths) < len(set(functions)):
        return
    if not all(p.endswith(_COMPILED_SOURCES) for p in paths.values()):
        return
    seen = {h.bench for h in hits}
    static = (Source.traced, Source.static)
    candidates = sorted(n for n, e in sel.entries.items() if e["source"] in static and n not in seen)
    label = next(s.label for s in starts if s.confidence == Confidence.high)
    for name, sampled in store.sampled_tests(candidates).items():
        e = sel.entries[name]
        tests = sampled & set(e["tests"]) if e["tests"] else sampled
        if not tests:
            continue
        first = sorted(tests)[0]
        more = f" and {len(tests) - 1} more" if len(tests) > 1 else ""
        why = f"static, not observed: on no stack of sampled test {first}{more} (from 1% of its samples)"
        e["reasons"].insert(0, Reason(label, (ChainStep(StepKind.NOTE, why),)))
        if e["confidence"] == Confidence.high:
            e["confidence"] = Confidence.medium


def _hit_text(hits: list[TracedHit], op: str) -> tuple[str, bool]:
    """How a benchmark's tests are known to run ``op`` (traced, or inferred and why), and
    whether only by inference."""
    on = [h for h in hits if op in h.ops]
    base, n_tests = op.split(".")[0], len({t for h in on for t in h.tests})
    if all(h.inferred for h in on):
        return f"inferred: {n_tests} test(s) run {base}, {on[0].inferred}", True
    return f"traced: {n_tests} test(s) execute {base}", False


def _select_static(
    sel: _Selection, walk: Reach, start_of: dict[int, Start], files: dict[int, str], benches: dict[str, BenchmarkInfo]
) -> None:
    """Benchmarks the walk reaches in their code: those without a usable trace, and any
    reached by a path with no operator on it (a Python change: traces hold operators only)."""
    for node in walk.nodes_of(NodeKind.BENCHMARK):
        name = walk.key[node]
        chain = walk.chain(node)
        via_op = any(walk.kind.get(n) == NodeKind.OP for n, _, _ in chain)
        if via_op and benches.get(name) is not None and benches[name].trace_status in _TRACED:
            continue
        start = start_of.get(chain[0][0])
        weak = any(kind in _WEAK_EDGES for _, kind, _ in chain)
        confidence = start.confidence if start else Confidence.low
        if weak and confidence == Confidence.high:
            confidence = Confidence.medium
        tests = {d.split(":", 1)[0] for d in walk.into_benchmark.get(node, ()) if ":" in d}
        ops = [walk.key[n] for n, _, _ in chain if walk.kind.get(n) == NodeKind.OP]
        steps = _chain(walk, node, files)
        sel.add(
            name,
            Source.static,
            confidence,
            Reason(start.label if start else steps[0].text, steps),
            modules=sorted(t for t in tests if t),
            ops=ops,
            distance=walk.depth[node],
        )


def _select_changed_benchmarks(sel: _Selection, cs: ChangeSet, benches: dict[str, BenchmarkInfo]) -> list[str]:
    """Changed benchmark files, and the benchmarks that import a changed module of their tree
    (shared configs); returns the changed modules no benchmark imports."""
    unused = []
    for path in cs.benchmark_files:  # a new one too: it is not in the index yet
        changed = ChainStep(StepKind.BENCHMARK_FILE, path)
        sel.add(Path(path).stem, Source.changed, Confidence.high, Reason(path, (changed,)))
    by_file = {b.file: name for name, b in benches.items()}
    for path in cs.benchmark_modules:
        users = sorted(by_file[f] for f in cs.benchmark_importers.get(path, ()) if f in by_file)
        for name in users:
            why = ChainStep(StepKind.BENCHMARK_FILE, benches[name].file, detail=path)
            sel.add(name, Source.changed, Confidence.high, Reason(path, (why,)))
        if not users:
            unused.append(f"{path} (no benchmark imports it)")
    return unused


def _select_executed(sel: _Selection, truth: LineTruth, benches: dict[str, BenchmarkInfo]) -> None:
    """Benchmarks whose traced tests ran a changed Python line, with those tests; and those whose
    file reads a changed module-level name of a shared benchmark module."""
    for h in truth.hits:
        if h.bench not in benches:
            continue
        changed = ChainStep(StepKind.FUNCTION, h.where, file=h.path)
        via = f"executed: {len(h.tests)} traced test(s) ran line {h.lines[0]}"
        ran = ChainStep(StepKind.BENCHMARK, h.bench, via=via)
        sel.add(h.bench, Source.executed, Confidence.high, Reason(f"{h.path}:{h.where}", (changed, ran)), tests=h.tests)
    by_file = {b.file: name for name, b in benches.items()}
    for r in truth.readers:
        for name in sorted(by_file[f] for f in r.readers if f in by_file):
            why = ChainStep(StepKind.BENCHMARK_FILE, benches[name].file, detail=f"{r.path} ({r.name})")
            sel.add(name, Source.changed, Confidence.high, Reason(f"{r.path}:{r.name}", (why,)))


def _layer_why(hit: LayerHit) -> str:
    """Why a function of the generated layer runs in every operator wrapper."""
    short = hit.named.split("::")[-1]
    via = "" if hit.depth == 0 else f" ({hit.qualname} is called by {short})"
    return f"run by every operator's generated wrapper: {hit.source}:{hit.line} names {short}{via}"


def _layer_benches(store: IndexStore, layer: list[LayerHit], traced: set[str]) -> frozenset[str]:
    """The traced benchmarks a change to the generated layer runs in: every one (each runs
    operators' wrappers), or, when only a backend's helper (a name with a placeholder:
    ``at::detail::empty_strided_{}``) or what it calls is changed, those running a structured
    operator: the generated structured wrappers create and restride their outputs through it
    (``create_out``, ``maybe_create_proxy``); a view or a hand-written kernel does not."""
    if not layer:
        return frozenset()
    if not _helpers_only(layer):
        return frozenset(traced)
    runs = store.traced_hits([(store.structured_ops(), None)])[0]
    return frozenset({h.bench for h in runs} & traced)


def _helpers_only(layer: list[LayerHit]) -> bool:
    """Whether the changed functions of the layer are only backend helpers the generated code
    names with a placeholder (``at::detail::empty_strided_{}``) and what those call."""
    return all(WILDCARD in hit.named for hit in layer)


def _select_layer(
    sel: _Selection, layer: list[LayerHit], runners: frozenset[str], benches: dict[str, BenchmarkInfo]
) -> None:
    """A changed function every generated operator wrapper runs: every benchmark whose wrappers
    run it (``runners``), like a Python line every traced test runs."""
    if not layer:
        return
    hit = layer[0]
    changed = ChainStep(StepKind.FUNCTION, hit.qualname, detail=f"{hit.source}:{hit.line} {hit.named}")
    for name in sorted(runners & set(benches)):
        ran = ChainStep(StepKind.BENCHMARK, name, via=_layer_why(hit))
        sel.add(name, Source.executed, Confidence.high, Reason(hit.qualname, (changed, ran)))


def _layer_canaries(
    layer: list[LayerHit], runners: frozenset[str], benches: dict[str, BenchmarkInfo], sets: list[CanarySet]
) -> list[CanaryHit]:
    """A changed function every generated operator wrapper runs is shared infrastructure: the
    executed-by-all kind, with the broad set's representative sample (those of it whose wrappers
    run the change, when the traces say which)."""
    if not layer:
        return []
    s = next((s for s in sets if s.name == "broad"), None)
    sample = [b for b in (s.benchmarks if s else ()) if b in benches]
    if runners and _helpers_only(layer):
        sample = [b for b in sample if b in runners]
    members = tuple(CanaryBenchmark(b, benches[b].file) for b in sample)
    description = "C++ the code generators emit into every operator's wrapper (templates and generators)"
    return [CanaryHit("generated-wrapper", _layer_why(layer[0]), description, members)]


def _executed_canaries(truth: LineTruth, benches: dict[str, BenchmarkInfo], sets: list[CanarySet]) -> list[CanaryHit]:
    """A changed line every line-traced test runs is shared infrastructure, whatever its file."""
    if not truth.every_test:
        return []
    s = next((s for s in sets if s.name == "broad"), None)
    members = tuple(CanaryBenchmark(b, benches[b].file) for b in (s.benchmarks if s else ()) if b in benches)
    why = f"executed by every traced test: {', '.join(truth.every_test[:3])}"
    return [CanaryHit("executed-by-all", why, "a line every benchmark test runs (Python line coverage)", members)]


def _broad(
    unbounded: bool, n_ops: int, executing: set[str], nested: set[str], traced: set[str], cfg: Config
) -> str:
    """Why a change is shared infrastructure by its breadth ('' when it is not): it implements
    more than ``reach_bound`` operators (``unbounded``), its operators are executed by ``shared_fraction``
    of the traced benchmarks, or the traces saw them run inside other operators (``nested``: a
    building block of theirs, like ``copy_`` inside ``to``, ``clone`` and ``cat``) in as many
    benchmarks as ``_SHARED_MIN_BENCHMARKS`` (below it, a small suite runs whole)."""
    if unbounded:
        return f"implements {n_ops} operators (bound {cfg.reach_bound})"
    if len(executing) >= max(_SHARED_MIN_BENCHMARKS, cfg.shared_fraction * len(traced)):
        return (
            f"its operators are executed by {len(executing)} of the {len(traced)} traced benchmarks"
            f" (shared_fraction {cfg.shared_fraction:g})"
        )
    if len(nested) >= _SHARED_MIN_BENCHMARKS:
        return f"its operators run inside other operators in {len(nested)} of the {len(traced)} traced benchmarks"
    return ""


def _canary_hits(
    patterns: list[tuple[CanarySet, str]],
    broad: str,
    own_ops: list[str],
    hits: list[TracedHit],
    benches: dict[str, BenchmarkInfo],
    sets: list[CanarySet],
    walk_complete: bool = True,
) -> list[CanaryHit]:
    """Canary sets for shared infrastructure: the fewest traced benchmarks covering the
    operators the change implements; when traces cover none of them (no evidence of which
    benchmarks run the change: the dispatcher), or the walk to them was cut at max_depth (it
    found only some: an allocator), also the set's own list and the suite's representative
    sample (the broad set's), indexed benchmarks only."""
    covers: dict[str, set[str]] = {}
    for h in hits:  # usable hits only
        covers.setdefault(h.bench, set()).update(op.split(".")[0] for op in h.ops)
    chosen = set_cover({o.split(".")[0] for o in own_ops}, covers)
    sample = next((s.benchmarks for s in sets if s.name == "broad"), ())

    def members(s: CanarySet | None) -> tuple[CanaryBenchmark, ...]:
        names = chosen if chosen and walk_complete else [*chosen, *(s.benchmarks if s else ()), *sample]
        names = list(dict.fromkeys(names))
        return tuple(CanaryBenchmark(b, benches[b].file) for b in names if b in benches)

    out = [
        CanaryHit(s.name, f"changed {hit} matches the {s.name} set", s.description, members(s)) for s, hit in patterns
    ]
    if broad and not patterns:
        s = next((s for s in sets if s.name == "broad"), None)
        out.append(CanaryHit("broad", broad, s.description if s else "shared infrastructure", members(s)))
    return out


def _covered_ops(store: IndexStore, walk: Reach, ops: list[str]) -> set[str]:
    """Reached operators some benchmark executes (a trace) or calls (the benchmark's code)."""
    covered = store.executed(ops)
    reaching = reaching_benchmarks(walk)
    covered |= {walk.key[n] for n in walk.nodes_of(NodeKind.OP) if n in reaching}
    return covered


def _finish(
    sel: _Selection, benches: dict[str, BenchmarkInfo], families: set[str], modes: tuple[str, ...]
) -> list[SelectedBenchmark]:
    out = []
    for name, e in sorted(sel.entries.items(), key=lambda kv: (kv[1]["distance"], kv[0])):
        row = benches.get(name)
        out.append(
            SelectedBenchmark(
                name=name,
                file=row.file if row else name,
                tests=tuple(sorted(e["tests"])),
                modules=tuple(sorted(e["modules"])),
                ops=tuple(e["ops"]),
                modes=tuple(m for m in _MODES if m in e["modes"] or (e["every_mode"] and m in modes)),
                devices=_devices(families, row.devices if row else ()),
                confidence=e["confidence"],
                source=e["source"],
                reasons=tuple(e["reasons"][:_REASONS_KEPT]),
            )
        )
    return out
