"""`perfq ci report`: the prepared PR comment from the artifacts of the select and bench jobs.

Reads ``affected.md`` and ``matrix.json`` (select) and every ``results-*.json`` (bench) from one
directory, imports the results into a fresh history, compares the label, and writes
``comment.md`` (affected summary, then verdicts), ``pr.json``, ``comparison.json`` and
``history.duckdb`` into the output directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from common import files
from common.errors import PerfqError
from perfq.ci.comment import COMMENT_FILE, PR_FILE, PullRequestRef, report_body
from perfq.ci.gate import missing_results, selected_benchmarks
from perfq.run import api as run_api

RESULTS_GLOB = "results-*.json"


@dataclass(frozen=True)
class ReportOutcome:
    """What the report found: the comparison (None when nothing ran) and how many benchmarks were selected."""

    comparison: run_api.ComparisonDocument | None
    selected: int | None
    result_files: int
    comment: Path
    missing: tuple[str, ...] = ()  # selected benchmarks without any result: the gate fails

    @property
    def failures(self) -> int:
        c = self.comparison
        return 0 if c is None else len(c.base.failures) + len(c.head.failures)

    @property
    def regressions(self) -> int:
        return 0 if self.comparison is None else self.comparison.summary.regression


def _read(path: Path) -> str | None:
    """An artifact's text (a regular file within files.InputKind.report's limit); None when it cannot be read."""
    try:
        return files.input_text(path, files.InputKind.report, errors="replace")
    except OSError:
        return None


def runnable(include: list) -> list:
    """The matrix entries that run something: a shard of the plan with no benchmark is dropped."""
    return [e for e in include if not (isinstance(e, dict) and "benchmarks" in e and not str(e["benchmarks"]).strip())]


def selected_count(matrix_file: Path) -> int | None:
    """Entries that run something in the select job's matrix (None when the file is missing or not a matrix)."""
    text = _read(matrix_file)
    if text is None:
        return None
    try:
        include = json.loads(text).get("include")
    except (ValueError, AttributeError):
        return None
    return len(runnable(include)) if isinstance(include, list) else None


def run_url() -> str:
    """The workflow run's address from the runner's environment ('' outside GitHub Actions)."""
    server, repo, run = (os.environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else ""


def build_report(inputs: Path, label: str, pr: PullRequestRef, out: Path,
                 settings: run_api.Settings | None = None, note: str = "") -> ReportOutcome:
    """Write the prepared comment (``note`` at its top) and its companions into ``out``."""
    if not inputs.is_dir():
        raise PerfqError(f"no artifact directory {inputs}")
    out.mkdir(parents=True, exist_ok=True)
    history = out / "history.duckdb"
    history.unlink(missing_ok=True)
    files = sorted(inputs.rglob(RESULTS_GLOB))
    comparison = None
    if files:
        run_api.import_files(history, files)
        try:
            comparison = run_api.compare_label(history, label, settings)
        except PerfqError:  # a side never stored a run (every job failed before measuring)
            comparison = None
    verdicts = run_api.render_markdown(comparison) if comparison is not None else None
    selected = selected_count(inputs / "matrix.json")
    missing = missing_results(selected_benchmarks(inputs / "matrix.json"), comparison)
    body = report_body(_read(inputs / "affected.md"), verdicts, selected, run_url(), missing, note)
    comment = out / COMMENT_FILE
    comment.write_text(body, encoding="utf-8")
    (out / PR_FILE).write_text(json.dumps(pr.to_json()) + "\n", encoding="utf-8")
    if comparison is not None:
        (out / "comparison.json").write_text(json.dumps(comparison.to_json(), indent=1, default=str) + "\n",
                                            encoding="utf-8")
    return ReportOutcome(comparison, selected, len(files), comment, missing)
