"""Child processes (common.proc): a timeout holds when a grandchild keeps the pipe open, the
child's whole group dies on a timeout, a signal, a normal end and a kill -9 of perfq, output is
capped, and `perfq run` / `perfq import` treat SIGTERM like Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import duckdb
import pytest

from common import proc
from common.sandbox import bwrap_problem
from tests.processes import alive, wait_for
from tests.run_fakebench import make_bench_root

PY = sys.executable






def _pids(path: Path, timeout: float = 30) -> list[int]:
    assert wait_for(lambda: path.is_file() and path.read_text().endswith("\n"), timeout)
    return [int(p) for p in path.read_text().split()]


def test_a_timeout_holds_when_a_grandchild_keeps_the_pipe_open(tmp_path):
    pids = tmp_path / "pids"
    started = time.monotonic()
    res = proc.run(["sh", "-c", f"sleep 1000 & echo $$ $! > {pids}; sleep 1000"], timeout=1)
    assert time.monotonic() - started < 10  # it waited for the pipe's end of file: 1,000 s
    assert res.error == "timed out after 1s" and res.returncode is None
    assert not any(alive(p) for p in _pids(pids))


def test_a_child_that_ends_leaving_a_process_on_the_pipe_returns_at_once(tmp_path):
    pids = tmp_path / "pids"
    started = time.monotonic()
    res = proc.run(["sh", "-c", f"sleep 1000 & echo $! > {pids}; echo done"], timeout=600)
    assert time.monotonic() - started < 10
    assert res.ok and res.stdout == "done\n"
    stray = _pids(pids)[0]
    # the stray of its group is signalled before run() returns; on a loaded machine it may take a moment to exit
    assert wait_for(lambda: not alive(stray), 10)


def test_output_is_capped_keeping_its_head_tail_and_the_lines_a_parser_needs():
    script = textwrap.dedent("""
        import sys
        w = sys.stdout.write
        w("HEAD\\n")
        for i in range(200_000):
            w("x" * 200 + "\\n")
            if i % 50_000 == 0:
                w(f"Forward Execution Time (us) : {i}\\n")
        w("TAIL\\n")
    """)
    tracemalloc.start()
    try:
        res = proc.run([PY, "-c", script], timeout=120, cap=2**20, keep=lambda line: "Execution Time" in line)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.ok
    assert res.stdout.startswith("HEAD\n") and res.stdout.endswith("TAIL\n")
    assert [line.split(": ")[1] for line in res.stdout.splitlines() if "Execution Time" in line] == [
        "0", "50000", "100000", "150000"
    ]
    assert len(res.stdout) < 2**20 + 1000 and res.cut > 38_000_000  # 40 MB printed
    assert "bytes of output cut here" in res.stdout
    assert peak < 12 * 2**20  # the whole output would be 40 MB (twice, decoded)


def _holder(tmp_path: Path, body: str) -> subprocess.Popen:
    """A Python process running ``body`` with perfq's signal handling, as a perfq command would."""
    code = textwrap.dedent(f"""
        import sys
        from common import proc
        from common.interrupt import noting_interrupts
        with noting_interrupts():
            try:
                {body}
            except KeyboardInterrupt:
                print("interrupted", flush=True)
                sys.exit(130)
    """)
    return subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)


def test_sigterm_and_ctrl_c_kill_the_childs_whole_group(tmp_path):
    for signum in (signal.SIGTERM, signal.SIGINT):
        pids = tmp_path / f"pids{signum}"
        holder = _holder(tmp_path, f"proc.run(['sh', '-c', 'sleep 1000 & echo $$ $! > {pids}; sleep 1000'])")
        children = _pids(pids)
        holder.send_signal(signum)
        out, _ = holder.communicate(timeout=30)
        assert holder.returncode == 130 and out == "interrupted\n"
        assert wait_for(lambda c=children: not any(alive(p) for p in c), 10)


STARTED_WHILE_SIGNALLED = """
import os, signal, sys, time
from common import proc
from common.interrupt import noting_interrupts

pids, first = sys.argv[1], proc._die_with_parent


def signalled_before_exec():  # in the child, before exec: the signal lands while perfq waits for the exec
    first()
    with open(pids, "w") as fh:
        fh.write(f"{os.getpid()}\\n")
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(0.5)


proc._die_with_parent = signalled_before_exec
with noting_interrupts():
    try:
        proc.run(["sh", "-c", f"sleep 1000 & echo $! >> {pids}; sleep 1000"])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        time.sleep(2)  # perfq saves its runs before it exits: the child had time to start its own
        sys.exit(130)
"""


def test_a_signal_while_the_child_starts_still_kills_its_group(tmp_path):
    """SIGTERM while ``subprocess.Popen`` waits for the child's exec (a loaded machine, a real-time child that
    runs before perfq does): the group is still killed, not left to ``PR_SET_PDEATHSIG``, which reaches the
    child alone and leaves what it started running."""
    pids = tmp_path / "pids"
    holder = subprocess.run([PY, "-c", STARTED_WHILE_SIGNALLED, str(pids)], capture_output=True, text=True,
                            timeout=60)
    assert (holder.returncode, holder.stdout) == (130, "interrupted\n"), holder.stderr
    started = [int(p) for p in pids.read_text().split()]
    assert started and wait_for(lambda: not any(alive(p) for p in started), 10)


def test_a_child_dies_with_a_killed_perfq(tmp_path):
    pids = tmp_path / "pids"
    holder = _holder(tmp_path, f"proc.run(['sh', '-c', 'echo $$ > {pids}; exec sleep 1000'])")
    (child,) = _pids(pids)
    holder.kill()
    holder.wait()
    assert wait_for(lambda: not alive(child), 10)


def test_scratch_dirs_of_dead_owners_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"perfq-run-{dead.pid}-abc"
    live = tmp_path / f"perfq-run-{os.getpid()}-def"
    other = tmp_path / "perfq-runner-notes"
    for path in (stale, live, other):
        (path / "sub").mkdir(parents=True)
    assert proc.remove_stale_scratch("run", tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


HANG = """
import os, subprocess, time
if os.environ.get("PROCS_HANG"):
    grandchild = subprocess.Popen(["sleep", "1000"])
    with open(os.environ["PROCS_HANG"], "w") as fh:
        fh.write(f"{os.getpid()} {grandchild.pid}\\n")
    time.sleep(1000)
"""


def _hanging_bench_root(tmp_path: Path) -> Path:
    root = make_bench_root(tmp_path)
    module = root / "pt" / "fake_test.py"
    module.write_text(HANG + module.read_text())
    return root


def _run_argv(root: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [PY, "-m", "perfq", "run", "--label", "L", "--bench", "fake", "--bench-root", str(root),
            "--repeat", "2", "--ab", "--base-python", PY, "--head-python", PY,
            "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path), *extra]


def _statuses(hist: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(hist), read_only=True)
    try:
        return con.execute("SELECT status, notes FROM runs ORDER BY side").fetchall()
    finally:
        con.close()


def test_perfq_run_timeout_holds_with_a_benchmark_whose_child_keeps_the_pipe(tmp_path):
    root = _hanging_bench_root(tmp_path)
    pids = tmp_path / "pids"
    env = {**os.environ, "CI": "true", "PROCS_HANG": str(pids)}
    started = time.monotonic()
    res = subprocess.run(_run_argv(root, tmp_path, "--timeout", "4"), env=env, capture_output=True, text=True,
                         timeout=300)
    assert time.monotonic() - started < 120, res.stderr
    assert "timed out after 4s" in res.stdout + res.stderr
    assert not any(alive(p) for p in _pids(pids))


def test_sigterm_of_perfq_run_is_like_ctrl_c(tmp_path):
    root = _hanging_bench_root(tmp_path)
    pids = tmp_path / "pids"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "CI": "true", "PROCS_HANG": str(pids), "TMPDIR": str(tmp)}
    run = subprocess.Popen(_run_argv(root, tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    children = _pids(pids, timeout=120)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130
    assert [line for line in err.splitlines() if line.strip() and not line.startswith("priority: ")] == [
        f"error: interrupted: finished samples kept in {tmp_path / 'h.duckdb'}, runs of label 'L' marked incomplete"
    ]
    statuses = _statuses(tmp_path / "h.duckdb")  # a user without real-time rights also has the priority's note
    assert [status for status, _ in statuses] == ["incomplete"] * 2
    assert all(notes.endswith("interrupted (SIGTERM)") for _, notes in statuses), statuses
    assert wait_for(lambda: not any(alive(p) for p in children), 10)
    assert not list(tmp.glob("perfq-run-*"))


SANDBOXED_SLEEP = "987.654"  # the benchmark's grandchild, found by its argument: its pid inside the sandbox is another


def _sandboxed_sleeps() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if entry.name.isdigit() and argv[:2] == [b"sleep", SANDBOXED_SLEEP.encode()]:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(bool(bwrap_problem()), reason=f"no sandbox here: {bwrap_problem()}")
def test_sigterm_of_a_sandboxed_run_leaves_nothing_of_the_benchmark(tmp_path):
    """bubblewrap starts the benchmark in a session of its own (``--new-session``), out of the group perfq kills:
    what it started still ends (its pid namespace dies with the group's bwrap, and perfq, a subreaper, ends the
    orphans it inherits; it still passed with bwrap's --unshare-pid, or its --die-with-parent, taken away)."""
    root = make_bench_root(tmp_path)
    module = root / "pt" / "fake_test.py"
    module.write_text(f"import subprocess, time\nsubprocess.Popen(['sleep', '{SANDBOXED_SLEEP}'])\ntime.sleep(1000)\n"
                      + module.read_text())
    run = subprocess.Popen(_run_argv(root, tmp_path, "--sandbox"), env={**os.environ, "CI": "true"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: bool(_sandboxed_sleeps()), 120)
    sleeps = _sandboxed_sleeps()
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert wait_for(lambda: not any(alive(p) for p in sleeps), 10)


def test_sigterm_of_perfq_import_is_one_line_and_exit_130(tmp_path):
    """`perfq import` stopped by SIGTERM while it stages a big file: one line, 130, nothing half-imported."""
    sample = ('{"type":"sample","run":0,"seq":%d,"repeat_index":%d,"benchmark":"b_test","test":"t%d","mode":"eager",'
              '"device":"cpu","metric":"forward_time","unit":"us","value":%d.5}\n')
    run = ('{"type":"run","label":"L","side":"base","id":"r1","ref":"main","commit_sha":"","torch_version":"",'
           '"python":"","host":"h","cpu":"","started_at":"2026-12-03T12:07:35.141","ended_at":null,"command":"",'
           '"status":"complete","notes":"","env":""}\n')
    lines = "".join(sample % (i, i, i % 100, 10 + i % 7) for i in range(600_000))
    (tmp_path / "big.json").write_text('{"format":"perfq-results","version":2}\n' + run + lines)
    hist = tmp_path / "h.duckdb"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    imp = subprocess.Popen([PY, "-m", "perfq", "import", str(tmp_path / "big.json"), "--history", str(hist),
                            "--repo", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "TMPDIR": str(tmp)})
    # the signal lands once the import stages the file, however fast the machine (a fixed sleep raced a fast CI)
    assert wait_for(lambda: any(tmp.glob("perfq-import-*")), 60)
    imp.send_signal(signal.SIGTERM)
    _, err = imp.communicate(timeout=60)
    assert imp.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip() and not line.startswith("priority: ")] == [
        "error: interrupted; nothing was half-written (indexes and results are replaced atomically)"
    ]
    if hist.exists():
        con = duckdb.connect(str(hist), read_only=True)
        try:
            # one transaction: none of the samples, or (the signal came after the commit) all of them
            assert con.execute("SELECT count(*) FROM samples").fetchone()[0] in (0, 600_000)
        finally:
            con.close()
