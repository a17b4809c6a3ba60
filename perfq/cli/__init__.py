"""The ``perfq`` command: the root Typer app over every feature's ``cli`` module.

Each command group lives in its own module with a ``register(app)`` function: ``index_cmd``
and ``affected_cmd`` here, ``perfq.<feature>.cli`` for run, ir, bisect and coverage.
Errors reach the user as one line (``error: ...``) and a non-zero exit.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from perfq.bisect import cli as bisect_cli
from perfq.ci import cli as ci_cli
from perfq.cli import affected_cmd, index_cmd
from perfq.common.cli import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from perfq.coverage import cli as coverage_cli
from perfq.errors import PerfqError
from perfq.ir import cli as ir_cli
from perfq.run import cli as run_cli

app = typer.Typer(
    name="perfq",
    help="Give every kernel change a performance signal: index, affected, run/compare, ir, bisect, coverage.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    epilog="Exit codes: 0 ok, 2 usage error, 3 a gate failed (regression, NO BENCHMARK, failed benchmarks, "
    "IR changed, no culprit), 4 perfq error, 130 interrupted; 1 is a crash (a bug: please report it).",
)

for _module in (index_cmd, affected_cmd, run_cli, ir_cli, bisect_cli, coverage_cli, ci_cli):
    _module.register(app)


def _print_version(value: bool) -> None:
    if value:
        from perfq import __version__

        print(f"perfq {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print perfq's version and exit.")] = False,
) -> None:
    """perfq: from a kernel diff to the benchmarks that can see it."""


@app.command()
def version() -> None:
    """Print perfq's version.

    Examples:

        perfq version

        perfq --version
    """
    from perfq import __version__

    print(f"perfq {__version__}")


_INTERRUPTED = "error: interrupted; nothing was half-written (indexes and results are replaced atomically)"


def main(argv: list[str] | None = None) -> None:
    """Entry point (``argv``: the arguments, default ``sys.argv[1:]``): PerfqError becomes
    ``error: ...`` and its exit code, Ctrl-C one line and 130, usage errors Typer's usual
    message; never a traceback for those."""
    try:
        code = app(args=argv, prog_name="perfq", standalone_mode=False)
    except PerfqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_ERROR if exc.exit_code is None else exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        print(_INTERRUPTED, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):  # click usage errors
            show()
            sys.exit(exc.exit_code)
        raise
    if code == EXIT_INTERRUPTED:  # Typer (not standalone) turns Ctrl-C into a silent 130
        print(_INTERRUPTED, file=sys.stderr)
    if isinstance(code, int) and code:
        sys.exit(code)
