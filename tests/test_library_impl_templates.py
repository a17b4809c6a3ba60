"""An ``m.impl`` kernel named through a class template's method (``TORCH_FN(QMul<false>::run)``)
is that method: its name is read past the template arguments (``QMul::run``), not cut to its last
word (``run``), which linked every ``run`` of the index (mkldnn's ``convolution::run``) as a
kernel of ``quantized::mul``."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.registrations import _function_name

CONV = """
namespace at::native::mkldnn::internal::convolution {
Tensor run(const Tensor& x) { return x; }
}
"""

QMUL = """
namespace at::native {
template <bool ReLUFused = false>
class QMul final {
 public:
  static Tensor run(Tensor qa, Tensor qb) { return qa; }
};
TORCH_LIBRARY_IMPL(quantized, QuantizedCPU, m) {
  m.impl(TORCH_SELECTIVE_NAME("quantized::mul"), TORCH_FN(QMul</*ReLUFused=*/false>::run));
  m.impl(TORCH_SELECTIVE_NAME("quantized::mul_relu"), TORCH_FN(QMul<std::integral_constant<bool, true>::value>::run));
}
}
"""


def _facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_a_class_templates_method_is_named_past_its_template_arguments():
    assert _function_name("TORCH_FN(QMul<false>::run)") == "QMul::run"
    assert _function_name("TORCH_FN(QMul<std::integral_constant<bool, true>::value>::run)") == "QMul::run"
    assert _function_name("TORCH_FN(ns::qadd<true>)") == "ns::qadd"
    assert _function_name("&at::native::add_out") == "at::native::add_out"


def test_the_kernel_is_the_templates_method_only():
    tables = link([_facts("aten/src/ATen/native/mkldnn/Conv.cpp", CONV),
                   _facts("aten/src/ATen/native/quantized/cpu/BinaryOps.cpp", QMUL)], [], [], [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    impls = {(row[2], name.get(row[4])) for row in tables.rows["library_impls"]}
    assert impls == {("quantized::mul", "at::native::QMul::run"), ("quantized::mul_relu", "at::native::QMul::run")}
