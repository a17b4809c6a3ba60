"""Issue 37: without the sandbox, a benchmark's grandchild that called ``setsid`` left the process
group perfq kills, and survived ``run --timeout`` and ``bisect --timeout``. perfq becomes a child
subreaper (``PR_SET_CHILD_SUBREAPER``) for benchmark runs: the orphan is handed to it and killed."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from common import proc
from tests.hostile_bench import marked
from tests.processes import wait_for

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]])
    os._exit(0)
os.wait()
time.sleep(float(sys.argv[2]))
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")


@pytest.mark.parametrize("runs_for, timeout", [(0, 60), (60, 2)], ids=["ends", "times-out"])
def test_a_setsid_daemon_of_a_benchmark_does_not_outlive_it(runs_for, timeout):
    marker = f"perfq-orphan-{uuid.uuid4().hex}"
    done = proc.run([sys.executable, "-c", DAEMON, marker, str(runs_for)], timeout=timeout, reap_orphans=True)
    assert bool(done.error) == (runs_for > timeout)
    assert wait_for(lambda: not marked(marker), 5), marked(marker)


def test_without_reaping_the_daemon_escapes_the_group():
    """The fault, kept where perfq does not ask for it (a build, a git call): the daemon survives."""
    marker = f"perfq-orphan-{uuid.uuid4().hex}"
    proc.run([sys.executable, "-c", DAEMON, marker, "0"], timeout=60)
    try:
        assert wait_for(lambda: bool(marked(marker)), 5)
    finally:
        for pid in marked(marker):
            os.kill(pid, 9)
