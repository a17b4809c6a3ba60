"""A killed `perfq index` never locks out later builds: kill -9 and SIGTERM of a real build with its
process pool, a lock inherited by a forked child, scratch files of dead builds."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.errors import PerfqError
from schema.writer import build_lock
from tests.aten_fixture import commit_all, make_repo, perfq
from tests.processes import alive, wait_for

FUNCTION = "int {name}(int x) {{ int y = x * 3; for (int k = 0; k < y; k++) y += k; return y; }}"


def _big_repo(root: Path, files: int = 60, functions: int = 300) -> Path:
    """The fixture plus ``files`` generated C++ files: a build whose pool works for seconds."""
    make_repo(root)
    for j in range(files):
        body = "\n".join(FUNCTION.format(name=f"g{j}_{i}") for i in range(functions))
        path = root / f"aten/src/ATen/native/gen/G{j}.cpp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"namespace at::native {{\n{body}\n}}\n")
    commit_all(root, "generated")
    return root


def _children(pid: int) -> set[int]:
    """Pids whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found






@pytest.fixture(scope="module")
def big_repo(tmp_path_factory) -> Path:
    return _big_repo(tmp_path_factory.mktemp("kill") / "repo")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_killed_build_leaves_no_workers_and_no_lock(big_repo: Path, sig: signal.Signals):
    db = big_repo / ".git/perfq/index.duckdb"
    shutil.rmtree(db.parent, ignore_errors=True)  # no facts cache: every file goes through the pool
    stderr = (big_repo.parent / f"stderr.{sig.name}").open("w+")
    build = subprocess.Popen(  # a build that hangs shows where: faulthandler prints its stacks on SIGABRT
        [sys.executable, "-m", "perfq", "index", "--full", "-q", "-j", "2", "--no-trace"],
        cwd=big_repo, stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    workers: set[int] = set()
    try:
        assert wait_for(lambda: len(_children(build.pid)) >= 2, 60), "the pool never started"
        time.sleep(0.5)  # the workers are extracting
        workers = _children(build.pid)
        assert build.poll() is None, "the build finished before it could be killed; make the fixture bigger"
        build.send_signal(sig)
        if not wait_for(lambda: build.poll() is not None, 30):
            build.send_signal(signal.SIGABRT)
            build.wait(timeout=10)
            stderr.seek(0)
            pytest.fail(f"the build did not end within 30 s of {sig.name}:\n{stderr.read()[-4000:]}")
        assert wait_for(lambda: not any(alive(w) for w in workers), 10), "pool workers outlived their parent"
    finally:
        for pid in [build.pid, *workers]:  # never leave a failed run's processes behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        build.wait()
        stderr.close()
    started = time.monotonic()
    proc = perfq(big_repo, "index", "-q", "--no-trace", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 240
    assert db.exists() and not [p for p in db.parent.iterdir() if ".tmp" in p.name]


def test_the_lock_is_not_held_by_a_forked_child_of_a_dead_holder(tmp_path: Path):
    """The lock-out's mechanism: the holder forks (as a process pool does) and dies; its child lives on."""
    db = tmp_path / "index.duckdb"
    read, write = os.pipe()
    holder = os.fork()
    if holder == 0:  # the build: take the lock, fork a long-lived worker, die without cleanup
        os.close(read)
        with build_lock(db):
            worker = os.fork()
            if worker == 0:
                time.sleep(30)
                os._exit(0)
            os.write(write, f"{worker}\n".encode())
            os._exit(0)
    os.close(write)
    worker = int(os.read(read, 32).decode())
    os.close(read)
    os.waitpid(holder, 0)
    try:
        assert alive(worker)
        with build_lock(db):  # taken over at once, while the orphan still runs
            assert (tmp_path / "index.duckdb.lock").read_text().strip() == str(os.getpid())
    finally:
        os.kill(worker, signal.SIGKILL)


def test_a_live_holder_is_refused_with_its_pid(tmp_path: Path):
    db = tmp_path / "index.duckdb"
    script = (
        "import sys, time; from pathlib import Path; from schema.writer import build_lock\n"
        f"with build_lock(Path({str(db)!r})):\n    print('locked', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(PerfqError, match=rf"another perfq index \(pid {holder.pid}\) is writing"), build_lock(db):
            pass
    finally:
        holder.kill()
        holder.wait()
    with build_lock(db):  # released when the holder died
        pass


def test_scratch_files_of_dead_builds_are_removed_by_the_next_build(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    state = repo / ".git/perfq"
    state.mkdir(parents=True)
    leftovers = [
        state / ".index.duckdb.999999.tmp",
        state / ".index.duckdb.999999.tmp.wal",
        state / "index.duckdb.facts.999999.tmp",
    ]
    for path in leftovers:
        path.write_bytes(b"half-written")
    keep = state / "history.duckdb"
    keep.write_bytes(b"not ours")
    proc = perfq(repo, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in leftovers if p.exists()]
    assert keep.exists() and (state / "index.duckdb").exists()
