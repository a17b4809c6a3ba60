"""Walking the reachability graph upward from changed nodes (reads the index only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from indexer.devices import device_of_key, layout_of_key
from schema.index_store import IndexStore
from schema.kinds import EdgeKind, NodeKind
from schema.packed_graph import PackedGraph


@dataclass
class Reach:
    """What a set of start nodes reaches: parents for explanations, kinds and keys (function
    labels once ``fill_labels`` has read them)."""

    parent: dict[int, tuple[int, EdgeKind, str]] = field(default_factory=dict)  # node -> (parent, edge kind, detail)
    depth: dict[int, int] = field(default_factory=dict)
    kind: dict[int, NodeKind] = field(default_factory=dict)
    key: dict[int, str] = field(default_factory=dict)
    label: dict[int, str] = field(default_factory=dict)
    edges: list[tuple[int, int]] = field(default_factory=list)  # (dst, src) explored
    truncated: bool = False
    hubs: set[int] = field(default_factory=set)  # operators whose many callers were not followed
    into_benchmark: dict[int, set[str]] = field(default_factory=dict)  # benchmark -> details of edges into it
    into_op: list[tuple[int, int, EdgeKind, str]] = field(default_factory=list)  # explored edges into ops
    # a Python function calling a bound C++ function the walk reached -> (that function, edge detail):
    # reached, not walked on from (the Python lines that call it tell which tests run it)
    bound_callers: dict[int, set[tuple[int, str]]] = field(default_factory=dict)
    _by_kind: dict[NodeKind, list[int]] = field(default_factory=dict, repr=False, compare=False)
    _grouped_at: int = field(default=-1, repr=False, compare=False)  # len(kind) when _by_kind was grouped
    _adjacent: dict[bool, tuple[int, dict[int, list[int]]]] = field(default_factory=dict, repr=False, compare=False)

    def layouts(self) -> dict[int, set[str]]:
        """op -> the tensor layouts of the kernels the walk reached it through (dense,
        quantized, sparse, nested; 'any' for composites), over every explored path."""
        return self._per_op(layout_of_key, "any")

    def devices(self) -> dict[int, set[str]]:
        """op -> the device families of the kernels the walk reached it through (cpu, cuda,
        vulkan...; '' for composites and device-neutral keys), over every explored path."""
        return self._per_op(device_of_key, "")

    def _per_op(self, of_key: Callable[[str], str], neutral: str) -> dict[int, set[str]]:
        """op -> ``of_key`` of the dispatch keys of the registrations the walk reached it
        through (``neutral`` through a call), an op delegating to another taking that op's."""
        out: dict[int, set[str]] = {}
        follow: list[tuple[int, int]] = []
        for dst, src, ekind, detail in self.into_op:
            if ekind in (EdgeKind.KERNEL, EdgeKind.LIBRARY_IMPL, EdgeKind.STUB_NAME):
                out.setdefault(src, set()).add(of_key(detail))
            elif ekind in (EdgeKind.STRUCTURED_DELEGATE, EdgeKind.AUTOGEN):
                follow.append((dst, src))
            else:
                out.setdefault(src, set()).add(neutral)
        changed = True
        while changed:  # an op delegating to another has what that op was reached with
            changed = False
            for dst, src in follow:
                new = out.get(dst, {neutral}) - out.get(src, set())
                if new:
                    out.setdefault(src, set()).update(new)
                    changed = True
        return out

    def up(self) -> dict[int, list[int]]:
        """node -> the nodes the walk went on to from it (its callers, registrations, operators)."""
        return self._adjacency(up=True)

    def down(self) -> dict[int, list[int]]:
        """node -> the explored nodes it was reached from (toward the start nodes)."""
        return self._adjacency(up=False)

    def _adjacency(self, up: bool) -> dict[int, list[int]]:
        cached = self._adjacent.get(up)
        if cached is not None and cached[0] == len(self.edges):  # edges are only appended
            return cached[1]
        out: dict[int, list[int]] = {}
        for dst, src in self.edges:
            a, b = (dst, src) if up else (src, dst)
            out.setdefault(a, []).append(b)
        self._adjacent[up] = (len(self.edges), out)
        return out

    def nodes_of(self, kind: NodeKind) -> list[int]:
        if self._grouped_at != len(self.kind):  # nodes are only added, and keep their kind
            self._by_kind.clear()
            for n, k in self.kind.items():
                self._by_kind.setdefault(k, []).append(n)
            self._grouped_at = len(self.kind)
        return list(self._by_kind.get(kind, ()))

    def chain_nodes(self, ends: list[int]) -> set[int]:
        """Every node on the chains from the start nodes to ``ends``."""
        return {n for end in ends for n, _, _ in self.chain(end)}

    def chain(self, node: int) -> list[tuple[int, EdgeKind | None, str]]:
        """(node, edge kind that led to it, detail) from the start node (kind None) to ``node``."""
        out = []
        seen = set()
        while node in self.parent and node not in seen:
            seen.add(node)
            parent, kind, detail = self.parent[node]
            out.append((node, kind, detail))
            node = parent
        out.append((node, None, ""))
        return list(reversed(out))


_REGISTRATIONS = frozenset((EdgeKind.KERNEL, EdgeKind.REGISTERED, EdgeKind.LIBRARY_IMPL))


def walk_up(
    store: IndexStore,
    starts: dict[int, str],
    max_depth: int,
    composite_hops: int | None = None,
    hub_fanout: int | None = None,
    backends: dict[str, set[str]] | None = None,
) -> Reach:
    """Breadth-first walk from ``starts`` (node -> device family, '' = any) along
    reach_edges (dst -> src), read from the packed graph. A path that has committed to a
    device (a CPU kernel file, a CPU dispatch key) does not cross a registration for
    another device. Benchmark nodes are reached but not expanded, nor are the Python
    functions calling a C++ function through its binding (``bound_callers``). ``composite_hops``
    bounds how many times a path may go from an operator into C++ code that calls it
    (composite ops, other kernels; an upstream composite op seen running it: UPSTREAM_COMPOSITE);
    None: no bound, 0: only the overload family, Python
    and benchmarks. With ``hub_fanout``, an operator called from more C++ functions than
    that (mul, cat, sum...) is a hub: the walk does not fan out into its callers, and
    records it in ``hubs``; past a composite step, neither does a function called from
    more C++ functions than that (the changed code's own callers are always followed)."""
    r = Reach()
    backends = op_backends(store) if backends is None else backends
    # per node, the best state it was reached with: (device family, composite hops used)
    state: dict[int, tuple[str, int]] = {node: (dev, 0) for node, dev in starts.items()}
    frontier = sorted(starts)
    for row in store.describe(frontier):
        r.kind[row.id], r.key[row.id], r.label[row.id] = row.kind, row.key, row.label
        r.depth[row.id] = 0
    walk = _Walk(store.graph(), r, state, composite_hops, hub_fanout, backends)
    depth = 0
    while frontier:
        if depth >= max_depth:
            r.truncated = True
            break
        depth += 1
        nxt: list[int] = []
        for dst in frontier:
            walk.step(dst, depth, nxt)
        frontier = sorted(set(nxt))
    return r


class _Walk:
    """One walk_up over the packed graph, filling ``r`` and ``state``: edge and node kinds
    compared by their codes, names looked up only for the edges and nodes that need them."""

    def __init__(
        self,
        g: PackedGraph,
        r: Reach,
        state: dict[int, tuple[str, int]],
        composite_hops: int | None,
        hub_fanout: int | None,
        backends: dict[str, set[str]],
    ) -> None:
        self.r, self.state = r, state
        self.composite_hops, self.hub_fanout, self.backends = composite_hops, hub_fanout, backends
        self.offsets, self.src, self.detail_of, self.node_kind = g.offsets, g.src, g.detail, g.node_kind
        self.kinds = bytes(g.kind)  # a kind is one byte: ``count`` and ``in`` over a run are C loops
        self.edge_kinds, self.details, self.node_kinds, self.keys = g.edge_kinds, g.details, g.node_kinds, g.keys
        ek, nk = g.edge_codes, g.node_codes
        self.call, self.kernel, self.op_call, self.backward, self.binding, self.upstream = (
            ek.get(k, -1)
            for k in (
                EdgeKind.CALL,
                EdgeKind.KERNEL,
                EdgeKind.OP_CALL,
                EdgeKind.BACKWARD,
                EdgeKind.PYTHON_BINDING,
                EdgeKind.UPSTREAM_COMPOSITE,
            )
        )
        self.registrations = frozenset(ek[k] for k in _REGISTRATIONS if k in ek)
        self.function, self.op, self.benchmark = (
            nk.get(k, -1) for k in (NodeKind.FUNCTION, NodeKind.OP, NodeKind.BENCHMARK)
        )

    def key(self, node: int) -> str:
        key = self.keys.get(node)
        return str(node) if key is None else key

    def fanout(self, lo: int, hi: int, kernel_fn: bool, callers: int) -> int:
        """C++ functions calling an operator (or its kernel function), among the edges ``lo`` to ``hi`` - 1."""
        kinds, src, node_kind, op_call, function = self.kinds, self.src, self.node_kind, self.op_call, self.function
        n = sum(1 for i in range(lo, hi) if kinds[i] == op_call and node_kind[src[i]] == function)
        return n + callers if kernel_fn else n

    def step(self, dst: int, depth: int, nxt: list[int]) -> None:
        """Follow the edges into ``dst`` (reached at ``depth`` - 1), adding the nodes to walk on from to ``nxt``."""
        lo, hi = self.offsets[dst], self.offsets[dst + 1]
        if lo == hi:
            return
        r, state, composite_hops, hub_fanout = self.r, self.state, self.composite_hops, self.hub_fanout
        run = self.kinds[lo:hi]
        call, kernel, op_call, backward, function = self.call, self.kernel, self.op_call, self.backward, self.function
        op, benchmark, registrations = self.op, self.benchmark, self.registrations
        kernel_fn = kernel >= 0 and kernel in run  # the kernel of an operator (-1: no such edge in the graph)
        callers = run.count(call) if call >= 0 else 0
        fanout = None
        node_kind, details, edge_kinds, node_kinds, keys = (
            self.node_kind, self.details, self.edge_kinds, self.node_kinds, self.keys
        )
        depth_of, parent, kind_of, key_of, label_of = r.depth, r.parent, r.kind, r.key, r.label
        add_edge = r.edges.append
        dst_dev, dst_hops = state[dst]  # an edge into dst from dst itself never widens it
        for src, ekind, detail in zip(self.src[lo:hi], run, self.detail_of[lo:hi], strict=True):
            nkind = node_kind[src]
            dev, hops = dst_dev, dst_hops
            if ekind == call:
                if hops and hub_fanout is not None and callers > hub_fanout:
                    continue  # past an operator's callers, a utility called from everywhere (size, data_ptr) stops
                composite = kernel_fn  # calling an operator's kernel function directly is a composite step
            elif ekind == self.upstream:  # an upstream composite op seen running dst: as its C++ call would be
                if dev and dev in self.backends.get(self.key(src), ()):
                    continue  # the op has its own kernel on this device, not the composite
                composite = True
            else:
                composite = ekind == op_call and nkind == function  # calling an operator through its API
            if composite or ekind == backward:
                hops += 1
                if composite_hops is not None and hops > composite_hops:
                    continue
                if hub_fanout is not None:
                    fanout = self.fanout(lo, hi, kernel_fn, callers) if fanout is None else fanout
                    if fanout > hub_fanout:
                        r.hubs.add(dst)
                        continue
            elif ekind in registrations:
                edge_dev = device_of_key(details[detail])
                if dev and edge_dev and edge_dev != dev:
                    continue  # a CPU change does not reach an op through its CUDA registration
                if dev and not edge_dev and ekind == kernel and dev in self.backends.get(self.key(src), ()):
                    continue  # a composite kernel the op does not use on this device (it has its own)
                dev = dev or edge_dev
            add_edge((dst, src))
            if nkind == op:
                r.into_op.append((dst, src, edge_kinds[ekind], details[detail]))
            elif nkind == benchmark:
                r.into_benchmark.setdefault(src, set()).add(details[detail])
            bound = ekind == self.binding
            if bound:
                r.bound_callers.setdefault(src, set()).add((dst, details[detail]))
            if src in depth_of:
                old_dev, old_hops = state[src]
                if (old_dev and not dev) or hops < old_hops:
                    # reached again with a wider device or fewer composite hops: walk on from there
                    state[src] = ("" if not dev or not old_dev else old_dev, min(hops, old_hops))
                    if nkind != benchmark and src not in r.bound_callers:
                        nxt.append(src)
                continue
            state[src] = (dev, hops)
            depth_of[src] = depth
            parent[src] = (dst, edge_kinds[ekind], details[detail])
            kind_of[src] = node_kinds[nkind]
            key = keys.get(src)
            key_of[src] = label_of[src] = str(src) if key is None else key
            if nkind != benchmark and not bound:
                nxt.append(src)


def fill_labels(store: IndexStore, chains: list[tuple[Reach, set[int]]]) -> None:
    """The qualified names of the functions among the given nodes of each walk (walks know
    functions by id only), read in one query."""
    functions = (NodeKind.FUNCTION, NodeKind.PYFUNCTION)
    wanted = [(r, {n for n in nodes if r.kind.get(n) in functions}) for r, nodes in chains]
    labels = store.labels(sorted(set().union(*(nodes for _, nodes in wanted))))
    for r, nodes in wanted:
        r.label.update((n, labels[n]) for n in nodes)


def op_backends(store: IndexStore) -> dict[str, set[str]]:
    """op -> device families that have a backend kernel of their own (CPU, CUDA...)."""
    out: dict[str, set[str]] = {}
    for op, key in store.kernel_keys(["CPU", "CUDA", "MPS", "XPU", "HIP"]):
        out.setdefault(op, set()).add(device_of_key(key))
    return out


def reaching_benchmarks(r: Reach) -> set[int]:
    """Nodes of the explored graph from which some benchmark is reachable."""
    return closure(r.down(), set(r.nodes_of(NodeKind.BENCHMARK)))


def closure(adjacency: dict[int, list[int]], nodes: set[int]) -> set[int]:
    """``nodes`` and every node ``adjacency`` leads to from them."""
    seen, todo = set(nodes), list(nodes)
    while todo:
        for nxt in adjacency.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
