"""The index of the fixture tree: every construct becomes the exact facts expected."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from schema.version import SCHEMA_VERSION
from tests.aten_fixture import make_repo


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, duckdb.DuckDBPyConnection]:
    repo = make_repo(tmp_path_factory.mktemp("repo"))
    db = repo / ".git" / "perfq" / "index.duckdb"
    build_index(repo, Config(), db, jobs=2, quiet=True)
    con = duckdb.connect(str(db), read_only=True)
    yield repo, con
    con.close()


def q(con: duckdb.DuckDBPyConnection, sql: str, *params) -> list[tuple]:
    return con.execute(sql, list(params)).fetchall()


def test_functions_with_kinds_and_qualified_names(indexed):
    _, con = indexed
    rows = dict(q(con, "SELECT qualname, kind FROM functions"))
    assert rows["at::native::softmax_op_cpu_out"] == "structured_impl"
    assert rows["at::meta::softmax_op"] == "structured_meta"
    assert rows["at::native::(anonymous namespace)::softmax_op_kernel_impl"] == "function"
    assert rows["at::native::softmax_op_cuda_kernel"] == "global_kernel"
    assert rows["torch.nn.functional.fancy_softmax"] == "python"
    # clang drops this template (std::optional without headers): the text scan recovers it
    assert any(k.startswith("at::native::(anonymous namespace)::inner_loop") for k in rows)


def test_internal_linkage(indexed):
    _, con = indexed
    internal = dict(q(con, "SELECT name, internal FROM functions WHERE name IN ('make_size', 'fancy')"))
    assert internal == {"make_size": True, "fancy": False}


def test_calls_through_dispatch_lambda_and_template_args(indexed):
    _, con = indexed
    edges = q(
        con,
        """SELECT a.name, b.name FROM call_edges e JOIN functions a ON a.id = e.caller_id
                      JOIN functions b ON b.id = e.callee_id""",
    )
    assert ("softmax_op_kernel_impl", "inner_loop") in edges
    assert ("lonely_kernel", "make_size") in edges


def test_dispatch_stub_declare_define_register(indexed):
    _, con = indexed
    roles = {
        (s, r, p.rsplit("/", 1)[-1])
        for s, r, p in q(con, "SELECT s.stub, s.role, f.path FROM stubs s JOIN files f ON f.id = s.file_id")
    }
    assert ("softmax_op_stub", "declare", "SoftmaxOp.h") in roles  # a DECLARE_DISPATCH over three lines
    assert ("softmax_op_stub", "define", "SoftmaxOp.cpp") in roles
    impls = q(
        con,
        """SELECT s.arch, s.impl_name, fn.name FROM stub_impls s
                      JOIN functions fn ON fn.id = s.function_id WHERE s.stub = 'softmax_op_stub'""",
    )
    assert impls == [("CPU", "softmax_op_kernel_impl", "softmax_op_kernel_impl")]


def test_native_functions_kernels_and_structured_delegate(indexed):
    _, con = indexed
    kernels = {
        (op, key): name
        for op, key, name in q(
            con, """SELECT k.op, k.dispatch_key, f.qualname FROM kernels k JOIN functions f ON f.id = k.function_id"""
        )
    }
    assert kernels[("softmax_op.out", "CPU")] == "at::native::softmax_op_cpu_out"
    assert kernels[("softmax_op.out", "CUDA")] == "at::native::softmax_op_cuda_out"
    assert kernels[("lonely", "CPU")] == kernels[("lonely", "CUDA")] == "at::native::lonely_kernel"
    assert kernels[("composite_thing", "CompositeImplicitAutograd")] == "at::native::composite_thing"
    assert q(con, "SELECT op, caller_op, kind FROM op_edges WHERE kind = 'structured_delegate'") == [
        ("softmax_op.out", "softmax_op", "structured_delegate")
    ]
    ops = dict(q(con, "SELECT name, structured FROM ops WHERE namespace = 'aten'"))
    assert ops == {
        "softmax_op": False,
        "softmax_op.out": True,
        "fancy": False,
        "lonely": False,
        "composite_thing": False,
    }


def test_library_registrations(indexed):
    _, con = indexed
    rows = q(
        con,
        """SELECT l.namespace, l.dispatch_key, l.op, f.name FROM library_impls l
                     JOIN functions f ON f.id = l.function_id""",
    )
    assert rows == [("quantized", "QuantizedCPU", "quantized::qthing", "qthing_impl")]
    assert q(con, "SELECT name, namespace FROM ops WHERE namespace = 'quantized'") == [
        ("quantized::qthing", "quantized")
    ]


def test_op_calls_from_cpp_and_python(indexed):
    _, con = indexed
    calls = {
        (f, op) for f, op in q(con, "SELECT f.name, o.op FROM op_calls o JOIN functions f ON f.id = o.function_id")
    }
    assert ("fancy", "softmax_op") in calls  # at::softmax_op in a composite kernel
    assert ("fancy", "softmax_op.out") in calls
    assert ("fancy_softmax", "softmax_op") in calls  # torch.softmax_op in Python


def test_benchmarks_tests_devices_and_links(indexed):
    _, con = indexed
    benches = {n: (json.loads(t), json.loads(d)) for n, t, d in q(con, "SELECT name, tests, devices FROM benchmarks")}
    assert set(benches) == {"softmax_op_test", "fancy_test", "qthing_test"}
    assert [t["name"] for t in benches["softmax_op_test"][0]] == ["SoftmaxOpBenchmark"]
    assert benches["softmax_op_test"][1] == ["cpu", "cuda"]
    links = set(q(con, "SELECT bench, op, source FROM bench_ops"))
    assert ("fancy_test", "fancy", "static") in links
    assert ("qthing_test", "quantized::qthing", "static") in links
    calls = q(con, """SELECT b.bench, f.qualname FROM bench_calls b JOIN functions f ON f.id = b.function_id""")
    assert calls == [("softmax_op_test", "torch.nn.functional.fancy_softmax")]


def test_meta_records_commit_and_timings(indexed):
    repo, con = indexed
    meta = dict(q(con, "SELECT key, value FROM meta"))
    assert len(meta["indexed_commit"]) == 40
    assert float(meta["time_extract"]) >= 0
    assert meta["schema_version"] == str(SCHEMA_VERSION)


def test_includes_resolved_to_indexed_headers(indexed):
    _, con = indexed
    rows = q(
        con,
        """SELECT f.path, i.target, h.path FROM includes i JOIN files f ON f.id = i.file_id
                     LEFT JOIN files h ON h.id = i.target_file_id""",
    )
    assert (
        "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp",
        "ATen/native/SoftmaxOp.h",
        "aten/src/ATen/native/SoftmaxOp.h",
    ) in rows
