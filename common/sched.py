"""Real-time scheduling for benchmark processes: what other load on the machine cannot preempt.

A benchmark process under ``SCHED_FIFO`` runs whenever it is ready: the other processes of a
shared 2-core machine (a CI runner's agent, a second job, an index build) wait for it instead of
taking its core in the middle of a timed loop. Both sides of a comparison get the same policy, so
the comparison stays fair; what changes is the noise (an A/A of softmax and add at load 6:
invocation noise 2-75% (median 16%) at normal priority, 0.5-11% (median 2.6%) under
``SCHED_FIFO``; docs/run.md "Priority").

Linux lets a process take ``SCHED_FIFO`` when it is privileged (``CAP_SYS_NICE``) or when its
``RLIMIT_RTPRIO`` allows the priority (``sudo prlimit --pid $$ --rtprio=1`` on a CI runner). The
kernel keeps 5% of every second for the other processes (``sched_rt_runtime_us``), so perfq's own
timeouts still fire.
"""

from __future__ import annotations

import os
import resource
from enum import Enum

from common.errors import PerfqError

FIFO_PRIORITY = 1  # the lowest real-time priority: above every normal process, below the kernel's own


class Priority(str, Enum):
    """How benchmark processes are scheduled."""

    auto = "auto"  # realtime when this process may, else normal (said in the run's notes)
    realtime = "realtime"  # SCHED_FIFO; an error when not permitted
    normal = "normal"  # the default policy (SCHED_OTHER)


def realtime_problem() -> str:
    """'' when this process may start children under ``SCHED_FIFO``; else why not, in one line."""
    if not hasattr(os, "sched_setscheduler"):
        return "this system has no POSIX real-time scheduling"
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    except OSError as exc:
        return (f"real-time scheduling is not permitted here ({exc.strerror or exc}): run as root, or raise "
                "the real-time limit first (`sudo prlimit --pid $$ --rtprio=1`)")
    os.sched_setscheduler(0, before[0], before[1])  # back: the probe only asks; lowering is always allowed
    return ""


def use_realtime(priority: Priority, notes: list[str], what: str = "benchmarks") -> bool:
    """Whether ``what`` (the benchmark processes) run under SCHED_FIFO: ``auto`` without permission
    adds a note to ``notes`` (normal priority), an explicit ``realtime`` without it is a PerfqError."""
    if priority == Priority.normal:
        return False
    problem = realtime_problem()
    if problem and priority == Priority.realtime:
        raise PerfqError(f"--priority realtime: {problem}")
    if problem:
        notes.append(f"{what} ran at normal priority, so other load on this machine adds noise: {problem}")
    return not problem


def enter_realtime() -> None:
    """In a child before exec: ``SCHED_FIFO`` (permission was probed by :func:`realtime_problem`),
    and ``RLIMIT_RTPRIO`` capped there, so that without ``CAP_SYS_NICE`` (the sandbox drops it) the
    benchmark cannot climb above perfq's own timers."""
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    hard = resource.getrlimit(resource.RLIMIT_RTPRIO)[1]
    cap = FIFO_PRIORITY if hard == resource.RLIM_INFINITY else min(hard, FIFO_PRIORITY)  # never raised
    resource.setrlimit(resource.RLIMIT_RTPRIO, (cap, cap))


def describe(realtime: bool) -> str:
    """The policy benchmark processes ran under, for the run's metadata."""
    return f"SCHED_FIFO {FIFO_PRIORITY}" if realtime else "normal (SCHED_OTHER)"
