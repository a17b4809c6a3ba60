"""The explained chains of an affected document as one graph: why each benchmark was picked.

Every reason's chain (changed function -> callers -> operator -> benchmark) becomes a path of a
networkx ``DiGraph``; chains that share steps share nodes, so the picture shows where a change
fans out. Written as GraphML (yEd, Gephi, Cytoscape), GEXF or GML, networkx's own writers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import networkx as nx

from common.errors import PerfqError
from query.document import AffectedDoc
from query.model import StepKind
from schema.model import EdgeKind

# a file's lines and a note are drawn as function nodes
_NODE_KIND = {StepKind.FILE: StepKind.FUNCTION, StepKind.NOTE: StepKind.FUNCTION}

_WRITERS: dict[str, Callable[[nx.DiGraph, Path], None]] = {
    ".graphml": lambda g, p: nx.write_graphml(g, p),
    ".gexf": lambda g, p: nx.write_gexf(g, p),
    ".gml": lambda g, p: nx.write_gml(g, p),
}


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
                label = step.label
                if label not in graph:
                    kind = _NODE_KIND.get(step.kind, step.kind)
                    graph.add_node(label, kind=kind.value, label=label, changed=False, selected=False)
                if index == 0:
                    graph.nodes[label]["changed"] = True
                if previous is not None and previous != label:
                    graph.add_edge(previous, label, via=step.via or EdgeKind.CALL.value)
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
