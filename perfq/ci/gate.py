"""What the CI gate trusts, which the PR it judges cannot change.

The compare thresholds and ignore list are read from the *base* commit's committed config
(``perfq.toml``, else ``pyproject.toml`` ``[tool.perfq]``), never from the PR's checkout; and
every benchmark the select job put in the matrix must have produced a result (samples or a
recorded failure), so a job that died before writing its file cannot pass as "no regression".
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from perfq.common import git
from perfq.config import load_config
from perfq.errors import PerfqError
from perfq.run import api as run_api

CONFIG_FILES = ("perfq.toml", "pyproject.toml")


def base_settings(repo: Path, rev: str) -> run_api.Settings:
    """The ``[tool.perfq.compare]`` settings committed at ``rev`` (perfq's defaults when it has none)."""
    commit = git.resolve_ref(repo, rev)
    with tempfile.TemporaryDirectory(prefix="perfq-base-config-") as tmp:
        snapshot = Path(tmp) / commit[:12]
        snapshot.mkdir()
        for name in CONFIG_FILES:
            data = git.show(repo, commit, name)
            if data is not None:
                (snapshot / name).write_bytes(data)
        try:
            return run_api.settings_from_config(load_config(snapshot).extra)
        except PerfqError as exc:
            raise PerfqError(f"the config of {rev} ({commit[:12]}): {str(exc).replace(str(snapshot) + '/', '')}"
                             ) from None
        except (ValueError, TypeError) as exc:
            raise PerfqError(f"bad [tool.perfq.compare] config at {rev} ({commit[:12]}): {exc}") from None


def selected_benchmarks(matrix_file: Path) -> tuple[str, ...]:
    """The benchmarks of a gha-matrix file: ``benchmark`` per entry, or a shard's ``benchmarks`` (space-separated)."""
    try:
        include = json.loads(matrix_file.read_text(encoding="utf-8")).get("include")
    except (OSError, ValueError, AttributeError):
        return ()
    names: list[str] = []
    for entry in include if isinstance(include, list) else ():
        if isinstance(entry, dict):
            names += str(entry.get("benchmark") or "").split() + str(entry.get("benchmarks") or "").split()
    return tuple(dict.fromkeys(names))


def missing_results(selected: tuple[str, ...], comparison: run_api.ComparisonDocument | None) -> tuple[str, ...]:
    """The selected benchmarks with no result at all: no test compared, ignored or failed on either side."""
    if comparison is None:
        return selected
    seen = {t.benchmark for t in comparison.tests}
    seen |= {f.benchmark for side in (comparison.base, comparison.head) for f in side.failures}
    seen |= {name.split("/", 1)[0] for name in comparison.ignored}
    return tuple(b for b in selected if b not in seen)
