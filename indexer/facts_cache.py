"""The facts cache of ``perfq index``: the facts of every file of the last build by file key, so that
a re-link parses only changed files. Stored as JSON lines, data only: reading it never runs code
(whoever can write a pickle can run code in the next build), and a damaged line costs its file a
re-parse, never the build.

Line 1 is a header (``{"format": ..., "version": <extractor version>}``); every other line is
``[key, kind, digest, payload]``; kinds: ``cpp``/``python`` (FileFacts), ``benchmark``
(BenchmarkFacts), ``yaml`` (operators and reader), ``trace`` (FileTrace JSON), ``meta``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from common import files
from common.paths import write_atomically
from indexer.benchmarks import BenchmarkFacts
from indexer.extract import gc_paused
from indexer.facts import Call, FileFacts, Function, LibraryDef, LibraryImpl, StubFact, StubImpl, class_fact
from indexer.native_yaml import OpFacts
from schema.model import FileStatus, Lang, Origin

FORMAT = "perfq-facts/1"
Entry = tuple[str, str, Any]  # (kind, digest, facts)

# list fields of the fact records whose items are records (or tuples) themselves
_ROWS: dict[type, dict[str, Callable[..., Any]]] = {
    FileFacts: {
        "functions": Function,
        "calls": Call,
        "stubs": StubFact,
        "stub_impls": StubImpl,
        "library_impls": LibraryImpl,
        "library_defs": LibraryDef,
        "classes": class_fact,
    },
    BenchmarkFacts: {"refs": tuple},
    OpFacts: {"kernels": tuple},
}


def _row(item: Any) -> Any:
    """A record as a JSON array (NamedTuples and tuples already are one)."""
    if is_dataclass(item):
        return [getattr(item, f.name) for f in fields(item)]
    return item


def _encode(record: Any) -> list[Any]:
    rows = _ROWS[type(record)]
    return [
        [_row(x) for x in getattr(record, f.name)] if f.name in rows else getattr(record, f.name)
        for f in fields(record)
    ]


def _decode(cls: type, data: Any) -> Any:
    """``cls`` from its encoded fields; TypeError/ValueError when the data does not fit."""
    names = [f.name for f in fields(cls)]
    if not isinstance(data, list) or len(data) != len(names):
        raise ValueError(f"not a {cls.__name__}")
    rows = _ROWS[cls]
    values = []
    for name, value in zip(names, data, strict=True):
        if name in rows:
            make = rows[name]
            value = [make(item) if make is tuple else make(*item) for item in value]
        values.append(value)
    return cls(*values)


def _payload(kind: str, facts: Any) -> Any:
    if kind in ("cpp", "python", "benchmark"):
        return _encode(facts)
    if kind == "yaml":
        ops, reader = facts
        return [[_encode(op) for op in ops], reader]
    return facts  # trace: already JSON; meta: None


def _facts(kind: str, payload: Any) -> Any:
    if kind in ("cpp", "python"):
        facts = _decode(FileFacts, payload)
        if not (isinstance(facts.path, str) and isinstance(facts.n_lines, int)):
            raise ValueError("not a FileFacts")
        facts.lang, facts.status, facts.origin = Lang(facts.lang), FileStatus(facts.status), Origin(facts.origin)
        return facts
    if kind == "benchmark":
        return _decode(BenchmarkFacts, payload)
    if kind == "yaml":
        ops, reader = payload
        return [_decode(OpFacts, op) for op in ops], str(reader)
    if kind == "trace" and isinstance(payload, dict):
        return payload
    if kind == "meta" and payload is None:
        return None
    raise ValueError(f"unknown cache entry kind {kind!r}")


# the kinds whose facts are a function of their digest (content and flags) alone: their lines
# can be written again as they were read or made (a trace's or yaml's are encoded anew)
_BY_DIGEST = ("cpp", "python", "benchmark")
Lines = dict[str, tuple[str, str]]  # key -> (digest, its line), for entries of _BY_DIGEST kinds


def encode_line(key: str, kind: str, digest: str, facts: Any) -> str:
    """One cache line: ``[key, kind, digest, payload]``."""
    return json.dumps([key, kind, digest, _payload(kind, facts)], separators=(",", ":")) + "\n"


def decode_line(line: str) -> tuple[str, Entry]:
    """(key, entry) of one cache line; ValueError, TypeError, KeyError or AttributeError when
    it does not decode."""
    key, kind, digest, payload = json.loads(line)
    if not (isinstance(key, str) and isinstance(kind, str) and isinstance(digest, str)):
        raise ValueError("not a cache line")
    return key, (kind, digest, _facts(kind, payload))


def load_cache(path: Path, version: str, lines: Lines | None = None) -> dict[str, Entry]:
    """The cached facts by key: {} when the file is missing, unreadable, of another format (an
    old pickle) or of another extractor ``version``; a line that does not decode is left out.
    ``lines`` gets the lines of the entries save_cache may write again as they are."""
    entries: dict[str, Entry] = {}
    try:
        with files.open_input(path, files.InputKind.cache) as (fd, _), \
                open(fd, encoding="utf-8", closefd=False) as fh, gc_paused():
            header = json.loads(fh.readline())
            if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != version:
                return {}
            for line in fh:
                try:
                    key, entry = decode_line(line)
                except (ValueError, TypeError, KeyError, AttributeError):
                    continue
                entries[key] = entry
                if lines is not None and entry[0] in _BY_DIGEST:
                    lines[key] = (entry[1], line if line.endswith("\n") else line + "\n")
    except (OSError, ValueError):  # ValueError: not UTF-8, not JSON
        if lines is not None:
            lines.clear()
        return {}
    return entries


def save_cache(path: Path, version: str, entries: dict[str, Entry], lines: Lines | None = None) -> None:
    """Write ``entries`` to ``path`` atomically (a scratch file renamed over it); an entry of a
    _BY_DIGEST kind whose digest ``lines`` holds is written as that line, not encoded again."""
    header = json.dumps({"format": FORMAT, "version": version}) + "\n"
    known = lines or {}

    def line(key: str, kind: str, digest: str, facts: Any) -> str:
        same = known.get(key) if kind in _BY_DIGEST else None
        return same[1] if same is not None and same[0] == digest else encode_line(key, kind, digest, facts)

    write_atomically(path, itertools.chain([header], (line(key, *entry) for key, entry in entries.items())), own=True)
