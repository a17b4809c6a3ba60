"""Worker processes that never outlive perfq: process pools, and one call run beside the
caller in a forked child (:func:`alongside`).

A forked ``ProcessPoolExecutor`` worker whose parent is killed (``kill -9``, a CI cancel's
SIGTERM) is orphaned: it blocks forever on the task queue it shares with its dead parent,
holding whatever the parent had open. The workers of :func:`worker_pool` ask the kernel to
kill them when their parent dies (``PR_SET_PDEATHSIG`` on Linux; a watcher thread elsewhere),
leave Ctrl-C to the parent, and are killed by the parent when the block fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent exits; False when unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    """Exit as soon as ``parent`` is no longer this process's parent (polling fallback)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def die_with_parent(parent: int) -> None:
    """Pool worker initializer: die when ``parent`` dies; Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _set_parent_death_signal():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what ``pool`` has not started and kill its workers now (not after their tasks)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)  # shutdown forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(OSError, ValueError):
            proc.kill()
    for proc in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            proc.join(timeout=5)
    if manager is not None:
        manager.join(timeout=1)
        if manager.is_alive():
            _end_half_read(pool, results)
            manager.join(timeout=5)


def _end_half_read(pool: ProcessPoolExecutor, results: object) -> None:
    """Wake the pool's manager thread from the read of a result a killed worker had begun to
    send: it would wait for the rest forever, and so would this process's exit, which joins
    the thread. Once the pipe's last writer (this process's copy) is closed it reads EOF and
    fails the pool; the futures cancelled meanwhile are dropped first, as failing one raises
    there (CPython < 3.12)."""
    pending = getattr(pool, "_pending_work_items", None) or {}
    for work_id in [k for k, item in pending.items() if item.future.cancelled()]:
        pending.pop(work_id, None)
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool of ``jobs`` workers that die with this process; when the block raises
    (an error, Ctrl-C, SIGTERM turned into KeyboardInterrupt) its workers are killed at once."""
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        kill_workers(pool)
        raise
    pool.shutdown(wait=True)


def _forked_child(fn: Callable[..., object], args: tuple) -> None:
    """The body of :func:`alongside`'s child: no collector passes over the parent's heap
    (they would copy every page it shares), die with the parent, a quiet non-zero exit on
    any error (the parent repeats the call to report it)."""
    gc.disable()
    _set_parent_death_signal()
    try:
        fn(*args)
    except BaseException:  # noqa: BLE001 - the parent re-runs fn and reports what fails
        os._exit(1)


_GRACE = 5.0  # seconds a stopped child has to act on SIGTERM before it is killed


def _stop(child: multiprocessing.Process) -> None:
    """SIGTERM ``child``, then SIGKILL it if it is still running after a grace period (a child
    inside a long C call, a DuckDB write, acts on SIGTERM only when the call returns)."""
    child.terminate()
    child.join(timeout=_GRACE)
    if child.is_alive():
        child.kill()
        child.join()


@contextlib.contextmanager
def alongside(fn: Callable[..., object], *args: object) -> Iterator[None]:
    """Run ``fn(*args)`` in a forked child while the block runs, on a core the block leaves idle
    (its arguments are shared copy-on-write, never pickled), and wait for it at the end. When
    the child fails, ``fn`` runs again here after the block, so its error surfaces as if it had
    been called in line; when the block raises, the child is stopped. ``fn`` must be safe to
    repeat. Without fork (not Linux) it simply runs after the block."""
    if not sys.platform.startswith("linux"):
        yield
        fn(*args)
        return
    child = multiprocessing.get_context("fork").Process(target=_forked_child, args=(fn, args), daemon=True)
    child.start()
    try:
        yield
    except BaseException:
        _stop(child)
        raise
    child.join()
    if child.exitcode != 0:
        fn(*args)
