"""A shared change's static selection of a benchmark no test of which could run.

``qembedding_bag_lookups_test`` (PyTorch 2.6.0) calls ``torch.ops.load_library`` of an internal
library at import: its trace fails before its first test, and neither the tracer nor a run ever
reaches its timed region. Shared infrastructure (``at::parallel_for``, the CPU allocator,
``c10::irange``) reaches its quantized operators statically, as it reaches almost every
operator; that chain says nothing about what runs, so a shared change leaves it out. A narrow
change (``embedding_bag_byte_impl`` itself) keeps it: there the static chain is the evidence.
"""

from __future__ import annotations

from query.affected import Selected, _runnable_only
from query.document import Confidence, Reason, SelectedBenchmark, Source
from schema.index_store import BenchmarkInfo


def _bench(name: str, status: str) -> BenchmarkInfo:
    return BenchmarkInfo(name, f"benchmarks/operator_benchmark/pt/{name}.py", "operator_benchmark", ("cpu",), status)


def _selected(name: str, source: Source) -> SelectedBenchmark:
    return SelectedBenchmark(name, f"benchmarks/operator_benchmark/pt/{name}.py", (), (), ("op",), ("eager",),
                             ("cpu",), Confidence.high, source, (Reason("f", ()),))


def _selection(*benchmarks: SelectedBenchmark) -> Selected:
    return Selected(list(benchmarks), {}, [], False, [], [], [])


BENCHES = {
    "lookups": _bench("lookups", "failed"),  # fails at import
    "untraced": _bench("untraced", ""),  # an index built without traces
    "add_test": _bench("add_test", "ok"),
    "pool_test": _bench("pool_test", "partial"),
}


def test_a_static_selection_of_a_benchmark_whose_trace_ran_no_test_is_dropped():
    sel = _selection(_selected("add_test", Source.traced), _selected("lookups", Source.static))
    out = _runnable_only(sel, BENCHES)
    assert [b.name for b in out.benchmarks] == ["add_test"]
    assert out.warnings == ["shared infrastructure: lookups not selected: reached only statically, and no test"
                            " of it ran when traced"]


def test_traced_partial_untraced_and_non_static_selections_stay():
    sel = _selection(
        _selected("add_test", Source.static),  # a Python path into a traced benchmark
        _selected("pool_test", Source.static),
        _selected("untraced", Source.static),  # no trace at all: static reach is all there is
        _selected("lookups", Source.changed),  # its own file changed
    )
    out = _runnable_only(sel, BENCHES)
    assert out is sel
