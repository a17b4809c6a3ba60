"""Text helpers shared by the extractors: blanking comments and string literals
(keeping offsets and line numbers) and mapping offsets to lines."""

from __future__ import annotations

import bisect
import re

# A C/C++ comment, string or char literal (raw strings are rare in ATen kernels and
# treated as plain strings).
_C_NOISE = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
    re.S,
)


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    if text[0] == '"':
        # keep the quotes and the text of string literals: registrations name ops in strings
        return text
    return re.sub(r"[^\n]", " ", text)


def strip_c_comments(text: str) -> str:
    """``text`` with C/C++ comments and char literals blanked (same length, same lines)."""
    return _C_NOISE.sub(_blank, text)


def blank_strings(text: str) -> str:
    """``text`` (comments already blanked) with string literal contents blanked too."""
    return re.sub(r'"(?:\\.|[^"\\\n])*"', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)


class LineIndex:
    """Maps character offsets of a text to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)

    def offset_of(self, line: int) -> int:
        """Offset of the first character of 1-based ``line``."""
        return self._starts[max(0, min(line - 1, len(self._starts) - 1))]


def decode_source(data: bytes) -> str | None:
    """Source bytes as text, or None for binary (NUL bytes) content. Non-UTF-8 bytes
    are replaced, never fatal."""
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")
