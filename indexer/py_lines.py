"""Python line truth, as index rows: the lines each traced test ran (indexer/trace_driver.py's
per-test line coverage), one line set per distinct (file, lines) that the tests running exactly
those lines share, and the traced torch's line digests (it is not the indexed source)."""

from __future__ import annotations

from collections.abc import Iterable

from indexer.trace import FileTrace
from schema.model import PyLineSetRow, PyLineTextRow, PyTestLinesRow


def line_rows(traces: Iterable[tuple[str, FileTrace]]) -> dict[str, list[tuple]]:
    """Rows of ``py_line_sets``, ``py_test_lines`` and ``py_line_texts`` for ``traces``
    ((benchmark name, its file's trace))."""
    set_ids: dict[tuple[str, tuple[int, ...]], int] = {}
    sets: list[tuple] = []
    tests: list[tuple] = []
    texts: dict[str, tuple[int, ...]] = {}
    for bench, trace in traces:
        for test in trace.tests:
            for path, lines in test.lines:
                key = (path, lines)
                if key not in set_ids:
                    set_ids[key] = len(set_ids)
                    sets += [(set_ids[key], path, line) for line in lines]
                tests.append((bench, test.name, set_ids[key]))
        for path, digests in trace.line_digests:
            texts.setdefault(path, digests)
    numbered = [(path, n, digest) for path, digests in sorted(texts.items()) for n, digest in enumerate(digests, 1)]
    return {PyLineSetRow.TABLE: sets, PyTestLinesRow.TABLE: sorted(set(tests)), PyLineTextRow.TABLE: numbered}
