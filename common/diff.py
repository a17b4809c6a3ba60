"""Unified diffs as data, parsed once with ``unidiff`` (pure).

:func:`parse_diff` turns ``git diff`` / ``git log -p`` text into per-file changes: the
changed line numbers on both sides, the hunks (with every line and its kind), the new
side's text per hunk (to rebuild a file from a bare patch). Hunks are read by their
header counts, so a removed line starting with ``-- `` or an added one starting with
``++ `` is content, never a file header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from common.errors import PerfqError


@dataclass(frozen=True)
class DiffLine:
    """One line of a hunk: ``kind`` is ``' '``, ``'+'`` or ``'-'``; ``new_line`` its new-side number
    (for a removed line: the new-side line it sits before)."""

    kind: str
    new_line: int
    text: str


@dataclass(frozen=True)
class Hunk:
    """One hunk: its old-side start and length, new-side start and length, and its lines."""

    source_start: int
    source_length: int
    target_start: int
    target_length: int
    lines: tuple[DiffLine, ...]
    new_lines: tuple[str, ...]  # the new side's text (context and added lines, as in the file)

    @property
    def target_range(self) -> tuple[int, int]:
        """New-side lines the hunk covers (1-based, inclusive); a pure deletion: the line next to it."""
        if self.target_length == 0:
            line = max(self.target_start, 1)
            return (line, line)
        return (self.target_start, self.target_start + self.target_length - 1)


@dataclass
class FileChange:
    old_path: str | None  # None: added file
    new_path: str | None  # None: deleted file
    removed: set[int] = field(default_factory=set)  # old-side line numbers
    added: set[int] = field(default_factory=set)  # new-side line numbers
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    new_blob: str | None = None  # the new side's object id, when the diff names it in full (--full-index)
    old_blob: str | None = None  # the old side's, likewise

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def status(self) -> str:
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "deleted"
        if self.old_path != self.new_path:
            return "renamed"
        return "modified"


_C_ESCAPES = {b"a": b"\a", b"b": b"\b", b"t": b"\t", b"n": b"\n", b"v": b"\v", b"f": b"\f", b"r": b"\r"}
_C_ESCAPE = re.compile(rb"\\([0-7]{3}|.)", re.S)


def unquote_path(path: str) -> str:
    """A file name as git writes it in a patch header: C-quoted (``"a/\\303\\234.cpp"``, a tab,
    a newline, ``"`` or ``\\`` in the name) or as it is; the octal escapes are UTF-8 bytes."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("utf-8", "surrogateescape")

    def byte(m: re.Match[bytes]) -> bytes:
        esc = m.group(1)
        return bytes([int(esc, 8) & 0xFF]) if len(esc) == 3 else _C_ESCAPES.get(esc, esc)

    return _C_ESCAPE.sub(byte, raw).decode("utf-8", "surrogateescape")


def _strip(path: str | None) -> str | None:
    if path is None:
        return None
    path = unquote_path(path)
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def _hunk(raw) -> Hunk:
    lines: list[DiffLine] = []
    new_line = raw.target_start
    for ln in raw:
        if ln.line_type not in (" ", "+", "-"):
            continue  # "\ No newline at end of file"
        lines.append(DiffLine(ln.line_type, new_line, ln.value.rstrip("\n")))
        if ln.line_type != "-":
            new_line += 1
    new_text = tuple(ln.value for ln in raw if ln.is_added or ln.is_context)
    return Hunk(raw.source_start, raw.source_length, raw.target_start, raw.target_length, tuple(lines), new_text)


def _file_change(pf) -> FileChange:
    old = None if pf.is_added_file else _strip(pf.source_file)
    new = None if pf.is_removed_file else _strip(pf.target_file)
    old_blob, new_blob = _blob_ids(pf.patch_info)
    fc = FileChange(old, new, binary=pf.is_binary_file, new_blob=new_blob, old_blob=old_blob)
    for raw in pf:
        fc.hunks.append(_hunk(raw))
        for line in raw:
            if line.is_removed and line.source_line_no:
                fc.removed.add(line.source_line_no)
            elif line.is_added and line.target_line_no:
                fc.added.add(line.target_line_no)
        if raw.source_length == 0 and old is not None:
            fc.removed.add(max(1, raw.source_start))  # a pure insertion: the line it follows
        if raw.target_length == 0 and new is not None:
            fc.added.add(max(1, raw.target_start))  # a pure deletion: where it was
    return fc


def _blob_ids(header: list[str] | None) -> tuple[str | None, str | None]:
    """The (old, new) object ids of an ``index OLD..NEW [mode]`` header line, each when given
    in full and not the null id (an added file's old side, a deleted one's new side)."""
    for line in header or ():
        if line.startswith("index ") and ".." in line:
            old, _, new = line.split()[1].partition("..")
            return tuple(b if len(b) in (40, 64) and b.strip("0") else None for b in (old, new))  # type: ignore[return-value]
    return None, None


def parse_diff(text: str) -> list[FileChange]:
    """Changed files and lines of a git diff (any context size)."""
    if not text.strip():
        return []
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        first = (str(exc).strip().splitlines() or ["unreadable"])[0]
        raise PerfqError(f"not a unified diff: {first}") from None
    return [_file_change(pf) for pf in patch]


def parse_patch(text: str) -> list[FileChange]:
    """A bare patch given by the user (``--diff``): like :func:`parse_diff`, but input with text
    and no file change in it (random bytes, prose, a log) is an error, not an empty change."""
    changes = parse_diff(text)
    if not changes and text.strip():
        raise PerfqError("the --diff input is not a unified diff (no `diff --git` or `---`/`+++` file headers)")
    for change in changes:
        for path in (change.old_path, change.new_path):
            if path is not None and not _inside(path):
                raise PerfqError(f"the --diff patch names {path!r}, which is not a path inside the repository")
    return changes


def _inside(path: str) -> bool:
    """A relative path that stays in the tree (no ``..``, no control characters)."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and ".." not in parts and not any(ord(c) < 32 for c in path)


def applies(old_text: bytes | None, change: FileChange) -> str | None:
    """Why ``change`` does not apply to ``old_text`` (its file's base content), or None when every
    hunk's context and removed lines are where its header says (like ``git apply --check``
    without offsets)."""
    if change.old_path is None or change.binary:
        return None
    if old_text is None:
        return f"{change.old_path} does not exist there"
    lines = old_text.decode("utf-8", "replace").splitlines()
    why = _mismatch(lines, change, "+", lambda h: h.source_start, lambda h: h.source_length)
    if why and _mismatch(lines, change, "-", lambda h: h.target_start, lambda h: h.target_length) is None:
        why += " (the patch is already applied there: give the ref it was made against, perfq affected REF --diff)"
    return why


def _mismatch(lines: list[str], change: FileChange, skip: str, start_of, length_of) -> str | None:
    """Where the hunks' lines (all but ``skip`` lines) differ from ``lines`` at the side's positions."""
    for hunk in change.hunks:
        expected = [ln.text for ln in hunk.lines if ln.kind != skip]
        start, length = start_of(hunk), length_of(hunk)
        first = start - 1 if length else start
        header = f"@@ -{hunk.source_start},{hunk.source_length} @@"
        if first < 0 or first + len(expected) > len(lines):
            return f"{change.old_path} hunk {header} is past its end ({len(lines)} lines)"
        for i, want in enumerate(expected):
            if lines[first + i].rstrip("\r") != want.rstrip("\r"):
                return (f"{change.old_path} hunk {header}: line {first + i + 1} is {lines[first + i][:60]!r}, "
                        f"the patch expects {want[:60]!r}")
    return None


def apply_hunks(old_text: bytes | None, change: FileChange) -> bytes | None:
    """The new side of ``change`` rebuilt from its old side and hunks (for a bare patch)."""
    if change.new_path is None:
        return None
    lines = (old_text or b"").decode("utf-8", "replace").splitlines(keepends=True)
    for hunk in sorted(change.hunks, key=lambda h: (h.source_start, h.source_length), reverse=True):
        start, length = hunk.source_start, hunk.source_length
        begin = start - 1 if length else start  # a pure insertion goes after line `start`
        lines[begin : begin + length] = list(hunk.new_lines)
    return "".join(lines).encode("utf-8")
