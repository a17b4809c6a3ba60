"""Configuration: PyTorch defaults, [tool.perfq] or perfq.toml, flags; bad values are one error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.config import Config, load_config
from common.errors import PerfqError
from perfq.options import EXIT_ERROR
from tests.aten_fixture import make_repo, perfq


def test_defaults_are_pytorchs(tmp_path: Path):
    cfg = load_config(tmp_path)
    assert cfg == Config()
    assert cfg.source_roots == ("aten/src/ATen", "c10", "torch/csrc")
    assert cfg.benchmark_roots == ("benchmarks/operator_benchmark/pt",)


def test_pyproject_section_then_flags(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfq]\nsource-roots = ["src"]\nreach_bound = 7\nshared_fraction = 1\n'
        '[tool.perfq.ir.benchmarks]\nadd_test = ["k:add"]\n'
    )
    cfg = load_config(tmp_path, {"python_roots": ["py"], "benchmark_roots": None})
    assert cfg.source_roots == ("src",) and cfg.reach_bound == 7 and cfg.python_roots == ("py",)
    assert cfg.shared_fraction == 1.0 and isinstance(cfg.shared_fraction, float)
    assert cfg.benchmark_roots == Config().benchmark_roots
    assert cfg.extra["ir"] == {"benchmarks": {"add_test": ["k:add"]}}


def test_perfq_toml_wins_over_pyproject(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.perfq]\nsource_roots = ["a"]\n')
    (tmp_path / "perfq.toml").write_text('source_roots = ["b"]\n')
    assert load_config(tmp_path).source_roots == ("b",)


@pytest.mark.parametrize(
    "text", ['[tool.perfq]\nreach_bound = "many"\n', "[tool.perfq\n", "[tool.perfq]\nexclude = 3\n"]
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(PerfqError):
        load_config(tmp_path)


def test_stats_reports_counts_and_resolution(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    assert perfq(repo, "index", "-q").returncode == 0
    proc = perfq(repo, "stats", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["counts"]["benchmarks"] == 3 and stats["counts"]["stub_impls"] == 1
    # every table of rows is counted, the class hierarchy's and the sampler's included
    assert {"includes", "class_bases", "virtual_methods", "native_tests", "canary_sets"} <= set(stats["counts"])
    assert not {"meta", "graph"} & set(stats["counts"])
    assert stats["resolution"]["stub impls resolved"] == "1/1 (100.0%)"
    assert stats["resolution"]["CPU/CUDA kernels resolved"] == "4/4 (100.0%)"
    proc = perfq(repo, "stats", "--db", str(tmp_path / "missing.duckdb"))
    assert proc.returncode == EXIT_ERROR and "no perfq index" in proc.stderr


def test_stats_table_says_when_no_benchmark_was_traced(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    assert perfq(repo, "index", "-q", "--no-trace").returncode == 0
    proc = perfq(repo, "stats")
    assert proc.returncode == 0, proc.stderr
    assert "traced benchmark files: none (indexed with --no-trace, or without torch)" in proc.stdout
    assert "tests ()" not in proc.stdout


def test_a_pyproject_that_does_not_name_perfq_is_not_judged(tmp_path: Path):
    """A project's own pyproject.toml without [tool.perfq] is not parsed: perfq runs on its
    defaults even when that file is not valid TOML (it is not perfq's to judge)."""
    (tmp_path / "pyproject.toml").write_text('[project\nname = "torch"\n')
    assert load_config(tmp_path) == Config()
    (tmp_path / "pyproject.toml").write_text('[project\nname = "torch"\n[tool.perfq]\nmax_depth = 3\n')
    with pytest.raises(PerfqError, match="malformed TOML"):
        load_config(tmp_path)
