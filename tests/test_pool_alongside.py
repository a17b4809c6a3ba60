"""``common.pool.alongside``: a call that runs in a forked child while the block runs (the
facts cache is saved this way during an index build's link and write)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from common.pool import alongside


def _write_pid(path: Path, delay: float = 0.0) -> None:
    time.sleep(delay)
    path.write_text(str(os.getpid()))


def _fail_in_children(path: Path, parent: int) -> None:
    if os.getpid() != parent:
        raise OSError(28, "No space left on device")
    path.write_text("written by the parent")


def test_the_call_runs_in_another_process_and_is_done_when_the_block_ends(tmp_path: Path):
    out = tmp_path / "pid"
    with alongside(_write_pid, out, 0.2):
        assert not out.exists()  # running beside the block, not before it
    assert out.read_text() != str(os.getpid())


def test_a_failed_child_is_repeated_in_line_so_its_error_surfaces(tmp_path: Path):
    out = tmp_path / "out"
    with alongside(_fail_in_children, out, os.getpid()):
        pass
    assert out.read_text() == "written by the parent"
    with pytest.raises(FileNotFoundError), alongside(_write_pid, tmp_path / "no" / "such" / "dir"):
        pass


def test_a_failing_block_stops_the_child(tmp_path: Path):
    out = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(KeyError), alongside(_write_pid, out, 30.0):
        raise KeyError("link failed")
    assert time.monotonic() - started < 10
    time.sleep(0.3)
    assert not out.exists()


def _deaf_to_sigterm(path: Path) -> None:
    """A child busy where SIGTERM is not acted on (inside a long C call, here ignored outright)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    path.write_text("finished")


def test_a_failing_block_does_not_wait_for_a_child_deaf_to_sigterm(tmp_path: Path):
    started = time.monotonic()
    with pytest.raises(KeyError), alongside(_deaf_to_sigterm, tmp_path / "out"):
        time.sleep(0.3)  # the child has started
        raise KeyError("interrupted")
    assert time.monotonic() - started < 20
    assert not (tmp_path / "out").exists()
