"""A unified diff as per-file changed line numbers on both sides (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from perfq.errors import PerfqError


@dataclass
class FileChange:
    old_path: str | None  # None: added file
    new_path: str | None  # None: deleted file
    removed: set[int] = field(default_factory=set)  # old-side line numbers
    added: set[int] = field(default_factory=set)  # new-side line numbers
    binary: bool = False
    hunks: list[tuple[int, int, list[str]]] = field(default_factory=list)  # (source start, length, new lines)

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


def _strip(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def parse_diff(text: str) -> list[FileChange]:
    """Changed files and lines of a git diff (any context size)."""
    if not text.strip():
        return []
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise PerfqError(f"not a unified diff: {exc}") from None
    changes = []
    for pf in patch:
        old = None if pf.is_added_file else _strip(pf.source_file)
        new = None if pf.is_removed_file else _strip(pf.target_file)
        fc = FileChange(old, new, binary=pf.is_binary_file)
        for hunk in pf:
            new_lines = [line.value for line in hunk if line.is_added or line.is_context]
            fc.hunks.append((hunk.source_start, hunk.source_length, new_lines))
            for line in hunk:
                if line.is_removed and line.source_line_no:
                    fc.removed.add(line.source_line_no)
                elif line.is_added and line.target_line_no:
                    fc.added.add(line.target_line_no)
            if hunk.source_length == 0 and old is not None:
                fc.removed.add(max(1, hunk.source_start))  # a pure insertion: the line it follows
            if hunk.target_length == 0 and new is not None:
                fc.added.add(max(1, hunk.target_start))  # a pure deletion: where it was
        changes.append(fc)
    return changes


def apply_hunks(old_text: bytes | None, change: FileChange) -> bytes | None:
    """The new side of ``change`` rebuilt from its old side and hunks (for a bare patch)."""
    if change.new_path is None:
        return None
    lines = (old_text or b"").decode("utf-8", "replace").splitlines(keepends=True)
    for start, length, new_lines in sorted(change.hunks, reverse=True):
        begin = start - 1 if length else start  # a pure insertion goes after line `start`
        lines[begin : begin + length] = new_lines
    return "".join(lines).encode("utf-8")
