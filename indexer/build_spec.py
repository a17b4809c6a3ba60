"""What a ``perfq index`` run builds (a frozen ``BuildSpec``, made once from its options) and what
its passes find on the way (a ``BuildState`` they fill in turn): the patch path
(indexer/incremental.py) and the re-link path (indexer/relink.py) share both."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from common import files
from common.config import Config
from common.errors import PerfqError
from indexer.build_config import BuildMacros
from indexer.build_info import BuildEvents, BuildReport, canaries_text, extractor_version, linker_version
from indexer.generated_layer import templates_digest
from indexer.native import NativeRun, perf_problem
from indexer.trace import driver_digest, torch_available
from indexer.upstream import Upstream, resolve_upstream
from schema.writer import check_replaceable

if TYPE_CHECKING:
    from indexer.benchmarks import BenchmarkFacts
    from indexer.facts import FileFacts
    from indexer.facts_cache import Lines
    from indexer.link import NativeLink
    from indexer.trace import FileTrace


@dataclass(frozen=True)
class BuildSpec:
    """One build's options and the inputs read before it starts (see ``specify_build``)."""

    repo: Path
    cfg: Config
    db_path: Path
    jobs: int | None
    quiet: bool
    full: bool
    trace: bool | None  # True: required, False: never, None: when torch is importable
    native: bool
    events: BuildEvents
    started: float  # time.perf_counter() when the build started: the report's total counts from it
    upstream: Upstream | None
    yaml_keys: dict[Path, tuple[str, str]]  # native_functions.yaml -> (cache key, digest), upstream's first
    canaries: str  # the canary sets' YAML text
    inputs: dict[str, str]  # what the index is built from (its meta), as far as known before the files are
    native_run: NativeRun = field(default_factory=NativeRun)  # a shard of the sampling, or shard files merged

    @property
    def facts_path(self) -> Path:
        """The facts cache beside the index."""
        return self.db_path.with_name(self.db_path.name + ".facts")

    @property
    def stat_path(self) -> Path | None:
        """The stat cache beside the index (None when the index's folder does not exist yet)."""
        return self.db_path.with_name(self.db_path.name + ".stat") if self.db_path.parent.is_dir() else None

    @property
    def patchable(self) -> bool:
        """Can the index be patched in place (if the change allows): it exists and nothing asks for a re-link."""
        return (
            self.db_path.exists() and not self.full and not self.trace and not self.native
            and not self.native_run.merge
            and not self.cfg.compile_commands
        )


@dataclass(frozen=True, slots=True)
class ExtractJob:
    """One file for the pool to parse: where (``root``, ``path``), as what (``kind``: cpp, python,
    benchmark), with which compile command (``compile_args``, digested in ``flags``), and the prefix
    of its key in the facts cache (``up:`` for an upstream's files)."""

    root: str
    kind: str
    path: str
    compile_args: list[str] | None = None
    flags: str = ""
    key_prefix: str = ""

    @property
    def cache_key(self) -> str:
        """The key of its facts in the facts cache."""
        return f"{self.key_prefix}{self.kind}:{self.path}"


@dataclass
class BuildState:
    """What the passes find, each filling its part in turn (the re-link's fields stay empty in a patch)."""

    report: BuildReport = field(default_factory=BuildReport)
    inputs: dict[str, str] = field(default_factory=dict)  # the spec's, and those the passes find
    build: BuildMacros | None = None  # the target build's macros: which #if branches it compiles
    # discover, hash
    files: dict[str, list[str]] = field(default_factory=dict)  # kind -> paths
    digests: dict[str, str | None] = field(default_factory=dict)  # path -> content digest
    # the re-link: extract (with the facts cache)
    canaries: list[dict] = field(default_factory=list)
    cache: dict = field(default_factory=dict)  # the facts cache as loaded: key -> (kind, digest, facts)
    lines: Lines = field(default_factory=dict)  # cache lines of cached or extracted facts, saved as they are
    kept: dict[str, tuple] = field(default_factory=dict)  # key -> (kind, digest, facts) of this build
    extract_jobs: list[ExtractJob] = field(default_factory=list)  # the files to parse, C++ first
    reader: str = ""  # the native_functions.yaml reader(s)
    python_facts: list[FileFacts] = field(default_factory=list)
    benches: list[BenchmarkFacts] = field(default_factory=list)
    # link native, trace, link, pack
    native: NativeLink | None = None
    yaml_warnings: list[str] = field(default_factory=list)
    traces: dict[str, FileTrace] = field(default_factory=dict)
    rows: dict[str, list[tuple]] = field(default_factory=dict)  # the tables as written

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """The block's seconds as the report's timing ``name``."""
        started = time.perf_counter()
        yield
        self.report.timings[name] = time.perf_counter() - started


def specify_build(
    repo: Path,
    cfg: Config,
    db_path: Path,
    *,
    jobs: int | None,
    quiet: bool,
    full: bool,
    trace: bool | None,
    events: BuildEvents | None,
    native: bool,
    native_run: NativeRun | None = None,
) -> BuildSpec:
    """The spec of a build from its options: checks them, resolves the upstream, and reads the
    inputs that decide between a patch and a re-link (config, canaries, linker, tracer, yaml digests)."""
    started = time.perf_counter()
    if trace is None:
        trace = {"on": True, "off": False}.get(cfg.trace)  # the command line wins over the config
    if not repo.is_dir():
        raise PerfqError(f"{repo} is not a directory")
    check_replaceable(db_path)
    native_run = native_run or NativeRun()
    if (native_run.shard or native_run.out) and not native:
        raise PerfqError("--native-shard and --native-out go with --native")
    if native and native_run.merge:
        raise PerfqError("--native-from merges shard files instead of sampling: not with --native")
    if native and (problem := perf_problem()):
        raise PerfqError(f"--native needs perf sampling: {problem}")
    upstream = resolve_upstream(cfg.upstream, repo)
    yaml_paths = _yaml_paths(repo, cfg, upstream)
    canaries = canaries_text(repo, cfg)
    inputs = {
        "config": repr(cfg),
        "canaries": hashlib.sha256(canaries.encode()).hexdigest(),
        "config:linker": linker_version() + extractor_version(),
    }
    if upstream is not None:
        inputs["upstream"] = upstream.key()
    if trace is not False and (version := torch_available()):
        inputs["tracer"] = f"{version}:{driver_digest()}"  # new traces are due: no in-place patch
    yaml_keys = {p: _yaml_key(p) for p in yaml_paths}
    inputs.update({f"source_sha:{_named(p, repo)}": sha for p, (_, sha) in yaml_keys.items()})
    inputs.update({f"source_sha:{_named(p, repo)}": _digest(p) for p in derivatives_paths(repo, cfg, upstream)})
    inputs["source_sha:generated_templates"] = templates_digest(repo, cfg.generated_templates)
    return BuildSpec(
        repo, cfg, db_path, jobs, quiet, full, trace, native, events or BuildEvents(), started, upstream, yaml_keys,
        canaries, inputs, native_run,
    )


def _yaml_paths(repo: Path, cfg: Config, upstream: Upstream | None) -> list[Path]:
    """The native_functions.yaml files, upstream's first; each file once, however spelt.
    With an upstream, a default path the repo lacks is not an error."""
    paths = [upstream.native_yaml] if upstream is not None else []
    default = Config().native_functions
    for p in cfg.native_functions:
        path = (Path(p) if Path(p).is_absolute() else repo / p).resolve()
        if not path.is_file():
            if upstream is not None and cfg.native_functions == default:
                continue
            raise PerfqError(f"native_functions.yaml not found at {path} (set native_functions in [tool.perfq])")
        paths.append(path)
    return list(dict.fromkeys(p.resolve() for p in paths))


def derivatives_paths(repo: Path, cfg: Config, upstream: Upstream | None) -> list[Path]:
    """The derivatives.yaml files the link reads (indexer/relink.py ``_derivatives``): a change to
    one links its formulas again, as a change to native_functions.yaml does."""
    if upstream is not None:
        return [upstream.derivatives] if upstream.derivatives else []
    return [repo / p for p in cfg.derivatives if (repo / p).is_file()]


def _digest(path: Path) -> str:
    """A yaml's content digest."""
    return hashlib.sha256(_yaml_bytes(path)).hexdigest()


def _named(path: Path, repo: Path) -> str:
    """``path`` relative to ``repo`` when it lies inside (an index moved with its repository
    keeps its inputs), else as it is."""
    try:
        return path.relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)


def _yaml_bytes(path: Path) -> bytes:
    """A yaml's bytes through the bounded reader (a regular file, files.InputKind.yaml), or a PerfqError."""
    try:
        return files.read_input(path, files.InputKind.yaml)
    except OSError as exc:
        raise PerfqError(files.input_error(exc)) from None


def _yaml_key(yaml_path: Path) -> tuple[str, str]:
    """Cache key and content digest of a native_functions.yaml (with its tags.yaml)."""
    digest = hashlib.sha256(_yaml_bytes(yaml_path))
    tags = yaml_path.parent / "tags.yaml"
    if os.path.lexists(tags):
        digest.update(_yaml_bytes(tags))
    return f"yaml:{yaml_path}", digest.hexdigest()
