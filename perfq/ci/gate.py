"""What the CI gate trusts, which the PR it judges cannot change.

The whole configuration is the *base* commit's committed config (``perfq.toml``, else
``pyproject.toml`` ``[tool.perfq]``), never the PR's checkout: the select job reads it from the
directory ``perfq ci base-config`` writes (``PERFQ_CONFIG_DIR``), the report takes the compare
thresholds and ignore list from it, and a PR that changes it is told the change takes effect after
merge. Every benchmark the select job put in the matrix must have produced a result (samples or a
recorded failure), so a job that died before writing its file cannot pass as "no regression".
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from common import files, git
from common.config import CONFIG_FILES, load_config
from common.errors import PerfqError
from perfq.run import api as run_api


def write_committed_config(repo: Path, rev: str, dest: Path) -> list[str]:
    """Write the config files committed at ``rev`` into the directory ``dest`` (made; files of
    another revision in it removed); the names written."""
    commit = git.resolve_ref(repo, rev)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CONFIG_FILES:
        (dest / name).unlink(missing_ok=True)
        data = git.show(repo, commit, name)
        if data is not None:
            (dest / name).write_bytes(data)
            written.append(name)
    return written


def changed_config(repo: Path, base: str, head: str) -> list[str]:
    """The config files whose committed content differs between ``base`` and ``head``."""
    old, new = git.resolve_ref(repo, base), git.resolve_ref(repo, head)
    return [name for name in CONFIG_FILES if git.show(repo, old, name) != git.show(repo, new, name)]


def base_settings(repo: Path, rev: str) -> run_api.Settings:
    """The ``[tool.perfq.compare]`` settings committed at ``rev`` (perfq's defaults when it has none)."""
    commit = git.resolve_ref(repo, rev)
    with tempfile.TemporaryDirectory(prefix="perfq-base-config-") as tmp:
        snapshot = Path(tmp) / commit[:12]
        write_committed_config(repo, commit, snapshot)
        try:
            return run_api.settings_from_config(load_config(snapshot, where=snapshot).extra)
        except PerfqError as exc:
            raise PerfqError(f"the config of {rev} ({commit[:12]}): {str(exc).replace(str(snapshot) + '/', '')}"
                             ) from None
        except (ValueError, TypeError) as exc:
            raise PerfqError(f"bad [tool.perfq.compare] config at {rev} ({commit[:12]}): {exc}") from None


def selected_benchmarks(matrix_file: Path) -> tuple[str, ...]:
    """The benchmarks of a gha-matrix file: ``benchmark`` per entry, or a shard's ``benchmarks`` (space-separated)."""
    try:
        include = json.loads(files.read_input(matrix_file, files.InputKind.matrix)).get("include")
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
