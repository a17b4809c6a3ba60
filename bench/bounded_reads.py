"""Peak RSS of perfq given /dev/zero as an input (issue 37 item 4), under a 4 GB address-space limit.

The three reported cases (``compile_commands = "/dev/zero"``, canaries as an in-repo symlink to
/dev/zero, ``perfq ci matrix`` on a symlink to /dev/zero) run against the perfq sources at
``--code`` (default: the installed perfq) on the ATen fixture; each prints its exit status, peak
RSS and the ratio to the floor measured in the same run (``perfq index`` of the fixture, no config).

    python bench/bounded_reads.py [--code DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.aten_fixture import make_repo  # noqa: E402  (the repository root, put on the path above)

AS_LIMIT = 4_000_000_000


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def peak(args: list[str], cwd: Path, code: str | None) -> tuple[int, float, str]:
    """(exit status, peak RSS in MB, last stderr line) of ``perfq args``."""
    env = {**os.environ, **({"PYTHONPATH": code} if code else {})}
    child = subprocess.Popen([sys.executable, "-m", "perfq", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, preexec_fn=_limited)
    lines = child.stderr.read().decode(errors="replace").strip().splitlines()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, lines[-1][:100] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", help="a perfq source tree to run instead of the installed perfq")
    code = parser.parse_args().code
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "repo")
        (repo / "zero-link.yaml").symlink_to("/dev/zero")
        (Path(tmp) / "zero.json").symlink_to("/dev/zero")
        index = ["index", "-q", "--no-trace", "--db", str(Path(tmp) / "i.duckdb")]
        _, floor, _ = peak(index, repo, code)
        cases = {
            'compile_commands = "/dev/zero"': ('[tool.perfq]\ncompile_commands = "/dev/zero"\n', index),
            "canaries: in-repo symlink to /dev/zero": ('[tool.perfq]\ncanaries = "zero-link.yaml"\n', index),
            "ci matrix: symlink to /dev/zero": ("", ["ci", "matrix", str(Path(tmp) / "zero.json")]),
        }
        print(f"floor (perfq index of the fixture): {floor:.0f} MB")
        for name, (toml, args) in cases.items():
            (repo / "perfq.toml").write_text(toml)
            status, rss, last = peak(args, repo, code)
            print(f"{name}: exit {status}, peak RSS {rss:.0f} MB = {rss / floor:.1f}x the floor "
                  f"(target < 1 GB); {last}")


if __name__ == "__main__":
    main()
