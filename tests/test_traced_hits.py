"""The traced tests a change's operators are executed by, as the index store reads them: one
hit per benchmark, operator and what its tests share (module, device, mode, why inferred),
its tests named once each, in the order of their names; a tensor layout the change does not
reach is no hit."""

from __future__ import annotations

import duckdb

from indexer.rules.traces import numbered_tests
from schema.index_store import IndexStore
from schema.writer import index_ddl

OPS = [  # name, base, overload, namespace
    ("add.Tensor", "add", "Tensor", "aten"),
    ("add.out", "add", "out", "aten"),
    ("mul.Tensor", "mul", "Tensor", "aten"),
    ("add", "add", "", "quantized"),
]
TESTS = [  # bench, test, module, class, tag, backward, device, mode, kernels_seen
    ("binary_test", "add_M8_cpu", "add", "AddBenchmark", "short", False, "cpu", "real", True),
    ("binary_test", "add_M8_cpu", "add", "AddBenchmark", "long", False, "cpu", "real", True),  # a copy by tag
    ("binary_test", "add_M64_cpu", "add", "AddBenchmark", "long", False, "cpu", "sampled", True),
    ("binary_test", "add_M8_cuda", "add", "AddBenchmark", "short", False, "cuda", "meta", False),
    ("binary_test", "mul_M8_cpu", "mul", "MulBenchmark", "short", False, "cpu", "real", True),
    ("aa_test", "qadd_cpu", "qadd", "QAddBenchmark", "short", False, "cpu", "inferred", False),
]
TRACE_OPS = [  # bench, test, namespace, base, layout, inferred, in_kernel
    ("binary_test", "add_M8_cpu", "aten", "add", "dense", "", False),
    ("binary_test", "add_M8_cpu", "aten", "mul", "dense", "", True),  # only inside add's kernel
    ("binary_test", "add_M64_cpu", "aten", "add", "dense", "", False),
    ("binary_test", "add_M8_cuda", "aten", "add", "dense", "", False),
    ("binary_test", "mul_M8_cpu", "aten", "mul", "dense", "", False),
    ("aa_test", "qadd_cpu", "quantized", "add", "quantized", "its module's real tests run it", False),
    ("aa_test", "qadd_cpu", "aten", "add", "quantized", "its module's real tests run it", False),
]


def _store() -> IndexStore:
    con = duckdb.connect()
    con.execute(index_ddl())
    con.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, '', false, NULL, 'function', '', NULL)", OPS)
    con.executemany("INSERT INTO bench_tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", numbered_tests(TESTS))
    con.executemany("INSERT INTO trace_ops VALUES (?, ?, ?, ?, ?, ?, ?)", TRACE_OPS)
    return IndexStore(con)


def test_hits_group_tests_by_what_they_share_and_name_each_test_once():
    (hits,) = _store().traced_hits([(["add.Tensor", "add.out"], None)])
    assert [(h.bench, h.tests, h.mode, h.device, h.ops) for h in hits] == [
        ("aa_test", ("qadd_cpu",), "inferred", "cpu", ("add.Tensor", "add.out")),
        ("binary_test", ("add_M64_cpu",), "sampled", "cpu", ("add.Tensor", "add.out")),
        ("binary_test", ("add_M8_cpu",), "real", "cpu", ("add.Tensor", "add.out")),
        ("binary_test", ("add_M8_cuda",), "meta", "cuda", ("add.Tensor", "add.out")),
    ]
    assert hits[0].inferred == "its module's real tests run it" and not hits[0].kernels_seen
    assert hits[2].inferred == "" and hits[2].kernels_seen


def test_hits_of_several_requests_and_layouts_from_one_read():
    store = _store()
    dense_add, both = store.traced_hits(
        [(["add.Tensor"], {"add.Tensor": {"dense"}}), (["mul.Tensor", "add"], None)]
    )
    assert {h.bench for h in dense_add} == {"binary_test"}  # the quantized test's add is not the dense kernel's
    assert [(h.bench, h.tests, h.ops) for h in both] == [
        ("aa_test", ("qadd_cpu",), ("add",)),
        ("binary_test", ("add_M8_cpu",), ("mul.Tensor",)),
        ("binary_test", ("mul_M8_cpu",), ("mul.Tensor",)),
    ]
    assert store.traced_hits([([], None)]) == [[]]


def test_graph_level_hits_leave_out_operators_run_only_inside_kernels():
    """What torch.compile's graph holds: an operator a test ran only inside another's kernel is
    not lowered there (a lowering of mul does not change add_M8_cpu)."""
    (everywhere,), (graph,) = (_store().traced_hits([(["mul.Tensor"], None)], graph_level=g) for g in (False, True))
    assert {h.tests for h in everywhere} == {("add_M8_cpu",), ("mul_M8_cpu",)}
    assert [h.tests for h in graph] == [("mul_M8_cpu",)]
