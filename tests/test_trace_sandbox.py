"""Tracing runs the checkout's code: a hostile benchmark file is contained (tests/hostile_bench.py),
a harness that hangs at import cannot hang the index, and the driver dies with a killed perfq and
leaves no scratch directory. The network and file-system parts need bubblewrap and are skipped
cleanly where it cannot run."""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from common import proc
from common.config import Config
from common.errors import PerfqError
from common.sandbox import NOBODY, Sandbox, bwrap_problem, scrubbed_env
from common.sched import FIFO_PRIORITY, realtime_problem
from indexer.trace import TraceJob, TraceOptions, trace_files
from schema.model import TraceStatus
from tests.hostile_bench import (
    BLOCKED_ATTEMPTS,
    TOKEN,
    hostile_place,
    hostile_source,
    make_tree,
    marked,
    outcomes,
)
from tests.processes import alive, wait_for

pytest.importorskip("torch")
needs_bwrap = pytest.mark.skipif(bool(bwrap_problem()), reason=f"no sandbox here: {bwrap_problem()}")


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
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with hostile_place(tmp_path, home) as place:
        file = make_tree(place.repo, place.plan)
        yield place.repo, file, place.plan, place.calls, tmp_path


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
    assert wait_for(lambda: not marked(plan["marker"]), 10)  # ... which died with the tracer
    assert result.status == TraceStatus.failed


def test_without_the_sandbox_the_environment_is_still_scrubbed_and_daemons_are_reaped(hostile):
    repo, file, plan, calls, _ = hostile
    try:
        seen = outcomes(_trace(file, repo, sandbox=False).errors)
        assert seen["token"] == seen["secret"] == "absent"
        assert seen["daemon"] == "started"  # it left the tracer's group and session ...
        assert wait_for(lambda: not marked(plan["marker"]), 10)  # ... and was reaped: perfq is the subreaper
    finally:
        for pid in marked(plan["marker"]):
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
from common.interrupt import noting_interrupts
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
    with box.launch(["true"]) as launch:
        done = subprocess.run(launch.argv, capture_output=True, text=True, check=False, pass_fds=launch.pass_fds)
    assert done.returncode == 0, done.stderr


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the attacks that undo a sandbox need root (CI runs as root)")


def _not_blocked(seen: dict[str, str]) -> dict[str, str]:
    """The attempts that did not fail (an attempt missing from ``seen`` counts as not blocked)."""
    return {name: seen.get(name, "not tried") for name in BLOCKED_ATTEMPTS
            if not seen.get(name, "").startswith("blocked")}


def _tree_snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


@needs_bwrap
@needs_root
def test_as_root_the_tracing_sandbox_blocks_every_attack(hostile):
    """Issue 37: as root, a traced benchmark's umount, remount, mknod, ptrace, setns, unshare,
    SCHED_FIFO 50, writes to /etc, the host's /tmp and .git/hooks, reads of other processes'
    environments and of the real home all fail; the host is unchanged."""
    repo, file, plan, calls, _ = hostile
    before = _tree_snapshot(repo)
    seen = outcomes(_trace(file, repo).errors)
    assert _not_blocked(seen) == {}, seen
    assert calls == []
    assert not [p for p in ("outside", "etc", "host_tmp") if Path(plan[p]).exists()]
    assert _tree_snapshot(repo) == before
    assert wait_for(lambda: not marked(plan["marker"]), 10)  # the daemon died with the sandbox


@needs_bwrap
@needs_root
def test_as_root_perfq_run_sandbox_blocks_every_attack(hostile):
    """The same attacks at the import of a `perfq run --sandbox` benchmark (run in realtime, as a
    CI bench job is): each fails, and the failed invocation's output says so."""
    from tests.run_fakebench import make_bench_root

    repo, _, plan, calls, tmp_path = hostile
    root = make_bench_root(repo)
    module = root / "pt" / "fake_test.py"
    module.write_text(hostile_source(plan) + module.read_text())
    before = _tree_snapshot(repo)
    res = subprocess.run(
        [sys.executable, "-m", "perfq", "run", "--label", "L", "--bench", "fake", "--bench-root", str(root),
         "--repeat", "1", "--side", "base", "--python", sys.executable, "--no-batch", "--sandbox",
         "--priority", "realtime", "--history", str(tmp_path / "h.duckdb"), "--repo", str(repo), "--format", "json"],
        env={**os.environ, "CI": "true", "GITHUB_TOKEN": TOKEN}, capture_output=True, text=True, timeout=300)
    assert json.loads(res.stdout)["runs"][0]["failures"] == ["fake_test"], res.stderr
    seen, _ = json.JSONDecoder().raw_decode(res.stderr.split("HOSTILE ", 1)[1])  # the progress line's FAILED (...)
    assert _not_blocked(seen) == {}, seen
    assert seen["token"] == "absent" and calls == []
    assert not [p for p in ("outside", "etc", "host_tmp") if Path(plan[p]).exists()]
    assert _tree_snapshot(repo) == before


def test_run_sandbox_without_bubblewrap_is_refused_in_one_line(tmp_path):
    """Issue 37: `--sandbox` where bubblewrap cannot run (here: not on PATH) used to run the
    benchmarks with the environment scrubbed only; it is an error (exit 4) before anything runs."""
    from tests.run_fakebench import make_bench_root

    root = make_bench_root(tmp_path)
    marker = tmp_path / "ran"
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "FAKE_SCHED_FILE": str(marker)}
    res = subprocess.run(
        [sys.executable, "-m", "perfq", "run", "--label", "L", "--bench", "fake", "--bench-root", str(root),
         "--repeat", "1", "--side", "base", "--python", sys.executable, "--sandbox",
         "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 4, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: --sandbox: the benchmarks cannot be contained")
    assert not marker.exists()


@needs_bwrap
def test_the_sandboxed_child_is_nobody_without_capabilities_under_seccomp(tmp_path):
    """What the child of a sandbox is, read from its own /proc status: uid nobody, no capability
    in any set, no new privileges, a seccomp filter; SCHED_FIFO at perfq's priority, capped there."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    probe = ("import os, resource; print(open('/proc/self/status').read()); "
             "print('rtprio', resource.getrlimit(resource.RLIMIT_RTPRIO)); print('policy', os.sched_getscheduler(0))")
    if realtime_problem():
        pytest.skip(realtime_problem())
    with Sandbox(scratch).launch([sys.executable, "-c", probe]) as launch:
        done = proc.run(launch.argv, env=Sandbox(scratch).env(os.environ), timeout=60, realtime=True,
                        pass_fds=launch.pass_fds)
    assert done.ok, done.stderr
    status = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert status["Uid"].split()[0] == str(NOBODY)
    assert {status[cap].strip() for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0" * 16}
    assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
    limit = resource.getrlimit(resource.RLIMIT_RTPRIO)[1]
    cap = FIFO_PRIORITY if limit == resource.RLIM_INFINITY else min(limit, FIFO_PRIORITY)
    assert f"rtprio ({cap}, {cap})" in done.stdout and f"policy {os.SCHED_FIFO}" in done.stdout


def test_a_required_sandbox_that_cannot_be_had_refuses_to_trace(tmp_path, monkeypatch):
    """Issue 37: where tracing would run a checkout's code uncontained and PERFQ_TRACE_SANDBOX=required
    (perfq's CI workflows), it is a one-line error and no benchmark code runs."""
    repo = tmp_path / "repo"
    ran = tmp_path / "ran"
    file = make_tree(repo)
    file.write_text(f"open({str(ran)!r}, 'w').close()\n")
    monkeypatch.setenv("PERFQ_TRACE_SANDBOX", "required")
    with pytest.raises(PerfqError, match="cannot be sandboxed here .the sandbox was turned off.*--no-trace"):
        _trace(file, repo, sandbox=False)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no bwrap on PATH
    bwrap_problem.cache_clear()
    try:
        with pytest.raises(PerfqError, match="bubblewrap .bwrap. is not installed"):
            _trace(file, repo)
    finally:
        bwrap_problem.cache_clear()
    assert not ran.exists()


def test_an_unsandboxed_trace_is_said_in_the_index(tmp_path):
    """Issue 37: tracing without bubblewrap (here: not on PATH) is said in the index's warnings too."""
    from tests.aten_fixture import make_repo
    from tests.conftest import db_rows, run_perfq

    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "i.duckdb"
    tools = tmp_path / "bin"  # git and the venv's Python, no bwrap
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    done = run_perfq(repo, "index", "-q", "--trace", "--db", str(db),
                     env={"PATH": f"{tools}{os.pathsep}{Path(sys.executable).parent}"})
    assert done.returncode == 0, done.stderr
    [(message,)] = db_rows(db, "SELECT message FROM warnings WHERE phase = 'trace'")
    assert message.startswith("benchmarks were traced NOT sandboxed (bubblewrap (bwrap) is not installed)")


@needs_bwrap
def test_a_readable_path_around_the_home_does_not_expose_it(tmp_path, monkeypatch):
    """A repository (or a path on sys.path) that holds the hidden home directory, bound back
    read-only, used to make the home readable again; it stays hidden, paths inside it bound back stay readable."""
    around = tmp_path / "around"
    home = around / "home"
    (home / "venv").mkdir(parents=True)
    (home / ".netrc").write_text("secret\n")
    (home / "venv" / "ok").write_text("ok\n")
    monkeypatch.setenv("HOME", str(home))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    box = Sandbox(scratch, (around, home / "venv"))
    with box.launch(["sh", "-c", f"cat {home}/venv/ok; cat {home}/.netrc"]) as launch:
        done = subprocess.run(launch.argv, capture_output=True, text=True, pass_fds=launch.pass_fds)
    assert done.stdout == "ok\n" and "No such file" in done.stderr, (done.stdout, done.stderr)
