"""Render an IR comparison: the stable JSON document and a markdown PR comment. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from common.documents import to_json as document_json
from common.render import GITHUB_COMMENT_BUDGET, fence
from perfq.ir.diff import (
    ADDED,
    ATTRIBUTES,
    IDENTICAL,
    REMOVED,
    STRUCTURAL,
    KernelDiff,
    buckets,
    format_delta,
    summarize,
)


class IRStatus(str, Enum):
    """How one IR differs between two collections."""

    identical = IDENTICAL
    attributes_only = ATTRIBUTES
    structural = STRUCTURAL
    added = ADDED
    removed = REMOVED


@dataclass(frozen=True)
class KernelEntry:
    """One (kernel, specialization, target, stage) compared."""

    kernel: str
    specialization: str
    target: str
    stage: str
    status: IRStatus
    op_delta: dict[str, int]
    bucket: str
    raw_identical: bool


@dataclass(frozen=True)
class IRSummary:
    """Number of IRs per status."""

    identical: int
    attributes_only: int = field(metadata={"json": ATTRIBUTES})
    structural: int = 0
    added: int = 0
    removed: int = 0


@dataclass(frozen=True)
class IRDiffDocument:
    """The `perfq ir diff --format json` document."""

    a: str
    b: str
    kernels: tuple[KernelEntry, ...]
    summary: IRSummary

    def to_json(self) -> dict[str, Any]:
        return document_json(self)


@dataclass(frozen=True)
class IRCollectDocument:
    """The `perfq ir collect|capture|harvest --format json` document."""

    label: str
    triton_version: str
    stored: int
    compiles: int
    seconds: float
    errors: tuple[str, ...]
    collection_id: str
    specializations: int | None = field(default=None, metadata={"omit_if_none": True})  # capture
    command_status: int | None = field(default=None, metadata={"omit_if_none": True})  # capture
    directory: str | None = field(default=None, metadata={"omit_if_none": True})  # harvest

    def to_json(self) -> dict[str, Any]:
        return document_json(self)


def ir_diff_document(label_a: str, label_b: str, diffs: list[KernelDiff]) -> IRDiffDocument:
    """The typed comparison of two collections."""
    kernels = tuple(
        KernelEntry(d.kernel, d.specialization, d.target, d.stage, IRStatus(d.status), dict(d.op_delta), d.bucket,
                    d.raw_identical)
        for d in diffs
    )
    counts = summarize(diffs)
    summary = IRSummary(counts[IDENTICAL], counts[ATTRIBUTES], counts[STRUCTURAL], counts[ADDED], counts[REMOVED])
    return IRDiffDocument(label_a, label_b, kernels, summary)


def to_json(label_a: str, label_b: str, diffs: list[KernelDiff]) -> dict[str, Any]:
    """``{"a", "b", "kernels": [...], "summary"}``: the documented, stable shape."""
    return ir_diff_document(label_a, label_b, diffs).to_json()


def summary_line(diffs: list[KernelDiff]) -> str:
    counts = summarize(diffs)
    return f"{len(diffs)} IRs compared: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)


def to_markdown(label_a: str, label_b: str, diffs: list[KernelDiff], raw: bool = False,
                max_diff_lines: int = 120, budget: int = GITHUB_COMMENT_BUDGET) -> str:
    """A PR comment: summary, triage buckets, changed kernels first with folded diffs
    (diffs that would push the comment past ``budget`` characters are left out, with a note)."""
    out = [f"### perfq ir diff: `{label_a}` → `{label_b}`", "", summary_line(diffs) + ".", ""]
    changed = [d for d in diffs if d.status != IDENTICAL]
    if not changed:
        out.append("No IR changed after normalization.")
        return "\n".join(out) + "\n"
    out += ["#### Triage", "", "| bucket | IRs | kernels |", "|---|---:|---|"]
    for bucket, group in buckets(diffs):
        names = sorted({f"`{d.kernel}` ({d.target} {d.stage})" for d in group})
        shown = ", ".join(names[:6]) + (f", … {len(names) - 6} more" if len(names) > 6 else "")
        out.append(f"| {bucket} | {len(group)} | {shown} |")
    out += ["", "#### Changed", "", "| kernel | target | stage | status | op delta |"]
    out.append("|---|---|---|---|---|")
    for d in changed:
        out.append(f"| `{d.kernel}` | {d.target} | {d.stage} | {d.status} | {format_delta(d.op_delta, 6)} |")
    out.append("")
    size = sum(len(line) + 1 for line in out)
    left_out = 0
    for d in changed:
        text = d.raw_diff if raw and d.raw_diff else d.diff
        title = f"{d.kernel} · {d.target} · {d.stage} · {d.status}"
        if d.op_delta:
            title += f" ({format_delta(d.op_delta, 4)})"
        block = [f"<details><summary>{title}</summary>", "", f"specialization: `{d.specialization}`", "",
                 fence(text, "diff", max_diff_lines), "", "</details>", ""]
        block_size = sum(len(line) + 1 for line in block)
        if budget and size + block_size > budget:
            left_out += 1
            continue
        out += block
        size += block_size
    if left_out:
        out += [f"_{left_out} diffs left out to keep this comment short: run "
                f"`perfq ir diff {label_a} {label_b}` to see them._", ""]
    same = [d for d in diffs if d.status == IDENTICAL]
    if same:
        out += [f"<details><summary>{len(same)} identical IRs</summary>", ""]
        out += [f"- `{d.kernel}` {d.target} {d.stage}" for d in same]
        out += ["", "</details>", ""]
    return "\n".join(out)
