"""A test traced on shapes only (fake or meta tensors, or sampled from a size group) takes the
operators its module's real tests ran inside kernels (``group_ops``: fake kernels run nothing
inside them); it takes the dtypes those real tests ran them on too, with its own calls' dtypes
(a long half config borrowing from short float ones keeps half). Round six's
``fill_non_native_type`` (Half, BFloat16, ComplexHalf, Float8 only): add_test's long backward
tests run ``fill_`` inside ``ones_like`` only by borrowing it from the float32 short ones, and
without a dtype they stayed selected for a half-only change."""

from __future__ import annotations

from indexer.rules.traces import dtype_rows
from indexer.trace import TracedTest, TraceMode


def _test(name: str, mode: TraceMode, ops: tuple[str, ...], *dtypes: str, module: str = "add") -> TracedTest:
    return TracedTest(name, module, "AddBenchmark", "short", True, "cpu", mode, ops, dtypes=dtypes)


REAL = _test("add_M1_bwd", TraceMode.real, ("aten::add", "aten::ones_like", "aten::fill_"),
             "aten::add|float32", "aten::ones_like|float32", "aten::fill_|float32")


def test_a_shapes_only_test_borrows_the_dtypes_of_the_operators_it_borrows():
    fake = _test("add_M128_bwd", TraceMode.sampled, ("aten::add", "aten::ones_like"),
                 "aten::add|float32", "aten::ones_like|float32")
    rows = dtype_rows("add_test", [REAL, fake])
    assert ("add_test", "add_M128_bwd", "aten", "fill_", "dense", "float32") in rows
    assert [r for r in rows if r[1] == "add_M128_bwd" and r[3] == "fill_"] == [
        ("add_test", "add_M128_bwd", "aten", "fill_", "dense", "float32")]


def test_its_own_dtypes_join_the_borrowed_ones():
    half = _test("add_M128_half_bwd", TraceMode.meta, ("aten::add",), "aten::add|float16")
    rows = dtype_rows("add_test", [REAL, half])
    assert sorted(r[5] for r in rows if r[1] == "add_M128_half_bwd" and r[3] == "fill_") == ["float16", "float32"]


def test_nothing_is_borrowed_across_modules_or_from_tests_that_did_not_run():
    other = _test("sub_M128_bwd", TraceMode.sampled, ("aten::sub",), "aten::sub|float32", module="sub")
    fake_only = _test("add_M128_bwd", TraceMode.meta, ("aten::add",), "aten::add|float32")
    assert not [r for r in dtype_rows("add_test", [REAL, other]) if r[1] == "sub_M128_bwd" and r[3] == "fill_"]
    assert not [r for r in dtype_rows("add_test", [fake_only]) if r[3] == "fill_"]
