"""The index's constructs as rules, one module per family (see base.py): the link runs the
phases in order and, inside each, these rules in this order (the order of their nodes, so of
node ids, and of their edges, the first of which wins)."""

from indexer.rules import (
    benchmarks,
    calls,
    canaries,
    classes,
    files,
    graph,
    native,
    ops,
    py_lines,
    python_refs,
    registrations,
    traces,
)

RULES = (
    files.RULE,
    ops.RULE,
    classes.RULE,
    registrations.RULE,
    python_refs.RULE,
    calls.RULE,
    traces.RULE,
    py_lines.RULE,
    benchmarks.RULE,
    graph.RULE,
    canaries.RULE,
    native.RULE,
)
