"""The out-of-tree backend fixture is a valid, committed git repository of the promised shape."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

import yaml

from tests.oot_fixture import git, make_oot_repo, repo_files


def test_fixture_is_a_clean_committed_git_repo(tmp_path: Path) -> None:
    repo = make_oot_repo(tmp_path)
    assert git(repo.path, "rev-parse", "--is-inside-work-tree") == "true"
    assert git(repo.path, "rev-parse", "HEAD") == repo.head
    assert git(repo.path, "status", "--porcelain") == ""
    tracked = set(git(repo.path, "ls-files").splitlines())
    assert tracked == set(repo_files())
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo.path, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_fixture_yaml_config_and_scripts_parse(tmp_path: Path) -> None:
    repo = make_oot_repo(tmp_path)
    entries = yaml.safe_load((repo.path / "yaml/native/native_functions.yaml").read_text())
    xpu = {e["func"].split("(")[0]: e["dispatch"]["XPU"] for e in entries if "XPU" in (e.get("dispatch") or {})}
    assert xpu["native_batch_norm"] == "batch_norm_xpu"
    assert xpu["_fused_scale_shift_"] == "_fused_scale_shift_xpu_"
    config = tomllib.loads((repo.path / "perfq.toml").read_text())["tool"]["perfq"]
    assert config["upstream"] == "torch"
    assert config["script_benchmark_roots"] == ["test/microbench"]
    scripts = sorted((repo.path / "test/microbench").glob("*.py"))
    assert [p.name for p in scripts] == ["batch_norm_2d.py", "distance.cdist.py", "eltwise.add.py",
                                         "upsample_nearest2d.py"]
    for path in scripts:
        tree = ast.parse(path.read_text())
        withs = [n for n in ast.walk(tree) if isinstance(n, ast.With)]
        assert any(ast.unparse(item.context_expr).startswith("profile(") for w in withs for item in w.items)
        assert 'device = "xpu"' in path.read_text()


def test_fixture_registrations_and_shared_header(tmp_path: Path) -> None:
    repo = make_oot_repo(tmp_path)
    src = repo.path / "src/ATen/native/xpu"
    assert "REGISTER_XPU_DISPATCH(cdist_stub, &xpu::cdist_kernel);" in (src / "Distance.cpp").read_text()
    assert "TORCH_IMPL_FUNC(upsample_nearest2d_out_xpu)" in (src / "UpSampleNearest2d.cpp").read_text()
    includers = [p.name for p in sorted((src / "sycl").glob("*.cpp")) if "sycl/Loops.h" in p.read_text()]
    assert includers == ["BinaryKernels.cpp", "DistanceKernels.cpp"]


def test_commit_edit_makes_a_one_file_commit(tmp_path: Path) -> None:
    repo = make_oot_repo(tmp_path)
    rel = "src/ATen/native/xpu/sycl/DistanceKernels.cpp"
    sha = repo.commit_edit(rel, "return a > b ? a - b : b - a;", "return a >= b ? a - b : b - a;", "cdist: tie")
    assert git(repo.path, "rev-parse", "HEAD~1") == repo.head
    assert git(repo.path, "diff", "--name-only", f"{repo.head}..{sha}").splitlines() == [rel]
