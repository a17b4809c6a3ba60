"""Tracing operator benchmarks: run each one with minimal iterations under
torch.profiler (data/trace_driver.py, one subprocess per file, in parallel) and collect
the aten ops its timed region executes, per benchmark class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from perfq.errors import PerfqError

TIMEOUT_S = 600


def torch_version(python: str = sys.executable) -> str:
    """The torch version ``python`` imports, or a PerfqError when it has none."""
    proc = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),  # in a PyTorch checkout, `import torch` would find its sources
    )
    if proc.returncode != 0:
        raise PerfqError(f"--trace-benchmarks needs torch importable by {python}")
    return proc.stdout.strip()


def _trace_one(repo: Path, path: str, python: str) -> tuple[str, dict[str, list[str]] | None, str]:
    file = repo / path
    root = file.parent.parent  # benchmarks/operator_benchmark (holds benchmark_core.py)
    if not (root / "benchmark_pytorch.py").is_file():
        return path, None, "not an operator_benchmark file (no benchmark_pytorch.py beside its package)"
    module = f"{file.parent.name}.{file.stem}"
    driver = str(resources.files("perfq.data").joinpath("trace_driver.py"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run(
            [python, driver, module], cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return path, None, f"timed out after {TIMEOUT_S}s"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("PERFQ-TRACE "):
            traced = json.loads(line[len("PERFQ-TRACE ") :])
            if proc.returncode != 0 and not traced:
                break
            return path, traced, ""
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return path, None, f"exit {proc.returncode}: {tail[:200]}"


def trace_benchmarks(
    repo: Path, paths: list[str], jobs: int | None = None, python: str = sys.executable
) -> dict[str, tuple[dict[str, list[str]] | None, str]]:
    """path -> (ops per benchmark class, or None with the reason) for each benchmark file."""
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = pool.map(lambda p: _trace_one(repo, p, python), paths)
        return {path: (traced, error) for path, traced, error in results}
