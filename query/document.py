"""The ``perfq affected`` document: what a change selects and why (README: JSON shape). The query
(query/affected.py) makes it; the renderers, ``perfq run``'s plan, bisect's ``--prune`` and the IR flag
read it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from common.documents import to_json
from query.changes import ChangedFunction
from query.model import Chain, ChainStep, StepKind


class Confidence(str, Enum):
    high = "high"  # a changed function of the index, traced or direct chain
    medium = "medium"  # through callers of a function the index lacks, or a class hierarchy
    low = "low"  # lines outside any function: every function of the file (and its includers)
    canary = "canary"  # only as a member of a canary set


class Source(str, Enum):
    traced = "traced"  # a traced test executes a reached operator
    inferred = "inferred"  # a test of another device is taken to run one inside that device's kernels
    static = "static"  # the benchmark's code reaches it (no usable trace, or a Python path)
    sampled = "sampled"  # the changed function is on a sampled test's stacks (perfq index --native)
    changed = "changed"  # the benchmark file itself changed
    executed = "executed"  # a traced test ran the changed Python line (line coverage)


@dataclass(frozen=True)
class Reason:
    function: str
    chain: Chain  # written as the steps' texts

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class SelectedBenchmark:
    name: str
    file: str
    tests: tuple[str, ...]  # the framework's test names that execute the change ('' list: all)
    modules: tuple[str, ...]  # their --operators names
    ops: tuple[str, ...]
    modes: tuple[str, ...]
    devices: tuple[str, ...]
    confidence: Confidence
    source: Source
    reasons: tuple[Reason, ...]
    ir_changed: tuple[str, ...] | None = field(default=None, metadata={"omit_if_none": True})

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class CanaryBenchmark:
    name: str
    file: str

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class CanaryHit:
    set: str
    trigger: str
    description: str
    benchmarks: tuple[CanaryBenchmark, ...]

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class Unmapped:
    file: str
    function: str | None
    lines: tuple[int, ...]
    reason: str

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class Unreached:
    """A changed function of the index from which perfq finds no operator and no benchmark: what
    runs it, if anything does, is outside what the index links (``callers``: indexed functions
    walked above it)."""

    file: str
    function: str
    callers: int
    reason: str

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class DispatchGap:
    """An operator the change implements that benchmarks run, but never on the dispatch key and
    dtypes the changed lines run for (query/dtype_gaps.py)."""

    op: str
    dispatch_key: str  # CPU, QuantizedCPU...
    dtypes: str  # 'floating', 'integral, bool', 'any dtype'
    benchmarked_on: tuple[str, ...]  # what its benchmarks run: 'QuantizedCPU', 'CPU integral'

    @property
    def text(self) -> str:
        only = f" (benchmarked only on {'; '.join(self.benchmarked_on)})" if self.benchmarked_on else ""
        return f"{self.op}, {self.dispatch_key}, {self.dtypes}: NO BENCHMARK{only}"

    def to_json(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class AffectedDoc:
    """The ``perfq affected`` document (README: JSON shape)."""

    base: str
    head: str
    compile_mode: bool
    shared_infrastructure: bool
    reach: dict[str, int]
    changed_functions: tuple[ChangedFunction, ...]
    no_op_changes: tuple[ChangedFunction, ...]
    benchmarks: tuple[SelectedBenchmark, ...]
    canary: tuple[CanaryHit, ...]
    ops: tuple[str, ...]
    no_benchmark_ops: tuple[str, ...]
    unmapped_changes: tuple[Unmapped, ...]
    ignored_files: tuple[str, ...]
    warnings: tuple[str, ...]
    # the operators of no_benchmark_ops that benchmarks run, but not on the change's dispatch key or dtypes
    no_benchmark_gaps: tuple[DispatchGap, ...] = ()
    # changed functions whose walk reaches no operator and no benchmark: perfq does not know what runs them
    unreached_functions: tuple[Unreached, ...] = ()
    ir_changed_kernels: tuple[str, ...] | None = field(default=None, metadata={"omit_if_none": True})

    def to_json(self) -> dict:
        return to_json(self)

    def all_benchmarks(self) -> list[SelectedBenchmark]:
        """Selected benchmarks plus those of triggered canary sets (each once)."""
        seen = {b.name for b in self.benchmarks}
        out = list(self.benchmarks)
        modes = ("eager", "compile") if self.compile_mode else ("eager",)
        for hit in self.canary:
            for b in hit.benchmarks:
                if b.name not in seen:
                    seen.add(b.name)
                    chain = (ChainStep(StepKind.CANARY, hit.set, detail=hit.trigger),)
                    out.append(
                        SelectedBenchmark(
                            b.name,
                            b.file,
                            (),
                            (),
                            (),
                            modes,
                            ("cpu",),
                            Confidence.canary,
                            Source.static,
                            (Reason("", chain),),
                        )
                    )
        return out


def flag_ir_changes(doc: AffectedDoc, changed_kernels: set[str], kernel_map: dict[str, list[str]]) -> AffectedDoc:
    """The document with each benchmark whose Triton kernels' IR changed between two
    collections marked. A benchmark's kernels are those ``kernel_map`` lists for it
    (``[tool.perfq.ir.benchmarks]``) plus kernels whose module is the benchmark itself
    (``softmax_test:kernel``, ``pt.softmax_test:kernel``)."""

    def mine(name: str) -> tuple[str, ...]:
        found = {k for k in changed_kernels if k.split(":", 1)[0].rsplit(".", 1)[-1] == name}
        return tuple(sorted(found | (changed_kernels & set(kernel_map.get(name, [])))))

    return replace(
        doc,
        ir_changed_kernels=tuple(sorted(changed_kernels)),
        benchmarks=tuple(replace(b, ir_changed=mine(b.name)) for b in doc.benchmarks),
    )


def names(doc: AffectedDoc) -> list[str]:
    return [b.name for b in doc.all_benchmarks()]
