"""The re-link path of ``perfq index`` (what a patch cannot do) as named passes over the build's
state (indexer/build_spec.py), run in order by ``relink``: extract the facts of new and changed
files in a process pool (the others come from the facts cache) and link the C++ files while the pool
parses the others, trace benchmarks, link the Python files and the benchmarks, pack the tables, sample
natively (``--native``) and write the index; the facts cache is saved alongside."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from common import files, git
from common.config import Config
from common.errors import PerfqError
from common.lifetime import keep_until_exit
from common.pool import alongside, worker_pool
from common.version import __version__
from common.yaml_text import YAMLError, load_yaml
from indexer.bench_imports import dependencies
from indexer.benchmarks import BenchmarkFacts
from indexer.build_info import extractor_version
from indexer.build_spec import BuildSpec, BuildState, ExtractJob, derivatives_paths
from indexer.compile_db import load_compile_db
from indexer.derivatives import Derivative, derivative
from indexer.extract import gc_paused, read_and_extract
from indexer.facts import FileFacts
from indexer.facts_cache import decode_line, encode_line, load_cache, save_cache
from indexer.generated_layer import read_templates
from indexer.link import NativeLink
from indexer.native import NativeOptions, NativeTest, load_shards, sample_native, save_shard
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
from schema.model import FileStatus, Lang, NativeSampleRow, NativeTestRow, Origin, TraceStatus, WarningRow
from schema.writer import Prefill, write_index


@gc_paused()  # on until the facts are freed: a collection over them cost ~0.8 s mid-build, another ran at its end
def relink(spec: BuildSpec, state: BuildState) -> None:
    """The re-link's passes, in order, after discover and hash (indexer/build.py); runs under the
    build's lock and fills ``state``, its report included. Two overlaps keep it fast: the C++
    files are linked while the pool parses the others (extract hands off to link_native), and
    forked children save the facts cache and write the C++ rows while the rest links."""
    state.canaries = load_canaries(spec.canaries)  # a malformed canaries file fails before any work
    find_work(spec, state)
    extract(spec, state)  # runs link_native once the C++ files and the yaml are in
    trace(spec, state)
    with _facts_cache_saved(spec, state), _prefilled(spec, state) as prefill:
        with state.timed("link"), alongside(prefill.write):
            link_python(spec, state)
            link_benchmarks(spec, state)
            pack(spec, state)
        sample(spec, state)
        write(spec, state, prefill)
    _finish_report(spec, state)


def find_work(spec: BuildSpec, state: BuildState) -> None:
    """Pass *extract*, its first half: the facts cache, and the files whose cached facts are not
    current (content and compile flags) as jobs, C++ files first (they are linked while the others
    are parsed); the others' facts are kept."""
    state.lines = {}
    state.cache = load_cache(spec.facts_path, extractor_version(), state.lines)
    state.kept = {}
    compile_db = load_compile_db(spec.repo, spec.cfg.compile_commands) if spec.cfg.compile_commands else {}
    jobs: list[ExtractJob] = []
    for kind in ("cpp", "python", "benchmark"):
        for path in state.files[kind]:
            args = compile_db.get(path) if kind == "cpp" else None
            # cached facts depend on the content and, for a real parse, the flags
            flags = hashlib.sha256(repr(args).encode()).hexdigest()[:12] if args else ""
            job = ExtractJob(str(spec.repo), kind, path, args or None, flags)
            cached = state.cache.get(job.cache_key)
            if cached is not None and cached[1] == (state.digests[path] or "") + flags:
                state.kept[job.cache_key] = cached
            else:
                jobs.append(job)
    if spec.upstream is not None:
        jobs += _upstream_jobs(spec.upstream, state.cache, state.kept)
    jobs.sort(key=lambda job: job.kind != "cpp")
    state.extract_jobs = jobs
    state.report.reused, state.report.reparsed = len(state.kept), len(jobs)


def extract(spec: BuildSpec, state: BuildState) -> None:
    """Pass *extract*: run the extractors over the jobs in a process pool and read the yaml files
    whose content changed (the others' operators come from the cache), filling ``state.kept`` and
    the new facts' cache lines. Once the C++ files and the yaml files are in, it hands off to
    link_native, which runs while the pool parses the other files. Ends with the facts by kind."""
    jobs = state.extract_jobs
    spec.events.phase("extract", f"{len(jobs)} files to parse, {len(state.kept)} from the facts cache")
    with state.timed("extract"):
        yaml_todo = _yaml_todo(spec, state)
        if not (jobs or yaml_todo):
            link_native(spec, state)
        else:
            _extract_in_pool(spec, state, yaml_todo)
    state.reader = ",".join(state.kept[key][2][1] for key, _ in spec.yaml_keys.values())
    state.python_facts = _facts(state.kept, "python")
    state.benches = _facts(state.kept, "benchmark")


def link_native(spec: BuildSpec, state: BuildState) -> None:
    """Pass *link native*: the link's first step (indexer/link.py NativeLink), once the C++ facts
    and the operators are in: what the C++ files and the operators make on their own."""
    with state.timed("link_cpp"):
        ops, state.yaml_warnings = merge_ops(_yaml_layers(spec.yaml_keys, state.kept))
        cpp_facts = _facts(state.kept, "cpp")
        spec.events.phase("link-cpp",
                          f"{len(cpp_facts)} C++ files and {len(ops)} operators, while the others are parsed")
        state.native = NativeLink(cpp_facts, ops, state.build)


def trace(spec: BuildSpec, state: BuildState) -> None:
    """Pass *trace*: the traced tests of each benchmark file, cached or traced now (``_traces``)."""
    with state.timed("trace"):
        imports = _benchmark_imports(spec.repo, state.benches, state.files["benchmark_module"], state.digests)
        state.traces = _traces(spec, state, imports)
    state.report.trace_failures = {
        p: t.reason or "; ".join(t.errors[:1]) for p, t in state.traces.items() if t.status != "ok"
    }


def link_python(spec: BuildSpec, state: BuildState) -> None:
    """Pass *link Python*: the Python files' functions, and what needs them numbered (stubs linked
    to operators by name, backward formulas, Python references through imports and re-exports)."""
    assert state.native is not None
    spec.events.phase("link", f"{len(state.python_facts)} Python files, {len(state.benches)} benchmark files")
    templates = read_templates(spec.repo, spec.cfg.generated_templates)
    state.native.link_python(state.python_facts, _derivatives(spec.repo, spec.cfg, spec.upstream), templates)


def link_benchmarks(spec: BuildSpec, state: BuildState) -> None:
    """Pass *link benchmarks*: the benchmarks, what they reference and what their traces ran."""
    assert state.native is not None
    state.native.link_benchmarks(state.benches, state.traces)


def pack(spec: BuildSpec, state: BuildState) -> None:
    """Pass *pack*: the tables as the index holds them (the graph packed, the canary sets, the
    link's and the yaml's warnings)."""
    assert state.native is not None
    tables = state.native.pack(state.canaries)
    state.rows = dict(tables.rows)
    yaml_warnings = [("", "yaml", w) for w in state.yaml_warnings]
    unsandboxed = state.report.trace_sandbox.startswith("NOT")  # said in the index's warnings too (issue 37)
    trace_warnings = [("", "trace", f"benchmarks were traced {state.report.trace_sandbox}")] if unsandboxed else []
    state.rows[WarningRow.TABLE] = [(f, p, m) for f, p, m in tables.warnings] + yaml_warnings + trace_warnings


def sample(spec: BuildSpec, state: BuildState) -> None:
    """Pass *native* (``--native`` only): sample the benchmark tests under perf into the
    native_samples and native_tests tables (perf was checked when the build was planned)."""
    run = spec.native_run
    if not spec.native and not run.merge:
        return
    events = spec.events

    def finished(test: NativeTest, error: str) -> None:
        events.phase("native", f"{test.bench}/{test.test}: {error or 'sampled'}")

    with state.timed("native"):
        if run.merge:
            events.phase("native", f"merging {len(run.merge)} shard file(s) of native samples")
            done = load_shards(list(run.merge), state.rows)
        else:
            shard = f", shard {run.shard}" if run.shard else ""
            events.phase("native", f"sampling benchmark tests under perf -e cpu-clock -g (one process per test{shard})")
            done = sample_native(spec.repo, state.rows, NativeOptions(shard=run.shard), on_test=finished)
            if run.out is not None:
                save_shard(run.out, done, state.rows, run.shard)
    state.rows[NativeSampleRow.TABLE] = list(done.rows)
    state.rows[NativeTestRow.TABLE] = list(done.tests)
    rate = done.rate
    events.phase("native", f"{done.sampled} tests, frames mapped {rate.frames_mapped}/{rate.frames},"
                           f" samples mapped {rate.samples_mapped}/{rate.samples}")
    state.inputs.update(done.meta())


def write(spec: BuildSpec, state: BuildState, prefill: Prefill) -> None:
    """Pass *write*: the tables and the meta as the index at ``spec.db_path`` (atomically; the rows
    ``prefill`` wrote are not written again)."""
    rows = state.rows
    missing = sorted({m for t in state.traces.values() if (m := t.missing_module())})
    inputs = {"native_functions_reader": state.reader, "trace_missing_modules": ",".join(missing), **state.inputs}
    spec.events.phase("write", f"{sum(len(r) for r in rows.values()):,} rows to {spec.db_path}")
    with state.timed("write"):
        write_index(spec.db_path, rows, _meta(spec.repo, inputs, state), prefill)
    state.report.counts = {k: len(v) for k, v in rows.items()}


def _finish_report(spec: BuildSpec, state: BuildState) -> None:
    """The report's total and skipped files; the build's objects are kept until the process exits
    (not freed one by one)."""
    assert state.native is not None
    file_facts = [*state.native.ctx.files, *state.python_facts]
    state.report.timings["total"] = time.perf_counter() - spec.started
    state.report.skipped = sorted((f.path, f.message) for f in file_facts if f.status == FileStatus.SKIPPED)
    keep_until_exit(state.kept, state.cache, state.lines, state.native, file_facts, state.benches, state.traces)


@contextlib.contextmanager
def _facts_cache_saved(spec: BuildSpec, state: BuildState) -> Iterator[None]:
    """The facts cache saved (when it changed) by a forked child while the block links and writes."""
    saving = state.report.reparsed or set(state.kept) != set(state.cache)
    if not saving:
        yield
        return
    with alongside(_save_facts, spec.facts_path, extractor_version(), state.kept, state.lines):
        yield


def _save_facts(path: Path, version: str, entries: dict, lines: dict) -> None:
    """``save_cache``, its OSError (a full disk) a one-line PerfqError naming the index's facts cache
    (issue 37: it surfaced as "cannot write the output")."""
    try:
        save_cache(path, version, entries, lines)
    except OSError as exc:
        raise PerfqError(f"cannot write the facts cache of the index at {path}: {exc.strerror or exc} "
                         "(choose another place with --db)") from None


@contextlib.contextmanager
def _prefilled(spec: BuildSpec, state: BuildState) -> Iterator[Prefill]:
    """The rows of the link's first step (NativeLink.heads), to be written into the new index by a
    forked child on the core the link leaves idle; its scratch file is removed when the block fails."""
    assert state.native is not None
    prefill = Prefill(spec.db_path, state.native.heads())
    try:
        yield prefill
    except BaseException:
        prefill.discard()
        raise


def load_canaries(text: str) -> list[dict]:
    """The canary sets of a canary-sets YAML text."""
    try:
        data = load_yaml(text) or {}
    except YAMLError:
        raise PerfqError("canaries file: malformed YAML") from None
    sets = data.get("sets", []) if isinstance(data, dict) else []
    return [s for s in sets if isinstance(s, dict) and s.get("name")]


def _extract_line(job: ExtractJob) -> tuple[str, str, str | None, str]:
    """The pool's task: (kind, path, the facts' cache line or None, error) for one job. A line,
    not the facts: JSON is quicker to make and read than a pickle of them, and the facts cache
    saves it as it is."""
    kind, path, facts, error = read_and_extract(job.root, job.kind, job.path, job.compile_args)
    if facts is None:
        return kind, path, None, error
    return kind, path, encode_line(job.cache_key, kind, getattr(facts, "sha256", "") + job.flags, facts), error


def _upstream_jobs(upstream: Upstream, cache: dict, kept: dict) -> list[ExtractJob]:
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
    return [ExtractJob(str(upstream.root), kind, p, key_prefix="up:") for kind, paths in kinds for p in paths]


def _yaml_todo(spec: BuildSpec, state: BuildState) -> list[tuple[str, str, Path]]:
    """(cache key, digest, path) of the yaml files whose content changed; the others' operators are kept."""
    todo = []
    for path, (key, sha) in spec.yaml_keys.items():
        cached = state.cache.get(key)
        if cached is not None and cached[1] == sha:
            state.kept[key] = cached
        else:
            todo.append((key, sha, path))
    return todo


def _extract_in_pool(spec: BuildSpec, state: BuildState, yaml_todo: list[tuple[str, str, Path]]) -> None:
    """The pool's part of pass *extract*: the jobs parsed and the yaml files read in worker
    processes; link_native runs here once the last C++ file (and the yaml) is in."""
    jobs, kept = state.extract_jobs, state.kept
    n_workers = spec.jobs or os.cpu_count() or 1
    n_cpp = sum(1 for job in jobs if job.kind == "cpp")
    progress = _Progress(len(jobs), spec.quiet)
    with worker_pool(n_workers) as pool:
        yaml_futures = [(key, sha, pool.submit(load_native_functions, spec.repo, p)) for key, sha, p in yaml_todo]

        def hand_off() -> None:
            for key, sha, fut in yaml_futures:
                kept[key] = ("yaml", sha, fut.result())
            with progress.saying("indexing (linking the C++ files)"):  # the count stands still meanwhile
                link_native(spec, state)

        chunk = max(1, min(64, len(jobs) // (n_workers * 8) or 1))
        with progress:
            results = pool.map(_extract_line, jobs, chunksize=chunk)
            if not n_cpp:
                hand_off()
            for i, (job, result) in enumerate(zip(jobs, results, strict=True)):
                _keep_result(state, job, result)
                progress.advance()
                if i + 1 == n_cpp:
                    hand_off()


def _keep_result(state: BuildState, job: ExtractJob, result: tuple[str, str, str | None, str]) -> None:
    """Keep a job's facts (decoded from its cache line), or facts saying why the file was skipped."""
    kind, path, line, error = result
    if line is None:
        failed = FileFacts(path, Lang.UNKNOWN, "", 0, status=FileStatus.SKIPPED, message=error)
        state.kept[job.cache_key] = (kind, job.flags, failed)
    else:
        key, entry = decode_line(line)
        state.kept[key], state.lines[key] = entry, (entry[1], line)


class _Progress:
    """The extraction's progress bar on a terminal (none when quiet, in CI or not a tty)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.bar = _progress_bar(quiet)
        self.total, self.done = total, 0
        self.task = None
        self.started = time.perf_counter()

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task("indexing", total=self.total, rate="0")
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def advance(self) -> None:
        self.done += 1
        if self.bar is not None and self.task is not None:
            rate = self.done / max(1e-6, time.perf_counter() - self.started)
            self.bar.update(self.task, advance=1, rate=f"{rate:.0f}")

    @contextlib.contextmanager
    def saying(self, description: str) -> Iterator[None]:
        """The bar's description is ``description`` while the block runs."""
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=description)
        yield
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description="indexing")


def _progress_bar(quiet: bool):
    """A rich progress bar for the extraction, or None when quiet, in CI or not on a terminal."""
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


def _meta(repo: Path, inputs: dict[str, str], state: BuildState) -> dict[str, str]:
    """The index's meta: what it was built from, and how (the report's counts and timings so far)."""
    meta = {
        "perfq_version": __version__,
        "repo": str(repo),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **inputs,
        "reparsed_files": str(state.report.reparsed),
        "reused_files": str(state.report.reused),
    }
    meta.update({f"time_{k}": f"{v:.2f}" for k, v in state.report.timings.items()})
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


def _traces(spec: BuildSpec, state: BuildState, imports: dict[str, dict[str, str | None]]) -> dict[str, FileTrace]:
    """Traced tests per benchmark file: cached ones whose file, the files of its tree it
    ``imports``, torch and tracer are unchanged (unless one failed for want of a module that is
    installed now), and new traces of the others when torch is importable (``spec.trace`` None:
    when it is; True: required; False: never). Without torch, earlier traces of unchanged files
    (and imports) are kept."""
    version = torch_available() if spec.trace is not False else None
    if spec.trace is True and version is None:
        raise PerfqError(f"tracing benchmarks needs torch importable by {sys.executable} (or pass --no-trace)")
    out: dict[str, FileTrace] = {}
    todo: list[tuple[BenchmarkFacts, str]] = []
    cache, kept = state.cache, state.kept
    for b in state.benches:
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
        out.update(_traced(spec, state, todo))
    return out


def _traced(spec: BuildSpec, state: BuildState, todo: list[tuple[BenchmarkFacts, str]]) -> dict[str, FileTrace]:
    """New traces of the benchmark files ``todo`` (with their cache keys), kept for the facts
    cache unless they timed out or ran out of memory."""
    kinds = {"operator_benchmark": "operator_benchmark"}
    trace_jobs = [TraceJob(b.file, kinds.get(b.framework, "script"), spec.repo / b.file) for b, _ in todo]
    opts = TraceOptions(parallel=spec.jobs or os.cpu_count() or 1, repo=spec.repo)
    state.report.trace_sandbox = sandbox_summary()
    spec.events.phase("trace", f"{len(trace_jobs)} benchmark files, {state.report.trace_sandbox}")
    done = 0

    def finished(result: FileTrace) -> None:
        nonlocal done
        done += 1
        spec.events.traced(result, done, len(trace_jobs))

    results = trace_files(trace_jobs, opts, finished)
    out: dict[str, FileTrace] = {}
    for b, key in todo:
        result = results.get(b.file) or FileTrace(b.file, TraceStatus.failed, "not traced")
        out[b.file] = result
        if result.status != TraceStatus.failed or not result.reason.startswith(("timed out", "used more")):
            state.kept[f"trace:{b.file}"] = ("trace", key, result.to_json())
    return out


def _derivatives(repo: Path, cfg: Config, upstream: Upstream | None) -> list[Derivative]:
    """The entries of derivatives.yaml (indexer/derivatives.py): the upstream's, else the
    configured ones that exist."""
    out: list[Derivative] = []
    for path in derivatives_paths(repo, cfg, upstream):
        try:
            entries = load_yaml(files.input_text(path, files.InputKind.yaml)) or []
        except (OSError, YAMLError, UnicodeDecodeError):
            continue
        for e in entries if isinstance(entries, list) else []:
            d = derivative(e) if isinstance(e, dict) else None
            if d is not None:
                out.append(d)
    return out


def _yaml_layers(yaml_keys: dict[Path, tuple[str, str]], kept: dict) -> list[tuple[str, list[OpFacts]]]:
    """The operators of each yaml file, in order."""
    return [(str(path), kept[key][2][0]) for path, (key, _) in yaml_keys.items()]
