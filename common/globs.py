"""fnmatch globs (case-sensitive) matched without compiling what cannot match: a pattern's
text outside its ``*`` and ``?`` wildcards is looked for first (~50 ns), and its expression
(fnmatch's own translation) is compiled only when some string holds all of it (a compile
costs ~0.3 ms, which a process pays per pattern: 55 canary-set patterns are a tenth of a
one-file ``perfq affected``)."""

from __future__ import annotations

import fnmatch
import functools
import re


@functools.cache
def _literals(pattern: str) -> tuple[str, ...]:
    """The text of ``pattern`` outside its wildcards (none for one with a ``[set]``)."""
    return () if "[" in pattern else tuple(t for t in re.split(r"[*?]", pattern) if t)


@functools.cache
def _expression(pattern: str, rooted: bool) -> re.Pattern[str]:
    """``rooted``: an optional leading slash, to match ``/path`` strings as ``path`` too."""
    return re.compile(f"/?(?:{fnmatch.translate(pattern)})" if rooted else fnmatch.translate(pattern))


def matching(strings: list[str], pattern: str, rooted: bool = False) -> list[str]:
    """Those of ``strings`` that ``pattern`` matches, filtered a literal at a time first;
    ``rooted``: the strings start with ``/`` and match with or without it."""
    candidates = strings
    for part in _literals(pattern):
        candidates = [s for s in candidates if part in s]
    if not candidates:
        return []
    expression = _expression(pattern, rooted)
    return [s for s in candidates if expression.match(s) is not None]


def match(string: str, pattern: str) -> bool:
    """Whether ``pattern`` matches ``string`` (as ``fnmatch.fnmatchcase``), literals first."""
    return all(part in string for part in _literals(pattern)) and _expression(pattern, False).match(string) is not None
