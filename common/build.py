"""Build commands (``--build``): one argv split like a shell would quote it, never run by a shell.

Shared by `perfq bisect --build` (a build after each checkout) and `perfq run --build` (a build
per side, in the side's worktree and virtualenv). ``{python}`` in a word stands for the
interpreter the build is for.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from common import proc
from common.errors import PerfqError

SHELL_CHARS = "();<>|&"


def build_argv(text: str | None, option: str = "--build") -> list[str] | None:
    """``text`` split into an argv like a shell would quote it, but never run by one: shell
    operators (``&&``, ``|``, ``>``, ``$(...)``...) are an error that says to wrap the command in
    ``sh -c '...'``. None for no command."""
    if text is None or not text.strip():
        return None
    lexer = shlex.shlex(text, posix=True, punctuation_chars=SHELL_CHARS)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise PerfqError(f"{option} {text!r}: {exc}") from None
    operators = [t for t in tokens if t and all(c in SHELL_CHARS for c in t)]
    if operators:
        raise PerfqError(f"{option} runs one command, not through a shell ({operators[0]!r} in {text!r}); "
                         f"for shell syntax use {option} \"sh -c '...'\"")
    return shlex.split(text)


def with_python(argv: list[str], python: str | Path) -> list[str]:
    """``argv`` with ``{python}`` replaced by ``python`` in every word."""
    return [word.replace("{python}", str(python)) for word in argv]


def build_text(argv: list[str]) -> str:
    """``argv`` as one line a shell would split back, ``{python}`` left as it is written."""
    return " ".join(word if word == "{python}" else shlex.quote(word) for word in argv)


def run_build(argv: list[str], cwd: Path, timeout: float | None,
              env: Mapping[str, str] | None = None, lines: int = 1) -> str | None:
    """Run a build command (an argv, no shell); None on success, else why it failed (with the
    last ``lines`` lines of its output)."""
    res = proc.run(argv, cwd=cwd, env=env, timeout=timeout)
    if res.error:
        return res.error
    if res.returncode == 0:
        return None
    return f"exit {res.returncode} {res.last_line() if lines == 1 else chr(10) + res.tail(lines)}".strip()
