"""Issue 37 item 4: every file perfq reads from a path it is given goes through one bounded reader
(common/files.py): a regular file only, at most its kind's limit, inside its roots.
``compile_commands = "/dev/zero"`` took 23.8 GB before the OOM killer, ``perfq ci matrix`` on a
symlink to /dev/zero 21.9 GB, and a FIFO blocked forever. Each input kind is given /dev/zero, a
FIFO and a symlink to each: one line, exit 4, a bounded peak RSS. perfq runs under an address-space
limit here, so a regression fails the test instead of eating the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common import files
from tests.aten_fixture import make_repo

AS_LIMIT = 4_000_000_000  # bytes of address space perfq may map (the brief's `ulimit -v 4000000`)
RSS_LIMIT_KB = 1 << 20  # peak RSS under 1 GB
VARIANTS = ("dev-zero", "fifo", "symlink-to-dev-zero", "symlink-to-fifo")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _perfq(cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in KB) of the perfq CLI, run under the address-space limit;
    a run past ``timeout`` (a FIFO read blocks) is killed and fails the test."""
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, "-m", "perfq", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                                 stderr=err, stdin=subprocess.DEVNULL, preexec_fn=_limited)
        deadline = time.monotonic() + timeout
        while not (done := os.wait4(child.pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                child.kill()
                child.wait()
                pytest.fail(f"perfq {' '.join(args)} did not end within {timeout:g} s")
            time.sleep(0.05)
        child.returncode = os.waitstatus_to_exitcode(done[1])  # reaped here: its own rusage, not the children's max
        err.seek(0)
        return child.returncode, err.read().decode(errors="replace"), done[2].ru_maxrss


def _plant(place: Path, variant: str) -> Path:
    """The hostile input at ``place`` (made: a FIFO, a symlink), or /dev/zero itself."""
    if variant == "dev-zero":
        return Path("/dev/zero")
    fifo = place.with_name(place.name + ".fifo")
    if "fifo" in variant:
        os.mkfifo(fifo)
    place.symlink_to(fifo if "fifo" in variant else "/dev/zero") if variant.startswith("symlink") else None
    return place if variant.startswith("symlink") else fifo


def _config_key(key: str, list_value: bool = False):
    def setup(repo: Path, variant: str) -> list[str]:
        path = _plant(repo / f"input-{key}", variant)
        value = f'["{path}"]' if list_value else f'"{path}"'
        (repo / "perfq.toml").write_text(f"[tool.perfq]\n{key} = {value}\n")
        return ["index", "-q", "--no-trace", "--db", str(repo.parent / "i.duckdb")]
    return setup


def _config_file(repo: Path, variant: str) -> list[str]:
    path = _plant(repo / "perfq.toml", variant)
    if path != repo / "perfq.toml":  # /dev/zero or a FIFO itself: the config file is a symlink to it
        (repo / "perfq.toml").symlink_to(path)
    return ["index", "-q", "--no-trace", "--db", str(repo.parent / "i.duckdb")]


def _argument(*before: str, after: tuple[str, ...] = ()):
    def setup(repo: Path, variant: str) -> list[str]:
        return [*before, str(_plant(repo.parent / "input", variant)), *after]
    return setup


KINDS = {
    "config": _config_file,
    "compile_commands": _config_key("compile_commands"),
    "canaries": _config_key("canaries"),
    "native_functions_yaml": _config_key("native_functions", list_value=True),
    "ci_matrix": _argument("ci", "matrix"),
    "result_file": _argument("import", after=("--history", "h.duckdb")),
    "diff": _argument("affected", "--diff"),
    "ir_manifest": _argument("ir", "collect", "--label", "x", "--manifest"),
    "coverage_report": _argument("ci", "coverage-trend", after=("--trend", "trend.json", "--commit", "0" * 40)),
}


WITHOUT_REPO = {"ci_matrix", "coverage_report"}  # commands with no --repo option


@pytest.fixture(scope="module")
def fixture_tree(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("bounded") / "repo")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_device_or_fifo_as_any_input_is_one_line_exit_4_and_bounded(fixture_tree, tmp_path, kind, variant):
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-a", str(fixture_tree), str(repo)], check=True)
    args = KINDS[kind](repo, variant)
    code, stderr, peak_kb = _perfq(repo, *args, *(() if kind in WITHOUT_REPO else ("--repo", str(repo))))
    assert code == 4, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: ") and "Traceback" not in stderr, stderr
    assert peak_kb < RSS_LIMIT_KB, peak_kb


@pytest.mark.parametrize("variant", VARIANTS)
def test_read_input_refuses_what_is_not_a_bounded_regular_file(tmp_path, variant):
    path = _plant(tmp_path / "input", variant)
    with pytest.raises(files.InputError, match="not a regular file"):
        files.read_input(path, files.InputKind.config)


def test_read_input_keeps_to_its_kind_limit_and_roots(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (files.InputKind.config.limit + 1))
    with pytest.raises(files.InputError, match="more than a config file may have"):
        files.read_input(big, files.InputKind.config)
    outside = tmp_path / "outside.yaml"
    outside.write_text("x: 1\n")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "link.yaml").symlink_to(outside)
    with pytest.raises(files.InputError, match="outside"):
        files.read_input(tmp_path / "repo" / "link.yaml", files.InputKind.canaries, (tmp_path / "repo",))
    assert files.read_input(tmp_path / "repo" / "link.yaml", files.InputKind.canaries) == b"x: 1\n"


@pytest.mark.parametrize("cache", ["facts", "stat", "graph"])
def test_a_cache_beside_the_index_planted_as_a_fifo_or_dev_zero_is_ignored(fixture_tree, tmp_path, cache):
    """The caches are perfq's own files but lie on disk: a FIFO or /dev/zero in their place is not
    read (an index is built, then queried, without hanging or growing)."""
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-a", str(fixture_tree), str(repo)], check=True)
    db = tmp_path / "i.duckdb"
    for variant in ("symlink-to-dev-zero", "fifo"):
        target = tmp_path / f"i.duckdb.{cache}"
        target.unlink(missing_ok=True)
        planted = _plant(target, variant)
        if planted != target:
            planted.rename(target)
        code, stderr, peak_kb = _perfq(repo, "index", "-q", "--no-trace", "--db", str(db), "--repo", str(repo))
        assert code == 0, stderr
        assert peak_kb < RSS_LIMIT_KB, peak_kb
        code, stderr, _ = _perfq(repo, "stats", "--db", str(db), "--repo", str(repo))
        assert code == 0, stderr


@pytest.mark.parametrize("value", ["../outside.yaml", "link.yaml"])
def test_canaries_outside_the_repository_are_refused(fixture_tree, tmp_path, value):
    """Issue 37 (low): `canaries` pointing outside the repository (a path or an in-repo symlink) was read."""
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-a", str(fixture_tree), str(repo)], check=True)
    (tmp_path / "outside.yaml").write_text("sets: {}\n")
    (repo / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    (repo / "perfq.toml").write_text(f'[tool.perfq]\ncanaries = "{value}"\n')
    code, stderr, _ = _perfq(repo, "index", "-q", "--no-trace", "--db", str(tmp_path / "i.duckdb"), "--repo", str(repo))
    assert code == 4 and stderr.count("\n") == 1 and "the canary set is outside" in stderr, stderr
