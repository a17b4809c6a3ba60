"""Reading files perfq does not trust: only regular files, within a size limit, inside their roots.

A checkout may hold a symlink to ``/dev/zero`` or out of the repository, or a FIFO: such a file
is never followed out, never read from a device, and never read past its limit (issue 33). Every
file a user names (a config key, an option, an artifact: :class:`InputKind`) is read through
:func:`read_input` / :func:`open_input`: a regular file, at most its kind's limit, inside the
roots given (issue 37: ``compile_commands = "/dev/zero"`` took 23.8 GB)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum

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


# ----------------------------------------------------------------------------- inputs a user names


class InputKind(Enum):
    """A kind of file perfq reads from a path it is given (a config key, an option, an artifact):
    what it is called in errors and the most perfq reads of it (issue 37)."""

    config = ("config file", 1 << 20)
    compile_commands = ("compile commands file", 512 << 20)
    canaries = ("canary set", 4 << 20)
    yaml = ("operator yaml", 64 << 20)
    matrix = ("matrix file", 16 << 20)
    results = ("result file", 8 << 30)  # 10 M samples are ~1 GB of JSON lines; DuckDB streams them
    results_v1 = ("version 1 result file", 1 << 30)  # one JSON document, parsed whole
    diff = ("diff", 256 << 20)
    manifest = ("IR manifest", 4 << 20)
    report = ("report artifact", 64 << 20)  # the CI report's affected.md, pr.json, comment.md, coverage trend
    cache = ("cache file", 2 << 30)  # the facts, stat and graph caches beside an index (perfq's own, but on disk)

    def __init__(self, label: str, limit: int) -> None:
        self.label, self.limit = label, limit


class InputError(OSError):
    """A path perfq refuses to read as its kind: not a regular file, too large, or outside its roots."""


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(os.path.commonpath([real, os.path.realpath(root)]) == os.path.realpath(root) for root in roots)


@contextmanager
def open_input(path: str | os.PathLike[str], kind: InputKind,
               roots: tuple[str | os.PathLike[str], ...] = ()) -> Iterator[tuple[int, os.stat_result]]:
    """(descriptor, fstat) of ``path`` read as a ``kind``: a regular file (symlinks followed, but
    never to a device or pipe: a FIFO opens without blocking, then is refused), at most
    ``kind.limit`` bytes, and, when ``roots`` are given, resolving inside one of them. InputError
    (an OSError) otherwise; the OSError of the open when it cannot be opened."""
    name = os.fspath(path)
    if roots and not _inside(name, tuple(os.fspath(root) for root in roots)):
        raise InputError(errno.EXDEV, f"the {kind.label} is outside {', '.join(map(os.fspath, roots))}", name)
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(errno.EINVAL, f"not a regular file (a device, a pipe or a directory): a {kind.label} "
                             "is read from a regular file only", name)
        if info.st_size > kind.limit:
            raise InputError(errno.EFBIG, f"{info.st_size} bytes, more than a {kind.label} may have "
                             f"({kind.limit >> 20} MB): not a {kind.label}", name)
        os.set_blocking(fd, True)
        yield fd, info
    finally:
        os.close(fd)


def read_input(path: str | os.PathLike[str], kind: InputKind,
               roots: tuple[str | os.PathLike[str], ...] = ()) -> bytes:
    """The bytes of ``path`` read as a ``kind`` (see :func:`open_input`); never more than its limit
    (a file growing while read is cut there and refused)."""
    with open_input(path, kind, roots) as (fd, info):
        parts: list[bytes] = []
        want = min(info.st_size, kind.limit) + 1
        while want > 0 and (part := os.read(fd, min(want, CHUNK))):
            parts.append(part)
            want -= len(part)
    data = b"".join(parts)
    if len(data) > kind.limit:
        raise InputError(errno.EFBIG, f"more than a {kind.label} may have ({kind.limit >> 20} MB): not a {kind.label}",
                         os.fspath(path))
    return data


def input_text(path: str | os.PathLike[str], kind: InputKind, roots: tuple[str | os.PathLike[str], ...] = (),
               errors: str = "strict") -> str:
    """:func:`read_input` decoded as UTF-8 (UnicodeDecodeError with ``errors="strict"``)."""
    return read_input(path, kind, roots).decode("utf-8", errors=errors)


def input_error(exc: OSError) -> str:
    """One line for an OSError of :func:`open_input` or :func:`read_input`: the path and why."""
    return f"{exc.filename}: cannot read: {exc.strerror or exc}"
