"""The command path stays light: `perfq --help` loads no database, statistics, compiler or parser."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("duckdb", "scipy", "numpy", "clang", "torch", "triton")

PROBE = """
import sys
from perfq.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(" ".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def test_help_imports_nothing_heavy():
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Usage" in proc.stdout
    assert proc.stderr.strip() == ""  # none of the heavy modules
