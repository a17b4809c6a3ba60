"""The re-link path of ``perfq index`` (a patch cannot do): extract the facts of new and changed
files in parallel (the others come from the facts cache), trace benchmarks, link everything and
write the index; the facts cache is saved alongside."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from indexer.bench_imports import dependencies
from indexer.benchmarks import BenchmarkFacts
from indexer.build_info import BuildEvents, BuildReport, extractor_version
from indexer.compile_db import load_compile_db
from indexer.extract import gc_paused, read_and_extract
from indexer.facts import FileFacts
from indexer.facts_cache import Lines, decode_line, encode_line, load_cache, save_cache
from indexer.link import NativeLink
from indexer.native import NativeTest, sample_native
from indexer.native_yaml import OpFacts, load_native_functions, merge_ops
from indexer.trace import (
    FileTrace,
    TraceJob,
    TraceOptions,
        cache_key,
    sandbox_summary,
    torch_available,
    trace_content,
    trace_files,
)
from indexer.upstream import Upstream
from perfq import __version__
from perfq.common import git
from perfq.common.lifetime import keep_until_exit
from perfq.common.pool import alongside, worker_pool
from perfq.common.yaml_text import YAMLError, load_yaml
from perfq.config import Config
from perfq.errors import PerfqError
from schema.model import FileStatus, Lang, Origin, TraceStatus
from schema.writer import Prefill, write_index

T = TypeVar("T")


@gc_paused()  # on until the facts are freed: a collection over them cost ~0.8 s mid-build, another ran at its end
def relink(
    repo: Path,
    cfg: Config,
    db_path: Path,
    files: dict[str, list[str]],
    digests: dict[str, str | None],
    upstream: Upstream | None,
    yaml_keys: dict[Path, tuple[str, str]],
    canaries_source: str,
    inputs: dict[str, str],
    report: BuildReport,
    events: BuildEvents,
    *,
    jobs: int | None,
    quiet: bool,
    trace: bool | None,
    started: float,
    native: bool = False,
) -> None:
    """Build the whole index of ``repo`` at ``db_path`` from ``files`` (content ``digests``),
    filling ``report`` (its total counted from ``started``; ``canaries_source``: the canary sets'
    YAML; ``inputs``: what the index was built from, for its meta); runs under the caller's build lock."""
    canaries = load_canaries(canaries_source)
    cache_path = db_path.with_name(db_path.name + ".facts")
    lines: Lines = {}  # cache lines of cached or extracted facts, saved again as they are
    cache = _load_cache(cache_path, lines)
    compile_db = load_compile_db(repo, cfg.compile_commands) if cfg.compile_commands else {}
    work: list[tuple] = []
    kept: dict[str, tuple[str, str, FileFacts | BenchmarkFacts]] = {}
    for kind in ("cpp", "python", "benchmark"):
        for path in files[kind]:
            key = f"{kind}:{path}"
            args = compile_db.get(path) if kind == "cpp" else None
            # cached facts depend on the content and, for a real parse, the flags
            flags = hashlib.sha256(repr(args).encode()).hexdigest()[:12] if args else ""
            cached = cache.get(key)
            if cached is not None and cached[1] == (digests[path] or "") + flags:
                kept[key] = cached
                continue
            work.append((str(repo), kind, path, args, flags) if args else (str(repo), kind, path))
    if upstream is not None:
        work += _upstream_work(upstream, cache, kept)
    work.sort(key=lambda job: job[1] != "cpp")  # C++ files first: they are linked while the others are parsed
    report.reused, report.reparsed = len(kept), len(work)
    events.phase("extract", f"{len(work)} files to parse, {len(kept)} from the facts cache")
    t2 = time.perf_counter()

    def link_native(layers: list[tuple[str, list[OpFacts]]]) -> tuple[NativeLink, list[str]]:
        """The link's first step, once the C++ facts and the operators are in; and the yaml warnings."""
        started_native = time.perf_counter()
        ops, yaml_warnings = merge_ops(layers)
        cpp_facts = _facts(kept, "cpp")
        events.phase("link-cpp", f"{len(cpp_facts)} C++ files and {len(ops)} operators, while the others are parsed")
        native = NativeLink(cpp_facts, ops)
        report.timings["link_cpp"] = time.perf_counter() - started_native
        return native, yaml_warnings

    reader, (native_link, yaml_warnings) = _extract_all(
        repo, work, kept, lines, cache, yaml_keys, jobs, quiet, link_native
    )
    report.timings["extract"] = time.perf_counter() - t2
    python_facts = _facts(kept, "python")
    file_facts = [*native_link.files, *python_facts]
    benches = _facts(kept, "benchmark")
    t_trace = time.perf_counter()
    imports = _benchmark_imports(repo, benches, files["benchmark_module"], digests)
    traces = _traces(repo, benches, imports, cache, kept, trace, jobs, events, report)
    report.timings["trace"] = time.perf_counter() - t_trace
    report.trace_failures = {p: t.reason or "; ".join(t.errors[:1]) for p, t in traces.items() if t.status != "ok"}
    # the facts cache is saved by a forked child while this process links and writes
    saving = report.reparsed or set(kept) != set(cache)
    with alongside(_save_cache, cache_path, kept, lines) if saving else contextlib.nullcontext():
        missing = sorted({m for t in traces.values() if (m := t.missing_module())})
        inputs = {"native_functions_reader": reader, "trace_missing_modules": ",".join(missing), **inputs}
        _link_and_write(repo, cfg, upstream, db_path, native_link, python_facts, benches, canaries, traces,
                        report, inputs, yaml_warnings, events, native)
    report.timings["total"] = time.perf_counter() - started
    report.skipped = sorted((f.path, f.message) for f in file_facts if f.status == FileStatus.SKIPPED)
    keep_until_exit(kept, cache, lines, native_link, file_facts, benches, traces)  # not freed one by one


def load_canaries(text: str) -> list[dict]:
    """The canary sets of a canary-sets YAML text."""
    try:
        data = load_yaml(text) or {}
    except YAMLError:
        raise PerfqError("canaries file: malformed YAML") from None
    sets = data.get("sets", []) if isinstance(data, dict) else []
    return [s for s in sets if isinstance(s, dict) and s.get("name")]


def _load_cache(path: Path, lines: Lines) -> dict:
    """Facts of the previous build by file key, or {} (missing, foreign or damaged cache)."""
    return load_cache(path, extractor_version(), lines)


def _save_cache(path: Path, entries: dict, lines: Lines) -> None:
    save_cache(path, extractor_version(), entries, lines)


def _extract_line(job: tuple) -> tuple[str, str, str | None, str]:
    """The pool's task: (kind, path, the facts' cache line or None, error) for one job of
    _extract_all. A line, not the facts: JSON is quicker to make and read than a pickle of
    them, and the facts cache saves it as it is."""
    kind, path, facts, error = read_and_extract(job)
    if facts is None:
        return kind, path, None, error
    key, digest = _key_and_digest(job, getattr(facts, "sha256", ""))
    return kind, path, encode_line(key, kind, digest, facts), error


def _key_and_digest(job: tuple, sha: str) -> tuple[str, str]:
    """A job's cache key (an upstream's files are prefixed) and its facts' digest (content and flags)."""
    kind, path = job[1], job[2]
    flags = job[4] if len(job) > 4 else ""
    prefix = job[5] if len(job) > 5 else ""
    return f"{prefix}{kind}:{path}", sha + flags


def _progress(total: int, quiet: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if quiet or not sys.stderr.isatty() or os.environ.get("CI"):
        return None
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} files/s"),
        TimeElapsedColumn(),
        transient=True,
    )


def _facts(kept: dict, kind: str) -> list:
    """The facts of the ``kind`` files (``cpp``, ``python``, ``benchmark``): the repo's, then the
    upstream's (marked as such), in path order."""
    out = []
    for key, (entry_kind, _, facts) in sorted(kept.items()):
        if entry_kind == kind:
            if key.startswith("up:"):
                facts.origin = Origin.UPSTREAM
            out.append(facts)
    return out


def _link_and_write(
    repo: Path,
    cfg: Config,
    upstream: Upstream | None,
    db_path: Path,
    native: NativeLink,
    python_facts: list[FileFacts],
    benches: list[BenchmarkFacts],
    canaries: list[dict],
    traces: dict[str, FileTrace],
    report: BuildReport,
    inputs: dict[str, str],
    yaml_warnings: list[str],
    events: BuildEvents,
    native_sampling: bool = False,
) -> None:
    """Finish the link (``native``: its C++ step) and write the tables as the index at ``db_path``."""
    events.phase("link", f"{len(python_facts)} Python files, {len(benches)} benchmark files")
    t3 = time.perf_counter()
    derivatives = _derivatives(repo, cfg, upstream)
    # the C++ rows are written into the new index by a forked child on the core the link leaves idle
    prefill = Prefill(db_path, native.heads())
    try:
        with alongside(prefill.write):
            tables = native.finish(python_facts, benches, canaries, traces, derivatives)
        report.timings["link"] = time.perf_counter() - t3
        rows = dict(tables.rows)
        rows["warnings"] = [(f, p, m) for f, p, m in tables.warnings] + [("", "yaml", w) for w in yaml_warnings]
        if native_sampling:
            inputs = {**inputs, **_native(repo, rows, report, events)}
        events.phase("write", f"{sum(len(r) for r in rows.values()):,} rows to {db_path}")
        t4 = time.perf_counter()
        write_index(db_path, rows, _meta(repo, inputs, report), prefill)
    except BaseException:
        prefill.discard()
        raise
    report.timings["write"] = time.perf_counter() - t4
    report.counts = {k: len(v) for k, v in rows.items()}


def _native(repo: Path, rows: dict[str, list[tuple]], report: BuildReport, events: BuildEvents) -> dict[str, str]:
    """Sample the benchmark tests under perf into ``rows["native_samples"]`` (perf was checked
    when the build started); the meta keys it gives."""
    t = time.perf_counter()
    events.phase("native", "sampling benchmark tests under perf -e cpu-clock -g (one process per test)")

    def finished(test: NativeTest, error: str) -> None:
        events.phase("native", f"{test.bench}/{test.test}: {error or 'sampled'}")

    done = sample_native(repo, rows, on_test=finished)
    rows["native_samples"] = list(done.rows)
    rows["native_tests"] = list(done.tests)
    report.timings["native"] = time.perf_counter() - t
    rate = done.rate
    events.phase("native", f"{done.sampled} tests, frames mapped {rate.frames_mapped}/{rate.frames},"
                           f" samples mapped {rate.samples_mapped}/{rate.samples}")
    return done.meta()


def _meta(repo: Path, inputs: dict[str, str], report: BuildReport) -> dict[str, str]:
    """The index's meta: what it was built from, and how (``report``'s counts and timings so far)."""
    meta = {
        "perfq_version": __version__,
        "repo": str(repo),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **inputs,
        "reparsed_files": str(report.reparsed),
        "reused_files": str(report.reused),
    }
    meta.update({f"time_{k}": f"{v:.2f}" for k, v in report.timings.items()})
    return meta


def _benchmark_imports(
    repo: Path, benches: list[BenchmarkFacts], modules: list[str], digests: dict[str, str | None]
) -> dict[str, dict[str, str | None]]:
    """Per benchmark file, the files of its tree it imports (directly or not), with their digests."""
    paths = [*(b.file for b in benches), *modules]
    sources = {p: data for p in paths if (data := git.show(repo, None, p)) is not None}
    return {
        file: {p: digests.get(p) for p in imported}
        for file, imported in dependencies([b.file for b in benches], sources).items()
    }


def _traces(
    repo: Path,
    benches: list[BenchmarkFacts],
    imports: dict[str, dict[str, str | None]],
    cache: dict,
    kept: dict,
    trace: bool | None,
    jobs: int | None,
    events: BuildEvents,
    report: BuildReport,
) -> dict[str, FileTrace]:
    """Traced tests per benchmark file: cached ones whose file, the files of its tree it
    ``imports``, torch and tracer are unchanged (unless one failed for want of a module that is
    installed now), and new traces of the others when torch is importable (``trace`` None: when
    it is; True: required; False: never). Without torch, earlier traces of unchanged files
    (and imports) are kept."""
    version = torch_available() if trace is not False else None
    if trace is True and version is None:
        raise PerfqError(f"tracing benchmarks needs torch importable by {sys.executable} (or pass --no-trace)")
    out: dict[str, FileTrace] = {}
    todo: list[tuple[BenchmarkFacts, str]] = []
    for b in benches:
        sha = trace_content(kept[f"benchmark:{b.file}"][1], imports.get(b.file, {}))
        key = f"trace:{b.file}"
        cached = cache.get(key)
        wanted = cache_key(sha, version) if version else None
        current = cached is not None and (cached[1] == wanted or (wanted is None and cached[1].startswith(f"{sha}:")))
        earlier = FileTrace.from_json(cached[2]) if current else None
        if earlier is not None and not (wanted is not None and earlier.installed_since()):
            kept[key] = cached
            out[b.file] = earlier
        elif wanted is not None and b.status == "ok":
            todo.append((b, wanted))
    if todo:
        kinds = {"operator_benchmark": "operator_benchmark"}
        trace_jobs = [TraceJob(b.file, kinds.get(b.framework, "script"), repo / b.file) for b, _ in todo]
        opts = TraceOptions(parallel=jobs or os.cpu_count() or 1, repo=repo)
        report.trace_sandbox = sandbox_summary()
        events.phase("trace", f"{len(trace_jobs)} benchmark files, {report.trace_sandbox}")
        done = 0

        def finished(result: FileTrace) -> None:
            nonlocal done
            done += 1
            events.traced(result, done, len(trace_jobs))

        results = trace_files(trace_jobs, opts, finished)
        for b, key in todo:
            result = results.get(b.file) or FileTrace(b.file, TraceStatus.failed, "not traced")
            out[b.file] = result
            if result.status != TraceStatus.failed or not result.reason.startswith(("timed out", "used more")):
                kept[f"trace:{b.file}"] = ("trace", key, result.to_json())
    return out


def _derivatives(repo: Path, cfg: Config, upstream: Upstream | None) -> list[tuple[str, list[str]]]:
    """(op, backward ops its formulas call) from derivatives.yaml: the upstream's, else the
    configured ones that exist."""
    paths = [upstream.derivatives] if upstream is not None and upstream.derivatives else []
    if upstream is None:
        paths += [repo / p for p in cfg.derivatives if (repo / p).is_file()]
    out: list[tuple[str, list[str]]] = []
    for path in paths:
        try:
            entries = load_yaml(path.read_text(encoding="utf-8")) or []
        except (OSError, YAMLError, UnicodeDecodeError):
            continue
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("name"), str):
                name = e["name"].split("(", 1)[0].strip()
                text = " ".join(str(v) for k, v in e.items() if k not in ("name", "dispatch"))
                out.append((name, sorted(set(_BACKWARD_CALL.findall(text)))))
    return out


_BACKWARD_CALL = re.compile(r"\b([A-Za-z_]\w*backward\w*)\s*\(")


def _upstream_work(upstream: Upstream, cache: dict, kept: dict) -> list[tuple]:
    """Extraction jobs for the upstream's files; none when the cache holds this upstream
    version (its files are not hashed or parsed again)."""
    marker = cache.get("up:key")
    if marker is not None and marker[1] == upstream.key():
        for key, value in cache.items():
            if key.startswith("up:"):
                kept[key] = value
        return []
    kept["up:key"] = ("meta", upstream.key(), None)
    kinds = (("cpp", upstream.cpp), ("python", upstream.python))
    return [(str(upstream.root), kind, p, None, "", "up:") for kind, paths in kinds for p in paths]


def _extract_all(
    repo: Path,
    work: list[tuple[str, str, str]],
    kept: dict,
    lines: Lines,
    cache: dict,
    yaml_keys: dict[Path, tuple[str, str]],
    jobs: int | None,
    quiet: bool,
    cpp_done: Callable[[list[tuple[str, list[OpFacts]]]], T],
) -> tuple[str, T]:
    """Run the extractors over ``work`` (C++ files first) in a process pool, and read the yaml
    files whose content changed (others come from ``cache``), filling ``kept``. Once the C++
    files and the yaml files are in, ``cpp_done`` gets the operators of each yaml, in order, and
    runs while the pool parses the other files; ``lines`` gets the new facts' cache lines.
    Returns the yaml reader(s) and what ``cpp_done`` returned."""
    jobs = jobs or os.cpu_count() or 1
    yaml_todo = []
    for path, (key, sha) in yaml_keys.items():
        cached = cache.get(key)
        if cached is not None and cached[1] == sha:
            kept[key] = cached
        else:
            yaml_todo.append((key, sha, path))
    n_cpp = sum(1 for job in work if job[1] == "cpp")
    if not (work or yaml_todo):
        done = cpp_done(_yaml_layers(yaml_keys, kept))
    else:
        progress = _progress(len(work), quiet)
        with worker_pool(jobs) as pool:
            yaml_futures = [(key, sha, pool.submit(load_native_functions, repo, p)) for key, sha, p in yaml_todo]

            def native_in() -> T:
                for key, sha, fut in yaml_futures:
                    kept[key] = ("yaml", sha, fut.result())
                if progress is not None and task is not None:  # the count stands still meanwhile: say why
                    progress.update(task, description="indexing (linking the C++ files)")
                out = cpp_done(_yaml_layers(yaml_keys, kept))
                if progress is not None and task is not None:
                    progress.update(task, description="indexing")
                return out

            chunk = max(1, min(64, len(work) // (jobs * 8) or 1))
            started = time.perf_counter()
            task = None
            if progress is not None:
                progress.start()
                task = progress.add_task("indexing", total=len(work), rate="0")
            try:
                results = pool.map(_extract_line, work, chunksize=chunk)
                if not n_cpp:
                    done = native_in()
                for i, (job, (kind, path, line, error)) in enumerate(zip(work, results, strict=True)):
                    if line is None:
                        key, digest = _key_and_digest(job, "")
                        failed = FileFacts(path, Lang.UNKNOWN, "", 0, status=FileStatus.SKIPPED, message=error)
                        kept[key] = (kind, digest, failed)
                    else:
                        key, entry = decode_line(line)
                        kept[key], lines[key] = entry, (entry[1], line)
                    if progress is not None and task is not None:
                        rate = (i + 1) / max(1e-6, time.perf_counter() - started)
                        progress.update(task, advance=1, rate=f"{rate:.0f}")
                    if i + 1 == n_cpp:
                        done = native_in()
            finally:
                if progress is not None:
                    progress.stop()
    return ",".join(kept[key][2][1] for key, _ in yaml_keys.values()), done


def _yaml_layers(yaml_keys: dict[Path, tuple[str, str]], kept: dict) -> list[tuple[str, list[OpFacts]]]:
    """The operators of each yaml file, in order."""
    return [(str(path), kept[key][2][0]) for path, (key, _) in yaml_keys.items()]
