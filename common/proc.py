"""Running a child process: one place for process groups, timeouts, Ctrl-C and SIGTERM, capped
output, undecodable output and output tails.

Every child runs in a session (and process group) of its own and dies with perfq
(``PR_SET_PDEATHSIG`` on Linux). Its whole group is killed on every way out: a timeout, Ctrl-C or
SIGTERM (both arrive as KeyboardInterrupt, see :mod:`common.interrupt`), an error, and
its normal end (what it left running is a stray). A timeout holds even when a grandchild keeps the
output pipe open: the group is killed, the pipe is not waited on. Output is read as it comes and
kept up to a cap (a head and a tail; lines a caller's ``keep`` accepts are kept from the middle
too), so a benchmark printing 300 MB costs perfq a bounded amount of memory.

Scratch directories (``$TMPDIR/perfq-<kind>-<pid>-*``) carry their owner's pid, so the next
command removes those a killed perfq left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from common import sched
from common.interrupt import deferred

TAIL_LINES = 25
OUTPUT_CAP = 64 * 2**20  # bytes kept of each stream (half its head, half its tail)
GRACE_S = 3.0  # SIGTERM, then this long, then SIGKILL
DRAIN_S = 1.0  # after the group is dead, output still buffered in the pipe is read this long
_CHUNK = 1 << 16
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class ChildUsage:
    """A reaped child's own resource use (``wait4``'s rusage: it and the descendants it waited for)."""

    user_s: float
    system_s: float
    major_faults: int
    minor_faults: int
    voluntary_switches: int  # it waited (I/O, a lock, sleep)
    involuntary_switches: int  # it was preempted: another task took its CPU
    max_rss_kib: int

    @classmethod
    def of(cls, usage: os.struct_rusage) -> ChildUsage:
        return cls(usage.ru_utime, usage.ru_stime, usage.ru_majflt, usage.ru_minflt, usage.ru_nvcsw, usage.ru_nivcsw,
                   usage.ru_maxrss)


@dataclass(frozen=True)
class ProcResult:
    """What one process did: exit status (None when it did not finish), its output, and why it failed."""

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # cannot start / timed out; '' when it ran to the end
    cut: int = 0  # bytes of output dropped by the cap (both streams)
    usage: ChildUsage | None = None  # its rusage, when perfq reaped it

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


# ----------------------------------------------------------------------------- capped output


class CappedOutput:
    """One stream's bytes as they arrive, kept up to ``cap``: the first half, the last half, and
    in between only the lines ``keep`` accepts (the rest is counted as cut)."""

    def __init__(self, cap: int = OUTPUT_CAP, keep: Callable[[str], bool] | None = None) -> None:
        self.head_cap, self.tail_cap, self.keep = cap - cap // 2, cap // 2, keep
        self.head = bytearray()
        self.middle: list[bytes] = []  # kept lines from the cut part
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.partial = bytearray()  # an unfinished line past the head
        self.cut = 0

    def add(self, data: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.partial += data
        *lines, rest = bytes(self.partial).split(b"\n")
        self.partial = bytearray(rest)
        for line in lines:
            self._to_tail(line + b"\n")
        if len(self.partial) > self.tail_cap:  # one endless line: keep its end only
            self.cut += len(self.partial) - self.tail_cap
            del self.partial[: len(self.partial) - self.tail_cap]

    def _to_tail(self, line: bytes) -> None:
        self.tail.append(line)
        self.tail_size += len(line)
        while self.tail_size + len(self.partial) > self.tail_cap and self.tail:
            old = self.tail.popleft()
            self.tail_size -= len(old)
            if self.keep is not None and self.keep(old.decode(errors="replace")):
                self.middle.append(old)
            else:
                self.cut += len(old)

    def text(self) -> str:
        """What was kept, decoded with replacement, a note where bytes were cut."""
        note = f"\n[perfq: {self.cut} bytes of output cut here]\n".encode() if self.cut else b""
        kept = b"".join([bytes(self.head), note, *self.middle, *self.tail, bytes(self.partial)])
        return kept.decode(errors="replace")


# ----------------------------------------------------------------------------- process groups


_LIBC: list[ctypes.CDLL] = []  # loaded by the parent: the child, between fork and exec, must not look for it


def _load_libc() -> None:
    if _LIBC or not sys.platform.startswith("linux"):
        return
    for find in (lambda: "libc.so.6", lambda: ctypes.util.find_library("c")):  # the search runs ldconfig
        try:
            _LIBC.append(ctypes.CDLL(find(), use_errno=True))
            return
        except OSError:
            continue


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when perfq dies (a ``kill -9`` cannot be handled)."""
    if _LIBC:
        _LIBC[0].prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _die_with_parent_realtime() -> None:
    """:func:`_die_with_parent`, then real-time scheduling (:mod:`common.sched`)."""
    _die_with_parent()
    sched.enter_realtime()


def popen(argv: list[str] | str, realtime: bool = False, **kwargs: object) -> subprocess.Popen:
    """``subprocess.Popen`` in a session and process group of its own, dying with perfq (and under
    ``SCHED_FIFO`` with ``realtime``); pair it with :func:`kill_group` (or use :func:`spawned`)."""
    _load_libc()
    before_exec = _die_with_parent_realtime if realtime else _die_with_parent
    started: list[subprocess.Popen] = []
    try:
        with deferred():  # Ctrl-C or SIGTERM while Popen waits for the exec: raised once the child is known
            started.append(subprocess.Popen(argv, start_new_session=True, preexec_fn=before_exec,  # type: ignore[call-overload]
                                            **kwargs))
    except KeyboardInterrupt:
        if started:  # its group is ended here: the caller never gets the child
            kill_group(started[0])
        raise
    return started[0]


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill_group(child: subprocess.Popen, grace: float = GRACE_S) -> ChildUsage | None:
    """End ``child``'s process group: SIGTERM, then SIGKILL once ``child`` has ended or ``grace``
    seconds have passed (whatever else of the group is left is a stray: killed then too). The
    child is reaped only after the group is signalled, so its id cannot have been reused (a child
    someone else reaped is not signalled: use :func:`ended`, not ``wait``, before this).
    Returns the child's rusage (``wait4``) when this reaped it."""
    if child.returncode is not None:
        return None
    if _exited(child.pid):
        _signal_group(child.pid, signal.SIGKILL)
    else:
        _signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while not _exited(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        _signal_group(child.pid, signal.SIGKILL)
    return _reap(child)


def _reap(child: subprocess.Popen) -> ChildUsage | None:
    """Reap the ended ``child`` with ``wait4``: its exit status goes to ``child.returncode``, its rusage is returned."""
    try:
        _, status, usage = os.wait4(child.pid, 0)
    except ChildProcessError:  # reaped elsewhere
        with contextlib.suppress(ChildProcessError):
            child.wait()
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    return ChildUsage.of(usage)


def ended(child: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``child`` to end, without reaping it (see :func:`kill_group`)."""
    deadline = time.monotonic() + timeout
    while not _exited(child.pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _exited(pid: int) -> bool:
    """Whether child ``pid`` has ended (without reaping it: its group id stays reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _children() -> set[int]:
    """The live processes whose parent is this process (from /proc)."""
    me, found = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    if int(fh.read().rsplit(b")", 1)[1].split()[1]) == me:
                        found.add(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (``PR_SET_CHILD_SUBREAPER``, Linux):
    a grandchild that left its process group (``setsid``) and outlived its parent becomes our child,
    so :func:`run` with ``reap_orphans`` can end it. False where it cannot."""
    _load_libc()
    return bool(_LIBC) and _LIBC[0].prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def kill_orphans(known: set[int]) -> list[int]:
    """SIGKILL and reap the children of this (subreaper) process that are not in ``known``:
    descendants of a finished child that escaped its group; repeated while killing one
    hands its own children to us. The pids killed."""
    killed: list[int] = []
    for _ in range(32):
        strays = _children() - known
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        killed += sorted(strays)
    return killed


@contextlib.contextmanager
def spawned(argv: list[str], reap_orphans: bool = False, **kwargs: object) -> Iterator[subprocess.Popen]:
    """:func:`popen` for the block; its group is killed when the block ends, however it ends.
    ``reap_orphans`` as for :func:`run`: a ``setsid`` daemon it started is killed then too."""
    known = _children() if reap_orphans and become_subreaper() else None
    child = popen(argv, **kwargs)
    try:
        yield child
    finally:
        kill_group(child)
        if known is not None:
            kill_orphans(known)
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def lines(stream: object, idle: float, first: float | None = None) -> Iterator[str]:
    """The lines of a child's output ``stream`` (a binary pipe) as they come, decoded with
    replacement; TimeoutError when nothing comes for ``idle`` seconds (``first``: before the first
    output, default ``idle``)."""
    fd = stream.fileno()  # type: ignore[attr-defined]
    pending = b""
    wait = idle if first is None else first
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            if not sel.select(wait):
                raise TimeoutError(f"no output for {wait:g}s")
            wait = idle
            data = os.read(fd, _CHUNK)
            if not data:
                break
            *done, pending = (pending + data).split(b"\n")
            for line in done:
                yield line.decode(errors="replace") + "\n"
    if pending:
        yield pending.decode(errors="replace")


def run(
    argv: list[str] | str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    shell: bool = False,
    capture: bool = True,
    keep: Callable[[str], bool] | None = None,
    cap: int = OUTPUT_CAP,
    realtime: bool = False,
    pass_fds: tuple[int, ...] = (),
    reap_orphans: bool = False,
) -> ProcResult:
    """Run ``argv`` to the end (or ``timeout`` seconds): output decoded with replacement, never raised.

    The child runs in its own process group, killed on a timeout, Ctrl-C or SIGTERM (which then
    propagates) and when the child ends. ``capture=False`` lets the child use this process's
    stdout and stderr. Each captured stream keeps ``cap`` bytes (head and tail) and, from the
    middle, the lines ``keep`` accepts (a parser's lines: measurements, headers). ``realtime``:
    the child runs under ``SCHED_FIFO`` (a benchmark; :mod:`common.sched`). ``pass_fds``: the
    descriptors it inherits (a sandbox's seccomp program, :class:`common.sandbox.Launch`).
    ``reap_orphans`` (a benchmark): nothing the child started outlives it, not even a ``setsid``
    daemon (this process becomes a subreaper; call it from one thread at a time).
    """
    known = _children() if reap_orphans and become_subreaper() else None
    pipe = subprocess.PIPE if capture else None
    outputs = {"stdout": CappedOutput(cap, keep), "stderr": CappedOutput(cap)}
    try:
        child = popen(argv, realtime, cwd=cwd, env=dict(env) if env is not None else None, stdout=pipe, stderr=pipe,
                      stdin=subprocess.DEVNULL, shell=shell, pass_fds=pass_fds)
    except OSError as exc:
        name = argv if isinstance(argv, str) else argv[0]
        return ProcResult(None, "", str(exc), f"cannot start {name}: {exc.strerror or exc}")
    try:  # right after the start: a signal from here on lands in the block that ends the child's group
        finished = _collect(child, outputs, timeout)
    finally:
        usage = kill_group(child)
        if known is not None:
            kill_orphans(known)
        _drain(child, outputs)
    out, err = outputs["stdout"], outputs["stderr"]
    error = "" if finished else f"timed out after {timeout:g}s"
    return ProcResult(child.returncode if finished else None, out.text(), err.text(), error, out.cut + err.cut,
                      usage)


def _collect(child: subprocess.Popen, outputs: dict[str, CappedOutput], timeout: float | None) -> bool:
    """Read the child's output until it ends (True) or ``timeout`` passes (False)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for name in outputs:
            stream = getattr(child, name)
            if stream is not None:
                sel.register(stream, selectors.EVENT_READ, name)
        while not _exited(child.pid):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait = 0.1 if left is None else min(0.1, left)
            if sel.get_map():
                _read_ready(sel, outputs, wait)
            else:
                time.sleep(min(wait, 0.05))
    return True


def _read_ready(sel: selectors.BaseSelector, outputs: dict[str, CappedOutput], wait: float) -> None:
    for key, _ in sel.select(wait):
        data = os.read(key.fd, _CHUNK)
        if data:
            outputs[key.data].add(data)
        else:
            sel.unregister(key.fileobj)


def _drain(child: subprocess.Popen, outputs: dict[str, CappedOutput]) -> None:
    """Read what the (dead) group left in the pipes, until end of file or ``DRAIN_S`` (a process
    that left the group may hold them open: it is not waited for), then close them."""
    streams = [s for s in (child.stdout, child.stderr) if s is not None]
    if not streams:
        return
    deadline = time.monotonic() + DRAIN_S
    with selectors.DefaultSelector() as sel:
        for name in outputs:
            stream = getattr(child, name)
            if stream is not None:
                sel.register(stream, selectors.EVENT_READ, name)
        while sel.get_map() and (left := deadline - time.monotonic()) > 0:
            _read_ready(sel, outputs, left)
    for stream in streams:
        stream.close()


# ----------------------------------------------------------------------------- scratch directories


def _scratch_prefix(kind: str, pid: int) -> str:
    return f"perfq-{kind}-{pid}-"


@contextlib.contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A new ``$TMPDIR/perfq-<kind>-<pid>-*`` directory for the block, removed when it ends; those
    of dead perfq processes are removed first."""
    remove_stale_scratch(kind)
    path = Path(tempfile.mkdtemp(prefix=_scratch_prefix(kind, os.getpid())))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_stale_scratch(kind: str, root: Path | None = None) -> list[Path]:
    """Remove the ``perfq-<kind>-<pid>-*`` directories whose owner ``pid`` is not alive."""
    removed = []
    for path in (root or Path(tempfile.gettempdir())).glob(f"perfq-{kind}-*"):
        pid = path.name[len(f"perfq-{kind}-"):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
