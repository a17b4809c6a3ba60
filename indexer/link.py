"""Linking: per-file facts in, index tables out (a pure function), as a schedule over the
rules of indexer/rules/ (one module per construct family: its tables and its step at each
phase). Runs the phases in order and, inside a phase, the rules in the order of RULES.
"""

from __future__ import annotations

from indexer.benchmarks import BenchmarkFacts
from indexer.build_config import BuildMacros
from indexer.derivatives import Derivative
from indexer.facts import FileFacts
from indexer.generated_layer import TemplateNames
from indexer.native_yaml import OpFacts
from indexer.rules import RULES
from indexer.rules.base import LinkContext, Phase, Tables
from indexer.trace import FileTrace
from schema.model import (
    CallEdgeRow,
    CallRow,
    FileRow,
    FunctionRow,
    IncludeRow,
    Lang,
    NodeRow,
    OpCallRow,
    ReachEdgeRow,
)

__all__ = ["NativeLink", "Tables", "link"]


def link(
    files: list[FileFacts],
    benches: list[BenchmarkFacts],
    ops: list[OpFacts],
    canaries: list[dict],
    traces: dict[str, FileTrace] | None = None,
    derivatives: list[Derivative] | None = None,
    build: BuildMacros | None = None,
    templates: TemplateNames | None = None,
) -> Tables:
    """All index tables from the extracted facts (``traces``: benchmark file -> its traced
    tests, see indexer/trace.py; ``derivatives``: derivatives.yaml's entries; ``build``: the
    target build's macros, None: every ``#if`` branch kept; ``templates``: the names the code
    generators' C++ uses): the C++ files first, then the Python files (see NativeLink)."""
    native = NativeLink([f for f in files if f.lang != Lang.PYTHON], ops, build)
    python = [f for f in files if f.lang == Lang.PYTHON]
    return native.finish(python, benches, canaries, traces, derivatives, templates)


class NativeLink:
    """The link in steps a build can overlap with its own work. On constructing, the phases
    that need only the C++ files and the operators (declare, native), so that a build can run
    them while its Python files are still being parsed; then ``link_python`` (python,
    references), ``link_benchmarks`` and ``pack`` (``finish``: the three)."""

    # tables whose rows after the native phases the later phases keep as they are, in place, and only append to
    FINAL_HEADS = tuple(
        row_type.TABLE
        for row_type in (FileRow, FunctionRow, CallRow, CallEdgeRow, OpCallRow, IncludeRow, NodeRow, ReachEdgeRow)
    )

    def __init__(self, files: list[FileFacts], ops: list[OpFacts], build: BuildMacros | None = None) -> None:
        self.ctx = LinkContext(files, ops, build)
        self._run(Phase.DECLARE, Phase.NATIVE)
        self.ctx.__dict__.pop("cpp_linker", None)  # ~30 MiB on PyTorch

    def _run(self, *phases: Phase) -> None:
        for phase in phases:
            for rule in RULES:
                self.ctx.run(rule, phase)

    def heads(self) -> dict[str, list[tuple]]:
        """The rows of the FINAL_HEADS tables so far: the first rows of what ``pack`` returns."""
        return {table: self.ctx.tables.rows[table] for table in self.FINAL_HEADS}

    def finish(
        self,
        python_files: list[FileFacts],
        benches: list[BenchmarkFacts],
        canaries: list[dict],
        traces: dict[str, FileTrace] | None = None,
        derivatives: list[Derivative] | None = None,
        templates: TemplateNames | None = None,
    ) -> Tables:
        """All index tables: the native phases' and those of ``python_files`` and ``benches`` (call once)."""
        self.link_python(python_files, derivatives, templates)
        self.link_benchmarks(benches, traces)
        return self.pack(canaries)

    def link_python(
        self,
        python_files: list[FileFacts],
        derivatives: list[Derivative] | None = None,
        templates: TemplateNames | None = None,
    ) -> None:
        """The Python files, and what needs them numbered first (``derivatives``: derivatives.yaml's
        entries; ``templates``: the names the code generators' C++ uses; call once)."""
        self.ctx.python_files, self.ctx.derivatives = python_files, derivatives or []
        self.ctx.templates = templates or self.ctx.templates
        self._run(Phase.PYTHON, Phase.REFERENCES)

    def link_benchmarks(self, benches: list[BenchmarkFacts], traces: dict[str, FileTrace] | None = None) -> None:
        """The benchmarks and their traces (``traces``: benchmark file -> its traced tests, see
        indexer/trace.py; after link_python; call once)."""
        self.ctx.benches, self.ctx.traces = benches, traces or {}
        self._run(Phase.BENCHMARKS)

    def pack(self, canaries: list[dict]) -> Tables:
        """All index tables: the graph packed, and the canary sets (after link_benchmarks)."""
        self.ctx.canaries = canaries
        self._run(Phase.PACK)
        return self.ctx.tables
