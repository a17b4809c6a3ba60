"""The README's two commands as a new user runs them: not root, a fresh clone, no virtualenv, only python3.

As root, the test makes a throwaway user and runs the scripts as that user, for real: the project's .venv is
created with the system's python3 and perfq installed into it by pip (from the machine's own package sources,
passed on as pip's environment), the demo indexes a corpus and prints the affected benchmarks, the second run
installs nothing, and scripts/test.sh sets up its extras and runs the lint contracts and a test file. Two
things are scaled down to keep the suite's cost small: torch is not installed (PERFQ_TORCH=skip: its 1 GB
install was run by hand, docs/measurements.md) and the corpus is the small ATen fixture, laid out as the
PyTorch 2.6.0 tree the demo edits, instead of the real one (fetched and indexed by hand, same page).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.aten_fixture import FILES, write_tree
from tests.conftest import git

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "aten/src/ATen/native/cpu/SoftMaxKernel.cpp"
# the demo edits line 168 of the kernel (`input_data + d0`): the fixture's file has that line there
KERNEL_TEXT = ("#include <ATen/native/SoftmaxOp.h>\n" + "// filler\n" * 165
               + "namespace at::native {\nfloat* first_row(float* input_data, long d0) { return input_data + d0; }\n"
               + "}  // namespace at::native\n")
USER_PATH = "/usr/local/bin:/usr/bin:/bin"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a throwaway user (useradd); run as root, as CI does"
    if not all(shutil.which(tool) for tool in ("useradd", "userdel", "runuser")):
        return "needs useradd, userdel and runuser"
    probe = subprocess.run(["env", "-i", f"PATH={USER_PATH}", "python3", "-c", "import venv, ensurepip"],
                           capture_output=True)
    return None if probe.returncode == 0 else "the system's python3 cannot make a virtualenv (python3-venv)"


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def _pip_env() -> dict[str, str]:
    """This machine's pip settings (where its packages come from) as PIP_* variables for the new user."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.split(".", 1)[-1]
        env.setdefault("PIP_" + name.upper().replace("-", "_"), value.strip("'"))
    return env


@pytest.fixture
def newcomer():
    """A throwaway user with a home directory, removed afterwards."""
    name = f"perfq-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


def _as(user: pwd.struct_passwd, command: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``command`` in bash as ``user`` with a login's clean environment plus ``env``; (result, seconds)."""
    clean = {"HOME": user.pw_dir, "USER": user.pw_name, "PATH": USER_PATH, "LANG": "C.UTF-8", **env}
    start = time.monotonic()
    argv = ["runuser", "-u", user.pw_name, "--", "env", "-i", *(f"{k}={v}" for k, v in clean.items()), "bash", "-c",
            command]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1500, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - start


def _give(user: pwd.struct_passwd, path: Path) -> None:
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(path)], check=True)


def test_both_readme_commands_as_a_new_user_without_a_venv(newcomer):
    home = Path(newcomer.pw_dir)
    clone = home / "perfq"
    git(home, "clone", "-q", str(ROOT), str(clone))
    corpus = home / "corpus" / "pytorch-2.6.0"
    write_tree(corpus, {**FILES, KERNEL: KERNEL_TEXT})
    git(corpus, "init", "-q", "-b", "main")
    git(corpus, "add", "-A")
    git(corpus, "commit", "-qm", "fixture")
    _give(newcomer, home)

    # every check before the installs: an unwritable corpus directory stops the demo at once, no .venv made
    failed, _ = _as(newcomer, "cd ~/perfq && bash scripts/demo.sh", PERFQ_CORPUS="/proc/perfq-corpus")
    assert failed.returncode == 4, failed.stderr
    assert failed.stderr.strip().splitlines() == ["error: fetch-pytorch-source: cannot write to /proc/perfq-corpus "
                                                  "(set PERFQ_CORPUS)"]
    assert not (clone / ".venv").exists()

    env = {**_pip_env(), "PERFQ_CORPUS": str(corpus.parent), "PERFQ_TORCH": "skip"}
    first, first_s = _as(newcomer, "cd ~/perfq && bash scripts/demo.sh", **env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "creating the virtualenv .venv" in first.stderr
    assert "1 changed function(s)" in first.stdout and "stub impls resolved" in first.stdout
    where = "import perfq, sys; print(sys.prefix, perfq.__file__)"
    prefix = subprocess.run([str(clone / ".venv/bin/python"), "-c", where], capture_output=True, text=True,
                            check=True, cwd="/").stdout.split()
    assert prefix == [str(clone / ".venv"), str(clone / "perfq/__init__.py")]  # the project's venv, editable

    again, again_s = _as(newcomer, "cd ~/perfq && bash scripts/demo.sh", **env)
    assert again.returncode == 0 and "1 changed function(s)" in again.stdout, again.stderr[-3000:]
    assert "creating the virtualenv" not in again.stderr and again_s < first_s  # nothing installed again

    tests, _ = _as(newcomer, "cd ~/perfq && bash scripts/test.sh -q -p no:cacheprovider tests/test_globs.py", **env)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert "[100%]" in tests.stdout  # (Debian packages it cannot install as this user are a note, not a failure)
    assert "0 broken" in tests.stdout  # lint-imports ran in the user's venv
