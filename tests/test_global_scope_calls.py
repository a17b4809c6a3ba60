"""A call written ``::name(...)`` names the global namespace (the C library's ``::isinf``), never
an ATen operator nor a function of a namespace (issue 40, held-out macro negative m03: the CUDA
``reciprocal_wrapper``'s ``::isinf(real)`` was read as a call of ``at::isinf``, so a change to the
CPU ``isinf`` selected unary_test through reciprocal's CUDA kernel)."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.native_yaml import OpFacts

COMPARE = """
namespace at::native {
Tensor isinf(const Tensor& self) {
  return self.abs() == std::numeric_limits<double>::infinity();
}
}
"""

FRACTION = """
namespace at::native {
template<typename T>
static inline c10::complex<T> reciprocal_wrapper(c10::complex<T> v) {
  auto either_inf = [](T real, T imag) {
    return ::isinf(real) || ::isinf(imag);
  };
  if (either_inf(v.real(), v.imag())) {
    return {0, 0};
  }
  return ::global_helper(v) + isinf_count(v);
}
}
"""

GLOBAL = """
int global_helper(int v) {
  return v;
}
namespace at::native {
int global_helper(int v) {
  return v + 1;
}
}
"""

OPS = [OpFacts("isinf", "isinf", "", "isinf(Tensor self) -> Tensor", False, None, "function, method", "",
               "CompositeExplicitAutograd", [("CompositeExplicitAutograd", "isinf")])]


def _facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_a_global_scope_call_is_qualified_by_the_global_namespace():
    f = _facts("aten/src/ATen/native/cuda/UnaryFractionKernels.cu", FRACTION)
    quals = {(c.callee_name, c.qualifier) for c in f.calls}
    assert ("isinf", "::") in quals and ("global_helper", "::") in quals
    assert ("isinf_count", "") in quals  # unqualified stays unqualified


def test_a_global_scope_call_reaches_no_operator_and_only_global_functions():
    files = [_facts("aten/src/ATen/native/TensorCompare.cpp", COMPARE),
             _facts("aten/src/ATen/native/cuda/UnaryFractionKernels.cu", FRACTION),
             _facts("aten/src/ATen/native/Global.cpp", GLOBAL)]
    tables = link(files, [], OPS, [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    callers_of_ops = {(name.get(fid), op) for fid, op, *_ in tables.rows["op_calls"]}
    assert not any(op == "isinf" for _, op in callers_of_ops)
    edges = {(name[a], name[b]) for a, b, *_ in tables.rows["call_edges"]}
    wrapper = "at::native::reciprocal_wrapper"
    assert not {callee for caller, callee in edges if caller.startswith(wrapper) and callee.endswith("isinf")}
    assert {callee for caller, callee in edges if caller.startswith(wrapper) and "global_helper" in callee} == {
        "global_helper"
    }
