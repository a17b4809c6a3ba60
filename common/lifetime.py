"""Objects that live until the process ends. The console script ends the process at once when its
command is done (perfq.cli.run), so large structures built for one command (an index build's facts
and link tables: millions of objects) need not be taken apart one by one when the function that
made them returns: ~0.5 s at the end of a full build, as clang's ``-disable-free`` skips freeing
its trees. Only when the process is known to end that way; elsewhere (tests, a library caller)
nothing is kept."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path

_kept: list[object] = []
_enabled = False


def free_at_exit() -> None:
    """Declare that this process ends without taking its objects apart (the console script)."""
    global _enabled
    _enabled = True


def keep_until_exit(*objects: object) -> None:
    """Keep ``objects`` alive until the process ends, when it ends without freeing them; the
    collector no longer looks at them (or at anything else alive now)."""
    if _enabled:
        _kept.append(objects)
        gc.freeze()


def process_age() -> float:
    """Seconds since this process started (``/proc/self/stat`` starttime against ``/proc/uptime``;
    0.0 where unreadable): a command's own start-up (imports) counts against its budget too."""
    try:
        fields = Path("/proc/self/stat").read_text(encoding="utf-8").rpartition(")")[2].split()
        uptime = Path("/proc/uptime").read_text(encoding="utf-8").split()
        return max(0.0, float(uptime[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (IndexError, ValueError, OSError):
        return 0.0


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection in the block; the collector's state is restored after it.
    For a bounded computation that allocates many objects and makes little cyclic garbage (one
    ``perfq affected``: the gen-0 collector otherwise runs hundreds of times on a large diff,
    10-15% of its CPU); memory is still freed by reference counting. In a process that ends
    without freeing its objects, what the block made is then kept out of the collector's sight
    (the first collection after it would otherwise look at every object it allocated)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _enabled:
            gc.freeze()
        if was_enabled:
            gc.enable()
