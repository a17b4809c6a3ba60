"""What `perfq run` and `perfq import` print as documents (``--format json|markdown``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.documents import to_json
from common.render import md_code, md_table, md_text
from perfq.run.report import ComparisonDocument, render_markdown

if TYPE_CHECKING:
    from perfq.run.runs import Run
    from schema.result_file_store import ImportCounts


@dataclass(frozen=True)
class RunSide:
    """One stored run of `perfq run`: its id, side, status and what it measured."""

    id: str
    side: str
    status: str
    samples: int
    failures: tuple[str, ...]  # benchmark names whose invocations failed


@dataclass(frozen=True)
class RunDocument:
    """The `perfq run --format json` document: the runs made, and the comparison when both sides ran."""

    label: str
    runs: tuple[RunSide, ...]
    comparison: ComparisonDocument | None = None

    @classmethod
    def from_runs(cls, label: str, runs: Iterable[Run], comparison: ComparisonDocument | None) -> RunDocument:
        sides = tuple(RunSide(r.id, r.side, str(getattr(r.status, "value", r.status)), len(r.samples),
                              tuple(f.benchmark for f in r.failures)) for r in runs)
        return cls(label, sides, comparison)

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    def markdown(self) -> str:
        if self.comparison is not None:
            return render_markdown(self.comparison)
        lines = [f"**perfq run {md_code(self.label)}**", ""]
        lines += md_table(("side", "run", "status", "samples", "failed"), "lllrl",
                          ((r.side, md_code(r.id), r.status, r.samples, md_text(", ".join(r.failures) or "-"))
                           for r in self.runs))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ImportDocument:
    """The `perfq import --format json` document: what the merge added to which history."""

    history: str
    files: int
    runs_seen: int
    runs_added: int
    samples_added: int
    failures_added: int

    @classmethod
    def from_counts(cls, counts: ImportCounts, history: Path) -> ImportDocument:
        return cls(str(history), counts.files, counts.runs_seen, counts.runs_added, counts.samples_added,
                   counts.failures_added)

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    def line(self) -> str:
        return (f"imported {self.files} file(s): {self.runs_added} new run(s) of {self.runs_seen}, "
                f"{self.samples_added} new sample(s), {self.failures_added} new failure(s) into {self.history}")

    def markdown(self) -> str:
        return "\n".join(md_table(("files", "runs seen", "new runs", "new samples", "new failures"), "rrrrr",
                                  [(self.files, self.runs_seen, self.runs_added, self.samples_added,
                                    self.failures_added)]))
