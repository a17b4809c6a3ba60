"""Reading files of a tree perfq does not trust: only regular files inside it, within a size limit.

A checkout may hold a symlink to ``/dev/zero`` or out of the repository, or a FIFO: such a file
is never followed out, never read from a device, and never read past its limit (issue 33)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO opens without a writer, then is refused
CHUNK = 1 << 20


class NotARegularFile(OSError):
    """A path perfq does not read: a symlink leaving its tree, a device, a pipe, a directory."""


@contextmanager
def open_regular(root: str, rel: str) -> Iterator[tuple[int, os.stat_result]]:
    """(descriptor, its fstat) of the regular file ``rel`` under ``root``; a symlink is followed
    only to a target inside ``root``. OSError (NotARegularFile for what is not read) otherwise."""
    path = f"{root.rstrip('/')}/{rel}"
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        real, top = os.path.realpath(path), os.path.realpath(root)
        if os.path.commonpath([real, top]) != top:
            raise NotARegularFile(errno.EXDEV, "a symbolic link leaving the repository", path) from None
        fd = os.open(real, _FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file (a device, a pipe or a directory)", path)
        yield fd, info
    finally:
        os.close(fd)


def read_limited(root: str, rel: str, limit: int) -> bytes:
    """The bytes of the regular file ``rel`` under ``root`` (see ``open_regular``), at most
    ``limit + 1`` of them: a longer result means the file is over ``limit``."""
    with open_regular(root, rel) as (fd, info):
        want = min(info.st_size, limit) + 1
        parts: list[bytes] = []
        while want > 0 and (part := os.read(fd, min(want, CHUNK))):
            parts.append(part)
            want -= len(part)
        return b"".join(parts)


def chunks(root: str, rel: str) -> Iterator[bytes]:
    """The regular file ``rel`` under ``root`` in chunks of a megabyte (see ``open_regular``)."""
    with open_regular(root, rel) as (fd, _):
        while part := os.read(fd, CHUNK):
            yield part
