"""Dtype and dispatch key (issue 40 item 2): a changed kernel line inside an ``AT_DISPATCH_*``
lambda or an ``isReducedFloatingType``-style branch runs only for its dtypes, a QuantizedCPU
kernel only on quantized tensors; the traces record each operator call's dtype and layout, a
change selects the tests that ran its operators so, NO BENCHMARK and ``perfq coverage`` name
the gaps at that level, and the budget plan covers (operator, dispatch key, dtype) pairs with a
test of a timed size."""

from __future__ import annotations

import difflib
from dataclasses import replace

import duckdb
import pytest

from common.config import Config
from common.diff import parse_diff
from indexer.dtypes import V2_LISTS, DtypeClass, dtype_class, dtype_class_of_scalar_type, lines_scope
from indexer.rules.traces import dtype_rows, numbered_tests
from indexer.trace import TracedTest, TraceMode
from perfq.cli.render_affected import markdown, table
from perfq.coverage.report import CoverageFacts, Overload, build_report, gap_text
from perfq.run.plan import Candidate, CostSource, config_of, fit_plan
from perfq.run.plan_inputs import dtype_units
from perfq.run.plan_view import headline, left_out_lines
from query.changes import changed_functions
from query.document import DispatchGap
from query.dtype_gaps import change_scope, gaps, on_scope
from query.equivalent import dispatch_gain, words
from schema.index_store import IndexStore
from schema.writer import index_ddl
from tests.affected_docs import affected_doc

KERNEL = """\
void remainder_kernel(TensorIteratorBase& iter) {
  if (isIntegralType(iter.common_dtype(), /*includeBool*/ false)) {
    AT_DISPATCH_INTEGRAL_TYPES(iter.common_dtype(), "remainder_cpu", [&]() {
      cpu_kernel(iter, [](scalar_t a, scalar_t b) -> scalar_t {
        scalar_t r = a % b;
        return r;
      });
    });
  } else if (iter.common_dtype() == kBFloat16) {
    cpu_kernel(iter, [=](BFloat16 a, BFloat16 b) -> BFloat16 {
      float mod0 = std::fmod(float(a), float(b));
      return mod0;
    });
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(iter.common_dtype(), "remainder_cpu", [&]() {
      cpu_kernel(iter, [=](scalar_t a, scalar_t b) -> scalar_t { return std::fmod(a, b); });
    });
  }
  if (iter.numel() > 0 && isReducedFloatingType(iter.dtype())) {
    log_once();
  }
}

void fill_kernel(TensorIterator& iter) {
  AT_DISPATCH_V2(iter.dtype(), "fill_cpu", AT_WRAP([&]() {
      scalar_t value = 0;
    }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), kBool);
}
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(KERNEL.splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    ("code", "scope"),
    [
        ("scalar_t r = a % b;", {DtypeClass.integral}),  # an AT_DISPATCH_INTEGRAL_TYPES lambda
        ("float mod0 = std::fmod", {DtypeClass.reduced}),  # an `== kBFloat16` branch, no macro
        ("{ return std::fmod(a, b); }", {DtypeClass.floating, DtypeClass.reduced}),  # FLOATING_TYPES_AND_HALF
        ("scalar_t value = 0;", {DtypeClass.floating, DtypeClass.integral, DtypeClass.complex, DtypeClass.bool}),
        ("log_once();", None),  # a condition combined with && is not a dtype test
        ("void remainder_kernel", None),  # outside every dispatch construct: any dtype
    ],
)
def test_a_kernel_line_runs_for_the_dtypes_of_the_dispatch_constructs_around_it(code, scope):
    assert lines_scope(KERNEL, [_line(code)]) == (frozenset(scope) if scope else None)


def test_lines_of_two_branches_run_for_both_and_a_line_outside_for_any():
    both = lines_scope(KERNEL, [_line("scalar_t r = a % b;"), _line("float mod0")])
    assert both == {DtypeClass.integral, DtypeClass.reduced}
    assert lines_scope(KERNEL, [_line("scalar_t r = a % b;"), _line("void remainder_kernel")]) is None


def test_torch_dtype_names_fall_into_classes():
    assert [dtype_class(d) for d in ("int32", "uint8", "float32", "bfloat16", "bool", "complex64", "quint8")] == [
        DtypeClass.integral, DtypeClass.integral, DtypeClass.floating, DtypeClass.reduced, DtypeClass.bool,
        DtypeClass.complex, DtypeClass.quantized,
    ]
    assert dtype_class("Scalar") is None


def test_a_diffs_scope_reads_removed_lines_in_the_base_and_added_ones_in_the_head():
    head = KERNEL.replace("scalar_t r = a % b;", "scalar_t r = a - (a / b) * b;")
    diff = (
        "diff --git a/k.cpp b/k.cpp\n--- a/k.cpp\n+++ b/k.cpp\n"
        "@@ -5 +5 @@\n-        scalar_t r = a % b;\n+        scalar_t r = a - (a / b) * b;\n"
    )
    texts = {"k.cpp": KERNEL.encode()}
    assert change_scope(parse_diff(diff), texts.get, {"k.cpp": head.encode()}.get) == {DtypeClass.integral}
    python = diff.replace("k.cpp", "k.py")
    assert change_scope(parse_diff(python), {"k.py": b""}.get, {"k.py": b""}.get) is None


OPS = [("remainder.Tensor", "remainder", "Tensor", "aten"), ("leaky_relu", "leaky_relu", "", "aten"),
       ("leaky_relu.out", "leaky_relu", "out", "aten")]
TESTS = [  # bench, test, module, class, tag, backward, device, mode, kernels_seen
    *(("remainder_test", f"remainder_{sizes}_cpu_dtypetorch.{dtype}", "remainder", "R", "short", False, "cpu", "real",
       True) for sizes, dtype in (("M1_N1_K1", "int32"), ("M64_N64_K64", "int32"), ("M64_N64_K64", "float32"))),
    ("qactivation_test", "q_leaky_relu_cpu", "q_leaky_relu", "Q", "short", False, "cpu", "real", True),
]


def _traced(name: str, *dtypes: str) -> TracedTest:
    return TracedTest(name, "", "", "short", False, "cpu", TraceMode.real, (), dtypes=dtypes)


def _store() -> IndexStore:
    con = duckdb.connect()
    con.execute(index_ddl())
    con.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, '', false, NULL, 'function', '', NULL)", OPS)
    con.executemany("INSERT INTO bench_tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", numbered_tests(TESTS))
    trace_ops = [(b, t, "aten", "remainder", "dense", "", False) for b, t, *_ in TESTS[:3]]
    trace_ops.append(("qactivation_test", "q_leaky_relu_cpu", "aten", "leaky_relu", "quantized", "", False))
    con.executemany("INSERT INTO trace_ops VALUES (?, ?, ?, ?, ?, ?, ?)", trace_ops)
    rows = dtype_rows("remainder_test", [
        _traced(TESTS[0][1], "aten::remainder|int32"),
        _traced(TESTS[1][1], "aten::remainder|int32"),
        _traced(TESTS[2][1], "aten::remainder|float32"),
    ]) + dtype_rows("qactivation_test", [_traced("q_leaky_relu_cpu", "aten::leaky_relu@quantized|quint8")])
    con.executemany("INSERT INTO trace_dtypes VALUES (?, ?, ?, ?, ?, ?)", rows)
    return IndexStore(con)


def test_trace_dtype_rows_keep_the_layout_and_the_dtype_of_each_operator():
    assert dtype_rows("q", [_traced("t", "aten::leaky_relu@quantized|quint8", "aten::add|int64")]) == [
        ("q", "t", "aten", "add", "dense", "int64"),
        ("q", "t", "aten", "leaky_relu", "quantized", "quint8"),
    ]


def test_an_integer_path_change_keeps_the_tests_that_ran_the_operator_on_integers():
    store = _store()
    (hits,) = store.traced_hits([(["remainder.Tensor"], {"remainder.Tensor": {"dense"}})])
    dtypes = store.traced_dtypes(["remainder.Tensor"])
    kept = on_scope(hits, dtypes, frozenset({DtypeClass.integral}))
    assert [t for h in kept for t in h.tests] == [TESTS[0][1], TESTS[1][1]]
    assert on_scope(hits, dtypes, frozenset({DtypeClass.reduced})) == []
    assert on_scope(hits, dtypes, None) == hits
    # quantized code dispatches on its output's dtype (quantize_per_tensor takes floats): the layout decides
    assert on_scope(hits, dtypes, frozenset({DtypeClass.quantized})) == hits


def test_an_operator_benchmarked_only_on_quantized_tensors_is_a_gap_of_its_cpu_kernel():
    store = _store()
    ops = ["leaky_relu", "leaky_relu.out", "remainder.Tensor"]  # two overloads of leaky_relu: one gap
    dense = {op: {"dense"} for op in ops}
    found = gaps(ops, dense, frozenset({DtypeClass.floating}),
                 store.traced_layouts(ops), store.traced_dtypes(ops), "cpu")
    assert [g.text for g in found] == [
        "leaky_relu, CPU, floating: NO BENCHMARK (benchmarked only on QuantizedCPU)",
    ]
    bf16 = gaps(["remainder.Tensor"], {"remainder.Tensor": {"dense"}}, frozenset({DtypeClass.reduced}),
                store.traced_layouts(ops), store.traced_dtypes(ops), "cpu")
    assert [g.text for g in bf16] == [
        "remainder, CPU, reduced-floating: NO BENCHMARK (benchmarked only on CPU floating, integral)",
    ]
    quantized = gaps(["leaky_relu"], {"leaky_relu": {"quantized"}}, frozenset({DtypeClass.quantized}),
                     store.traced_layouts(ops), store.traced_dtypes(ops), "cpu")
    assert quantized == []


def test_coverage_lists_an_operator_run_only_on_another_dispatch_key_as_no_benchmark():
    facts = CoverageFacts()
    facts.ops["leaky_relu"] = Overload(name="leaky_relu", base="leaky_relu", overload="", namespace="aten",
                                       schema="", dispatch_keys=("CPU", "CUDA", "QuantizedCPU"))
    facts.bench_files = {"qactivation_test": "q.py", "relu_test": "r.py"}
    facts.bench_ops = {"qactivation_test": {"leaky_relu", "relu"}, "relu_test": {"relu"}}
    facts.link_sources = {(b, op): {"traced"} for b, ops in facts.bench_ops.items() for op in ops}
    facts.traced_layouts = {"leaky_relu": {"quantized"}, "relu": {"quantized", "dense"}}
    facts.ops["relu"] = Overload(name="relu", base="relu", overload="", namespace="aten", schema="",
                                 dispatch_keys=("CPU", "QuantizedCPU", "SparseCPU"))
    rows = {r.op: r for r in build_report(facts, None).rows}
    assert not rows["leaky_relu"].covered and rows["relu"].covered  # relu's CPU kernel runs; SparseCPU's is noted
    assert rows["relu"].gap_keys == ("SparseCPU",) and rows["leaky_relu"].gap_keys == ("CPU",)
    assert gap_text(rows["leaky_relu"]) == "NO BENCHMARK on CPU (benchmarked only on QuantizedCPU)"
    facts.link_sources[("qactivation_test", "leaky_relu")] = {"static"}  # an untraced link: not judged
    assert {r.op: r for r in build_report(facts, None).rows}["leaky_relu"].covered


def _candidate(test: str, units: frozenset[str]) -> Candidate:
    elements = 262_144 if "M64" in test else 1
    return Candidate("remainder_test", test, "remainder", frozenset({"remainder.Tensor"}), config_of(test, "cpu"),
                     0.2 + elements * 1e-7, CostSource.default, units=units)


def test_the_plan_covers_pairs_with_a_test_of_a_timed_size():
    store = _store()
    units = dtype_units(store.traced_dtypes(["remainder.Tensor"]))
    assert units[("remainder_test", TESTS[0][1])] == {"remainder [CPU, integral]"}
    candidates = [_candidate(t, units[("remainder_test", t)]) for _, t, *_ in TESTS[:3]]
    plan = fit_plan(candidates, 1, budget_seconds=60)
    covers = [t.test for t in plan.tests if t.pick.value == "covers"]
    assert sorted(covers) == [TESTS[2][1], TESTS[1][1]]  # the 64x64x64 int32 test, not the 1-element one
    assert (plan.pairs_covered, plan.pairs_executable, plan.coverage) == (2, 2, 1.0)
    assert "of the (operator, dispatch key, dtype) pairs some benchmark executes" in headline(plan)
    tight = fit_plan(candidates, 1, budget_seconds=37.5)  # one test and its process fit: the other pair is named
    assert tight.pairs_covered == 1 and any("pairs not run (over budget)" in line for line in left_out_lines(tight))
    ints = fit_plan(candidates[:2], 1, budget_seconds=60)  # an integer-path change: integer tests only
    assert [t.test for t in ints.tests if t.pick.value == "covers"] == [TESTS[1][1]]


@pytest.mark.torch
def test_the_tracer_records_the_dtype_and_layout_of_each_operator_call():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from indexer.trace_driver import _MARK, _dtypes_per_marker, _markers, _ops_per_marker

    ints = torch.arange(1, 9, dtype=torch.int32)
    quantized = torch.quantize_per_tensor(torch.rand(8) - 0.5, 0.1, 0, torch.quint8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.profiler.record_function(f"{_MARK}0"):
            torch.remainder(ints, 3)
            torch.where(ints > 2, ints.double(), 0.0)  # a bool mask first: the values' dtype counts too
        with torch.profiler.record_function(f"{_MARK}1"):
            torch.nn.functional.leaky_relu(quantized, 0.01)
    events = prof.profiler.kineto_results.events()
    markers = _markers(events)
    dtypes = _dtypes_per_marker(events, markers, _ops_per_marker(events, markers, {"0": "real", "1": "real"}))
    assert "aten::remainder|int32" in dtypes["0"]
    assert {"aten::where|bool", "aten::where|float64"} <= dtypes["0"]
    assert "aten::leaky_relu@quantized|quint8" in dtypes["1"]
    assert not any(d.startswith("aten::leaky_relu|") for d in dtypes["1"])


def test_the_affected_outputs_name_each_gap_once(capsys):
    gap = DispatchGap("leaky_relu", "CPU", "floating", ("QuantizedCPU",))
    doc = replace(affected_doc(ops=("leaky_relu",)), no_benchmark_ops=("leaky_relu",), no_benchmark_gaps=(gap,))
    text = "leaky_relu, CPU, floating: NO BENCHMARK (benchmarked only on QuantizedCPU)"
    assert markdown(doc).count(text) == 1
    table(doc)
    assert capsys.readouterr().out.count(text) == 1
    assert doc.to_json()["no_benchmark_gaps"] == [
        {"op": "leaky_relu", "dispatch_key": "CPU", "dtypes": "floating", "benchmarked_on": ["QuantizedCPU"]}
    ]


def _v2(*groups: str) -> str:
    return 'AT_DISPATCH_V2(t, "k", AT_WRAP([&]() {}), ' + ", ".join(f"AT_EXPAND({g})" for g in groups) + ");"


@pytest.mark.parametrize("group", sorted(set(V2_LISTS) - {"AT_FLOAT8_TYPES"}))
def test_the_index_and_the_query_read_one_dispatch_vocabulary(group):
    # the query's "a list that only gains dtypes" reads the group's dtypes, and a line in a
    # lambda dispatched over the group runs for exactly their classes
    gained = dispatch_gain(words([_v2("AT_FLOAT8_TYPES")]), words([_v2("AT_FLOAT8_TYPES", group)]))
    assert gained is not None and set(gained.dtypes) == set(V2_LISTS[group])
    kernel = "void k(TensorIterator& iter) {\n" + _v2(group).replace("{}", "{\n    f();\n  }") + "\n}\n"
    assert lines_scope(kernel, [3]) == frozenset(dtype_class_of_scalar_type(d) for d in V2_LISTS[group])


FUNCTOR = """\
#include <cstdint>

namespace at::native {

template <typename T>
struct IndexAddFunctor {
  void operator()(T* out, const T* src, T alpha) const {
    T val = src[0] * alpha;
    out[0] += val;
  }
};

template <typename T>
void scale(T* out, const T* src, T alpha) {
  out[0] = src[0] * alpha;
}

}  // namespace at::native
"""
BOOL_ARM = """\
    T val;
    if constexpr (std::is_same_v<T, bool>) {
      val = src[0] && alpha;
    } else {
      val = src[0] * alpha;
    }
"""


def _functor_scope(head: str):
    path = "src/ATen/native/xpu/sycl/Indexing.cpp"
    diff = "".join(difflib.unified_diff(FUNCTOR.splitlines(True), head.splitlines(True), f"a/{path}", f"b/{path}"))
    changes = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    base, new = {path: FUNCTOR.encode()}, {path: head.encode()}
    cs = changed_functions(changes, base.get, new.get, Config(source_roots=("src",)))
    return cs, change_scope(changes, base.get, new.get, cs.line_scopes)


def test_a_statement_split_into_a_bool_arm_and_the_old_code_runs_differently_for_bool_only():
    """torch-xpu-ops r6-n01: ``T val = src * alpha_;`` became ``T val; if constexpr
    (std::is_same_v<T, bool>) { val = src && alpha_; } else { val = src * alpha_; }`` (and an
    ``#include <type_traits>`` line). Every other T runs the old code: the change is seen by the
    tests that ran the operator on bool tensors only (the dtype scope of an ``== kBool`` branch)."""
    head = FUNCTOR.replace("    T val = src[0] * alpha;\n", BOOL_ARM).replace(
        "#include <cstdint>\n", "#include <cstdint>\n#include <type_traits>\n\n")
    cs, scope = _functor_scope(head)
    assert [cf.name for cf in cs.functions] == ["operator()"]
    assert scope == {DtypeClass.bool}


@pytest.mark.parametrize(("arm", "scope"), [
    ("if constexpr (std::is_same<T, c10::BFloat16>::value) {\n      val = src[0];\n    } else {\n"
     "      val = src[0] * alpha;\n    }\n", {DtypeClass.reduced}),
    ("if constexpr (std::is_same_v<T, bool>) {\n      val = src[0];\n    } else {\n"
     "      val = src[0] + alpha;\n    }\n", None),  # the other dtypes' code changed too
    ("if constexpr (std::is_same_v<T, float>) {\n      val = src[0];\n    } else {\n"
     "      val = src[0] * alpha;\n    }\n", None),  # float: an accumulate type's test too (Half runs it)
    ("if (flag) {\n      val = src[0];\n    } else {\n      val = src[0] * alpha;\n    }\n", None),
])
def test_a_type_arm_scopes_a_change_only_when_the_other_types_run_the_old_code(arm: str, scope):
    head = FUNCTOR.replace("    T val = src[0] * alpha;\n", "    T val;\n    " + arm)
    assert _functor_scope(head)[1] == (frozenset(scope) if scope else None)


def test_a_line_inside_a_bool_arm_runs_for_bool():
    text = FUNCTOR.replace("    T val = src[0] * alpha;\n", BOOL_ARM)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "&&" in row)
    assert lines_scope(text, [line]) == {DtypeClass.bool}
