"""Preprocessor branches the index does not see: ``#if 0`` branches, and every branch but the first of
a conditional group whose branches leave braces or parentheses unbalanced (indexer/source_text.py
``preprocessor_spans``; the text scanner blanks them so that the file's blocks still match). No
function or call inside one is indexed, so a change there reaches nothing through the graph: this
table says where that is by construction, not a miss of the link."""

from __future__ import annotations

import typing
from dataclasses import dataclass

from indexer.facts import FileFacts
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule
from schema.model import column


@dataclass(frozen=True, slots=True)
class UnseenBranchRow:
    """Preprocessor branches of a C++ file the index does not see (#if 0; the later branches of a
    group whose branches leave braces unbalanced): no function or call inside one is indexed.
    """

    TABLE: typing.ClassVar[str] = "unseen_branches"

    file_id: int
    first_line: int = column("the branch's first line, after its directive")
    last_line: int = column("its last line, before the next directive")
    directive: str = column("the directive that opens it: '#if 0', '#else', '#elif defined(X)'")


def _rows(file_id: int, facts: FileFacts) -> list[tuple]:
    """The rows of one file's unseen branches (the extractor's facts: first line, last line, directive)."""
    branches = facts.constructs.get(UnseenBranchRow.TABLE, ())
    return [(file_id, first, last, directive) for first, last, directive in branches]


def declare(ctx: LinkContext) -> None:
    """The unseen branches of every C++ file (file id: its place among them, as the files rule numbers them)."""
    out = ctx.out(UnseenBranchRow)
    for file_id, facts in enumerate(ctx.files):
        out += _rows(file_id, facts)


def record(ctx: PatchContext) -> None:
    """The changed files' unseen branches, in place of the indexed ones."""
    rows = [row for file_id, (facts, _) in ctx.changed.items() for row in _rows(file_id, facts)]
    ctx.replace_file_rows(UnseenBranchRow, rows)


RULE = Rule(
    "unseen branches",
    writes=(UnseenBranchRow,),
    reads=(),
    link={Phase.DECLARE: declare},
    patch={PatchPhase.RECORD: record},
    place=15,
)
