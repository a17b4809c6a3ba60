"""File digests reuse the stat cache only for files whose stat did not change; the cache is
data that can be damaged or planted without giving a wrong digest."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from indexer import stat_cache


def file_digests(repo: Path, paths: list[str], cache: Path | None) -> dict[str, str | None]:
    """The digests of ``paths`` through the stat cache at ``cache``, read and saved as a build does."""
    with stat_cache.stat_cache(cache) as stats:
        return stats.digests(repo, paths)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.cpp").write_text("void a() {}\n")
    (repo / "b.cpp").write_text("void b() {}\n")
    return repo, tmp_path / "index.duckdb.stat"


def _age(cache: Path, seconds: int) -> None:
    """The cache as if saved ``seconds`` later than it was (its files then count as settled)."""
    doc = json.loads(cache.read_text())
    doc["saved_ns"] += seconds * 1_000_000_000
    cache.write_text(json.dumps(doc))


def test_unchanged_files_are_not_read_again(tmp_path, monkeypatch):
    repo, cache = _tree(tmp_path)
    first = file_digests(repo, ["a.cpp", "b.cpp", "gone.cpp"], cache)
    assert first == {"a.cpp": _sha("void a() {}\n"), "b.cpp": _sha("void b() {}\n"), "gone.cpp": None}
    _age(cache, 10)
    read = []
    real = stat_cache._sha256
    monkeypatch.setattr(stat_cache, "_sha256", lambda root, rel: read.append(os.path.basename(rel)) or real(root, rel))
    (repo / "b.cpp").write_text("void b() { return; }\n")
    second = file_digests(repo, ["a.cpp", "b.cpp"], cache)
    assert read == ["b.cpp"] and second["b.cpp"] == _sha("void b() { return; }\n")
    assert second["a.cpp"] == first["a.cpp"]


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tmp_path):
    repo, cache = _tree(tmp_path)
    file_digests(repo, ["a.cpp"], cache)
    _age(cache, 10)
    st = (repo / "a.cpp").stat()
    (repo / "a.cpp").write_text("void z() {}\n")  # same size
    os.utime(repo / "a.cpp", ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves
    assert file_digests(repo, ["a.cpp"], cache)["a.cpp"] == _sha("void z() {}\n")


def test_a_damaged_or_planted_cache_costs_a_hash_not_a_wrong_digest(tmp_path):
    repo, cache = _tree(tmp_path)
    for content in (b"\x00\xff garbage", b'{"format": "perfq-stat-cache-1", "files": []}', b"[1, 2]"):
        cache.write_bytes(content)
        assert file_digests(repo, ["a.cpp"], cache)["a.cpp"] == _sha("void a() {}\n")
    st = (repo / "a.cpp").stat()
    planted = {"format": "perfq-stat-cache-1", "saved_ns": 0,
               "files": {"a.cpp": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "0" * 64]}}
    cache.write_text(json.dumps(planted))  # saved long before the file changed: not trusted
    assert file_digests(repo, ["a.cpp"], cache)["a.cpp"] == _sha("void a() {}\n")



def test_the_cache_read_and_saved_in_threads_is_whole_when_the_block_ends(tmp_path, monkeypatch):
    """A build reads the cache while it lists its files and saves it while it patches: when
    the block ends both are done, and the next build reuses every digest."""
    repo = tmp_path / "repo"
    repo.mkdir()
    names = [f"f{i}.cpp" for i in range(300)]
    for name in names:
        (repo / name).write_text(f"void {name[:-4]}() {{}}\n")
    cache = tmp_path / "index.duckdb.stat"
    with stat_cache.stat_cache(cache) as stats:
        first = stats.digests(repo, names)
    saved = json.loads(cache.read_text())["files"]
    assert sorted(saved) == sorted(names) and all(saved[n][4] == first[n] for n in names)
    _age(cache, 10)
    read = []
    real = stat_cache._sha256
    monkeypatch.setattr(stat_cache, "_sha256", lambda root, rel: read.append(rel) or real(root, rel))
    with stat_cache.stat_cache(cache) as stats:
        assert stats.digests(repo, names) == first
    assert read == []
