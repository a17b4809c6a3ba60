"""The CI gate (`perfq ci report --fail-on-regression`) cannot be opened by the PR it judges.

Issue 33 item 7: the PR's own config must not loosen it (thresholds and ignore list come from the
base commit), a selected benchmark without a result fails it, and NaN or out-of-range thresholds
and misspelt compare keys are errors, not silently vanished regressions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from perfq.options import EXIT_ERROR, EXIT_GATE, EXIT_USAGE
from tests.conftest import git
from tests.run_fakebench import make_bench_root

LOOSE = ['[compare]\nignore = ["*"]\n', "[compare]\nmin_effect = 1000\n", "[compare]\nalpha = 1e-300\n"]


@pytest.fixture
def slowed(tmp_path: Path, cli) -> Path:
    """An artifact directory: one `perfq run --ab` of fake_test whose head is 2x slower (4 tests)."""
    root = make_bench_root(tmp_path)
    inputs = tmp_path / "perfq-in"
    inputs.mkdir()
    res = cli(tmp_path, "run", "-l", "pr-4", "--ab", "--base-python", sys.executable, "--head-python",
              sys.executable, "--bench", "fake", "--head-env", "FAKE_SLOW=2", "--bench-root", str(root),
              "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path), "--out",
              str(inputs / "results-fake_test-eager-cpu.json"))
    assert res.returncode == 0, res.stderr
    (inputs / "matrix.json").write_text(json.dumps({"include": [{"benchmark": "fake_test"}]}))
    return inputs


def _repo(path: Path, base_config: str | None) -> str:
    """A repository whose base commit has ``base_config`` as perfq.toml (None: no config); returns that commit."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("x\n")
    if base_config is not None:
        (path / "perfq.toml").write_text(base_config)
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return git(path, "rev-parse", "HEAD").strip()


def _report(cli, repo: Path, inputs: Path, *extra: str):
    return cli(repo, "ci", "report", str(inputs), "--label", "pr-4", "--pr", "4", "--head-sha", "d" * 40,
               "--out", str(repo / "out"), "--fail-on-regression", *extra)


def test_the_prs_config_cannot_open_the_gate(tmp_path, cli, slowed):
    repo = tmp_path / "repo"
    base = _repo(repo, None)
    for loose in LOOSE:  # the PR's checkout (working tree and its commit) loosens the compare settings
        (repo / "perfq.toml").write_text(loose)
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "PR")
        gate = _report(cli, repo, slowed, "--base", base)
        assert gate.returncode == EXIT_GATE, (loose, gate.stderr)
        assert "4 regression(s)" in (repo / "out/comment.md").read_text()
        gate = _report(cli, repo, slowed)  # no --base: perfq's defaults, still not the checkout's
        assert gate.returncode == EXIT_GATE, (loose, gate.stderr)


def test_the_base_commits_config_is_the_one_read(tmp_path, cli, slowed):
    repo = tmp_path / "repo"
    base = _repo(repo, '[compare]\nignore = ["fake_test"]\n')  # the maintainers ignore the benchmark on main
    (repo / "perfq.toml").write_text("[compare]\nmin_effect = 0.01\n")  # the PR's edit is not read
    gate = _report(cli, repo, slowed, "--base", base)
    assert gate.returncode == 0, gate.stderr
    assert "Ignored by config: 4 test(s)" in (repo / "out/comment.md").read_text()


def test_selected_benchmarks_without_results_fail_the_gate(tmp_path, cli, slowed):
    repo = tmp_path / "repo"
    base = _repo(repo, '[compare]\nignore = ["fake_test"]\n')  # fake_test's regressions do not count here
    (slowed / "matrix.json").write_text(json.dumps({"include": [
        {"shard": 1, "shards": 2, "benchmarks": "fake_test"},
        {"shard": 2, "shards": 2, "benchmarks": "gone_test other_test"}]}))
    gate = _report(cli, repo, slowed, "--base", base)
    assert gate.returncode == EXIT_GATE, gate.stderr
    assert "no result for 2 selected benchmark(s): gone_test, other_test" in gate.stderr
    assert "`gone_test`, `other_test`" in (repo / "out/comment.md").read_text()
    empty = tmp_path / "empty-in"  # the matrix selected a benchmark, no job wrote a result file
    empty.mkdir()
    (empty / "matrix.json").write_text(json.dumps({"include": [{"benchmark": "fake_test"}]}))
    gate = _report(cli, repo, empty, "--base", base)
    assert gate.returncode == EXIT_GATE and "fake_test" in gate.stderr


@pytest.mark.parametrize("flag", [("--alpha", "nan"), ("--alpha", "-1"), ("--alpha", "1"), ("--min-effect", "nan"),
                                  ("--min-effect", "-0.1"), ("--min-effect", "inf")])
def test_nan_and_out_of_range_threshold_flags_are_usage_errors(tmp_path, cli, flag):
    res = cli(tmp_path, "compare", "pr-1", *flag, "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == EXIT_USAGE and f"Invalid value for '{flag[0]}'" in res.stderr
    assert sum("must be" in line for line in res.stderr.splitlines()) == 1


@pytest.mark.parametrize("config, message", [
    ("[compare]\nalpha = -1\n", "alpha must be in (0, 1), not -1"),
    ("[compare]\nalpha = nan\n", "alpha must be in (0, 1), not nan"),
    ("[compare]\nmin_effect = nan\n", "min_effect must be a finite number >= 0, not nan"),
    ("[compare.thresholds]\nsoftmax_test = -0.5\n", "thresholds.softmax_test must be a finite number >= 0"),
    ("[compare]\nmin_samples = 0\n", "min_samples must be a positive integer"),
    ("[compare]\nalpha = \"0.05\"\n", "alpha must be a number"),
    ("[compare]\nmin_efect = 0.5\n", "unknown key 'min_efect'; did you mean 'min_effect'?"),
    ("[compare]\nalpah = 0.5\n", "unknown key 'alpah'; did you mean 'alpha'?"),
    ("[compare]\nwhatever = 1\n", "unknown key 'whatever' (known: alpha, "),
])
def test_bad_compare_config_is_one_line_exit_4(tmp_path, cli, config, message):
    (tmp_path / "perfq.toml").write_text(config)
    res = cli(tmp_path, "compare", "pr-1", "--repo", str(tmp_path), "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == EXIT_ERROR and message in res.stderr and res.stderr.count("\n") == 1, res.stderr
    repo = tmp_path / "repo"  # the gate reads the same from the base commit, exit 4 before anything is written
    base = _repo(repo, config)
    (tmp_path / "in").mkdir()
    gate = _report(cli, repo, tmp_path / "in", "--base", base)
    assert gate.returncode == EXIT_ERROR and message in gate.stderr and gate.stderr.count("\n") == 1, gate.stderr
    assert not (repo / "out").exists()
