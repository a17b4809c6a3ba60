"""Ctrl-C and SIGTERM: both raise KeyboardInterrupt for the whole command, so cleanup code runs
(runs marked incomplete, children's process groups killed, scratch files removed) and the command
ends with one line and exit 130, and both are noted, because DuckDB turns a KeyboardInterrupt
raised inside a query into ``RuntimeError('Query interrupted')``: an error that follows a noted
signal is the interruption."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_noted: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    _noted.append(signum)
    raise KeyboardInterrupt


def interrupted() -> bool:
    """Whether SIGINT or SIGTERM reached a handler installed here since :func:`noting_interrupts` began."""
    return bool(_noted)


def interruption() -> str:
    """What interrupted the command, for notes: ``Ctrl-C`` (also when nothing was noted) or ``SIGTERM``."""
    return "SIGTERM" if _noted and _noted[-1] == signal.SIGTERM else "Ctrl-C"


@contextlib.contextmanager
def _handling(signum: signal.Signals) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's
        yield
        return
    previous = signal.signal(signum, _interrupt)
    try:
        yield
    finally:
        signal.signal(signum, previous)


@contextlib.contextmanager
def noting_interrupts() -> Iterator[None]:
    """Within the block (a whole command), Ctrl-C and SIGTERM (a CI cancel, ``kill``, a container
    stop) raise KeyboardInterrupt and are noted."""
    _noted.clear()
    with _handling(signal.SIGINT), _handling(signal.SIGTERM):
        yield


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a CI cancel, ``kill``) raises KeyboardInterrupt like Ctrl-C, so
    cleanup code runs (scratch files removed, workers killed, sessions marked). Outside the main
    thread, where signals cannot be handled, nothing changes."""
    with _handling(signal.SIGTERM):
        yield
