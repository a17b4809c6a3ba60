"""The "IR changed" flag of `perfq affected`: benchmarks whose Triton kernels' IR changed."""

from __future__ import annotations

from query.document import AffectedDoc, Confidence, SelectedBenchmark, Source, flag_ir_changes


def _bench(name: str) -> SelectedBenchmark:
    return SelectedBenchmark(
        name, f"pt/{name}.py", (), (), (), ("eager",), ("cpu",), Confidence.high, Source.traced, ()
    )


def _doc() -> AffectedDoc:
    return AffectedDoc(
        base="a",
        head="b",
        compile_mode=False,
        shared_infrastructure=False,
        reach={},
        changed_functions=(),
        no_op_changes=(),
        benchmarks=tuple(_bench(n) for n in ("softmax_test", "add_test", "sum_test")),
        canary=(),
        ops=(),
        no_benchmark_ops=(),
        unmapped_changes=(),
        ignored_files=(),
        warnings=(),
    )


def test_kernels_of_the_benchmark_module_and_of_the_config_map():
    changed = {"pt.softmax_test:softmax_kernel", "kernels.reduce:sum_kernel", "other:unrelated"}
    doc = flag_ir_changes(_doc(), changed, {"sum_test": ["kernels.reduce:sum_kernel"]}).to_json()
    flags = {b["name"]: b["ir_changed"] for b in doc["benchmarks"]}
    assert flags == {
        "softmax_test": ["pt.softmax_test:softmax_kernel"],
        "add_test": [],
        "sum_test": ["kernels.reduce:sum_kernel"],
    }
    assert doc["ir_changed_kernels"] == sorted(changed)


def test_no_changed_kernels_flags_nothing():
    doc = flag_ir_changes(_doc(), set(), {"sum_test": ["kernels.reduce:sum_kernel"]}).to_json()
    assert all(b["ir_changed"] == [] for b in doc["benchmarks"])
