"""Objects that live until the process ends. The console script ends the process at once when its
command is done (perfq.cli.run), so large structures built for one command (an index build's facts
and link tables: millions of objects) need not be taken apart one by one when the function that
made them returns: ~0.5 s at the end of a full build, as clang's ``-disable-free`` skips freeing
its trees. Only when the process is known to end that way; elsewhere (tests, a library caller)
nothing is kept."""

from __future__ import annotations

import gc

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
