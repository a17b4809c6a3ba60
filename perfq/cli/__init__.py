"""The ``perfq`` command: the root Typer app over every feature's ``cli`` module.

Each command group lives in its own module with a ``register(app)`` function: ``index_cmd``
and ``affected_cmd`` here, ``perfq.<feature>.cli`` for run, ir, bisect, coverage and ci.
``perfq COMMAND ...`` builds an app with COMMAND's module only: Typer inspects the signature
of every registered command when it builds the app, and importing every feature's CLI costs
as much again (~0.1 s of a 0.3 s ``perfq affected``). ``perfq``, ``perfq --help`` and shell
completion build the whole app. Errors reach the user as one line (``error: ...``) and a
non-zero exit.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import importlib
import os
import sys
import threading
import time
from typing import Annotated, Any, NoReturn

import typer

from common.errors import PerfqError
from common.interrupt import interrupted, noting_interrupts
from common.lifetime import free_at_exit, process_age
from common.version import __version__
from perfq.options import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, mark_program_start

# every command (or command group) and the module whose register(app) adds it
COMMAND_MODULES = {
    "index": "perfq.cli.index_cmd",
    "stats": "perfq.cli.index_cmd",
    "affected": "perfq.cli.affected_cmd",
    "backtest": "perfq.cli.affected_cmd",
    "run": "perfq.run.cli",
    "compare": "perfq.run.cli",
    "history": "perfq.run.cli",
    "import": "perfq.run.cli",
    "ir": "perfq.ir.cli",
    "bisect": "perfq.bisect.cli",
    "bisect-step": "perfq.bisect.cli",
    "coverage": "perfq.coverage.cli",
    "ci": "perfq.ci.cli",
}


def build_app(command: str | None = None) -> typer.Typer:
    """The root app with ``command``'s module registered (none for ``version``), or every module
    (None or an unknown command, so that the help lists them all)."""
    app = _root_app()
    module = COMMAND_MODULES.get(command or "")
    modules = [module] if module else [] if command == "version" else dict.fromkeys(COMMAND_MODULES.values())
    for name in modules:
        importlib.import_module(name).register(app)
    app.command()(version)
    return app


def __getattr__(name: str) -> Any:
    """``perfq.cli.app``: the whole app (for tests and tools that import it)."""
    if name == "app":
        return build_app()
    raise AttributeError(name)


def _root_app() -> typer.Typer:
    """The app without commands: its help and root options."""
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
    app.callback()(_root)
    return app


def _print_version(value: bool) -> None:
    if value:
        print(f"perfq {__version__}")
        raise typer.Exit(EXIT_OK)


def _root(
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print perfq's version and exit.")] = False,
) -> None:
    """perfq: from a kernel diff to the benchmarks that can see it."""


def version() -> None:
    """Print perfq's version.

    Examples:

        perfq version

        perfq --version
    """
    print(f"perfq {__version__}")


_INTERRUPTED = "error: interrupted; nothing was half-written (indexes and results are replaced atomically)"


def main(argv: list[str] | None = None) -> None:
    """Entry point (``argv``: the arguments, default ``sys.argv[1:]``): PerfqError becomes
    ``error: ...`` and its exit code, Ctrl-C (or SIGTERM, or an error it caused) one line and
    130, usage errors Typer's usual message; never a traceback for those."""
    args = sys.argv[1:] if argv is None else argv
    app = build_app(args[0] if args else None)
    with noting_interrupts():
        try:
            code = app(args=args, prog_name="perfq", standalone_mode=False)
            sys.stdout.flush()  # a closed or full stdout fails here, not silently at exit
        except (KeyboardInterrupt, typer.Abort):
            _exit_interrupted()
        except SystemExit as exc:  # click turns a broken pipe into a bare exit 1
            if isinstance(exc.__context__, OSError) and exc.__context__.errno == errno.EPIPE:
                _exit_output_failed(exc.__context__)
            raise
        except Exception as exc:
            _exit_on(exc)
    if code == EXIT_INTERRUPTED:  # Typer (not standalone) turns Ctrl-C into a silent 130
        print(_INTERRUPTED, file=sys.stderr)
    if isinstance(code, int) and code:
        sys.exit(code)


def run() -> NoReturn:
    """The console script and ``python -m perfq``: main(), then the process ends at once.
    atexit handlers run and the standard streams are flushed as at a normal exit, but the
    interpreter does not take its modules and objects apart one by one first: 20-30 ms of a
    0.3 s ``perfq affected``, 0.15 s after an index build. The usual exit is kept when another
    thread runs (it joins it), a profiler or tracer is on (``python -m cProfile -m perfq``,
    coverage: they save their data after the program) and for a crash (its traceback)."""
    mark_program_start(time.monotonic() - process_age())  # its own start-up counts against a budget
    free_at_exit()
    try:
        main()
        code: object = EXIT_OK
    except SystemExit as exc:
        code = exc.code
    if threading.active_count() > 1 or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if code is None:
        code = EXIT_OK
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()  # what Py_Finalize would run; os._exit runs none
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (``perfq ... | head``) or stream
            stream.flush()
    os._exit(code)


def _exit_output_failed(exc: OSError) -> NoReturn:
    """The output could not be written: a reader that closed the pipe (``perfq ... | head``) ends perfq
    quietly with a broken pipe's usual status (141, as a shell reports a SIGPIPE death); a full disk or an
    I/O error is one line and ``EXIT_ERROR``. Nothing more is written to stdout, not even at exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if exc.errno == errno.EPIPE:
        sys.exit(EXIT_BROKEN_PIPE)
    where = f" {exc.filename}" if exc.filename else " the output"
    with contextlib.suppress(OSError):
        print(f"error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
    sys.exit(EXIT_ERROR)


def _exit_interrupted() -> NoReturn:
    print(_INTERRUPTED, file=sys.stderr)
    sys.exit(EXIT_INTERRUPTED)


def _exit_on(exc: Exception) -> NoReturn:
    """Exit as ``exc`` says: a PerfqError's one line, an interruption when a signal came first
    (DuckDB reports one as RuntimeError), Typer's exit or a click usage error's message."""
    if isinstance(exc, PerfqError):
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_ERROR if exc.exit_code is None else exc.exit_code)
    if isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ENOSPC, errno.EIO):
        _exit_output_failed(exc)
    if interrupted():
        _exit_interrupted()
    if isinstance(exc, typer.Exit):
        sys.exit(exc.exit_code)
    show = getattr(exc, "show", None)
    if callable(show) and isinstance(getattr(exc, "exit_code", None), int):  # click usage errors
        show()
        sys.exit(exc.exit_code)
    raise exc
