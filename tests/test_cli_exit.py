"""The console script ends the process at once after a command (perfq.cli.run), and still
behaves as a normal exit: the same exit codes, every line written, atexit handlers run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.version import __version__
from perfq.run.results import EXPORT_FORMAT

RUN = """
import atexit, sys, threading, time
{setup}
sys.argv = ["perfq", *{args!r}]
from perfq.cli import run
run()
"""


def _run(args: list[str], setup: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    code = RUN.format(setup=setup, args=args)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_success_flushes_output_and_runs_atexit_handlers():
    proc = _run(["--version"], setup="atexit.register(lambda: print('atexit ran', flush=True))")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [f"perfq {__version__}", "atexit ran"]


def test_a_perfq_error_keeps_its_line_and_exit_code(tmp_path):
    proc = _run(["affected", "HEAD~1"], cwd=tmp_path)  # not a git repository
    assert proc.returncode == 4
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1


def test_usage_error_exit_code():
    proc = _run(["affected", "--no-such-option"])
    assert proc.returncode == 2 and "No such option" in proc.stderr


def test_a_live_thread_is_joined_as_at_a_normal_exit():
    setup = "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', flush=True))).start()"
    proc = _run(["--version"], setup=setup)
    assert proc.returncode == 0
    assert "thread done" in proc.stdout


def test_output_through_a_pipe_is_the_same_as_after_a_normal_exit():
    def piped(code: str) -> bytes:
        with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        return out

    quick = piped(RUN.format(setup="", args=["--help"]))
    normal = piped("import sys\nfrom perfq.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert len(quick) > 2000 and quick == normal


def test_a_profiler_still_gets_to_write_its_profile(tmp_path):
    out = tmp_path / "perfq.prof"
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "perfq", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and out.stat().st_size > 0


@pytest.mark.parametrize("entry", [["-m", "perfq"]])
def test_python_dash_m_uses_the_same_exit(entry):
    proc = subprocess.run([sys.executable, *entry, "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"perfq {__version__}"


def test_a_history_written_before_the_quick_exit_is_complete_for_the_next_process(tmp_path):
    """``perfq import`` ends with os._exit: what it committed must be there for the next reader."""
    runs = [{"label": "L", "side": side, "status": "complete", "started_at": "2025-01-01T00:00:00",
             "samples": [{"seq": i, "repeat_index": 0, "benchmark": "b_test", "test": "t1", "mode": "eager",
                          "device": "cpu", "metric": "forward_time", "unit": "us", "value": 10.0 + i}
                         for i in range(50)], "failures": []} for side in ("base", "head")]
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"format": EXPORT_FORMAT, "version": 1, "runs": runs}))
    history = tmp_path / "history.duckdb"
    proc = _run(["import", str(result), "--history", str(history)])
    assert proc.returncode == 0, proc.stderr
    reader = subprocess.run([sys.executable, "-c", f"import duckdb; c = duckdb.connect({str(history)!r}, "
                             "read_only=True); print(c.execute('SELECT count(*) FROM samples').fetchone()[0])"],
                            capture_output=True, text=True, timeout=120)
    assert reader.stdout.strip() == "100", reader.stderr
