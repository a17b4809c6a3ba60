"""Python line truth: the lines each traced test ran (indexer/trace_driver.py's per-test line
coverage), one line set per distinct (file, lines) that the tests running exactly those lines
share, and the traced torch's line digests (it is not the indexed source)."""

from __future__ import annotations

from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import PyLineSetRow, PyLineTextRow, PyTestLinesRow


def link_lines(ctx: LinkContext) -> None:
    """The ``py_line_sets``, ``py_test_lines`` and ``py_line_texts`` rows of the traced benchmarks."""
    set_ids: dict[tuple[str, tuple[int, ...]], int] = {}
    sets, tests = ctx.out(PyLineSetRow), set()
    texts: dict[str, tuple[int, ...]] = {}
    for b in ctx.benches:
        trace = ctx.traces.get(b.file)
        if trace is None:
            continue
        for test in trace.tests:
            for path, lines in test.lines:
                key = (path, lines)
                if key not in set_ids:
                    set_ids[key] = len(set_ids)
                    sets += [(set_ids[key], path, line) for line in lines]
                tests.add((b.name, test.name, set_ids[key]))
        for path, digests in trace.line_digests:
            texts.setdefault(path, digests)
    ctx.out(PyTestLinesRow).extend(sorted(tests))
    ctx.out(PyLineTextRow).extend(
        (path, n, digest) for path, digests in sorted(texts.items()) for n, digest in enumerate(digests, 1)
    )


RULE = Rule(
    "py_lines",
    writes=(PyLineSetRow, PyTestLinesRow, PyLineTextRow),
    reads=(),
    link={Phase.BENCHMARKS: link_lines},
    place=80,
)
