"""The reachability graph packed for queries: edges grouped by their ``dst`` (compressed
sparse rows), edge kinds and details as small codes, and the kinds of all nodes, so that a
walk reads one table row instead of one SQL query per level."""

from __future__ import annotations

import json
from collections.abc import Iterable

from perfq.schema.index_store import GraphColumns

PARTS = ("offsets", "src", "kind", "detail", "node_kind", "names")
KEYED = ("op", "stub", "benchmark")  # node kinds whose keys a walk needs


def pack_graph(nodes: Iterable[tuple], edges: Iterable[tuple]) -> list[tuple[str, bytes]]:
    """``nodes``: (id, kind, key, label); ``edges``: (dst, src, kind, detail). Returns the
    ``graph`` table rows (part, bytes)."""
    import numpy as np  # here, not at the top: an incremental build that keeps the graph skips its 0.08 s import

    nodes = list(nodes)
    edges = list(edges)
    n = (max((row[0] for row in nodes), default=-1) + 1) if nodes else 0
    node_kinds = sorted({row[1] for row in nodes})
    kind_code = {k: i for i, k in enumerate(node_kinds)}
    node_kind = np.zeros(n, dtype=np.uint8)
    keys: dict[str, str] = {}  # keys of the nodes a walk needs by key: operators, stubs, benchmarks
    for nid, kind, key, _ in nodes:
        node_kind[nid] = kind_code[kind]
        if kind in KEYED:
            keys[str(nid)] = key
    edge_kinds = sorted({e[2] for e in edges})
    details = sorted({e[3] for e in edges})
    ek = {k: i for i, k in enumerate(edge_kinds)}
    dk = {d: i for i, d in enumerate(details)}
    dst = np.fromiter((e[0] for e in edges), dtype=np.int32, count=len(edges))
    src = np.fromiter((e[1] for e in edges), dtype=np.int32, count=len(edges))
    kind = np.fromiter((ek[e[2]] for e in edges), dtype=np.uint8, count=len(edges))
    detail = np.fromiter((dk[e[3]] for e in edges), dtype=np.int32, count=len(edges))
    order = np.lexsort((src, dst))
    names = {"node_kinds": node_kinds, "edge_kinds": edge_kinds, "details": details, "keys": keys}
    return _parts(node_kind, dst[order], src[order], kind[order], detail[order], names)


def pack_columns(cols: GraphColumns) -> list[tuple[str, bytes]]:
    """The same rows as ``pack_graph`` from columns the index reads itself (an incremental
    build's repack: no Python row per edge)."""
    import numpy as np

    n = int(cols.node_id.max()) + 1 if len(cols.node_id) else 0
    node_kind = np.zeros(n, dtype=np.uint8)
    node_kind[cols.node_id] = cols.node_kind
    names = {"node_kinds": cols.node_kinds, "edge_kinds": cols.edge_kinds, "details": cols.details,
             "keys": {str(nid): key for nid, key in cols.keys}}
    return _parts(
        node_kind,
        cols.dst.astype(np.int32),
        cols.src.astype(np.int32),
        cols.kind.astype(np.uint8),
        cols.detail.astype(np.int32),
        names,
    )


def _parts(node_kind, dst, src, kind, detail, names: dict) -> list[tuple[str, bytes]]:
    """The rows, from node kinds by id and edges sorted by (dst, src)."""
    import numpy as np

    n = len(node_kind)
    counts = np.bincount(dst, minlength=n) if len(dst) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return [
        ("offsets", offsets.astype(np.int64).tobytes()),
        ("src", src.tobytes()),
        ("kind", kind.tobytes()),
        ("detail", detail.tobytes()),
        ("node_kind", node_kind.tobytes()),
        ("names", json.dumps(names).encode()),
    ]
