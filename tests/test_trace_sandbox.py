"""Tracing runs the checkout's code: a hostile benchmark file is contained (tests/hostile_bench.py),
a harness that hangs at import cannot hang the index, and the driver dies with a killed perfq and
leaves no scratch directory. The network and file-system parts need bubblewrap and are skipped
cleanly where it cannot run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from indexer.trace import TraceJob, TraceOptions, trace_files
from perfq.common.sandbox import Sandbox, bwrap_problem, scrubbed_env
from perfq.config import Config
from perfq.errors import PerfqError
from schema.model import TraceStatus
from tests.hostile_bench import make_tree, outcomes
from tests.processes import alive, wait_for

pytest.importorskip("torch")
needs_bwrap = pytest.mark.skipif(bool(bwrap_problem()), reason=f"no sandbox here: {bwrap_problem()}")


def _marked(marker: str) -> list[int]:
    """Pids of processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        kids = {p for p, pp in parents.items() if pp == parent}
        todo += list(kids - found)
        found |= kids
    return found






def _trace(file: Path, repo: Path, **opts) -> object:
    rel = str(file.relative_to(repo))
    return trace_files([TraceJob(rel, "operator_benchmark", file)], TraceOptions(parallel=1, repo=repo, **opts))[rel]


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The hostile tree, a listener it may call, a home with a secret, a token in the environment."""
    repo = tmp_path / "repo"
    (repo / ".git" / "hooks").mkdir(parents=True)
    outside = Path(__file__).parent / f"pwned-{uuid.uuid4().hex}"  # outside the repo and /tmp
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine github.com password hunter2\n")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    calls: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                calls.append(conn.recv(100))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    plan = {
        "marker": f"perfq-hostile-{uuid.uuid4().hex}",
        "port": listener.getsockname()[1],
        "home_secret": str(home / ".netrc"),
        "outside": str(outside),
        "hook": str(repo / ".git" / "hooks" / "post-checkout"),
    }
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    file = make_tree(repo, plan)
    yield repo, file, plan, calls, tmp_path
    outside.unlink(missing_ok=True)
    stop.set()
    thread.join()
    listener.close()
    for pid in _marked(plan["marker"]):  # a daemon that got away: do not leave it to the machine
        os.kill(pid, 9)


def test_no_secret_reaches_the_traced_code_and_it_gets_its_own_home_and_tmpdir(hostile):
    repo, file, plan, _, tmp_path = hostile
    seen = outcomes(_trace(file, repo).errors)
    assert seen["token"] == seen["secret"] == "absent"
    assert seen["home"].startswith(str(tmp_path / "tmp" / "perfq-trace-")) and seen["home"].endswith("/home")
    assert seen["tmpdir"].startswith(str(tmp_path / "tmp" / "perfq-trace-")) and seen["tmpdir"].endswith("/tmp")
    assert not list((tmp_path / "tmp").glob("perfq-trace-*"))  # the scratch directory is removed


@needs_bwrap
def test_the_sandbox_blocks_the_network_writes_hooks_home_and_daemons(hostile):
    repo, file, plan, calls, tmp_path = hostile
    result = _trace(file, repo)
    seen = outcomes(result.errors)
    assert seen["network"].startswith("blocked") and calls == []
    assert seen["outside"].startswith("blocked") and not Path(plan["outside"]).exists()
    assert seen["hook"].startswith("blocked") and not Path(plan["hook"]).exists()
    assert seen["home_secret"].startswith("blocked")
    assert seen["daemon"] == "started"  # it ran, inside the sandbox's pid namespace ...
    assert wait_for(lambda: not _marked(plan["marker"]), 10)  # ... which died with the tracer
    assert result.status == TraceStatus.failed


def test_without_the_sandbox_the_environment_is_still_scrubbed(hostile):
    repo, file, plan, calls, _ = hostile
    seen = outcomes(_trace(file, repo, sandbox=False).errors)
    assert seen["token"] == seen["secret"] == "absent"
    for pid in _marked(plan["marker"]):  # a setsid daemon outlives an unsandboxed trace (documented)
        os.kill(pid, 9)


def test_the_allowlist_keeps_what_torch_needs_and_drops_the_rest(tmp_path):
    env = scrubbed_env({"PATH": "/bin", "LC_ALL": "C", "GITHUB_TOKEN": "t", "SSH_AUTH_SOCK": "/s", "HOME": "/root",
                        "PYTHONPATH": "/p", "ACTIONS_RUNTIME_TOKEN": "r"}, tmp_path)
    assert env == {"PATH": "/bin", "LC_ALL": "C", "PYTHONPATH": "/p", "HOME": str(tmp_path / "home"),
                   "TMPDIR": str(tmp_path / "tmp")}


@pytest.mark.parametrize("sleepy", ["alarm", "deaf"])
def test_a_harness_that_hangs_at_import_cannot_hang_the_index(tmp_path, sleepy):
    """benchmark_core.py sleeping at import: the warm-up's limit stops it; one deaf to the alarm is
    stopped by the driver's silence limit."""
    repo = tmp_path / "repo"
    file = make_tree(repo, sleepy=sleepy)
    started = time.monotonic()
    result = _trace(file, repo, warmup_s=5, timeout_s=3, silence_s=10)
    assert time.monotonic() - started < 150  # torch's own start is not limited this tightly: ~5-30 s here
    assert result.status == TraceStatus.failed
    expected = "warm-up" if sleepy == "alarm" else "printed nothing for 10 s"
    assert expected in result.reason


HOLDER = """
import sys
from pathlib import Path
from perfq.common.interrupt import noting_interrupts
from indexer.trace import TraceJob, TraceOptions, trace_files
repo, file = Path(sys.argv[1]), Path(sys.argv[2])
with noting_interrupts():
    try:
        trace_files([TraceJob(str(file.relative_to(repo)), "operator_benchmark", file)],
                    TraceOptions(parallel=1, repo=repo, warmup_s=600, timeout_s=600))
    except KeyboardInterrupt:
        sys.exit(130)
"""


@pytest.mark.parametrize("signum", [9, 15])
def test_a_killed_perfq_index_leaves_no_tracer_and_no_scratch(tmp_path, signum):
    """kill -9 or SIGTERM of the process tracing (its harness hangs in the warm-up): the driver and
    everything under it die; the scratch directory is removed (SIGTERM) or by the next trace (kill -9)."""
    repo = tmp_path / "repo"
    file = make_tree(repo, sleepy="alarm")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(repo), str(file)],
                              env={**os.environ, "TMPDIR": str(tmp)})
    assert wait_for(lambda: list(tmp.glob("perfq-trace-*")) and len(_descendants(holder.pid)) >= 2, 60)
    time.sleep(1)
    tree = _descendants(holder.pid)
    holder.send_signal(signum)
    holder.wait(timeout=60)
    assert wait_for(lambda: not any(alive(p) for p in tree), 15), [p for p in tree if alive(p)]
    if signum == 15:
        assert holder.returncode == 130
        assert not list(tmp.glob("perfq-trace-*"))
    else:
        assert list(tmp.glob("perfq-trace-*"))
        other = make_tree(tmp_path / "other")
        subprocess.run([sys.executable, "-c", textwrap.dedent(HOLDER), str(tmp_path / "other"), str(other)],
                       env={**os.environ, "TMPDIR": str(tmp)}, check=True, timeout=300)
        assert not list(tmp.glob("perfq-trace-*"))


def test_trace_config_key(tmp_path):
    assert Config().with_overrides({"trace": "off"}).trace == "off"
    with pytest.raises(PerfqError, match="'trace' must be one of auto, on, off"):
        Config().with_overrides({"trace": "yes"})


RUN_HOSTILE = """
import json, os, socket, sys
seen = {"token": os.environ.get("GITHUB_TOKEN", "absent"), "side": os.environ.get("SIDE_SETTING", "absent")}
try:
    with open(os.environ["HOSTILE_OUTSIDE"], "w") as fh:
        fh.write("pwned")
    seen["outside"] = "written"
except OSError as exc:
    seen["outside"] = "blocked: " + type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", int(os.environ["HOSTILE_PORT"])), timeout=3).close()
    seen["network"] = "connected"
except OSError as exc:
    seen["network"] = "blocked: " + type(exc).__name__
leaks = [k for k in ("token", "outside", "network") if seen[k] in ("ghp_secret", "written", "connected")]
if seen["side"] != "kept" or (leaks and (leaks != ["outside", "network"] or os.environ.get("HOSTILE_STRICT"))):
    sys.exit("HOSTILE " + json.dumps(seen))
"""


def test_perfq_run_sandbox_contains_a_prs_benchmarks(tmp_path, monkeypatch):
    """`perfq run --sandbox`: no token reaches a benchmark (the side's own --base-env does); with
    bubblewrap, no network and no write outside its scratch directory. The run still measures."""
    from tests.run_fakebench import make_bench_root

    root = make_bench_root(tmp_path)
    module = root / "pt" / "fake_test.py"
    module.write_text(RUN_HOSTILE + module.read_text())
    listener = socket.create_server(("127.0.0.1", 0))
    outside = Path(__file__).parent / f"pwned-{uuid.uuid4().hex}"
    env = {**os.environ, "CI": "true", "GITHUB_TOKEN": "ghp_secret"}
    side_env = [f"HOSTILE_OUTSIDE={outside}", f"HOSTILE_PORT={listener.getsockname()[1]}", "SIDE_SETTING=kept",
                *(["HOSTILE_STRICT=1"] if not bwrap_problem() else [])]
    try:
        res = subprocess.run(
            [sys.executable, "-m", "perfq", "run", "--label", "L", "--bench", "fake", "--bench-root", str(root),
             "--repeat", "1", "--side", "base", "--python", sys.executable, "--no-batch", "--sandbox",
             *[arg for item in side_env for arg in ("--base-env", item)],
             "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path), "--format", "json"],
            env=env, capture_output=True, text=True, timeout=300)
    finally:
        listener.close()
        existed = outside.exists()
        outside.unlink(missing_ok=True)
    assert res.returncode == 0, res.stderr
    assert "note: sandbox" in res.stderr
    history = subprocess.run([sys.executable, "-m", "perfq", "history", "fake_test", "--history",
                              str(tmp_path / "h.duckdb"), "--repo", str(tmp_path), "--format", "json"],
                             capture_output=True, text=True, timeout=120)
    assert history.returncode == 0 and "add_M8_cpu" in history.stdout  # it measured
    if not bwrap_problem():
        assert not existed


@needs_bwrap
def test_a_relative_entry_on_sys_path_does_not_break_the_sandbox(tmp_path, monkeypatch):
    """bwrap wants absolute sources: a relative ``sys.path`` entry ('bench', as scripts run from the
    repo root put there) used to make every contained child fail with "Can't find source path"."""
    (tmp_path / "bench").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [*sys.path, "bench"])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    box = Sandbox(scratch, (Path("bench"),))
    done = subprocess.run(box.argv(["true"]), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
