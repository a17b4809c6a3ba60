"""Function extents of one version of a changed file: parsed on the fly, or, for a C++
edit inside function bodies, moved from the base version's extents without a parse."""

from __future__ import annotations

import re

from common.diff import FileChange
from indexer.facts import FileFacts, Function


def parse_extents(kind: str, path: str, data: bytes) -> FileFacts | None:
    """Function extents of one file version, parsed on the fly."""
    # the parser (libclang) is imported when a file needs parsing: a body edit of an indexed
    # file does not, and the import is 15 ms of a 0.3 s query
    from indexer.api import file_facts

    facts = file_facts(kind, path, data, functions_only=True)
    return facts if isinstance(facts, FileFacts) else None


_CPP_LITERALS_AND_COMMENTS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|/\*.*?\*/|//.*')


def _code(text: str) -> str | None:
    """A C++ line without its literals and comments, or None when a raw string or a block
    comment running over lines could hide braces."""
    if 'R"' in text:
        return None
    code = _CPP_LITERALS_AND_COMMENTS.sub("", text)
    return None if "/*" in code or "*/" in code else code


def _braces(lines: list[str]) -> tuple[int, int] | None:
    """(net brace depth, lowest running depth) of C++ lines, or None when braces cannot be
    counted line by line (block comments, raw strings, preprocessor lines, continuations)."""
    depth = low = 0
    for text in lines:
        code = _code(text)
        if code is None or text.lstrip().startswith("#") or text.rstrip().endswith("\\"):
            return None
        for ch in code:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                low = min(low, depth)
    return depth, low


def _change_groups(fc: FileChange) -> list[tuple[list[int], int, list[str], list[str]]]:
    """Per run of changed lines: (removed old line numbers, the old line an insertion sits
    before, removed texts, added texts)."""
    groups = []
    for hunk in fc.hunks:
        old = hunk.source_start if hunk.source_length else hunk.source_start + 1
        current: tuple[list[int], int, list[str], list[str]] | None = None
        for line in hunk.lines:
            if line.kind == " ":
                current = None
                old += 1
                continue
            if current is None:
                current = ([], old, [], [])
                groups.append(current)
            if line.kind == "-":
                current[0].append(old)
                current[2].append(line.text)
                old += 1
            else:
                current[3].append(line.text)
    return groups


def _body_opens(lines: list[str], f: Function) -> int | None:
    """The line of ``f``'s first ``{`` (its body's, unless a default argument has braces), or
    None when a line cannot be read for braces."""
    for number in range(f.start_line, min(f.end_line, len(lines)) + 1):
        code = _code(lines[number - 1])
        if code is None:
            return None
        if "{" in code:
            return number
    return None


def shifted_extents(
    base: FileFacts, base_text: bytes, fc: FileChange, head_sha: str, head_lines: int
) -> FileFacts | None:
    """The head version's C++ function extents moved from the base version's, without a
    parse, when every run of changed lines lies inside one function body (after the line
    that opens it, before the line that closes it: its name and signature are unchanged) and
    keeps its braces (same net depth, never lower than the removed lines went): then no
    function starts, ends or is named differently, and each extent moves by the lines added
    above it. None when that cannot be shown (the head is then parsed)."""
    if base.status != "ok" or not fc.hunks:
        return None
    lines = base_text.decode("utf-8", "replace").splitlines()
    opens_of: dict[Function, int | None] = {}  # read for the functions around a change only

    def inside_body(first: int, last: int) -> bool:
        for f in base.functions:
            if f.start_line < first and last < f.end_line:
                if f not in opens_of:
                    opens_of[f] = _body_opens(lines, f)
                opens = opens_of[f]
                if opens is not None and opens < first:
                    return True
        return False

    moves: list[tuple[int, int]] = []  # (first old line that moves, lines added - removed)
    for removed, before, old_texts, new_texts in _change_groups(fc):
        old_braces, new_braces = _braces(old_texts), _braces(new_texts)
        if old_braces is None or new_braces is None:
            return None
        if new_braces[0] != old_braces[0] or new_braces[1] < old_braces[1]:
            return None
        first, last = (min(removed), max(removed)) if removed else (before, before - 1)
        if not inside_body(first, last):
            return None
        moves.append((last + 1, len(new_texts) - len(removed)))

    def moved(line: int) -> int:
        return line + sum(delta for at, delta in moves if at <= line)

    functions = [f._replace(start_line=moved(f.start_line), end_line=moved(f.end_line)) for f in base.functions]
    return FileFacts(fc.new_path or base.path, base.lang, head_sha, head_lines, functions=functions)
