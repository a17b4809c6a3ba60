"""Running a child process: one place for timeouts, Ctrl-C, undecodable output and output tails."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 25


@dataclass(frozen=True)
class ProcResult:
    """What one process did: exit status (None when it did not finish), its output, and why it failed."""

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # cannot start / timed out; '' when it ran to the end

    @property
    def ok(self) -> bool:
        return not self.error and self.returncode == 0

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of stderr (stdout when stderr is empty)."""
        return tail(self.stderr or self.stdout, lines)

    def last_line(self, width: int = 200) -> str:
        """The last line of stderr (or stdout), cut to ``width`` characters."""
        return self.tail(1)[:width]


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` non-trailing lines of ``text``."""
    return "\n".join(text.strip().splitlines()[-lines:])


def run(
    argv: list[str] | str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    shell: bool = False,
    capture: bool = True,
) -> ProcResult:
    """Run ``argv`` to the end (or ``timeout`` seconds): output decoded with replacement, never raised.

    Ctrl-C kills the child and propagates. ``capture=False`` lets the child use this
    process's stdout and stderr.
    """
    pipe = subprocess.PIPE if capture else None
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env) if env is not None else None, stdout=pipe, stderr=pipe,
            text=True, errors="replace", shell=shell,
        )
    except OSError as exc:
        name = argv if isinstance(argv, str) else argv[0]
        return ProcResult(None, "", str(exc), f"cannot start {name}: {exc.strerror or exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return ProcResult(None, stdout or "", stderr or "", f"timed out after {timeout:g}s")
    except KeyboardInterrupt:
        proc.kill()
        proc.communicate()
        raise
    return ProcResult(proc.returncode, stdout or "", stderr or "")
