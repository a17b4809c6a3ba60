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


def _raises_interrupt(handler: object) -> bool:
    return handler in (_interrupt, signal.default_int_handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, Ctrl-C and SIGTERM that would raise KeyboardInterrupt are noted and raised when the
    block ends (a KeyboardInterrupt then replaces an exception of the block): a step that must not be cut in
    two, such as a child started but not yet handed to the code that ends it. Outside the main thread, or
    for a signal perfq does not turn into KeyboardInterrupt, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        _noted.append(signum)
        pending.append(signum)

    swapped = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    swapped = {signum: old for signum, old in swapped.items() if _raises_interrupt(old)}
    for signum in swapped:
        signal.signal(signum, hold)
    try:
        yield
    except BaseException:
        if pending:
            raise KeyboardInterrupt from None
        raise
    finally:
        for signum, old in swapped.items():
            signal.signal(signum, old)  # type: ignore[arg-type]
    if pending:
        raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a CI cancel, ``kill``) raises KeyboardInterrupt like Ctrl-C, so
    cleanup code runs (scratch files removed, workers killed, sessions marked). Outside the main
    thread, where signals cannot be handled, nothing changes."""
    with _handling(signal.SIGTERM):
        yield
