"""Normalize Triton IR text (TTIR/TTGIR MLIR, LLVM IR, PTX/AMDGCN) so that only meaning is left.

Pure text in, text out. What is abstracted (the way LLVM's update_test_checks.py, MLIR's
generate-test-checks.py and the instnamer pass do it):

- MLIR: source locations (``loc(...)`` suffixes and ``#locN = loc(...)`` alias lines);
  SSA value names (``%offs_3``, ``%arg5``, ``%c1024_i32``) become ``%v0, %v1, ...`` in order
  of first appearance in each function; block labels become ``^bb0, ^bb1, ...``.
- LLVM IR: debug info (``!dbg !N``, ``!DI*`` metadata, ``#dbg_*`` records, ``!llvm.dbg.cu``),
  comments (``; preds = ...``, ``; ModuleID``), ``source_filename``; local values and
  labels renamed per function (``%v0``, ``bb0:``); remaining metadata ids renumbered.
- PTX / AMDGCN: ``.loc``/``.file`` directives, debug sections and comments.
- Everywhere: absolute paths in strings become ``<path>/basename``; trailing blanks and
  blank-line runs are dropped.

Everything else (ops, types, attributes, layouts, constants, function names) is kept, and
normalizing twice gives the same text.
"""

from __future__ import annotations

import re

NORMALIZER_VERSION = 1  # bump when the output changes: stored texts are then re-normalized from raw

MLIR_STAGES = ("ttir", "ttgir", "mlir", "ttsharedir")
LLVM_STAGES = ("llir", "ll")
ASM_STAGES = ("ptx", "amdgcn")

_STRING = r'"(?:[^"\\]|\\.)*"'
_MLIR_TOKEN = re.compile(_STRING + r"|%[\w$.\-]+|\^[\w$.\-]+")
_LLVM_TOKEN = re.compile(_STRING + r"|%[\w$.\-]+|(?<![\w.])![0-9]+\b")
_MLIR_FUNC = re.compile(r"^\s*(?:tt\.func|llvm\.func|func\.func|gpu\.func)\b")
_LLVM_LABEL_DEF = re.compile(r"^([\w$.\-]+):")
_ABS_PATH = re.compile(r'^"((?:/|[A-Za-z]:[\\/])[^"]*)"$')


def stage_kind(stage: str, text: str = "") -> str:
    """``mlir``, ``llvm`` or ``asm`` for a stage name (guessing from the text if unknown)."""
    stage = stage.lower()
    if stage in MLIR_STAGES:
        return "mlir"
    if stage in LLVM_STAGES:
        return "llvm"
    if stage in ASM_STAGES:
        return "asm"
    if re.search(r"^define\s", text, re.M):
        return "llvm"
    if re.search(r"^\s*(module|tt\.func)\b", text, re.M):
        return "mlir"
    return "asm"


def normalize_ir(text: str, stage: str) -> str:
    """The normalized form of ``text`` (an IR of ``stage``); idempotent."""
    kind = stage_kind(stage, text)
    if kind == "mlir":
        lines = _normalize_mlir(text.splitlines())
    elif kind == "llvm":
        lines = _normalize_llvm(text.splitlines())
    else:
        lines = _normalize_asm(text.splitlines(), stage.lower())
    return _tidy(lines)


def _tidy(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def _norm_string(token: str) -> str:
    match = _ABS_PATH.match(token)
    if not match:
        return token
    path = match.group(1).replace("\\", "/").rstrip("/")
    return f'"<path>/{path.rsplit("/", 1)[-1]}"'


def _skip_string(line: str, i: int) -> int:
    """Index just past the string literal starting at ``line[i] == '"'``."""
    j = i + 1
    while j < len(line):
        if line[j] == "\\":
            j += 2
            continue
        if line[j] == '"':
            return j + 1
        j += 1
    return j


def _strip_locs(line: str) -> str:
    """Remove every ``loc(...)`` (balanced, string-aware) and the blank before it."""
    out: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == '"':
            j = _skip_string(line, i)
            out.append(line[i:j])
            i = j
            continue
        if line.startswith("loc(", i) and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] in "_.#")):
            depth, j = 0, i + 3
            while j < len(line):
                if line[j] == '"':
                    j = _skip_string(line, j)
                    continue
                if line[j] == "(":
                    depth += 1
                elif line[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            while out and out[-1].endswith(" "):
                out[-1] = out[-1][:-1]
                if not out[-1]:
                    out.pop()
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _normalize_mlir(lines: list[str]) -> list[str]:
    out: list[str] = []
    values: dict[str, str] = {}
    blocks: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return _norm_string(token)
        table, prefix = (values, "%v") if token.startswith("%") else (blocks, "^bb")
        if token not in table:
            table[token] = f"{prefix}{len(table)}"
        return table[token]

    for line in lines:
        if re.match(r"^#loc\d*\s*=\s*loc\(", line):
            continue
        if _MLIR_FUNC.match(line):
            values.clear()
            blocks.clear()
        line = _strip_locs(line)
        out.append(_MLIR_TOKEN.sub(rename, line))
    return out


def _strip_llvm_noise(line: str) -> str | None:
    """Drop debug info and comments from one LLVM IR line (None: drop the whole line)."""
    stripped = line.strip()
    if (
        stripped.startswith(";")
        or stripped.startswith("source_filename")
        or stripped.startswith("#dbg_")
        or re.match(r"^!llvm\.dbg\.", stripped)
        or re.match(r"^![0-9]+\s*=\s*(distinct\s+)?!DI", stripped)
    ):
        return None
    # drop trailing comments outside strings and ", !dbg !N" / " !dbg !N"
    parts: list[str] = []
    i = 0
    while i < len(line):
        if line[i] == '"':
            j = _skip_string(line, i)
            parts.append(line[i:j])
            i = j
            continue
        if line[i] == ";":
            break
        parts.append(line[i])
        i += 1
    text = "".join(parts)
    return re.sub(r",?\s*!dbg\s+![0-9]+", "", text)


class _LlvmScope:
    """Renaming state of one LLVM function: values become %vN, labels %bbN."""

    def __init__(self, labels: set[str] | None = None) -> None:
        self.labels = labels or set()
        self.names: dict[str, str] = {}
        self.n_values = 0
        self.n_labels = 0

    def name(self, token: str) -> str:
        if token not in self.names:
            if token[1:] in self.labels:
                self.names[token] = f"%bb{self.n_labels}"
                self.n_labels += 1
            else:
                self.names[token] = f"%v{self.n_values}"
                self.n_values += 1
        return self.names[token]


_MD_DEF = re.compile(r"^(![0-9]+)\s*=")
_MD_REF = re.compile(r"(?<![\w.])![0-9]+\b")


def _prune_metadata(lines: list[str]) -> list[str]:
    """Drop metadata nodes only reachable from the debug info that was removed."""
    defs = {m.group(1): i for i, m in ((i, _MD_DEF.match(line)) for i, line in enumerate(lines)) if m}
    reached: set[str] = set()
    todo = [ref for i, line in enumerate(lines) if i not in defs.values() for ref in _MD_REF.findall(line)]
    while todo:
        ref = todo.pop()
        if ref in reached or ref not in defs:
            continue
        reached.add(ref)
        todo.extend(_MD_REF.findall(lines[defs[ref]].split("=", 1)[1]))
    dropped = {i for ref, i in defs.items() if ref not in reached}
    return [line for i, line in enumerate(lines) if i not in dropped]


def _normalize_llvm(lines: list[str]) -> list[str]:
    kept = _prune_metadata([s for s in (_strip_llvm_noise(line) for line in lines) if s is not None])
    out: list[str] = []
    metadata: dict[str, str] = {}
    i = 0
    while i < len(kept):
        if not kept[i].startswith("define "):
            out.append(_rename_llvm(kept[i], None, metadata))
            i += 1
            continue
        j = i
        while j < len(kept) - 1 and kept[j].rstrip() != "}":
            j += 1
        body = kept[i : j + 1]
        labels = {m.group(1) for m in (_LLVM_LABEL_DEF.match(b) for b in body[1:]) if m}
        scope = _LlvmScope(labels)
        out.extend(_rename_llvm(b, scope, metadata) for b in body)
        i = j + 1
    return out


def _rename_llvm(line: str, scope: _LlvmScope | None, metadata: dict[str, str]) -> str:
    """Rename locals (inside a function: ``scope``) and metadata ids in one line."""

    def rename(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return _norm_string(token)
        if token.startswith("!"):
            if token not in metadata:
                metadata[token] = f"!{len(metadata)}"
            return metadata[token]
        return scope.name(token) if scope is not None else token

    label = _LLVM_LABEL_DEF.match(line) if scope is not None else None
    if scope is not None and label and label.group(1) in scope.labels:
        return scope.name("%" + label.group(1))[1:] + ":" + _LLVM_TOKEN.sub(rename, line[label.end() :])
    return _LLVM_TOKEN.sub(rename, line)


def _normalize_asm(lines: list[str], stage: str) -> list[str]:
    """PTX (``//`` comments, ``{...}`` debug sections) or AMDGCN (``;`` comments)."""
    comment = ";" if stage == "amdgcn" else "//"
    out: list[str] = []
    skipping = ""  # "brace": until a closing "}", "section": until the next section
    for line in lines:
        stripped = line.strip()
        if skipping == "brace":
            skipping = "" if stripped.startswith("}") else skipping
            continue
        if skipping == "section" and not re.match(r"^\.(section|text|amdgpu_metadata|end_amdgpu)", stripped):
            continue
        skipping = ""
        if re.match(r"^\.section\s+\.?debug", stripped):
            skipping = "section" if stage == "amdgcn" else "brace"
            continue
        if re.match(r"^\.(loc|file)\b", stripped) or stripped.startswith(comment):
            continue
        parts, i = [], 0
        while i < len(line):
            if line[i] == '"':
                j = _skip_string(line, i)
                parts.append(_norm_string(line[i:j]))
                i = j
                continue
            if line.startswith(comment, i):
                break
            parts.append(line[i])
            i += 1
        out.append("".join(parts))
    return out
