"""perfq never replaces a path it did not create, and reads source files within their limits:
`--db` and `--out` refuse what is not their own kind of file, temp files have unique names,
source symlinks leaving the repository or pointing at devices are skipped (issue 33, items 1-3)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from common import files
from common.errors import PerfqError
from common.paths import write_atomically
from perfq.options import EXIT_ERROR
from perfq.run.results import EXPORT_FORMAT, export_runs, import_files
from schema.engine import duckdb
from tests.aten_fixture import FILES, commit_all, git, make_repo, replace_in, write_tree

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("paths") / "repo")


def db_functions(repo: Path) -> str:
    con = duckdb.connect(str(repo / ".git/perfq/index.duckdb"), read_only=True)
    try:
        return " ".join(row[0] for row in con.execute("SELECT name FROM functions").fetchall())
    finally:
        con.close()


def _history(path: Path) -> bytes:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (run_id VARCHAR); INSERT INTO runs VALUES ('r1')")
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["notes", "history", "other-db", "symlink", "directory"])
def test_index_db_never_replaces_a_file_perfq_did_not_create(repo: Path, tmp_path: Path, cli, kind: str):
    target = tmp_path / "target"
    if kind == "notes":
        target.write_text("notes\n")
    elif kind == "history":
        _history(target)
    elif kind == "other-db":
        con = duckdb.connect(str(target))
        con.execute("CREATE TABLE mine (x INTEGER)")
        con.close()
    elif kind == "symlink":
        (tmp_path / "real").write_text("mine\n")
        target.symlink_to(tmp_path / "real")
    else:
        target.mkdir()
    before = target.read_bytes() if target.is_file() else None
    _one_line_error(cli(repo, "index", "-q", "--no-trace", "--db", str(target)), "refusing to replace", "--db")
    if before is not None:
        assert target.read_bytes() == before
    assert target.is_symlink() == (kind == "symlink")
    assert not [p for p in tmp_path.iterdir() if p.name not in ("target", "real")]


@pytest.mark.parametrize("stray", [".lock", ".facts", ".stat", ".graph"])
@pytest.mark.parametrize("kind", ["notes", "history", "other-db"])
def test_index_db_recognizes_its_files_by_content_not_by_their_neighbours(repo: Path, tmp_path: Path, cli,
                                                                           kind: str, stray: str):
    """Issue 37: a stray ``X.lock`` or ``X.facts`` beside a user's file made ``index --db X`` replace it."""
    target = tmp_path / "target"
    if kind == "notes":
        target.write_text("notes\n")
    elif kind == "history":
        _history(target)
    else:
        con = duckdb.connect(str(target))
        con.execute("CREATE TABLE mine (x INTEGER)")
        con.close()
    (tmp_path / f"target{stray}").write_text("")
    before = target.read_bytes()
    _one_line_error(cli(repo, "index", "-q", "--no-trace", "--db", str(target)), "refusing to replace", "--db")
    assert target.read_bytes() == before


def test_index_db_replaces_its_own_index_and_an_empty_file(repo: Path, tmp_path: Path, cli):
    target = tmp_path / "index.duckdb"
    target.touch()
    assert cli(repo, "index", "-q", "--no-trace", "--db", str(target)).returncode == 0
    assert cli(repo, "index", "-q", "--no-trace", "--full", "--db", str(target)).returncode == 0
    assert cli(repo, "stats", "--db", str(target)).returncode == 0


# --- perfq run --out: symlinks and devices are written through, temp names are unique (item 2) ---------------


def test_result_file_through_a_symlink_keeps_the_link(tmp_path: Path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "out.json"
    link.symlink_to(real)
    planted = tmp_path / "out.json.tmp"  # a predictable temp name is never used (nor followed)
    planted.symlink_to(tmp_path / "victim")
    export_runs([], link)
    assert link.is_symlink() and import_files(tmp_path / "h.duckdb", [link]) is not None
    assert json.loads(real.read_text().splitlines()[0])["format"] == EXPORT_FORMAT
    assert not (tmp_path / "victim").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == ["out.json.tmp"]


def test_result_file_to_a_device_is_written_through_never_replaced(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    export_runs([], fifo)
    assert json.loads(reader.communicate(timeout=30)[0].splitlines()[0])["format"] == EXPORT_FORMAT
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if Path("/dev/full").exists():
        with pytest.raises(PerfqError, match="cannot write the result file /dev/full"):
            export_runs([], Path("/dev/full"))
        assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_atomic_writes_use_unique_temp_names_and_keep_the_mode(tmp_path: Path, monkeypatch):
    target = tmp_path / "file"
    target.write_text("old")
    target.chmod(0o640)
    names: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: names.append(str(src)) or real_replace(src, dst))
    write_atomically(target, ["one"])
    write_atomically(target, ["two"])
    assert target.read_text() == "two" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert len(set(names)) == 2 and all(Path(n).parent == tmp_path for n in names)
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path, ["x"])


# --- source files: never a device, never a link out of the repository, the size limit first (item 3) --------


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "outside", "fifo"])
def test_a_source_symlink_to_a_device_or_out_of_the_repo_is_skipped_unread(tmp_path: Path, cli, target: str):
    repo = make_repo(tmp_path / "repo")
    kernel = "aten/src/ATen/native/cpu/Evil.cpp"
    if target == "outside":
        (tmp_path / "secret.cpp").write_text("void secret_function() {}\n")
        (repo / kernel).symlink_to(tmp_path / "secret.cpp")
    elif target == "fifo":
        os.mkfifo(repo / kernel)
    else:
        (repo / kernel).symlink_to(target)
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, hard))  # an unlimited read would fail fast, not OOM the machine
    try:
        proc = cli(repo, "index", "--no-trace", "--format", "json")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert proc.returncode == 0, proc.stderr
    assert target == "fifo" or kernel in proc.stdout + proc.stderr  # git lists no FIFO: never opened
    assert "secret_function" not in db_functions(repo)


def test_read_limited_reads_at_most_the_limit_plus_one(tmp_path: Path):
    (tmp_path / "big").write_bytes(b"x" * 1000)
    assert len(files.read_limited(str(tmp_path), "big", 10)) == 11
    assert files.read_limited(str(tmp_path), "big", 5000) == b"x" * 1000
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(files.NotARegularFile):
        files.read_limited(str(tmp_path), "zero", 10)


# --- refs from the user are never options of git (item 6) ------------------------------------------------------

HOSTILE = ["--output=victim.txt", "--output=victim.txt..HEAD", "-o", "--exec=touch victim.txt"]


@pytest.mark.parametrize("ref", HOSTILE)
def test_a_hostile_ref_is_never_an_option_of_git(repo: Path, ref: str, cli):
    from common import git
    from perfq.bisect import git as bisect_git

    victim = repo / "victim.txt"
    victim.write_text("precious\n")
    calls = [
        lambda: git.first_parent_commits(repo, ref),
        lambda: git.merge_base(repo, ref, "HEAD"), lambda: git.diff(repo, ref, None),
        lambda: git.diff(repo, "HEAD", ref),
        lambda: git.commit(repo, ref), lambda: git.parents(repo, ref), lambda: git.resolve_ref(repo, ref),
        lambda: bisect_git.first_parent_range(repo, ref, "HEAD"), lambda: bisect_git.numstat(repo, ref),
        lambda: bisect_git.diff_text(repo, ref),
    ]
    for call in calls:
        with pytest.raises(PerfqError):
            call()
    assert git.show(repo, ref, "README.md") is None and git.count_commits(repo, ref) == 0
    proc = cli(repo, "backtest", "--", ref if ".." in ref else f"{ref}..HEAD")
    assert proc.returncode == EXIT_ERROR and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert cli(repo, "affected", "--", ref).returncode == EXIT_ERROR
    assert victim.read_text() == "precious\n"
    assert not [p for p in repo.iterdir() if p.name.startswith("-")]
    victim.unlink()


# --- file names git quotes (item 10) --------------------------------------------------------------------------


@pytest.mark.parametrize("odd", ["Ünïcødé", "tab\there", "new\nline", 'q"uote', "back\\slash"],
                         ids=["unicode", "tab", "newline", "quote", "backslash"])
def test_a_change_to_a_file_whose_name_git_quotes_is_mapped(tmp_path: Path, cli, odd: str):
    kernel = KERNEL.replace("SoftmaxOpKernel", f"Softmax{odd}Kernel")
    repo = tmp_path / "repo"
    write_tree(repo, {kernel if rel == KERNEL else rel: text for rel, text in FILES.items()})
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "base")
    assert cli(repo, "index", "-q", "--no-trace").returncode == 0
    git(repo, "checkout", "-q", "-b", "work")
    replace_in(repo, kernel, "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    for args in (("main",), ()):  # a range, and the working tree against HEAD~ (git diff either way)
        proc = cli(repo, "affected", *(args or ("HEAD~",)), "--format", "json")
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["benchmarks"], doc
        assert {c["file"] for c in doc["changed_functions"]} == {kernel}, doc["changed_functions"]
        assert not doc.get("ignored_files"), doc["ignored_files"]


def test_git_status_and_numstat_keep_odd_names(tmp_path: Path):
    from common import git as common_git
    from perfq.bisect.git import numstat

    repo = tmp_path / "repo"
    names = ["Ünïcødé.cpp", "tab\there.cpp", "new\nline.cpp", 'q"uote.cpp', "back\\slash.cpp"]
    repo.mkdir()
    for name in names:
        (repo / name).write_text("int a;\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "base")
    for name in names:
        (repo / name).write_text("int a;\nint b;\n")
    assert sorted(common_git.dirty(repo)) == sorted(names)
    commit_all(repo)
    assert sorted(f["path"] for f in numstat(repo, "HEAD")) == sorted(names)


@pytest.mark.parametrize("how", ["nul-byte", "binary-patch"])
def test_a_binary_change_to_a_source_file_is_warned_and_unmapped(tmp_path: Path, cli, how: str):
    repo = make_repo(tmp_path / "repo")
    assert cli(repo, "index", "-q", "--no-trace").returncode == 0
    kernel = repo / KERNEL
    if how == "nul-byte":
        kernel.write_bytes(kernel.read_bytes().replace(b"out[i] * 2", b"out[i] * 2\0"))
        commit_all(repo)
        proc = cli(repo, "affected", "HEAD~", "--format", "json")
    else:
        data = kernel.read_bytes()
        kernel.write_bytes(data + b"\0binary tail\n")
        patch = subprocess.run(["git", "diff", "--binary"], cwd=repo, capture_output=True, text=True).stdout
        assert "GIT binary patch" in patch
        kernel.write_bytes(data)
        patch_file = tmp_path / "p.diff"
        patch_file.write_text(patch)
        proc = cli(repo, "affected", "--diff", str(patch_file), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    unmapped = doc["unmapped_changes"]
    assert any(u["file"] == KERNEL and "binary" in u["reason"] for u in unmapped), unmapped
    assert any(KERNEL in w and "binary" in w for w in doc["warnings"]), doc["warnings"]
