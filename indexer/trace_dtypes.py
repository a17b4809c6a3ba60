"""The link step of the traced dtypes: a benchmark file's tests -> trace_dtypes rows.

Self-contained (its row type, schema.model.TraceDtypeRow; this one function): the link calls it
beside a trace's trace_ops rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from indexer.trace import TracedTest


def dtype_rows(bench: str, tests: Iterable[TracedTest]) -> list[tuple[str, str, str, str, str, str]]:
    """(bench, test, namespace, base, layout, dtype) per test, operator, layout and dtype it ran."""
    rows = set()
    for test in tests:
        for entry in test.dtypes:
            op, _, dtype = entry.rpartition("|")
            qualified, _, layout = op.partition("@")
            namespace, _, base = qualified.partition("::")
            if base and dtype:
                rows.add((bench, test.name, namespace, base, layout or "dense", dtype))
    return sorted(rows)
