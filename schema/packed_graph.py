"""The reachability graph packed for queries: edges grouped by their ``dst`` (compressed
sparse rows), edge kinds and details as small codes, and the kinds of all nodes, so that a
walk reads a few arrays instead of one SQL query per level. A full link packs it from the
rows (``pack_graph``); a patch patches the packed graph it had (``patch_packed``); both give
the same bytes for the same nodes and reach_edges. Stored in the ``graph`` table by a full
link, and beside the index in a file (graph_file.py) by every build."""

from __future__ import annotations

import functools
import json
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import NamedTuple

from schema.kinds import EdgeKind, NodeKind

PARTS = ("offsets", "src", "kind", "detail", "node_kind", "names")
KEYED = (NodeKind.OP, NodeKind.STUB, NodeKind.BENCHMARK)  # node kinds whose keys a walk needs
Edge = tuple[int, int, EdgeKind, str]  # (dst, src, kind, detail), as in reach_edges


class PackedGraph:
    """The packed parts as arrays; the names part is decoded when first used."""

    def __init__(self, parts: dict[str, bytes] | dict[str, memoryview]) -> None:
        self.names_json = bytes(parts["names"])  # as stored: a patch that keeps every name reuses it
        self.offsets = _array("q", parts["offsets"])  # the stdlib array: numpy's import costs a query 0.1 s
        self.src = _array("i", parts["src"])
        self.kind = _array("B", parts["kind"])
        self.detail = _array("i", parts["detail"])
        self.node_kind = _array("B", parts["node_kind"])

    def into(self, node: int) -> list[tuple[int, EdgeKind]]:
        """(source node, edge kind) of the edges into ``node``: what reaches it one step up."""
        lo, hi = self.offsets[node], self.offsets[node + 1]
        return [(self.src[i], self.edge_kinds[self.kind[i]]) for i in range(lo, hi)]

    @functools.cached_property
    def _names(self) -> dict:
        return json.loads(self.names_json)

    @functools.cached_property
    def node_kinds(self) -> list[NodeKind]:
        return [NodeKind(k) for k in self._names["node_kinds"]]

    @functools.cached_property
    def edge_kinds(self) -> list[EdgeKind]:
        return [EdgeKind(k) for k in self._names["edge_kinds"]]

    @functools.cached_property
    def details(self) -> list[str]:
        return self._names["details"]

    @functools.cached_property
    def keys(self) -> dict[int, str]:
        return {int(k): v for k, v in self._names["keys"].items()}

    @functools.cached_property
    def detail_codes(self) -> dict[str, int]:
        """detail -> its code."""
        return _codes(self.details)

    @functools.cached_property
    def edge_codes(self) -> dict[EdgeKind, int]:
        """edge kind -> its code."""
        return _codes(self.edge_kinds)

    @functools.cached_property
    def node_codes(self) -> dict[NodeKind, int]:
        """node kind -> its code."""
        return _codes(self.node_kinds)


def _array(code: str, data: bytes | memoryview) -> array | memoryview:
    """The items of ``data``: a view of the graph file's map as is, table bytes copied."""
    if isinstance(data, memoryview):
        return data.cast(code)
    out = array(code)
    out.frombytes(data)
    return out


class GraphDelta(NamedTuple):
    """What a patch changed in the ``nodes`` and ``reach_edges`` tables, and the sorted
    distinct kinds and details those tables hold afterwards (the packed codes' vocabularies)."""

    removed: list[Edge]
    added: list[Edge]  # in the order they were inserted
    dropped_nodes: list[int]
    new_nodes: list[tuple[int, NodeKind, str]]  # (id, kind, key), in the order they were inserted
    n_nodes: int  # the largest node id + 1
    node_kinds: list[NodeKind]
    edge_kinds: list[EdgeKind]
    details: list[str]


class StaleGraph(ValueError):
    """The packed graph does not hold an edge the tables say was removed."""


def pack_graph(nodes: Iterable[tuple], edges: Iterable[tuple]) -> list[tuple[str, bytes]]:
    """``nodes``: (id, kind, key, label); ``edges``: (dst, src, kind, detail). Returns the
    ``graph`` table rows (part, bytes)."""
    import numpy as np  # here, not at the top: an incremental build that keeps the graph skips its 0.08 s import

    nodes = list(nodes)
    edges = list(edges)
    n = (max((row[0] for row in nodes), default=-1) + 1) if nodes else 0
    node_kinds = sorted({row[1] for row in nodes})
    kind_code = _codes(node_kinds)
    node_kind = np.zeros(n, dtype=np.uint8)
    keys: dict[str, str] = {}  # keys of the nodes a walk needs by key: operators, stubs, benchmarks
    for nid, kind, key, _ in nodes:
        node_kind[nid] = kind_code[kind]
        if kind in KEYED:
            keys[str(nid)] = key
    edge_kinds = sorted({e[2] for e in edges})
    details = sorted({e[3] for e in edges})
    ek, dk = _codes(edge_kinds), _codes(details)
    dst = np.fromiter((e[0] for e in edges), dtype=np.int32, count=len(edges))
    src = np.fromiter((e[1] for e in edges), dtype=np.int32, count=len(edges))
    kind = np.fromiter((ek[e[2]] for e in edges), dtype=np.uint8, count=len(edges))
    detail = np.fromiter((dk[e[3]] for e in edges), dtype=np.int32, count=len(edges))
    order = np.lexsort((src, dst))
    names = {"node_kinds": node_kinds, "edge_kinds": edge_kinds, "details": details, "keys": keys}
    return _parts(node_kind, dst[order], src[order], kind[order], detail[order], names)


def _parts(node_kind, dst, src, kind, detail, names: dict) -> list[tuple[str, bytes]]:
    """The rows, from node kinds by id and edges sorted by (dst, src)."""
    import numpy as np

    n = len(node_kind)
    counts = np.bincount(dst, minlength=n) if len(dst) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return _rows(offsets.tobytes(), src.tobytes(), kind.tobytes(), detail.tobytes(), node_kind.tobytes(),
                 json.dumps(names).encode())


def _rows(
    offsets: bytes, src: bytes, kind: bytes, detail: bytes, node_kind: bytes, names: bytes
) -> list[tuple[str, bytes]]:
    """The ``graph`` table rows of the packed parts."""
    return [
        ("offsets", offsets),
        ("src", src),
        ("kind", kind),
        ("detail", detail),
        ("node_kind", node_kind),
        ("names", names),
    ]


def patch_packed(old: PackedGraph, delta: GraphDelta) -> list[tuple[str, bytes]]:
    """The rows ``pack_graph`` would give for the patched tables, from the packed graph they
    had before and what changed: the runs of untouched edges are copied, and only the edges
    into the nodes the delta touches are merged again (standard library arrays: a patch spares
    numpy's import). StaleGraph when ``old`` lacks an edge the delta removed."""
    offsets, src = array("q", bytes(old.offsets)), array("i", bytes(old.src))
    kind, detail = bytes(old.kind), array("i", bytes(old.detail))
    drops = _positions(old, delta.removed)  # dst -> positions of its edges removed
    same_details = delta.details is old.details or delta.details == old.details
    ek, dk = _codes(delta.edge_kinds), old.detail_codes if same_details else _codes(delta.details)
    kind = kind.translate(_recoded(old.edge_kinds, ek, 256))
    if not same_details:
        detail = array("i", map(_recoded(old.details, dk, 0).__getitem__, detail))
    adds: dict[int, list[tuple[int, int, int]]] = {}  # dst -> edges added into it: (src, kind, detail)
    for dst, s, k, d in delta.added:
        adds.setdefault(dst, []).append((s, ek[k], dk[d]))
    out = _Packing(src, kind, detail)
    copied, first, shift = 0, 0, 0  # old edges copied so far, the next node's offset to write, their shift
    for dst in sorted(drops.keys() | adds.keys()):
        lo, hi = (offsets[dst], offsets[dst + 1]) if dst < len(offsets) - 1 else (offsets[-1],) * 2
        out.copy(copied, lo)
        out.merge(lo, hi, drops.get(dst, []), adds.get(dst, []))
        out.offsets_from(offsets, first, dst + 1, shift)
        copied, first = hi, dst + 1
        shift += len(adds.get(dst, ())) - len(drops.get(dst, ()))
    out.copy(copied, len(src))
    out.offsets_from(offsets, first, delta.n_nodes + 1, shift)
    del out.offsets[delta.n_nodes + 1 :]  # dropped nodes at the end: no edge is left into them
    return _rows(out.offsets.tobytes(), out.src.tobytes(), bytes(out.kind), out.detail.tobytes(),
                 _node_kinds(old, delta), _names(old, delta, same_details))


def _positions(old: PackedGraph, removed: list[Edge]) -> dict[int, list[int]]:
    """The positions in ``old`` of the ``removed`` edges, by dst."""
    ek, dk = _codes(old.edge_kinds), old.detail_codes
    offsets, src, kind, detail = old.offsets, old.src, old.kind, old.detail
    found: dict[int, list[int]] = {}
    for dst, s, k, d in removed:
        wanted, mine = (s, ek.get(k), dk.get(d)), found.setdefault(dst, [])
        lo, hi = (offsets[dst], offsets[dst + 1]) if dst < len(offsets) - 1 else (0, 0)
        run = range(bisect_left(src, s, lo, hi), bisect_right(src, s, lo, hi))  # a run is sorted by src
        at = next((i for i in run if i not in mine and (src[i], kind[i], detail[i]) == wanted), None)
        if at is None:
            raise StaleGraph(f"no edge {dst} <- {s} ({k}, {d}) in the packed graph")
        mine.append(at)
    return found


class _Packing:
    """The patched graph's arrays, written in order of dst from the old ones (recoded)."""

    def __init__(self, src: array, kind: bytes, detail: array) -> None:
        self.old = (src, kind, detail)
        self.src, self.kind, self.detail, self.offsets = array("i"), bytearray(), array("i"), array("q")

    def copy(self, lo: int, hi: int) -> None:
        """The old edges ``lo`` to ``hi`` - 1, as they are."""
        src, kind, detail = self.old
        self.src.extend(src[lo:hi])
        self.kind.extend(kind[lo:hi])
        self.detail.extend(detail[lo:hi])

    def merge(self, lo: int, hi: int, drops: list[int], adds: list[tuple[int, int, int]]) -> None:
        """The run of old edges ``lo`` to ``hi`` - 1 (one dst's, sorted by src) without the
        positions ``drops``, with ``adds`` in place: each after the old edges of its src (an
        older row before a newer one, as a stable sort by src leaves them)."""
        src = self.old[0]
        events = sorted(
            [(bisect_right(src, edge[0], lo, hi), 0, edge[0], n, edge) for n, edge in enumerate(adds)]
            + [(at, 1, 0, 0, None) for at in drops]
        )
        at_old = lo
        for at, dropped, _, _, edge in events:
            self.copy(at_old, at)
            if dropped:
                at_old = at + 1
            else:
                self.src.append(edge[0])
                self.kind.append(edge[1])
                self.detail.append(edge[2])
                at_old = at
        self.copy(at_old, hi)

    def offsets_from(self, offsets: array, start: int, stop: int, shift: int) -> None:
        """The offsets of nodes ``start`` to ``stop`` - 1: the old ones moved by ``shift`` (a
        node past the old graph's end starts where its edges end)."""
        run = offsets[min(start, len(offsets)) : min(stop, len(offsets))]
        self.offsets.extend(array("q", [o + shift for o in run]) if shift else run)
        self.offsets.extend(array("q", [offsets[-1] + shift]) * max(0, stop - max(start, len(offsets))))


def _node_kinds(old: PackedGraph, delta: GraphDelta) -> bytes:
    """The node_kind part: the old codes recoded, dropped nodes 0 (as no node), new ones set."""
    codes = _codes(delta.node_kinds)
    kinds = bytearray(bytes(old.node_kind).translate(_recoded(old.node_kinds, codes, 256))[: delta.n_nodes])
    kinds += bytes(delta.n_nodes - len(kinds))
    for nid in delta.dropped_nodes:
        if nid < delta.n_nodes:
            kinds[nid] = 0
    for nid, kind, _ in delta.new_nodes:
        kinds[nid] = codes[kind]
    return bytes(kinds)


def _names(old: PackedGraph, delta: GraphDelta, same_details: bool) -> bytes:
    """The names part: vocabularies, and the keys of keyed nodes in the order they were
    inserted; the old part as it is when none of them changed (33k details take ~12 ms to
    encode)."""
    dropped = set(delta.dropped_nodes)
    new_keys = [(str(nid), key) for nid, kind, key in delta.new_nodes if kind in KEYED]
    if (same_details and not new_keys and not dropped & old.keys.keys() and delta.node_kinds == old.node_kinds
            and delta.edge_kinds == old.edge_kinds):
        return old.names_json
    keys = {str(nid): key for nid, key in old.keys.items() if nid not in dropped}
    keys.update(new_keys)
    names = {"node_kinds": delta.node_kinds, "edge_kinds": delta.edge_kinds, "details": delta.details, "keys": keys}
    return json.dumps(names).encode()


def _codes(names: list[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(names)}


def _recoded(old: list[str], new: dict[str, int], size: int) -> list[int] | bytes:
    """Old code -> new code: a ``bytes.translate`` table when ``size`` is 256, else a list
    (codes of names no longer used map to 0: no edge kept has them)."""
    table = [new.get(name, 0) for name in old]
    return bytes(table + list(range(len(table), size))) if size == 256 else table
