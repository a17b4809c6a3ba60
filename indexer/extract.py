"""One file in, its facts out: reads the file, hashes it, and calls the extractor for
its kind. Runs in worker processes; never raises for bad input (the facts say why)."""

from __future__ import annotations

import contextlib
import gc
import hashlib
from collections.abc import Iterator
from pathlib import Path

from common import files
from indexer.benchmarks import BenchmarkFacts, extract_benchmark
from indexer.cpp import extract_cpp, language_of
from indexer.facts import FileFacts
from indexer.python_src import extract_python
from indexer.source_text import decode_source
from schema.model import FileStatus, Lang

MAX_BYTES = 4 * 1024 * 1024


def file_facts(
    kind: str,
    path: str,
    data: bytes,
    functions_only: bool = False,
    compile_args: list[str] | None = None,
    abs_path: str | None = None,
    sha: str | None = None,
) -> FileFacts | BenchmarkFacts:
    """Facts of one file's content ``data`` (kind: cpp | python | benchmark); with
    ``functions_only`` just the C++ function extents. ``sha``: the whole file's digest, when
    ``data`` is only its first MAX_BYTES + 1 bytes (see ``read_source``)."""
    sha = sha or hashlib.sha256(data).hexdigest()
    text = decode_source(data)
    lang = language_of(path) if kind == "cpp" else Lang.PYTHON
    facts = FileFacts(path, lang, sha, data.count(b"\n") + 1)
    if text is None:
        facts.status, facts.message = FileStatus.SKIPPED, "binary content"
        return facts
    if len(data) > MAX_BYTES:
        facts.status, facts.message = FileStatus.SKIPPED, f"larger than {MAX_BYTES} bytes"
        return facts
    if kind == "benchmark":
        bench = extract_benchmark(path, text)
        bench.sha256 = sha
        return bench
    try:
        if kind == "cpp":
            return extract_cpp(path, text, facts, functions_only, compile_args, abs_path)
        return extract_python(path, text, facts)
    except RecursionError:
        facts.status, facts.message = FileStatus.WARNING, "too deeply nested to parse"
        return facts


def read_and_extract(
    repo: str, kind: str, path: str, compile_args: list[str] | None = None
) -> tuple[str, str, FileFacts | BenchmarkFacts | None, str]:
    """(kind, path, facts or None, error) for the file ``path`` of ``repo`` (``compile_args``: its
    compile command's, for a real parse); the worker entry point."""
    file = Path(repo) / path
    try:
        data, sha = read_source(str(repo), path)
    except OSError as exc:
        return kind, path, None, f"cannot read: {exc.strerror}"
    facts = file_facts(kind, path, data, compile_args=compile_args, abs_path=str(file.resolve()), sha=sha)
    return kind, path, facts, ""


def read_source(root: str, path: str) -> tuple[bytes, str | None]:
    """A source file's bytes up to MAX_BYTES + 1 (a longer file is skipped, never read whole)
    and, for a longer one, the digest of all of it, hashed in chunks (common/files.py); OSError
    for a file that is not read (a device, a symlink leaving the repository)."""
    data = files.read_limited(root, path, MAX_BYTES)
    if len(data) <= MAX_BYTES:
        return data, None
    digest = hashlib.sha256()
    for part in files.chunks(root, path):
        digest.update(part)
    return data, digest.hexdigest()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off: extraction makes millions of objects without
    cycles (syntax trees, facts) whose allocation would only trigger collections that walk
    them again and again (a third of the Python extractor's time). Worker processes forked
    inside the block inherit the setting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
