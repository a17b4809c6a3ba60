"""A member call links to the Tensor method of the same name only when its receiver may be a
tensor: ``device.index()`` on a ``Device`` parameter is not the operator ``index`` (on
torch-xpu-ops that false call made every script's copy run ``nonzero``), ``scalar.to<double>()``
is not ``to``; ``self.index(...)`` on a ``const Tensor&`` is, and so is a receiver whose type is
not written where it is declared (``auto``) or not a plain variable."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.native_yaml import OpFacts

SOURCE = """
namespace at::native {
struct Device {
  int index() const { return 0; }
};
bool on_peer(Device dst_device, const Tensor& self, Tensor const& other, std::vector<int64_t> sizes) {
  auto copy = self.contiguous();
  Scalar scale = 2;
  at::Tensor picked = self.index(other);
  return dst_device.index() > 0 && copy.index(other).numel() > sizes.size() && scale.to<double>() > 0;
}
}
"""

OPS = [
    OpFacts(f"{name}.Tensor", name, "Tensor", f"{name}.Tensor(Tensor self) -> Tensor", False, None,
            "function, method", "", None, [("CPU", f"{name}_cpu")])
    for name in ("index", "to", "size", "contiguous", "numel")
]


def facts() -> FileFacts:
    out = file_facts("cpp", "aten/src/ATen/native/Peer.cpp", textwrap.dedent(SOURCE).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_the_receivers_declared_type_is_read_with_the_call():
    receivers = {(c.callee_name, c.line, c.qualifier) for c in facts().calls if c.kind == "member"}
    assert receivers == {
        ("contiguous", 6, ".Tensor"),  # const Tensor& self
        ("index", 8, ".Tensor"),
        ("index", 9, ".Device"),  # Device dst_device
        ("index", 9, "."),  # auto copy: not written
        ("numel", 9, "."),  # copy.index(other).numel(): not a plain variable
        ("size", 9, ".std::vector<int64_t>"),
        ("to", 9, ".Scalar"),
    }


def test_only_receivers_that_may_be_tensors_call_operators():
    tables = link([facts()], [], OPS, [], {}, [])
    calls = {(op.split(".")[0], line) for _, op, _, line in tables.rows["op_calls"]}
    assert calls == {("contiguous", 6), ("index", 8), ("index", 9), ("numel", 9)}
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    edges = {(name[caller], name[callee], line) for caller, callee, _, line in tables.rows["call_edges"]}
    assert ("at::native::on_peer", "at::native::Device::index", 9) in edges  # the C++ method it is


VEC_HEADER = """
namespace at::vec {
template <class T> struct Vectorized {
  Vectorized<T> erf() const { return *this; }
};
}
"""

GROUP_SOURCE = """
#include <ATen/cpu/vec/vec.h>
namespace at::native {
vec::Vectorized<float> vectorized_gelu(vec::Vectorized<float> x) {
  const vec::Vectorized<float> kAlphaVec(0.7f);
  return (x * kAlphaVec).erf();
}
Tensor erf_twice(const Tensor& self) {
  return (self * 2).erf() + make(self).erf();
}
}
"""


def test_a_parenthesized_receiver_has_the_type_of_its_first_variable():
    """``(x * k).erf()`` on Vectorized operands is Vectorized's erf, not the operator erf (held-out
    f05: a change to ``Vectorized<float>::erf`` reached no kernel and fell back to every file that
    includes the vec headers); ``(self * 2).erf()`` on a tensor stays the operator, and a call's
    result (``make(self).erf()``) stays unknown."""
    header = file_facts("cpp", "aten/src/ATen/cpu/vec/vec.h", textwrap.dedent(VEC_HEADER).lstrip("\n").encode())
    kernel = file_facts("cpp", "aten/src/ATen/native/cpu/Gelu.cpp",
                        textwrap.dedent(GROUP_SOURCE).lstrip("\n").encode())
    receivers = {(c.callee_name, c.line, c.qualifier) for c in kernel.calls if c.kind == "member"}
    assert receivers == {("erf", 5, ".vec::Vectorized<float>"), ("erf", 8, ".Tensor"), ("erf", 8, ".")}
    erf_op = [OpFacts("erf", "erf", "", "erf(Tensor self) -> Tensor", False, None, "function, method", "", None,
                      [("CPU", "erf_cpu")])]
    tables = link([header, kernel], [], erf_op, [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    edges = {(name[caller], name[callee]) for caller, callee, _, _ in tables.rows["call_edges"]}
    assert ("at::native::vectorized_gelu", "at::vec::Vectorized::erf") in edges
    assert ("at::native::erf_twice", "at::vec::Vectorized::erf") not in edges
    op_calls = {(name[caller], op, line) for caller, op, _, line in tables.rows["op_calls"]}
    assert op_calls == {("at::native::erf_twice", "erf", 8)}
