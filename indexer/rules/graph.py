"""The reachability graph: nodes (functions, stubs, operators, benchmarks) and edges, where
``src`` is affected when ``dst`` changes; the other rules add to it through ``ctx.graph``
(base.Graph), and this rule packs it for queries (schema/packed_graph.py)."""

from __future__ import annotations

from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import GraphRow, NodeRow, ReachEdgeRow
from schema.packed_graph import pack_graph


def pack(ctx: LinkContext) -> None:
    """The graph packed: edges by dst as arrays."""
    ctx.set_rows(GraphRow, pack_graph(ctx.read(NodeRow), ctx.read(ReachEdgeRow)))


RULE = Rule(
    "graph",
    writes=(NodeRow, ReachEdgeRow, GraphRow),
    reads=(),
    link={Phase.PACK: pack},
)
