"""Options and helpers shared by every command module (the root app and each feature's ``cli.py``)."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import MISSING, fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from common.paths import default_history_path, default_index_path, repo_root

# Exit statuses of every perfq command (documented in README.md, "Exit codes").
EXIT_OK = 0
EXIT_CRASH = 1  # an unexpected exception (a bug): Python's own status, with its traceback
EXIT_USAGE = 2  # bad command line (click/Typer usage errors)
EXIT_GATE = 3  # the answer fails a gate: regression, NO BENCHMARK, failed benchmarks, IR changed, no culprit
EXIT_ERROR = 4  # a perfq error (PerfqError): unknown ref, missing/locked/corrupt index, unreadable file...
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT); finished work is kept
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (`perfq ... | head`): 128 + SIGPIPE, quietly

_PROGRAM_STARTED: list[float] = []  # set once by the console script (perfq.cli.run)


def mark_program_start(started: float) -> None:
    """The console script's process started at ``started`` (``time.monotonic()``'s clock)."""
    _PROGRAM_STARTED[:] = [started]


def command_started() -> float:
    """When the running command started (``time.monotonic()``'s clock): the process's start when perfq
    is the program, so its own start-up counts against a budget; else (``perfq.cli.main(argv)`` called
    in a process that does more: a test, a script) now."""
    return _PROGRAM_STARTED[0] if _PROGRAM_STARTED else time.monotonic()


REPO_PANEL = "Repository"
REPO_HELP = "Repository root (default: the current git worktree)."
DB_HELP = "Index database (default: <git common dir>/perfq/index.duckdb)."
HISTORY_HELP = "Results history database (default: <git common dir>/perfq/history.duckdb)."
# the shared options in the one Typer style: ``repo: RepoOpt = None``
RepoOpt = Annotated[Path | None, typer.Option("--repo", rich_help_panel=REPO_PANEL, help=REPO_HELP)]
DbOpt = Annotated[Path | None, typer.Option("--db", rich_help_panel=REPO_PANEL, help=DB_HELP)]
HistoryOpt = Annotated[Path | None, typer.Option("--history", rich_help_panel=REPO_PANEL, help=HISTORY_HELP)]
PRIORITY_HELP = ("Scheduling of the benchmark processes: realtime (SCHED_FIFO: other load cannot preempt them), "
                 "normal, or auto (realtime when permitted).")
FORMAT_HELP = "table on a terminal, json for machines, markdown for PR comments."


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def resolve_repo(repo: Path | None) -> Path:
    return repo_root(repo or Path.cwd())


def resolve_db(repo: Path, db: Path | None) -> Path:
    return db if db is not None else default_index_path(repo)


def resolve_history(repo: Path, history: Path | None) -> Path:
    return history if history is not None else default_history_path(repo)


def finite(value: float | None) -> float | None:
    """Typer callback: a finite number (``nan`` and ``inf`` are usage errors)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def non_negative(value: float | None) -> float | None:
    """Typer callback: a finite number >= 0."""
    if finite(value) is not None and value < 0:
        raise typer.BadParameter(f"{value:g} is negative")
    return value


def positive(value: float | None) -> float | None:
    """Typer callback: a finite number > 0 (a timeout, a duration)."""
    if finite(value) is not None and value <= 0:
        raise typer.BadParameter(f"{value:g} is not positive")
    return value


Args = TypeVar("Args")


def takes_options(args_type: type[Args]) -> Callable[[Callable[[Args], None]], Callable[..., None]]:
    """Decorator: a Typer command whose options are the fields of the dataclass ``args_type`` (each
    ``Annotated[type, typer.Option(...)]``, in order), called with one instance of it.

    A command with many options stays one short function: the options are declared once, as a type.
    """
    hints = get_type_hints(args_type, include_extras=True)
    parameters = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                                    default=inspect.Parameter.empty if f.default is MISSING else f.default)
                  for f in fields(args_type)]  # type: ignore[arg-type]

    def decorate(body: Callable[[Args], None]) -> Callable[..., None]:
        def command(**values: Any) -> None:
            body(args_type(**values))

        command.__name__, command.__doc__ = body.__name__, body.__doc__
        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate
