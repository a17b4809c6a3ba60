"""The facts `perfq coverage` needs, read from the index through :class:`schema.index_store.IndexStore`."""

from __future__ import annotations

from collections import defaultdict

from perfq.coverage.report import CoverageFacts, LinkSource, Overload
from schema.engine import duckdb
from schema.index_store import IndexStore


def load_facts(con: duckdb.DuckDBPyConnection) -> CoverageFacts:
    """Operators with their dispatch keys and kernel functions, kernel sizes and paths, benchmark links."""
    store = IndexStore(con)
    keys: dict[str, set[str]] = defaultdict(set)
    kfuncs: dict[str, set[int]] = defaultdict(set)
    for k in store.kernels():
        keys[k.op].add(k.dispatch_key)
        if k.function_id is not None:
            kfuncs[k.op].add(k.function_id)
    facts = CoverageFacts()
    for op in store.ops():
        op_keys = set(keys.get(op.name, ()))
        if op.composite:
            op_keys.add(op.composite)
        facts.ops[op.name] = Overload(
            name=op.name,
            base=op.base,
            overload=op.overload or "",
            namespace=op.namespace,
            schema=op.schema,
            dispatch_keys=tuple(sorted(op_keys)),
            kernel_functions=tuple(sorted(kfuncs.get(op.name, ()))),
        )
    for size in store.kernel_sizes():
        facts.function_lines[size.function_id] = size.lines
        facts.function_paths[size.function_id] = size.path
        facts.function_starts[size.function_id] = size.start_line
    for bench in store.benchmark_files():
        facts.bench_files[bench.name] = bench.file
        facts.bench_ops.setdefault(bench.name, set())
    for op, layouts in store.traced_layouts(sorted(facts.ops)).items():
        facts.traced_layouts[op] = set(layouts)
    seen = store.seen_by_trace()
    for link in store.bench_ops():
        facts.bench_ops.setdefault(link.bench, set()).add(link.op)
        source = _source(link.bench, link.op, link.source, facts, seen)
        facts.link_sources.setdefault((link.bench, link.op), set()).add(source)
    return facts


def _source(bench: str, op: str, source: str, facts: CoverageFacts, seen: set[tuple[str, str, str]]) -> str:
    """A trace link is ``traced`` only when a trace saw the operator run; ``inferred`` when the trace
    only inferred it (inside an upstream operator, or called by the repo's kernel for another device)."""
    if source != LinkSource.traced.value:
        return source
    fact = facts.ops.get(op)
    if fact is None or (bench, fact.namespace, fact.base) in seen:
        return source
    return LinkSource.inferred.value
