"""Content digests of the files to index, hashed again only when a file's stat changed.

Like git's index: each file's size, mtime, ctime and inode are kept with its SHA-256 in a
JSON file next to the index (``index.duckdb.stat``). A file whose stat is unchanged keeps
its digest without being read; a file modified within a few seconds of the last save is
hashed again anyway (a timestamp may not have moved for an edit that quick). The file is
data only: a missing, damaged or foreign one costs a full hash, never a wrong digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

from perfq.common.paths import write_atomically

FORMAT = "perfq-stat-cache-1"
RACY_NS = 3_000_000_000  # files modified this close to the last save are hashed again


def _load(path: Path) -> tuple[dict[str, list], int]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, 0
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict):
        return {}, 0
    saved = doc.get("saved_ns")
    return doc["files"], saved if isinstance(saved, int) else 0


def _sha256(file: str) -> str | None:
    try:
        with open(file, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def file_digests(repo: Path, paths: list[str], cache: Path | None) -> dict[str, str | None]:
    """SHA-256 of each of ``paths`` under ``repo`` (None: unreadable), reusing ``cache``'s
    digests of files whose stat did not change, and saving the cache again."""
    old, saved_ns = _load(cache) if cache is not None else ({}, 0)
    out: dict[str, str | None] = {}
    entries: dict[str, list] = {}
    root = str(repo).rstrip("/")
    for rel in paths:
        file = f"{root}/{rel}"  # not Path, nor os.path.join: for thousands of files they cost more than the stat
        try:
            st = os.stat(file)
        except OSError:
            out[rel] = None
            continue
        key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        entry = old.get(rel)
        fresh = max(st.st_mtime_ns, st.st_ctime_ns) >= saved_ns - RACY_NS
        if isinstance(entry, list) and len(entry) == 5 and entry[:4] == key and not fresh:
            out[rel] = entry[4]
        else:
            out[rel] = _sha256(file)
        if out[rel] is not None:
            entries[rel] = [*key, out[rel]]
    if cache is not None:
        _save(cache, entries)
    return out


def _save(path: Path, entries: dict[str, list]) -> None:
    """Write the cache atomically; a failure only loses the cache."""
    with contextlib.suppress(OSError):
        write_atomically(path, [json.dumps({"format": FORMAT, "saved_ns": time.time_ns(), "files": entries})])
