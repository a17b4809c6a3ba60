"""``common.pool.worker_pool``: a block that fails (Ctrl-C, SIGTERM) kills its workers, and the
process still ends, even when a killed worker was half-way through sending its result."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# The worker writes the first bytes of a result message (the length header of
# multiprocessing.Connection, then part of the payload) to the pool's result pipe and stops there,
# as a worker SIGKILLed mid-write leaves it; the block then fails.
SCRIPT = textwrap.dedent(
    """
    import os, struct, sys, time
    from pathlib import Path
    from common.pool import worker_pool

    def half_sent(marker):
        frame = sys._getframe()
        while frame.f_code.co_name != "_process_worker":
            frame = frame.f_back
        writer = frame.f_locals["result_queue"]._writer
        os.write(writer.fileno(), struct.pack("!i", 1 << 20) + b"the first bytes")
        Path(marker).write_text("sent")
        time.sleep(120)

    if __name__ == "__main__":
        marker = Path(sys.argv[1])
        try:
            with worker_pool(2) as pool:
                futures = [pool.submit(half_sent, str(marker)) for _ in range(4)]
                while not marker.exists():
                    time.sleep(0.02)
                time.sleep(0.2)  # the pool's reader is now waiting for the rest of the message
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """
)


def test_a_block_interrupted_while_a_worker_sends_ends_the_process(tmp_path: Path):
    script = tmp_path / "half_sent.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "marker")], capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "interrupted"
    assert "Traceback" not in proc.stderr, proc.stderr
