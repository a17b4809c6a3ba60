"""The reachability graph: nodes (functions, stubs, operators, benchmarks) and edges, where
``src`` is affected when ``dst`` changes; the other rules add to it through ``ctx.graph``
(base.Graph), and this rule packs it for queries (schema/packed_graph.py)."""

from __future__ import annotations

from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule, each_once
from schema.model import GraphRow, NodeKind, NodeRow, ReachEdgeRow
from schema.packed_graph import pack_graph


def pack(ctx: LinkContext) -> None:
    """The graph packed: edges by dst as arrays."""
    ctx.set_rows(GraphRow, pack_graph(ctx.read(NodeRow), ctx.read(ReachEdgeRow)))


def read_nodes(ctx: PatchContext) -> None:
    """The new functions' nodes (node id == function id), and the operator and stub nodes by key."""
    graph = ctx.graph
    ctx.insert(NodeRow, [(fid, NodeKind.FUNCTION, str(fid), f.qualname) for fid, f in ctx.fresh])
    graph.fresh_nodes = [(fid, NodeKind.FUNCTION, str(fid)) for fid, _ in ctx.fresh]
    sql_nodes = ctx.store.rows("op_and_stub_nodes")
    graph.node_ids = {(NodeKind(k), key): i for i, k, key in sql_nodes}
    graph.next_node = ctx.store.value("next_node_id")


def record_graph(ctx: PatchContext) -> None:
    """The nodes made and the edges added (each once), as rows."""
    ctx.insert(NodeRow, ctx.graph.new_nodes)
    ctx.graph.added = each_once(ctx.graph.reach)
    ctx.insert(ReachEdgeRow, ctx.graph.added)


RULE = Rule(
    "graph",
    writes=(NodeRow, ReachEdgeRow, GraphRow),
    reads=(),
    link={Phase.PACK: pack},
    patch={PatchPhase.PREPARE: read_nodes, PatchPhase.RECORD: record_graph},
    place=100,
)
