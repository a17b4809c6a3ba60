"""Which files get indexed: every root's files from one listing, overlapping roots, a root that
is a file, neighbours that only share a root's prefix, untracked files, a tree without git, git
missing from PATH, and exclusion patterns."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.config import Config
from indexer.discover import discover, excluded, excluded_paths
from tests.aten_fixture import make_repo

FILES = [
    "torch/nn/functional.py",
    "torch/csrc/api/add.cpp",
    "torch/csrc/api/__init__.py",
    "torch.py",  # shares the prefix "torch" but lies below no root
    "torch-extra/kernels.cpp",
    "aten/src/ATen/native/Add.cpp",
    "aten/src/ATen/native/Add.py",
    "aten/src/ATen/native/test/AddTest.cpp",  # excluded
    "benchmarks/pt/add_test.py",
    "benchmarks/pt/__init__.py",
    "benchmarks/pt/helpers.py",  # neither *_test.py nor under a script root
    "benchmarks/benchmark_core.py",  # the harness, beside the benchmark root: a module benchmarks import
    "micro/softmax.py",
    "one_kernel.cpp",  # a root that is a file
]

CONFIG = Config(
    source_roots=("aten/src/ATen", "torch/csrc", "one_kernel.cpp"),
    python_roots=("torch",),
    benchmark_roots=("benchmarks/pt",),
    script_benchmark_roots=("micro",),
)

EXPECTED = {
    "cpp": ["aten/src/ATen/native/Add.cpp", "one_kernel.cpp", "torch/csrc/api/add.cpp"],
    "python": ["torch/csrc/api/__init__.py", "torch/nn/functional.py"],
    "benchmark": ["benchmarks/pt/add_test.py", "micro/softmax.py"],
    "benchmark_module": ["benchmarks/benchmark_core.py", "benchmarks/pt/__init__.py", "benchmarks/pt/helpers.py"],
}


def _tree(root: Path) -> Path:
    for path in FILES:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n")
    return root


@pytest.mark.parametrize("git", [True, False], ids=["git", "no-git"])
def test_each_kind_gets_the_files_below_its_roots(tmp_path: Path, git: bool):
    repo = _tree(tmp_path / "repo")
    if git:
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "add", *FILES[:6]], check=True)  # the rest untracked: still listed
    assert discover(repo, CONFIG) == EXPECTED


def test_index_with_git_missing_from_path_is_one_line_and_exit_4(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    no_git = tmp_path / "bin"
    no_git.mkdir()
    res = subprocess.run([sys.executable, "-m", "perfq", "index"], cwd=repo, capture_output=True, text=True,
                         env={**os.environ, "PATH": str(no_git)}, timeout=120)
    assert res.returncode == 4, res.stderr
    assert res.stderr.strip() == "error: git is not installed or not on PATH"
    assert not (repo / ".git" / "perfq" / "index.duckdb").exists()


_WILDCARDS = ("*", "**", "?", "t[e]st", "[!a]*")
_SEGMENT = st.sampled_from(["aten", "test", "tests", "third_party", "src", "a.cpp", "b.h", "x.py", *_WILDCARDS])


@settings(max_examples=300, deadline=None)
@given(
    path=st.lists(_SEGMENT.filter(lambda s: s not in _WILDCARDS), min_size=1, max_size=5).map("/".join),
    patterns=st.lists(st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join), min_size=0, max_size=3),
    leading=st.booleans(),
)
def test_exclusion_is_fnmatch_of_the_path_or_the_slashed_path(path, patterns, leading):
    """The literal-text check and one regular expression per pattern equal fnmatch on ``path``
    or on ``/path``."""
    patterns = tuple(("/" if leading else "") + p for p in patterns)
    expected = any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase("/" + path, p) for p in patterns)
    assert excluded(path, patterns) == expected
    others = ["aten/a.cpp", "test/b.h", "src/third_party/x.py"]
    assert excluded_paths([path, *others], patterns) == {p for p in [path, *others] if excluded(p, patterns)}
