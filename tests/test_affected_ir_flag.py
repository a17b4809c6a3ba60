"""The "IR changed" flag of `perfq affected`: benchmarks whose Triton kernels' IR changed."""

from __future__ import annotations

from perfq.query.affected import flag_ir_changes


def _doc() -> dict:
    return {"benchmarks": [{"name": "softmax_test"}, {"name": "add_test"}, {"name": "sum_test"}]}


def test_kernels_of_the_benchmark_module_and_of_the_config_map():
    changed = {"pt.softmax_test:softmax_kernel", "kernels.reduce:sum_kernel", "other:unrelated"}
    doc = flag_ir_changes(_doc(), changed, {"sum_test": ["kernels.reduce:sum_kernel"]})
    flags = {b["name"]: b["ir_changed"] for b in doc["benchmarks"]}
    assert flags == {
        "softmax_test": ["pt.softmax_test:softmax_kernel"],
        "add_test": [],
        "sum_test": ["kernels.reduce:sum_kernel"],
    }
    assert doc["ir_changed_kernels"] == sorted(changed)


def test_no_changed_kernels_flags_nothing():
    doc = flag_ir_changes(_doc(), set(), {"sum_test": ["kernels.reduce:sum_kernel"]})
    assert all(b["ir_changed"] == [] for b in doc["benchmarks"])
