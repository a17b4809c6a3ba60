"""`perfq run --ab --base-ref A --head-ref B`: each side runs its ref's code (perfq.run.sides).

Fixtures are small git repos written here: a pure-Python one whose code comes as a hand-written
wheel per commit (fast, no compiler), and a `torch.utils.cpp_extension` extension built per
side (marked ``torch``, built once per module: one build per commit).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from common.errors import PerfqError
from perfq.run.sides import SideSpec, fetch_wheel, refuse_same_code, sha256_of, side_bench_root
from tests.conftest import db_rows, git, run_perfq

BENCH_TOML = """\
[tool.perfq.benchmarks.{name}]
command = "{{python}} {script}"
pattern = '^(?P<test>\\w+): (?P<value>[0-9.]+) us$'
unit = "us"
"""

WHEEL_BENCH = """\
import time

import wpkg

for _ in range(3):
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        wpkg.work()
        best = min(best, time.perf_counter() - started)
    print(f"work: {{best * 1e6:.1f}} us")
    print("bench_version: {version} us")
"""

WPKG = """\
def work():
    total = 0
    for _ in range({reps}):
        for i in range(20000):
            total += i
    return total
"""


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(out: Path, reps: int) -> Path:
    """A pure-Python wheel of ``wpkg`` 1.0 whose ``work()`` loops ``reps`` times (written by hand)."""
    out.mkdir(parents=True, exist_ok=True)
    dist = "wpkg-1.0.dist-info"
    files = {
        "wpkg.py": WPKG.format(reps=reps).encode(),
        f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: wpkg\nVersion: 1.0\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: perfq-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = out / "wpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def wheel_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Path]:
    """(repo, [C1, C2], wheels dir): C1's wheel fast, C2's three times slower; the benchmark file
    itself prints its commit's version (1 at C1, 2 at C2)."""
    root = tmp_path_factory.mktemp("wheels")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "perfq.toml").write_text(BENCH_TOML.format(name="work", script="bench.py"), encoding="utf-8")
    commits = []
    for version in (1, 2):
        (repo / "bench.py").write_text(WHEEL_BENCH.format(version=version), encoding="utf-8")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"v{version}")
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    wheels = root / "wheels"
    for commit, reps in zip(commits, (1, 3), strict=True):
        make_wheel(wheels / commit, reps)
    return repo, commits, wheels


def _wheel_args(wheels: Path) -> list[str]:
    template = str(wheels / "{commit}" / "wpkg-1.0-py3-none-any.whl")
    return ["--base-wheel", template, "--head-wheel", template]


def _envs(history: Path, label: str) -> dict[str, dict[str, str]]:
    rows = db_rows(history, f"select side, env from runs where label = '{label}'")
    return {side: json.loads(env) for side, env in rows}


def test_wheels_per_commit_run_each_sides_code(wheel_repo, tmp_path):
    repo, (c1, c2), wheels = wheel_repo
    history = tmp_path / "h.duckdb"
    res = run_perfq(repo, "run", "-l", "w", "--ab", "--base-ref", c1, "--head-ref", c2, *_wheel_args(wheels),
                    "--bench", "work", "--repeat", "5", "--format", "json", "--history", str(history))
    assert res.returncode == 0, res.stderr
    verdicts = {t["test"]: t for t in json.loads(res.stdout)["comparison"]["tests"]}
    assert verdicts["work"]["verdict"] == "regression", verdicts["work"]  # the head wheel loops 3 times
    assert verdicts["bench_version"]["base_median"] == 1.0  # each side ran its own commit's benchmark file
    assert verdicts["bench_version"]["head_median"] == 2.0
    envs = _envs(history, "w")
    for side, commit in (("base", c1), ("head", c2)):
        env = envs[side]
        wheel = wheels / commit / "wpkg-1.0-py3-none-any.whl"
        assert env["side_commit"] == env["git_commit"] == commit
        assert env["side_install"] == "wheel" and env["side_wheel"] == str(wheel)
        assert env["side_wheel_sha256"] == sha256_of(wheel)
        assert env["python_executable"].startswith(str(repo / ".git" / "perfq" / "sides"))
        assert (Path(env["side_source"]) / "bench.py").read_text() == git(repo, "show", f"{commit}:bench.py")
    assert envs["base"]["python_executable"] != envs["head"]["python_executable"]

    again = run_perfq(repo, "run", "-l", "w2", "--ab", "--base-ref", c1, "--head-ref", c2, *_wheel_args(wheels),
                      "--bench", "work", "--repeat", "1", "--format", "json", "--history", str(history))
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("(reused)") == 2  # same commits and wheels: nothing made again
    assert _envs(history, "w2")["head"]["side_wheel_sha256"] == envs["head"]["side_wheel_sha256"]


def test_wheels_without_refs_run_the_checkouts_files(wheel_repo, tmp_path):
    repo, (c1, c2), wheels = wheel_repo
    history = tmp_path / "h.duckdb"
    res = run_perfq(repo, "run", "-l", "nr", "--ab", "--base-wheel", str(wheels / c1 / "wpkg-1.0-py3-none-any.whl"),
                    "--head-wheel", str(wheels / c2 / "wpkg-1.0-py3-none-any.whl"), "--bench", "work",
                    "--repeat", "1", "--format", "json", "--sides-dir", str(tmp_path / "sides"),
                    "--history", str(history))
    assert res.returncode == 0, res.stderr
    versions = {t["test"]: t for t in json.loads(res.stdout)["comparison"]["tests"]}["bench_version"]
    assert versions["base_median"] == versions["head_median"] == 2.0  # the checkout (at C2) for both sides
    for side, env in _envs(history, "nr").items():
        assert env["side_source"] == str(repo.resolve()) and env["side_install"] == "wheel", side
        assert env["side_ref"] == "" and env["side_commit"] == c2
    assert not list((tmp_path / "sides").glob("*/src"))  # no worktree made


def test_same_code_under_two_refs_is_refused(wheel_repo, tmp_path):
    repo, (c1, c2), wheels = wheel_repo
    sides_dir = tmp_path / "sides"
    cases = {
        "same ref, nothing installed": ["--base-ref", c2, "--head-ref", "HEAD"],
        "two refs, same installed code": ["--base-ref", c1, "--head-ref", c2],
        "same commit built twice": ["--base-ref", c1, "--head-ref", c1, "--build", "{python} -c pass"],
        "one wheel for both": ["--base-ref", c1, "--head-ref", c2, "--base-wheel", str(wheels / c1 / "x.whl"),
                               "--head-wheel", str(wheels / c1 / "x.whl")],
    }
    for what, args in cases.items():
        res = run_perfq(repo, "run", "-l", "x", "--ab", *args, "--bench", "work", "--sides-dir", str(sides_dir),
                        "--history", str(tmp_path / "h.duckdb"))
        assert res.returncode == 4, (what, res.stderr)
        assert res.stderr.startswith("error: base (") and "would run the same code" in res.stderr, what
        assert len(res.stderr.strip().splitlines()) == 1, what
    assert not sides_dir.exists() or not any(sides_dir.glob("*/venv"))  # refused before building anything


def test_identical_wheels_are_refused_after_reading_them(wheel_repo, tmp_path):
    repo, (c1, c2), wheels = wheel_repo
    copy = tmp_path / "copy" / "wpkg-1.0-py3-none-any.whl"
    copy.parent.mkdir()
    shutil.copy(wheels / c1 / "wpkg-1.0-py3-none-any.whl", copy)
    res = run_perfq(repo, "run", "-l", "x", "--ab", "--base-ref", c1, "--head-ref", c2,
                    "--base-wheel", str(wheels / c1 / "wpkg-1.0-py3-none-any.whl"), "--head-wheel", str(copy),
                    "--bench", "work", "--sides-dir", str(tmp_path / "sides"), "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == 4, res.stderr
    assert "both wheels are the same file" in res.stderr


def test_build_needs_both_refs(wheel_repo, tmp_path):
    repo, _, wheels = wheel_repo
    res = run_perfq(repo, "run", "-l", "aa", "--ab", "--head-wheel", str(next(wheels.glob("*/*.whl"))),
                    "--base-python", "python3", "--head-python", "python3", "--bench", "work",
                    "--build", "{python} -c pass", "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == 4 and "--build needs --base-ref and --head-ref" in res.stderr


def test_build_without_ab_or_refs_is_a_usage_error(wheel_repo, tmp_path):
    repo, (c1, _), _ = wheel_repo
    res = run_perfq(repo, "run", "-l", "x", "--side", "head", "--build", "{python} -c pass", "--bench", "work",
                    "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == 4 and "need --ab" in res.stderr
    res = run_perfq(repo, "run", "-l", "x", "--ab", "--base-ref", c1, "--head-ref", "nope", "--bench", "work",
                    "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == 4 and "unknown ref 'nope'" in res.stderr


def test_wheel_urls_are_downloaded_once(tmp_path):
    wheel = make_wheel(tmp_path / "src", reps=1)
    cache = tmp_path / "cache"
    first = fetch_wheel(wheel.as_uri(), cache)
    assert first.name == wheel.name and first.is_relative_to(cache)
    assert sha256_of(first) == sha256_of(wheel)
    wheel.unlink()  # the cached copy is used from now on
    assert fetch_wheel(wheel.as_uri(), cache) == first
    with pytest.raises(PerfqError, match="does not exist"):
        fetch_wheel(str(tmp_path / "missing.whl"), cache)
    with pytest.raises(PerfqError, match="does not name a .whl"):
        fetch_wheel("https://example.invalid/torch.tar.gz", cache)


def test_side_identity_and_bench_root(tmp_path):
    from perfq.run.sides import Install

    built = SideSpec("base", "a", "1" * 40, "/py", Install.build, ("{python}", "-c", "pass"))
    refuse_same_code(built, SideSpec("head", "b", "2" * 40, "/py", Install.build, ("{python}", "-c", "pass")))
    refuse_same_code(built, SideSpec("head", "a", "1" * 40, "/other/py", Install.build, ("{python}", "-c", "pass")))
    with pytest.raises(PerfqError, match="both refs name that commit"):
        refuse_same_code(built, SideSpec("head", "b", "1" * 40, "/py", Install.build, ("{python}", "-c", "pass")))
    wheel = SideSpec("base", "a", "1" * 40, "/py", Install.wheel, wheel="w1.whl")
    refuse_same_code(wheel, SideSpec("head", "b", "2" * 40, "/py", Install.wheel, wheel="w2.whl"), "s1", "s2")
    with pytest.raises(PerfqError, match="same file"):
        refuse_same_code(wheel, SideSpec("head", "b", "2" * 40, "/py", Install.wheel, wheel="w2.whl"), "s", "s")
    repo = tmp_path / "repo"
    assert side_bench_root(repo, repo / "benchmarks" / "ob", tmp_path / "wt") == tmp_path / "wt" / "benchmarks" / "ob"
    assert side_bench_root(repo, tmp_path / "elsewhere", tmp_path / "wt") == tmp_path / "elsewhere"


# --- a C++ extension built per side (torch.utils.cpp_extension) ---------------------------------

SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="sumext", version="0.1", ext_modules=[CppExtension("sumext", ["sumext.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""

SUMEXT_CPP = """\
#include <ATen/core/Tensor.h>
#include <torch/library.h>

// one operator, sumext::loop_sum, registered with the dispatcher (lighter to compile than a
// pybind11 module over torch/extension.h: about 17 s of CPU instead of a minute)
double loop_sum(const at::Tensor& x) {
  auto a = x.contiguous();
  const float* p = a.data_ptr<float>();
  double s = 0;
  for (int r = 0; r < REPS; ++r)
    for (int64_t i = 0; i < a.numel(); ++i) s += p[i];
  return s;
}

TORCH_LIBRARY(sumext, m) { m.def("loop_sum", &loop_sum); }
"""

EXT_BENCH = """\
import glob
import time

import torch

torch.ops.load_library(glob.glob("sumext*.so")[0])
x = torch.ones(200000)
for _ in range(4):
    best = float("inf")
    for _ in range(20):
        started = time.perf_counter()
        torch.ops.sumext.loop_sum(x)
        best = min(best, time.perf_counter() - started)
    print(f"loop_sum: {best * 1e6:.1f} us")
"""

# builds the extension in place in the side's worktree (the benchmark imports it from there); with
# `{python} -m pip install --no-build-isolation .` it would go into the side's venv instead
EXT_BUILD = "{python} setup.py build_ext --inplace"


@pytest.fixture(scope="module")
def ext_run(tmp_path_factory: pytest.TempPathFactory):
    """The extension repo (commit 1: one pass over the tensor; commit 2: five) and one
    `perfq run --ab --base-ref C1 --head-ref C2 --build ...` of it: two builds, once per module."""
    pytest.importorskip("torch.utils.cpp_extension")
    if not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("no C++ compiler")
    root = tmp_path_factory.mktemp("ext")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (repo / "bench.py").write_text(EXT_BENCH, encoding="utf-8")
    (repo / "perfq.toml").write_text(BENCH_TOML.format(name="sumloop", script="bench.py"), encoding="utf-8")
    commits = []
    for reps in (1, 5):
        (repo / "sumext.cpp").write_text(SUMEXT_CPP.replace("REPS", str(reps)), encoding="utf-8")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"{reps} pass(es)")
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    history = root / "h.duckdb"
    res = run_perfq(repo, "run", "-l", "ext", "--ab", "--base-ref", commits[0], "--head-ref", commits[1],
                    "--build", EXT_BUILD, "--bench", "sumloop", "--repeat", "2", "--format", "json",
                    "--history", str(history), timeout=1800)
    return repo, commits, history, res


@pytest.mark.torch
def test_extension_built_per_side_finds_the_slow_commit(ext_run):
    _, (c1, c2), history, res = ext_run
    assert res.returncode == 0, res.stderr
    (test,) = json.loads(res.stdout)["comparison"]["tests"]
    assert test["test"] == "loop_sum" and test["verdict"] == "regression", test
    assert test["change"] > 1.0  # five passes instead of one
    envs = _envs(history, "ext")
    for side, commit in (("base", c1), ("head", c2)):
        env = envs[side]
        assert env["side_commit"] == commit and env["side_install"] == "build"
        assert env["side_build"] == EXT_BUILD
        assert env["torch_version"] and env["torch_file"].endswith("torch/__init__.py")
        assert list(Path(env["side_source"]).glob("sumext*.so"))  # built in the side's own worktree
        assert env["python_executable"] == env["side_python"]


@pytest.mark.torch
def test_extension_builds_are_cached_by_commit(ext_run, tmp_path):
    repo, (c1, c2), _, _ = ext_run
    res = run_perfq(repo, "run", "-l", "ext2", "--ab", "--base-ref", c1, "--head-ref", c2, "--build", EXT_BUILD,
                    "--bench", "sumloop", "--repeat", "1", "--history", str(tmp_path / "h.duckdb"), timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("(reused)") == 2 and "installing" not in res.stderr
    refused = run_perfq(repo, "run", "-l", "ext3", "--ab", "--base-ref", c2, "--head-ref", "HEAD",
                        "--build", EXT_BUILD, "--bench", "sumloop", "--history", str(tmp_path / "h.duckdb"))
    assert refused.returncode == 4 and "would run the same code" in refused.stderr
