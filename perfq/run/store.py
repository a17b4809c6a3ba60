"""The run's store: runs saved to and read from the results history.

The SQL and the history's row types are ``schema.results_store`` (below this layer); this module
converts the run's domain (:class:`perfq.run.runs.Run`) to those rows and back.
"""

from __future__ import annotations

from pathlib import Path

from perfq.run.runs import Run
from schema import results_store
from schema.history import LOCK_WAIT


def save_runs(history: Path, runs: list[Run], wait: float = LOCK_WAIT) -> tuple[int, int, int]:
    """Write ``runs`` and their new samples, failures and invocations in one transaction, waiting up to
    ``wait`` seconds for the file; returns (new runs, new samples, new failures)."""
    return results_store.save_runs(history, [run.stored() for run in runs], wait)


def runs_for_label(history: Path, label: str, with_samples: bool = True) -> list[Run]:
    """Every run stored under ``label`` (without ``with_samples``: their sample counts only)."""
    return [Run.from_stored(stored) for stored in results_store.runs_for_label(history, label, with_samples)]
