"""The packed graph's copy beside the index (``index.duckdb.graph``), read by memory map.

The ``graph`` table stays the truth; this file spares a query process DuckDB's read of ~5 MB
of blobs (~15 ms on PyTorch) and gives it the arrays without a copy. It names the graph it
holds by ``graph_token`` (a digest of the parts, also written to the index's ``meta``): a
missing, foreign, stale or damaged file is never read, and the query reads the table instead.
Written after the index it belongs to, with a rename, so a reader sees a whole file.

Layout: ``MAGIC``, one JSON line ``{"token": ..., "parts": {name: [offset, length]}}``, then
the parts, each at an offset that is a multiple of 8.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
from collections.abc import Iterator
from pathlib import Path

from common import files
from common.paths import write_atomically

MAGIC = b"perfq-graph 1\n"
SUFFIX = ".graph"
_ALIGN = 8


def graph_file(db: Path) -> Path:
    return db.with_name(db.name + SUFFIX)


def graph_token(rows: list[tuple[str, bytes]] | list[tuple[str, memoryview]]) -> str:
    """The digest naming the packed graph ``rows`` (part, data): a checksum of the parts too."""
    digest = hashlib.sha256()
    for part, data in sorted(rows, key=lambda row: row[0]):
        digest.update(f"{part}:{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def write_graph_file(db: Path, rows: list[tuple[str, bytes]], token: str) -> None:
    """Write the copy of ``rows`` for the index just written at ``db``; when it cannot be
    written the index is whole all the same (queries read the graph table)."""
    with contextlib.suppress(OSError):
        write_atomically(graph_file(db), _chunks(rows, token), binary=True, own=True)


def _chunks(rows: list[tuple[str, bytes]], token: str) -> Iterator[bytes]:
    parts: dict[str, list[int]] = {}
    offset = 0
    for part, data in rows:
        parts[part] = [offset, len(data)]
        offset += -(-len(data) // _ALIGN) * _ALIGN
    header = MAGIC + json.dumps({"token": token, "parts": parts}).encode() + b"\n"
    start = -(-len(header) // _ALIGN) * _ALIGN
    yield header + bytes(start - len(header))
    for _, data in rows:
        yield data + bytes(-len(data) % _ALIGN)


def read_graph_file(db: Path, token: str) -> dict[str, memoryview] | None:
    """The parts of the copy beside ``db`` when it holds the graph ``token`` names, its parts
    checked against it (a few ms for PyTorch's 5 MB), else None."""
    try:
        with files.open_input(graph_file(db), files.InputKind.cache) as (fd, _):
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, or empty (ValueError)
        return None
    end = mapped.find(b"\n", len(MAGIC), len(MAGIC) + (1 << 16))
    try:
        if mapped[: len(MAGIC)] != MAGIC or end < 0:
            return None
        header = json.loads(mapped[len(MAGIC) : end])
        if header.get("token") != token:
            return None
        start = -(-(end + 1) // _ALIGN) * _ALIGN
        view = memoryview(mapped)
        out = {}
        for part, (offset, length) in header["parts"].items():
            if start + offset + length > len(mapped):
                return None
            out[part] = view[start + offset : start + offset + length]
        if graph_token(list(out.items())) != token:  # damaged parts under a whole header
            return None
        return out
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
