"""A native_functions.yaml dispatch kernel is ``at::native::<name>``: the code the dispatcher
registers calls it there. A same-named function in another namespace or class is not the
kernel: torch-xpu-ops' ``at::native::xpu::pstl::sort`` (a sorting helper) was taken for
the kernel of upstream's ``sort`` op, so the walk from the radix-sort kernels stopped at
``sort`` and never reached embedding or unique, which call pstl::sort; in PyTorch,
``clone`` linked ``at::CPUGeneratorImpl::clone`` and ``size.Dimname`` ``MapAllocator::size``."""

from __future__ import annotations

from indexer.link import link
from indexer.native_yaml import OpFacts
from tests.cpp_facts import cpp_facts

SOURCE = """
namespace at::native::xpu::pstl {
void sort(int* keys, int n) {
  radix_sort(keys, n);
}
}  // namespace at::native::xpu::pstl

namespace at {
struct CPUGeneratorImpl {
  CPUGeneratorImpl* clone() const {
    return nullptr;
  }
};
}  // namespace at

namespace at::native {
Tensor clone(const Tensor& self) {
  return self;
}
Tensor embedding_dense_backward_xpu(const Tensor& grad, const Tensor& indices) {
  xpu::pstl::sort(nullptr, 0);
  return grad;
}
}  // namespace at::native
"""


def _op(name: str, kernels: list[tuple[str, str]]) -> OpFacts:
    return OpFacts(name, name, "", f"{name}(Tensor self) -> Tensor", False, None, "function", "", None, kernels)


def test_a_dispatch_kernel_is_the_at_native_function_of_its_name():
    facts = cpp_facts("src/ATen/native/xpu/Sorting.cpp", SOURCE)
    ops = [
        _op("sort", [("CompositeExplicitAutograd", "sort")]),  # upstream's kernel: not in this repo
        _op("clone", [("CompositeExplicitAutograd", "clone")]),
        _op("embedding_dense_backward", [("XPU", "embedding_dense_backward_xpu")]),
    ]
    tables = link([facts], [], ops, [], {}, [])
    qualname = {row[0]: row[2] for row in tables.rows["functions"]}
    kernels = {(op, qualname.get(fid)) for op, _, _, fid in tables.rows["kernels"]}
    assert kernels == {
        ("sort", None),
        ("clone", "at::native::clone"),
        ("embedding_dense_backward", "at::native::embedding_dense_backward_xpu"),
    }
