"""Compare two IR collections: per (kernel, specialization, target, stage) status, op-count
deltas, unified diffs and triage buckets. Pure: texts in, answers out (plus the readers
``load_collection`` and ``changed_kernels`` over :class:`schema.ir_store.IrStore`).

Statuses: ``identical`` (normalized texts equal), ``attributes-only`` (equal once attribute
dictionaries, layout encodings, attribute aliases and LLVM attributes are blanked),
``structural`` (anything else: ops, operands, types, constants, order), ``added``/``removed``.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from perfq.ir.normalize import NORMALIZER_VERSION, normalize_ir, stage_kind
from schema.ir_store import IrStore

IDENTICAL, ATTRIBUTES, STRUCTURAL, ADDED, REMOVED = (
    "identical", "attributes-only", "structural", "added", "removed"
)
CHANGED = (ATTRIBUTES, STRUCTURAL, ADDED, REMOVED)
STATUS_ORDER = {STRUCTURAL: 0, ATTRIBUTES: 1, ADDED: 2, REMOVED: 3, IDENTICAL: 4}


@dataclass(frozen=True)
class IRText:
    """One stored IR: raw text and its normalized form."""

    raw: str
    normalized: str


@dataclass
class KernelDiff:
    """The comparison of one (kernel, specialization, target, stage) between A and B."""

    kernel: str
    specialization: str
    target: str
    stage: str
    status: str
    op_delta: dict[str, int] = field(default_factory=dict)
    bucket: str = ""
    raw_identical: bool = False
    diff: str = ""  # unified diff of the normalized texts (empty when identical)
    raw_diff: str = ""  # filled only on request

    def as_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "specialization": self.specialization,
            "target": self.target,
            "stage": self.stage,
            "status": self.status,
            "op_delta": dict(self.op_delta),
            "bucket": self.bucket,
            "raw_identical": self.raw_identical,
        }


# ---------------------------------------------------------------- attributes
def _drop_balanced(text: str, opener: str, closer: str, keep_if) -> str:
    """Remove same-line balanced ``opener..closer`` groups for which ``keep_if`` is False."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == opener:
            depth, j = 0, i
            while j < len(text):
                if text[j] == opener:
                    depth += 1
                elif text[j] == closer:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j < len(text) and not keep_if(text[i : j + 1]):
                i = j + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


_MLIR_ALIAS_DEF = re.compile(r"^#[\w.$\-]+\s*=")
_MLIR_INLINE_ATTR = re.compile(r"#[\w.$\-]+<")
_MLIR_ALIAS_REF = re.compile(r"#[\w.$\-]+")
_LLVM_ATTR_WORDS = re.compile(
    r"\b(nofree|readnone|readonly|writeonly|noundef|nonnull|nocapture|noalias|inreg|nsw|nuw|exact|"
    r"disjoint|nneg|samesign|inbounds|nuw|local_unnamed_addr|unnamed_addr|dso_local|tail|musttail|"
    r"notail|fast|nnan|ninf|nsz|arcp|contract|afn|reassoc|immarg|signext|zeroext|returned|"
    r"noinline|alwaysinline|align\s+\d+|(?:captures|range|dereferenceable|dereferenceable_or_null|"
    r"nofpclass|initializes)\([^()]*(?:\([^()]*\)[^()]*)*\))"
)


def strip_attributes(text: str, stage: str) -> str:
    """The IR skeleton with attributes blanked: equal skeletons mean attributes-only."""
    kind = stage_kind(stage, text)
    out: list[str] = []
    for line in text.splitlines():
        if kind == "mlir":
            if _MLIR_ALIAS_DEF.match(line):
                continue
            line = _drop_balanced(line, "{", "}", lambda group: "=" not in group)
            while _MLIR_INLINE_ATTR.search(line):
                m = _MLIR_INLINE_ATTR.search(line)
                assert m is not None
                start = m.end() - 1
                rest = _drop_balanced(line[start:], "<", ">", lambda _g: False)
                line = line[: m.start()] + "#attr" + rest
            line = _MLIR_ALIAS_REF.sub("#attr", line).replace("<>", "")
            line = line.replace(" attributes ", " ").replace("module attributes", "module")
        elif kind == "llvm":
            stripped = line.strip()
            if stripped.startswith(("attributes #", "target ", "!")):
                continue
            line = re.sub(r"\s#\d+\b", "", line)
            line = re.sub(r",\s*![\w.]+\s+!\d+", "", line)
            line = _LLVM_ATTR_WORDS.sub("", line)
        out.append(re.sub(r"\s+([,)\]])", r"\1", " ".join(line.split())))
    return "\n".join(out)


# ---------------------------------------------------------------- op counts
_MLIR_OP = re.compile(r'^\s*(?:%[\w$.\-#:]+(?:\s*,\s*%[\w$.\-#:]+)*\s*=\s*)?"?([a-z_][\w]*\.[\w.]+)"?')
_LLVM_INSTR = re.compile(r"^\s+(?:%[\w$.\-]+\s*=\s*)?(?:(?:tail|musttail|notail)\s+)?([a-z][\w.]*)")
_LLVM_CALLEE = re.compile(r"\b(?:call|invoke)\b[^@\"]*?(@[\w.$\-]+|\basm\b)")
_ASM_INSTR = re.compile(r"^\s+(?:@!?%?\w+\s+)?([a-z_][\w.]*)")


def op_counts(text: str, stage: str) -> Counter[str]:
    """How many times each op (MLIR), instruction or callee (LLVM/asm) occurs."""
    kind = stage_kind(stage, text)
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if kind == "mlir":
            m = _MLIR_OP.match(line)
            if m:
                counts[m.group(1)] += 1
        elif kind == "llvm":
            m = _LLVM_INSTR.match(line)
            if not m:
                continue
            op = m.group(1)
            if op in ("call", "invoke"):
                callee = _LLVM_CALLEE.search(line)
                op = f"call {callee.group(1)}" if callee else op
            counts[op] += 1
        else:
            m = _ASM_INSTR.match(line)
            if m and not line.strip().startswith("."):
                counts[m.group(1)] += 1
    return counts


def op_delta(a: str, b: str, stage: str) -> dict[str, int]:
    """``B - A`` op counts, nonzero only, biggest change first."""
    ca, cb = op_counts(a, stage), op_counts(b, stage)
    delta = {op: cb[op] - ca[op] for op in set(ca) | set(cb) if cb[op] != ca[op]}
    return dict(sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0])))


def format_delta(delta: Mapping[str, int], limit: int = 0) -> str:
    """``+2 tt.load, -1 ttg.convert_layout`` (at most ``limit`` items when > 0)."""
    items = [f"{n:+d} {op}" for op, n in delta.items()]
    if limit and len(items) > limit:
        items = items[:limit] + [f"... {len(items) - limit} more"]
    return ", ".join(items)


# ---------------------------------------------------------------- classify
def classify(a: str, b: str, stage: str) -> str:
    """identical / attributes-only / structural for two normalized texts."""
    if a == b:
        return IDENTICAL
    if strip_attributes(a, stage) == strip_attributes(b, stage):
        return ATTRIBUTES
    return STRUCTURAL


def _line_category(line: str, kind: str) -> str:
    s = line.strip()
    if kind == "mlir":
        if _MLIR_ALIAS_DEF.match(s):
            return "layouts"
        if s.startswith("module"):
            return "module attributes"
        if re.match(r"^(tt|llvm|func)\.func\b", s):
            return "signature"
        return "op attributes"
    if s.startswith(("attributes #", "target ")):
        return "module attributes"
    if s.startswith("define ") or s.startswith("declare "):
        return "signature"
    if s.startswith("!"):
        return "metadata"
    return "op attributes"


def triage_bucket(status: str, delta: Mapping[str, int], a: str, b: str, stage: str) -> str:
    """A short bucket name that groups look-alike changes (e.g. a compiler sync)."""
    if status in (IDENTICAL, ADDED, REMOVED):
        return status
    if status == STRUCTURAL:
        if not delta:
            return "structural: same op counts (operands, types or order)"
        return "structural: " + format_delta(delta, limit=4)
    kind = stage_kind(stage, a or b)
    la, lb = a.splitlines(), b.splitlines()
    cats: set[str] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag != "equal":
            cats.update(_line_category(line, kind) for line in la[i1:i2] + lb[j1:j2])
    return "attributes-only: " + " + ".join(sorted(cats))


def unified_diff(a: str, b: str, label_a: str, label_b: str, context: int = 3) -> str:
    """A unified diff of two texts ('' when equal)."""
    if a == b:
        return ""
    lines = difflib.unified_diff(
        a.splitlines(), b.splitlines(), fromfile=label_a, tofile=label_b, lineterm="", n=context
    )
    return "\n".join(lines) + "\n"


class Key(NamedTuple):
    """What identifies one IR across collections."""

    kernel: str
    specialization: str
    target: str
    stage: str


def diff_collections(
    a: Mapping[Key, IRText],
    b: Mapping[Key, IRText],
    label_a: str = "A",
    label_b: str = "B",
    with_raw: bool = False,
    context: int = 3,
) -> list[KernelDiff]:
    """Compare every key of ``a`` and ``b``; changed entries first, then by key."""
    results: list[KernelDiff] = []
    for key in sorted(set(a) | set(b)):
        kernel, spec, target, stage = key
        ia, ib = a.get(key), b.get(key)
        name = f"{kernel} [{target} {stage}]"
        if ia is None or ib is None:
            status = ADDED if ia is None else REMOVED
            present = ib if ia is None else ia
            assert present is not None
            na, nb = ("", present.normalized) if ia is None else (present.normalized, "")
            delta = op_delta(na, nb, stage)
            d = unified_diff(na, nb, f"{label_a}: {name}", f"{label_b}: {name}", context)
            results.append(KernelDiff(kernel, spec, target, stage, status, delta, status, False, d))
            continue
        status = classify(ia.normalized, ib.normalized, stage)
        delta = op_delta(ia.normalized, ib.normalized, stage) if status != IDENTICAL else {}
        entry = KernelDiff(
            kernel, spec, target, stage, status, delta,
            triage_bucket(status, delta, ia.normalized, ib.normalized, stage),
            ia.raw == ib.raw,
            unified_diff(ia.normalized, ib.normalized, f"{label_a}: {name}", f"{label_b}: {name}", context),
        )
        if with_raw:
            entry.raw_diff = unified_diff(ia.raw, ib.raw, f"{label_a}: {name}", f"{label_b}: {name}", context)
        results.append(entry)
    results.sort(key=lambda d: (STATUS_ORDER[d.status], d.kernel, d.specialization, d.target, d.stage))
    return results


def summarize(diffs: Iterable[KernelDiff]) -> dict[str, int]:
    """Count of entries per status (every status present, zero if none)."""
    counts = dict.fromkeys((IDENTICAL, ATTRIBUTES, STRUCTURAL, ADDED, REMOVED), 0)
    for d in diffs:
        counts[d.status] += 1
    return counts


def buckets(diffs: Iterable[KernelDiff]) -> list[tuple[str, list[KernelDiff]]]:
    """Changed entries grouped by triage bucket, biggest bucket first."""
    groups: dict[str, list[KernelDiff]] = {}
    for d in diffs:
        if d.status != IDENTICAL:
            groups.setdefault(d.bucket, []).append(d)
    return sorted(groups.items(), key=lambda kv: (STATUS_ORDER[kv[1][0].status], -len(kv[1]), kv[0]))


def renormalize(raw: str, stored: str, stage: str, stored_version: int | None) -> str:
    """The normalized text, recomputed from ``raw`` when the normalizer has changed since storing."""
    return stored if stored_version == NORMALIZER_VERSION else normalize_ir(raw, stage)


def load_collection(con: Any, label: str) -> dict[Key, IRText]:
    """Every IR stored under ``label`` in the history DB (``con``: a DuckDB connection)."""
    return {
        Key(t.kernel, t.specialization, t.target, t.stage):
            IRText(t.raw_text, renormalize(t.raw_text, t.normalized_text, t.stage, t.normalizer_version))
        for t in IrStore(con).texts(label)
    }


def changed_kernels(con: Any, label_a: str, label_b: str) -> set[str]:
    """Kernels (``module:function``) collected under both labels whose IR differs
    (attributes-only, structural, or a specialization/target/stage only on one side);
    empty when either label has no collection.

    For ``perfq affected``: flag a benchmark "IR changed" if any of its kernels is here.
    """
    try:
        a, b = load_collection(con, label_a), load_collection(con, label_b)
    except Exception:  # no ir_records table yet (history created before this migration)
        return set()
    if not a or not b:
        return set()
    by_kernel_a: dict[str, set[Key]] = {}
    by_kernel_b: dict[str, set[Key]] = {}
    for key in a:
        by_kernel_a.setdefault(key.kernel, set()).add(key)
    for key in b:
        by_kernel_b.setdefault(key.kernel, set()).add(key)
    changed: set[str] = set()
    for kernel in set(by_kernel_a) & set(by_kernel_b):
        keys_a, keys_b = by_kernel_a[kernel], by_kernel_b[kernel]
        if keys_a != keys_b or any(
            classify(a[k].normalized, b[k].normalized, k.stage) != IDENTICAL for k in keys_a
        ):
            changed.add(kernel)
    return changed
