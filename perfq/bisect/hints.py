"""Root-cause hints: scan a unified diff for changes that commonly cost performance (pure).

Each hint names a pattern (changed loop bounds, added synchronization, tile/block sizes,
new loads inside loops, dtype changes, removed prefetch/double buffering, launch
parameters, new masking, layout changes) and the file/line where it was seen. Hints are
leads for a human, not a diagnosis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.diff import DiffLine, parse_diff
from common.errors import PerfqError


@dataclass(frozen=True)
class Hint:
    kind: str
    message: str
    file: str
    line: int
    text: str


_LOOP = re.compile(r"^\s*(for\s*\(|for\s+\w[\w, ]*\s+in\s+|while\s*[\s(]|#pragma\s+unroll)")
_SYNC = re.compile(r"__syncthreads|__syncwarp|__threadfence|tl\.debug_barrier|\bbarrier\s*\(|"
                   r"cudaDeviceSynchronize|cudaStreamSynchronize|torch\.cuda\.synchronize|\.synchronize\(\)|"
                   r"__builtin_amdgcn_s_barrier|std::mutex|lock_guard|unique_lock|atomic(Add|CAS|Max|Min)?\b|"
                   r"tl\.atomic_\w+")
_TILE = re.compile(r"\b(BLOCK(_SIZE)?(_[A-Z])?|TILE(_SIZE)?(_[A-Z])?|block_?size|tile_?size|GROUP_SIZE_M|"
                   r"kBlock\w*|kTile\w*|kWarp\w*|threads_?per_?block|num_threads|blockDim|SPLIT_K)\b"
                   r"['\"]?\s*(?:[:=]\s*|\s+)\d+")
_LOAD = re.compile(r"tl\.load\(|__ldg\(|\bload\(|_mm\d*_load|\bld\.global|\w+\[[^\]]+\]\s*(?:[;,)*+\-/]|$)")
_DTYPE = re.compile(r"\b(float16|float32|float64|bfloat16|half|double|fp16|bf16|fp32|tf32|int8|int32|int64|"
                    r"at::Half|at::BFloat16|ScalarType::\w+|dtype\s*=|\.to\(|acc_type|opmath_t|tl\.float\w*)\b")
_PREFETCH = re.compile(r"prefetch|double[_ ]?buffer|cp\.async|cp_async|pipeline|num_stages|multistage|"
                       r"__pipeline_\w+|async_copy|ping[_-]?pong", re.IGNORECASE)
_LAUNCH = re.compile(r"\b(num_stages|num_warps|waves_per_eu|num_ctas|maxnreg|launch_bounds|__launch_bounds__|"
                     r"matrix_instr_nonkdim|kpack)\b")
_MASK = re.compile(r"\bmask\s*=|tl\.where\(|\bmasked_\w+|\bif\s*\(\s*\w+\s*<\s*\w+\s*\)")
_LAYOUT = re.compile(r"\.contiguous\(|\bstrides?\b|memory_format|channels_last|\.transpose\(|\.permute\(|"
                     r"\.t\(\)|\border\s*=|\blayout\b|row_major|col_major|\bstride_\w+", re.IGNORECASE)

_MESSAGES = {
    "loop-bounds": "loop bounds changed: the trip count or step of a loop differs",
    "sync": "synchronization added: a barrier, lock, atomic or device sync was introduced",
    "tile-size": "tile/block size changed: occupancy, reuse and vectorization may differ",
    "load-in-loop": "new load inside a loop: memory traffic per iteration grew",
    "dtype": "dtype changed: a different precision or accumulator type is used",
    "prefetch-removed": "prefetch/double buffering removed or pipelining reduced",
    "launch-params": "launch parameters changed (num_stages / num_warps / waves_per_eu ...)",
    "masking": "new masking: predicated loads/stores or tl.where were added",
    "layout": "memory layout changed: strides, contiguity, transposes or block order differ",
}


@dataclass(frozen=True)
class _Hunk:
    file: str
    lines: tuple[DiffLine, ...]


def _parse(diff: str) -> list[_Hunk]:
    return [_Hunk(fc.path, h.lines) for fc in parse_diff(diff) if not fc.binary for h in fc.hunks]


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _inside_loop(hunk: _Hunk, pos: int) -> bool:
    """Whether line ``pos`` of ``hunk`` is nested (by indentation) under a loop header."""
    depth = _indent(hunk.lines[pos].text)
    for kind, _, prev in ((ln.kind, ln.new_line, ln.text) for ln in reversed(hunk.lines[:pos])):
        if kind == "-" or not prev.strip():
            continue
        ind = _indent(prev)
        if ind < depth:
            if _LOOP.match(prev):
                return True
            depth = ind
    return False


def _grew(rx: re.Pattern[str], added: list[str], removed: list[str]) -> bool:
    """More matches on added than on removed lines: something new, not an edited line."""
    return sum(len(rx.findall(t)) for t in added) > sum(len(rx.findall(t)) for t in removed)


def scan_diff(diff: str, limit: int = 20) -> list[Hint]:
    """Hints for ``diff`` (unified format), at most one per kind and file, at most ``limit``."""
    hints: list[Hint] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: str, hunk: _Hunk, line: int, text: str) -> None:
        if (kind, hunk.file) in seen or len(hints) >= limit:
            return
        seen.add((kind, hunk.file))
        hints.append(Hint(kind, _MESSAGES[kind], hunk.file, line, text.strip()[:160]))

    try:
        hunks = _parse(diff)
    except PerfqError:  # not a diff: hints are leads, never a failure
        return []
    for hunk in hunks:
        removed = [ln.text for ln in hunk.lines if ln.kind == "-"]
        added = [(ln.new_line, ln.text) for ln in hunk.lines if ln.kind == "+"]
        removed_loops = [t for t in removed if _LOOP.match(t)]
        added_text = [t for _, t in added]
        new_sync, new_mask, new_load = (_grew(rx, added_text, removed) for rx in (_SYNC, _MASK, _LOAD))
        for pos, (kind, n, text) in enumerate((ln.kind, ln.new_line, ln.text) for ln in hunk.lines):
            if kind == "+":
                if _LOOP.match(text) and removed_loops and text.strip() not in {r.strip() for r in removed}:
                    add("loop-bounds", hunk, n, text)
                if new_sync and _SYNC.search(text):
                    add("sync", hunk, n, text)
                if new_load and _LOAD.search(text) and _inside_loop(hunk, pos):
                    add("load-in-loop", hunk, n, text)
                if new_mask and _MASK.search(text):
                    add("masking", hunk, n, text)
            if kind in "+-":
                if _LAUNCH.search(text):
                    add("launch-params", hunk, n, text)
                elif _TILE.search(text):
                    add("tile-size", hunk, n, text)
                if _DTYPE.search(text):
                    add("dtype", hunk, n, text)
                if _LAYOUT.search(text):
                    add("layout", hunk, n, text)
            if kind == "-" and _PREFETCH.search(text):
                still = any(_PREFETCH.search(t) and t.strip() == text.strip() for _, t in added)
                if not still:
                    add("prefetch-removed", hunk, n, text)
    return hints
