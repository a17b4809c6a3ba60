"""A load generator for the contended variants of bench/run_defaults.py and bench/power.py.

``busy(seconds)`` starts, at normal priority, ``CPU_HOGS`` processes that spin on the CPU and one
memory-bandwidth hog (numpy copying a 128 MiB array back and forth: the shared cache and the memory
bus), for at most ``seconds``: each child ends itself at its deadline, and the context ends them
all when the block ends, however it ends. ``describe()`` is what the benches print next to their
figures, with ``uptime`` and ``/proc/pressure``.

Usage alone: python bench/loadgen.py SECONDS   (for a look at its effect with top or perfq run)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

CPU_HOGS = 4
BANDWIDTH_MIB = 128

_SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    sum(range(10000))\n"
_BANDWIDTH = (
    "import time\nimport numpy as np\nend = time.monotonic() + {seconds}\n"
    f"a = np.ones({BANDWIDTH_MIB} * 2**17); b = np.empty_like(a)\n"
    "while time.monotonic() < end:\n    np.copyto(b, a)\n    np.copyto(a, b)\n"
)


def machine_state() -> str:
    """``uptime`` and the "some" avg10 of /proc/pressure/{cpu,memory,io}: the machine as measured."""
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    pressure = []
    for kind in ("cpu", "memory", "io"):
        path = Path(f"/proc/pressure/{kind}")
        line = path.read_text().splitlines()[0] if path.exists() else "n/a"
        pressure.append(f"{kind} {line.split()[1] if line.startswith('some') else line}")
    return f"{uptime}; pressure some: {', '.join(pressure)}"


def describe() -> str:
    return (f"load generator: {CPU_HOGS} CPU spinners + 1 memory-bandwidth hog ({BANDWIDTH_MIB} MiB copies), "
            "normal priority")


@contextlib.contextmanager
def busy(seconds: float) -> Iterator[None]:
    """The machine kept busy for the block (at most ``seconds``: the children end themselves then)."""
    codes = [_SPIN.format(seconds=seconds)] * CPU_HOGS + [_BANDWIDTH.format(seconds=seconds)]
    children = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for code in codes]
    try:
        yield
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    print(describe(), f"for {seconds:.0f} s")
    with busy(seconds):
        time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
