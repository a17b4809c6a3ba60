"""What an index build reads and reports, shared by its patch and re-link paths: the versions of
the code that made an index, the canary sets' text, and the report and events of a build."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from common import files
from common.config import Config
from common.errors import PerfqError
from common.version import __version__

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from indexer.trace import FileTrace

_EXTRACTOR_SOURCES = [
    ("indexer", m)
    for m in (
        "benchmarks.py",
        "cpp.py",
        "cpp_arity.py",
        "cpp_calls.py",
        "cpp_local_names.py",
        "cpp_fallback.py",
        "extract.py",
        "facts.py",
        "preprocessor.py",
        "python_src.py",
        "registrations.py",
        "source_text.py",
    )
] + [("data", "prelude.h")]


_LINKING = (
    "build_config.py", "preprocessor.py", "link.py", "link_cpp.py", "stub_names.py", "incremental.py",
    "native_yaml.py", "relink.py", "trace.py",
)


def linker_sources() -> list[Traversable]:
    """The linking code: the schedulers, the name resolution, every rule of indexer/rules/ (found,
    not listed) and the patch's statements."""
    indexer = resources.files("indexer")
    rules = sorted((f for f in indexer.joinpath("rules").iterdir() if f.name.endswith(".py")), key=lambda f: f.name)
    return [*(indexer.joinpath(name) for name in _LINKING), *rules, resources.files("schema").joinpath("patch.sql")]


def linker_version() -> str:
    """A digest of the linking code: an index linked by another version is re-linked, not patched."""
    digest = hashlib.sha256(__version__.encode())
    for source in linker_sources():
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def extractor_version() -> str:
    """A digest of the extractor sources and the prelude: cached facts from another
    version of them are not reused."""
    digest = hashlib.sha256(__version__.encode())
    for pkg, name in _EXTRACTOR_SOURCES:
        digest.update(name.encode())
        digest.update(resources.files(pkg).joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


def canaries_text(repo: Path, cfg: Config) -> str:
    """The text of the configured canary-sets file, else of perfq's own data/canaries.yaml."""
    if not cfg.canaries:
        return resources.files("data").joinpath("canaries.yaml").read_text(encoding="utf-8")
    path = repo / cfg.canaries
    try:  # inside the repository, like every path of the config
        return files.input_text(path, files.InputKind.canaries, (repo,))
    except OSError as exc:
        raise PerfqError(f"canaries file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PerfqError(f"canaries file {path}: not UTF-8 text") from None


@dataclass
class BuildReport:
    counts: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    reparsed: int = 0
    reused: int = 0
    mode: str = "linked"  # linked (full re-link from the facts cache) | patched (in place)
    trace_failures: dict[str, str] = field(default_factory=dict)  # benchmark file -> why not (fully) traced
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) of files held without parsing
    trace_sandbox: str = ""  # how the benchmarks traced by this build were contained ('' when none was)


class BuildEvents:
    """What a build tells its caller while it runs (the CLI renders it); silent by default."""

    def phase(self, name: str, detail: str = "") -> None:
        pass

    def traced(self, result: FileTrace, done: int, total: int) -> None:
        pass
