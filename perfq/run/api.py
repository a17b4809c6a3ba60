"""What other features may use of perfq.run: import result files, compare a label, render the verdicts."""

from __future__ import annotations

from pathlib import Path

from perfq.run.compare import Settings, settings_from_config
from perfq.run.compare_labels import comparison_for_label
from perfq.run.report import ComparisonDocument, render_markdown
from perfq.run.results import import_files

__all__ = ["ComparisonDocument", "Settings", "compare_label", "import_files", "render_markdown", "settings_from_config"]


def compare_label(history: Path, label: str, settings: Settings | None = None) -> ComparisonDocument:
    """The comparison document of ``label`` in ``history`` (PerfqError when it has no base or head run)."""
    return comparison_for_label(history, label, settings or Settings())
