"""Small C++ fixtures for link tests: a source's facts, and the call edges a link made, by name."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import Tables


def cpp_facts(path: str, source: str) -> FileFacts:
    """The facts of ``source`` (dedented) as the C++ file ``path``; it must parse."""
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def call_edges(tables: Tables) -> set[tuple[str, str]]:
    """(caller, callee) qualified names of the linked calls."""
    qualname = {row[0]: row[2] for row in tables.rows["functions"]}
    return {(qualname[caller], qualname[callee]) for caller, callee, *_ in tables.rows["call_edges"]}
