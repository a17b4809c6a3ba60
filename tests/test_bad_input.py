"""Bad input is a one-line error (or a stated warning), never a traceback and never silently accepted:
config files, unwritable index places, `--diff` input, reversed ranges, `--ir` labels, `--scaffold`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from common.config import Config, load_config
from common.errors import PerfqError
from perfq.options import EXIT_ERROR
from tests.aten_fixture import commit_all, make_repo, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
GOOD_PATCH = (
    f"diff --git a/{KERNEL} b/{KERNEL}\n--- a/{KERNEL}\n+++ b/{KERNEL}\n"
    "@@ -7 +7 @@\n-    out[i] = out[i] * 2;\n+    out[i] = out[i] * 4;\n"
)


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """The fixture repo, indexed, with a second commit changing a kernel."""
    repo = make_repo(tmp_path_factory.mktemp("bad") / "repo")
    subprocess.run(["git", "tag", "base"], cwd=repo, check=True)
    from indexer.build import build_index

    build_index(repo, Config(), repo / ".git/perfq/index.duckdb", jobs=1, quiet=True, trace=False)
    replace_in(repo, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(repo, "kernel change")
    subprocess.run(["git", "tag", "head"], cwd=repo, check=True)
    subprocess.run(["git", "checkout", "-q", "base"], cwd=repo, check=True)
    return repo


# --- configuration -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("perfq.toml", 'tool = "x"\n', "'tool' must be a table"),
        ("perfq.toml", '[tool]\nperfq = "x"\n', "'perfq' must be a table"),
        ("perfq.toml", "[tool.black]\nline-length = 3\n", "without [tool.perfq]"),
        ("pyproject.toml", 'tool = "perfq"\n', "'tool' must be a table"),  # one naming perfq is read
        ("pyproject.toml", "[tool]\nperfq = 3\n", "'perfq' must be a table"),
        ("pyproject.toml", '[tool.perfq]\nsource_root = ["src"]\n', "did you mean 'source_roots'?"),
        ("perfq.toml", 'python-root = ["py"]\n', "did you mean 'python_roots'?"),
        ("perfq.toml", "max_depht = 3\n", "did you mean 'max_depth'?"),
        ("perfq.toml", "hub_fanuot = 3\n", "did you mean 'hub_fanout'?"),
        ("perfq.toml", "max_depth = true\n", "'max_depth' must be an integer"),
        ("perfq.toml", "reach_bound = 0\n", "'reach_bound' must be a positive integer"),
        ("perfq.toml", "hub_fanout = -5\n", "'hub_fanout' must be a positive integer"),
        ("perfq.toml", "max_depth = -1\n", "'max_depth' must be a positive integer"),
        ("perfq.toml", "max_depth = 2.5\n", "'max_depth' must be an integer"),
        ("perfq.toml", "shared_fraction = 0\n", "'shared_fraction' must be a fraction in (0, 1]"),
        ("perfq.toml", "shared_fraction = 1.5\n", "'shared_fraction' must be a fraction in (0, 1]"),
        ("perfq.toml", "shared_fraction = true\n", "'shared_fraction' must be a fraction in (0, 1]"),
        ("perfq.toml", 'shared_fraction = "half"\n', "'shared_fraction' must be a fraction in (0, 1]"),
        ("perfq.toml", "upstream = 1\n", "'upstream' must be a string"),
        ("perfq.toml", "exclude = [1]\n", "'exclude' must be a list of strings"),
    ],
)
def test_bad_config_is_a_one_line_error(tmp_path: Path, cli, name: str, text: str, needle: str):
    repo = make_repo(tmp_path / "repo")
    (repo / name).write_text(text)
    with pytest.raises(PerfqError, match="."):
        load_config(repo)
    _one_line_error(cli(repo, "index", "-q", "--no-trace"), needle)
    assert not (repo / ".git/perfq/index.duckdb").exists()


def test_an_unknown_key_far_from_any_known_one_is_a_warning(tmp_path: Path, cli):
    repo = make_repo(tmp_path / "repo")
    (repo / "perfq.toml").write_text('colour = "blue"\n[compare]\nalpha = 0.01\n')
    cfg = load_config(repo)
    assert cfg.extra == {"colour": "blue", "compare": {"alpha": 0.01}} and cfg.unknown_keys() == ["colour"]
    proc = cli(repo, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    assert "warning: unknown config key 'colour' is ignored" in proc.stderr
    assert "compare" not in proc.stderr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('source_roots = ["aten/src/ATn"]\n', "source_roots: 'aten/src/ATn' does not exist"),
        ('python_roots = ["pyy"]\n', "python_roots: 'pyy' does not exist"),
        ('benchmark_roots = ["bench/none"]\n', "benchmark_roots: 'bench/none' does not exist"),
        ("source_roots = []\npython_roots = []\nbenchmark_roots = []\n", "nothing to index"),
        ('source_roots = ["README.md"]\n', "source_roots: 'README.md' holds no C++ source"),
        ('source_roots = ["torch"]\n', "source_roots: 'torch' holds no C++ source"),
        ('python_roots = ["aten"]\n', "python_roots: 'aten' holds no Python file"),
        ('script_benchmark_roots = ["aten/src"]\n', "script_benchmark_roots: 'aten/src' holds no Python script"),
    ],
)
def test_roots_that_index_nothing_are_an_error(tmp_path: Path, cli, text: str, needle: str):
    repo = make_repo(tmp_path / "repo")
    (repo / "perfq.toml").write_text(text)
    _one_line_error(cli(repo, "index", "-q", "--no-trace"), needle)


def test_default_roots_missing_from_the_tree_are_not_an_error(tmp_path: Path, cli):
    repo = make_repo(tmp_path / "repo")  # has no c10/ nor torch/csrc/, both default source roots
    assert not (repo / "c10").exists()
    proc = cli(repo, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr


def test_no_sources_but_benchmarks_is_an_index(tmp_path: Path, cli):
    """Operators and benchmarks only (traced truth): chosen with empty roots, not an error."""
    repo = make_repo(tmp_path / "repo")
    (repo / "perfq.toml").write_text("source_roots = []\npython_roots = []\n")
    proc = cli(repo, "index", "-q", "--no-trace", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)["counts"]
    assert counts["functions"] == 0 and counts["benchmarks"] == 3 and counts["ops"] > 0


# --- the index location ---------------------------------------------------------------------------------------


def test_an_unwritable_index_location_is_a_one_line_error(tmp_path: Path, cli, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    _one_line_error(cli(repo, "index", "-q", "--no-trace", "--db", "/proc/perfq/index.duckdb"),
                    "cannot write the index at /proc/perfq/index.duckdb")
    real_replace = os.replace

    def denied(src, dst, *args, **kwargs):
        if str(dst).endswith("index.duckdb"):
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", denied)
    proc = cli(repo, "index", "-q", "--no-trace")
    _one_line_error(proc, "cannot write the index at", "Permission denied", "--db")
    state = repo / ".git/perfq"
    assert not [p for p in state.iterdir() if ".tmp" in p.name]


# --- perfq affected inputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ("hello, this is prose and not a patch\n", "not a unified diff"),
        (os.urandom(2048).decode("latin-1"), ""),
        (GOOD_PATCH.replace("out[i] * 2", "out[i] * 7"), "does not apply to the working tree"),
        (GOOD_PATCH.replace("@@ -7 +7 @@", "@@ -70 +70 @@"), "is past its end"),
        (GOOD_PATCH.replace("SoftmaxOpKernel.cpp", "Missing.cpp"), "Missing.cpp does not exist there"),
        (GOOD_PATCH.replace("@@ -7 +7 @@", "@@ -7,5 +7 @@"), ""),
    ],
    ids=["prose", "random-bytes", "context-differs", "out-of-range", "missing-file", "bad-counts"],
)
def test_a_bad_patch_is_a_one_line_error(indexed: Path, perfq, patch: str, needle: str):
    proc = perfq(indexed, "affected", "--diff", "-", stdin=patch)
    _one_line_error(proc, needle)


def test_a_patch_that_applies_and_an_empty_one(indexed: Path, perfq):
    proc = perfq(indexed, "affected", "--diff", "-", "--format", "names", stdin=GOOD_PATCH)
    assert proc.returncode == 0 and sorted(proc.stdout.split()) == ["fancy_test", "softmax_op_test"], proc.stderr
    proc = perfq(indexed, "affected", "head", "--diff", "-", "--format", "json", stdin="")
    assert proc.returncode == 0, proc.stderr
    assert "the --diff input is empty: no change" in json.loads(proc.stdout)["warnings"]
    proc = perfq(indexed, "affected", "head", "--diff", "-", stdin=GOOD_PATCH)  # at `head` the line reads * 3
    _one_line_error(proc, "does not apply to head")


def test_a_patch_already_applied_in_the_working_tree_says_so(indexed: Path, perfq):
    replace_in(indexed, KERNEL, "out[i] * 2", "out[i] * 4")
    try:
        proc = perfq(indexed, "affected", "--diff", "-", stdin=GOOD_PATCH)
    finally:
        subprocess.run(["git", "checkout", "-q", KERNEL], cwd=indexed, check=True)
    _one_line_error(proc, "already applied", "perfq affected REF --diff")
    proc = perfq(indexed, "affected", "base", "--diff", "-", "--format", "names", stdin=GOOD_PATCH)
    assert proc.returncode == 0 and sorted(proc.stdout.split()) == ["fancy_test", "softmax_op_test"], proc.stderr


def test_a_reversed_range_is_a_one_line_error(indexed: Path, cli):
    proc = cli(indexed, "affected", "base..head", "--format", "names")
    assert proc.returncode == 0 and sorted(proc.stdout.split()) == ["fancy_test", "softmax_op_test"]
    _one_line_error(cli(indexed, "affected", "head..base"), "head..base is empty", "try base..head")
    assert cli(indexed, "affected", "head..head", "--format", "names").returncode == 0  # empty, not reversed


def test_ir_labels_that_are_not_stored_are_a_one_line_error(indexed: Path, cli, tmp_path: Path):
    history = tmp_path / "h.duckdb"
    _one_line_error(cli(indexed, "affected", "base..head", "--ir", "a..b", "--history", str(history)),
                    "no results history")
    from schema.history import connect_history

    connect_history(history).close()
    _one_line_error(cli(indexed, "affected", "base..head", "--ir", "a..b", "--history", str(history)),
                    "no IR collection labelled 'a'")


def test_an_empty_scaffold_operator_is_a_one_line_error(indexed: Path, cli):
    _one_line_error(cli(indexed, "coverage", "--scaffold", ""), "--scaffold needs an operator name")
    _one_line_error(cli(indexed, "coverage", "--scaffold", "  "), "--scaffold needs an operator name")
