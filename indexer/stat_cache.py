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
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from common import files
from common.paths import write_atomically

FORMAT = "perfq-stat-cache-1"
RACY_NS = 3_000_000_000  # files modified this close to the last save are hashed again


def _load(path: Path) -> tuple[dict[str, list], int]:
    try:
        doc = json.loads(files.read_input(path, files.InputKind.cache))
    except (OSError, ValueError):
        return {}, 0
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict):
        return {}, 0
    saved = doc.get("saved_ns")
    return doc["files"], saved if isinstance(saved, int) else 0


def _sha256(root: str, rel: str) -> str | None:
    """SHA-256 of the regular file ``rel`` under ``root`` read in chunks, or None when it is
    unreadable, a device or pipe, or a symlink leaving the repository (common/files.py)."""
    digest = hashlib.sha256()
    try:
        for part in files.chunks(root, rel):
            digest.update(part)
    except OSError:
        return None
    return digest.hexdigest()


def combined_digest(digests: dict[str, str | None]) -> str:
    """One digest for several files' (path -> digest): changes when any of them does."""
    joined = "".join(f"{path}\0{digest}\n" for path, digest in sorted(digests.items()))
    return hashlib.sha256(joined.encode()).hexdigest()


@contextlib.contextmanager
def stat_cache(path: Path | None) -> Iterator[StatCache]:
    """The stat cache at ``path`` (None: none), read in a thread from here on (a build lists
    its files meanwhile) and saved in a thread after ``digests`` (the build goes on); both are
    done when the block ends."""
    cache = StatCache(path)
    try:
        yield cache
    finally:
        cache.close()


class StatCache:
    """Reads and saves of one stat cache file, each in a thread of its own."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._old: tuple[dict[str, list], int] = ({}, 0)
        self._loading = self._thread(self._load) if path is not None else None
        self._saving: threading.Thread | None = None

    def _thread(self, work: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=work, name="perfq-stat-cache", daemon=True)
        thread.start()
        return thread

    def _load(self) -> None:
        self._old = _load(self.path)

    def digests(self, repo: Path, paths: list[str]) -> dict[str, str | None]:
        """SHA-256 of each of ``paths`` under ``repo`` (None: unreadable), the cached one for a
        file whose stat did not change; the cache is saved again meanwhile."""
        if self._loading is not None:
            self._loading.join()
        old, saved_ns = self._old
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
                out[rel] = _sha256(root, rel)
            if out[rel] is not None:
                entries[rel] = [*key, out[rel]]
        if self.path is not None:
            path = self.path
            self._saving = self._thread(lambda: _save(path, entries))
        return out

    def close(self) -> None:
        """Wait for the read and the save."""
        for thread in (self._loading, self._saving):
            if thread is not None:
                thread.join()


def _save(path: Path, entries: dict[str, list]) -> None:
    """Write the cache atomically; a failure only loses the cache."""
    with contextlib.suppress(OSError):
        write_atomically(path, [json.dumps({"format": FORMAT, "saved_ns": time.time_ns(), "files": entries})],
                         own=True)
