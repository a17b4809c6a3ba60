"""Native sampling sharded over a CI matrix (issue 40 item 7): each runner samples one shard of the
chosen tests into a shard file (`perfq index --native --native-shard I/N --native-out F`), and the
nightly merges the files into the index (`perfq index --native-from F ...`), functions mapped by
file and qualified name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.errors import PerfqError
from common.paths import default_index_path
from indexer.native import NativeReport, NativeTest, Shard, load_shards, save_shard
from indexer.native_frames import MatchRate
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in
from tests.conftest import db_rows

OP_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"


def test_shards_split_the_tests_once_each():
    tests = [NativeTest(f"b{i}", f"t{i}", "pt.m", Path("/r")) for i in range(7)]
    shards = [Shard.parse(f"{i}/3").take(tests) for i in (1, 2, 3)]
    assert sorted((t.bench for s in shards for t in s), key=lambda b: int(b[1:])) == [t.bench for t in tests]
    assert [len(s) for s in shards] == [3, 2, 2]
    for bad in ("0/3", "4/3", "a/b", "3", "-1/2"):
        with pytest.raises(PerfqError, match="I/N"):
            Shard.parse(bad)


def test_a_shard_file_maps_back_by_file_and_qualname(tmp_path: Path):
    rows = {"files": [(1, "a.cpp"), (2, "b.cpp")],
            "functions": [(10, 1, "ns::f"), (11, 2, "ns::g"), (12, 2, "ns::gone")]}
    report = NativeReport(rows=(("x_test", "x_M8", 10, 0.5), ("x_test", "x_M8", 12, 0.2)),
                          tests=(("x_test", "x_M8", 100, 80),), sampled=1, failed=("y_test/y_M1: timed out",),
                          rate=MatchRate(100, 80, 40, 30), seconds=12.5)
    save_shard(tmp_path / "s1.json", report, rows, Shard(1, 2))
    report2 = NativeReport(rows=(("z_test", "z_N4", 11, 0.9),), tests=(("z_test", "z_N4", 50, 50),), sampled=1,
                           failed=(), rate=MatchRate(50, 50, 10, 10), seconds=7.5)
    save_shard(tmp_path / "s2.json", report2, rows, Shard(2, 2))
    # another build of the same sources numbers its functions otherwise, and lacks one of them
    other = {"files": [(5, "b.cpp"), (6, "a.cpp")], "functions": [(20, 6, "ns::f"), (21, 5, "ns::g")]}
    merged = load_shards([tmp_path / "s1.json", tmp_path / "s2.json"], other)
    assert sorted(merged.rows) == [("x_test", "x_M8", 20, 0.5), ("z_test", "z_N4", 21, 0.9)]
    assert merged.sampled == 2 and merged.failed == ("y_test/y_M1: timed out",)
    assert merged.rate == MatchRate(150, 130, 50, 40) and merged.seconds == 20.0


@pytest.mark.parametrize("text", ["{", '{"format": "other"}', '{"format": "perfq-native-shard/1", "samples": 3}'])
def test_a_bad_shard_file_is_one_error(tmp_path: Path, text: str):
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(PerfqError, match="shard"):
        load_shards([tmp_path / "bad.json"], {})


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_repo(tmp_path_factory.mktemp("shards"))
    proc = perfq(root, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    return root


def test_merged_shards_select_the_sampled_benchmark(repo: Path, tmp_path: Path):
    shard = tmp_path / "native-1.json"
    shard.write_text(json.dumps({
        "format": "perfq-native-shard/1", "shard": "1/2",
        "samples": [["fancy_test", "fancy_M8", OP_FILE, "at::native::lonely_kernel", 0.42],
                    ["fancy_test", "fancy_M8", OP_FILE, "at::native::not_in_this_index", 0.3]],
        "tests": [["fancy_test", "fancy_M8", 200, 150]], "failed": [],
        "rate": {"samples": 200, "samples_mapped": 150, "frames": 30, "frames_mapped": 20}, "seconds": 15.0,
    }))
    proc = perfq(repo, "index", "-q", "--no-trace", "--native-from", str(shard))
    assert proc.returncode == 0, proc.stderr
    db = default_index_path(repo)
    assert db_rows(db, "SELECT n.bench, n.test, f.qualname, n.share FROM native_samples n"
                       " JOIN functions f ON f.id = n.function_id") == [
        ("fancy_test", "fancy_M8", "at::native::lonely_kernel", 0.42)]
    git(repo, "checkout", "-q", "-b", "work")
    try:
        replace_in(repo, OP_FILE, "make_size(3);", "make_size(4);")
        commit_all(repo)
        doc = json.loads(perfq(repo, "affected", "main", "--format", "json").stdout)
    finally:
        git(repo, "checkout", "-q", "-f", "main")
        git(repo, "branch", "-q", "-D", "work")
    assert {b["name"]: b["source"] for b in doc["benchmarks"]}.get("fancy_test") == "sampled"


def test_shard_options_without_native_or_a_bad_file_are_one_line(repo: Path, tmp_path: Path):
    before = default_index_path(repo).stat().st_mtime_ns
    proc = perfq(repo, "index", "-q", "--no-trace", "--native-shard", "1/2")
    assert proc.returncode == 4 and proc.stderr.strip() == "error: --native-shard and --native-out go with --native"
    (tmp_path / "bad.json").write_text("not json")
    proc = perfq(repo, "index", "-q", "--no-trace", "--native-from", str(tmp_path / "bad.json"))
    assert proc.returncode == 4 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: cannot read")
    assert default_index_path(repo).stat().st_mtime_ns == before  # the index is left as it was
