"""The facts cache is data, not code: a pickle planted at its path is never unpickled, damaged lines cost
their files a re-parse and never the build, and a warm re-link from the cache equals a cold build."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from indexer.facts_cache import decode_line, encode_line, load_cache, save_cache
from tests.aten_fixture import make_repo

TABLES = ("files", "functions", "calls", "call_edges", "op_calls", "reach_edges", "kernels", "stub_impls",
          "library_impls", "benchmarks", "bench_ops", "ops")


def _tables(db: Path) -> dict[str, list]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall())) for t in TABLES}
    finally:
        con.close()


class _Planted:
    """Unpickling this makes a directory: proof that the file was run as code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, dict]:
    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    return repo, db, _tables(db)


def test_the_cache_is_json_lines_and_a_warm_relink_equals_a_cold_build(built):
    repo, db, cold = built
    cache = db.with_name(db.name + ".facts")
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "perfq-facts/1"
    kinds = {json.loads(line)[1] for line in lines[1:]}
    assert {"cpp", "python", "benchmark", "yaml"} <= kinds
    report = build_index(repo, Config(), db, jobs=1, quiet=True, full=True, trace=False)
    assert report.reparsed == 0 and report.reused == len(lines) - 1 - 1  # minus the header and the yaml
    assert _tables(db) == cold


def test_a_planted_pickle_is_never_run(built, tmp_path: Path):
    repo, db, cold = built
    marker = tmp_path / "pwned"
    cache = db.with_name(db.name + ".facts")
    cache.write_bytes(pickle.dumps({"version": "x", "files": _Planted(marker)}))
    report = build_index(repo, Config(), db, jobs=1, quiet=True, full=True, trace=False)
    assert not marker.exists()
    assert report.reused == 0 and _tables(db) == cold
    assert cache.read_text(encoding="utf-8").startswith('{"format": "perfq-facts/1"')


def test_damaged_lines_cost_a_reparse_not_the_build(built):
    repo, db, cold = built
    cache = db.with_name(db.name + ".facts")
    header, *lines = cache.read_text(encoding="utf-8").splitlines()
    cpp = [i for i, line in enumerate(lines) if json.loads(line)[1] == "cpp"]
    key, kind, digest, payload = json.loads(lines[cpp[0]])
    lines[cpp[0]] = json.dumps([key, kind, digest, payload[:-1]])  # a field short
    lines[cpp[1]] = lines[cpp[1]][: len(lines[cpp[1]]) // 2]  # cut in the middle
    key, kind, digest, payload = json.loads(lines[cpp[2]])
    payload[6] = [["f", "f", "function"]]  # a function row of the wrong arity
    lines[cpp[2]] = json.dumps([key, kind, digest, payload])
    lines.append("\x00\xff not json")
    lines.append(json.dumps(["cpp:evil.cpp", "code", "", "__import__('os').system('true')"]))
    cache.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    report = build_index(repo, Config(), db, jobs=1, quiet=True, full=True, trace=False)
    assert report.reparsed == 3
    assert _tables(db) == cold


def test_a_cache_of_another_extractor_version_is_ignored(built):
    repo, db, cold = built
    cache = db.with_name(db.name + ".facts")
    header, *lines = cache.read_text(encoding="utf-8").splitlines()
    cache.write_text("\n".join([json.dumps({"format": "perfq-facts/1", "version": "old"}), *lines]) + "\n")
    report = build_index(repo, Config(), db, jobs=1, quiet=True, full=True, trace=False)
    assert report.reused == 0 and _tables(db) == cold


def test_lines_are_written_again_as_they_were_read_or_made_and_only_while_their_digest_holds(built, tmp_path: Path):
    """The pool hands each file's facts over as its cache line, and the save writes such lines
    as they are: each must be the line the cache would encode for those facts, and an entry
    whose digest changed (or of a kind not keyed by its digest, a trace) is encoded anew."""
    _, db, _ = built
    cache = db.with_name(db.name + ".facts")
    version = json.loads(cache.read_text(encoding="utf-8").splitlines()[0])["version"]
    lines: dict = {}
    entries = load_cache(cache, version, lines)
    assert lines and set(lines) == {k for k, (kind, _, _) in entries.items() if kind in ("cpp", "python", "benchmark")}
    for key, (digest, line) in lines.items():
        kind, _, facts = entries[key]
        assert line == encode_line(key, kind, digest, facts)  # the workers' lines are the cache's encoding

    cpp = next(k for k, e in entries.items() if e[0] == "cpp")
    kind, digest, facts = entries[cpp]
    facts.n_lines += 1  # changed facts under a new digest: encoded anew
    entries[cpp] = (kind, digest + "x", facts)
    entries["trace:bench.py"] = ("trace", "k", {"tests": []})
    lines["trace:bench.py"] = ("k", "not this line\n")  # not a kind keyed by digest: never reused
    out = tmp_path / "again.facts"
    save_cache(out, version, entries, lines)
    written = dict(decode_line(line) for line in out.read_text(encoding="utf-8").splitlines()[1:])
    assert written[cpp] == (kind, digest + "x", facts)
    assert written["trace:bench.py"] == ("trace", "k", {"tests": []})
    kept = [k for k in lines if k != cpp and k != "trace:bench.py"]
    text = out.read_text(encoding="utf-8")
    assert all(lines[k][1] in text for k in kept)


@pytest.mark.parametrize("poison", ["line-as-text", "call-out-of-range", "name-as-number"])
def test_a_poisoned_line_that_decodes_costs_a_reparse_not_every_later_build(built, poison: str):
    """Facts of the right shape but the wrong types or references (issue 33: every later index,
    `--full` included, failed) make the build parse every file again, once; the cache is healed."""
    repo, db, cold = built
    cache = db.with_name(db.name + ".facts")
    header, *lines = cache.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines)
              if json.loads(line)[1] == "cpp" and json.loads(line)[3][6] and json.loads(line)[3][7])
    key, kind, digest, payload = json.loads(lines[at])
    if poison == "line-as-text":
        payload[6][0][3] = "x"
    elif poison == "call-out-of-range":
        payload[7][0][0] = 999
    else:
        payload[6][0][1] = 7
    lines[at] = json.dumps([key, kind, digest, payload])
    cache.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    for full in (True, False, True):
        build_index(repo, Config(), db, jobs=1, quiet=True, full=full, trace=False)
        assert _tables(db) == cold
    assert lines[at] not in cache.read_text(encoding="utf-8").splitlines()  # healed
