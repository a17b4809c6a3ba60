"""The explained chains of an affected document as one graph: why each benchmark was picked.

Every reason's chain (changed function -> callers -> operator -> benchmark) becomes a path of a
networkx ``DiGraph``; chains that share steps share nodes, so the picture shows where a change
fans out. Written as GraphML (yEd, Gephi, Cytoscape), GEXF or GML, networkx's own writers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path

import networkx as nx

from perfq.errors import PerfqError
from query.affected import AffectedDoc


class StepKind(str, Enum):
    """What a chain step names."""

    function = "function"
    op = "op"
    stub = "stub"
    benchmark = "benchmark"
    benchmark_file = "benchmark_file"
    canary = "canary"


_PREFIXES = (
    ("benchmark file ", StepKind.benchmark_file),
    ("benchmark ", StepKind.benchmark),
    ("canary set ", StepKind.canary),
    ("op ", StepKind.op),
    ("stub ", StepKind.stub),
)

_WRITERS: dict[str, Callable[[nx.DiGraph, Path], None]] = {
    ".graphml": lambda g, p: nx.write_graphml(g, p),
    ".gexf": lambda g, p: nx.write_gexf(g, p),
    ".gml": lambda g, p: nx.write_gml(g, p),
}


def split_step(step: str) -> tuple[StepKind, str, str]:
    """(kind, name, edge tag) of a chain step such as ``op _softmax [structured_delegate]``."""
    text, sep, tag = step.partition(" [")
    tag = tag[:-1] if sep and tag.endswith("]") else ""
    for prefix, kind in _PREFIXES:
        if text.startswith(prefix):
            return kind, text, tag
    return StepKind.function, text, tag


def chain_graph(doc: AffectedDoc) -> nx.DiGraph:
    """A node per distinct step (``kind``, ``label``), an edge per consecutive pair (``via``: the edge tag).

    The selected benchmarks get ``selected=True`` with their source and confidence; the changed
    functions are the chains' first steps (``changed=True``).
    """
    graph = nx.DiGraph(base=doc.base, head=doc.head)
    for bench in doc.benchmarks:
        for reason in bench.reasons:
            previous = None
            for index, step in enumerate(reason.chain):
                kind, label, tag = split_step(step)
                if label not in graph:
                    graph.add_node(label, kind=kind.value, label=label, changed=False, selected=False)
                if index == 0:
                    graph.nodes[label]["changed"] = True
                if previous is not None and previous != label:
                    graph.add_edge(previous, label, via=tag or "call")
                previous = label
            if previous is not None:
                node = graph.nodes[previous]
                node.update(selected=True, benchmark=bench.name, source=bench.source.value,
                            confidence=bench.confidence.value)
    return graph


def write_chain_graph(doc: AffectedDoc, path: Path) -> nx.DiGraph:
    """Write the chain graph to ``path``, its format from the suffix; PerfqError for an unknown one."""
    writer = _WRITERS.get(path.suffix.lower())
    if writer is None:
        raise PerfqError(f"--graph {path}: unknown format {path.suffix or '(none)'!r}; "
                         f"use one of {', '.join(sorted(_WRITERS))}")
    graph = chain_graph(doc)
    try:
        writer(graph, path)
    except OSError as exc:
        raise PerfqError(f"--graph {path}: cannot write: {exc.strerror or exc}") from None
    return graph
