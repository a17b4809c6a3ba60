"""A structured kernel's ``TORCH_META_FUNC`` and ``TORCH_IMPL_FUNC`` bodies are methods of
generated classes deriving from ``at::impl::MetaBase`` or, for ``structured_inherits:
TensorIteratorBase``, from the TensorIterator: their unqualified calls (``build_unary_op``,
``device_type``) are its members. Unlinked, a change to ``TensorIteratorBase::build`` reached
none of the 300 structured TensorIterator operators through their meta functions (a labelled
change to its fast set-up missed ``hardsigmoid_test`` and ``remainder_test``); a free function
calling the same name is not a member of any of them."""

from __future__ import annotations

from indexer.link import link
from tests.cpp_facts import call_edges, cpp_facts

ITERATOR = """
namespace at {
void TensorIteratorBase::build(TensorIteratorConfig& config) {
  fast_set_up(config);
}
void TensorIteratorBase::build_unary_op(const TensorBase& out, const TensorBase& a) {
  build(config);
}
DeviceType TensorIteratorBase::device_type(int64_t arg) const {
  return device(arg).type();
}
void TensorIteratorBase::fast_set_up(const TensorIteratorConfig& config) {
  compute_fast_setup_type(config);
}
}  // namespace at
"""

ACTIVATION = """
#include <ATen/native/Activation.h>
namespace at::meta {
TORCH_META_FUNC(hardsigmoid) (const Tensor& self) {
  build_unary_op(maybe_get_output(), self);
}
}  // namespace at::meta
namespace at::native {
TORCH_IMPL_FUNC(hardsigmoid_out) (const Tensor& self, const Tensor& result) {
  hardsigmoid_stub(device_type(), *this);
}
void build_unary_op(const Tensor& out, const Tensor& self) {
  (void)out;
}
void free_helper(const Tensor& self) {
  build_unary_op(self, self);
}
}  // namespace at::native
"""


def test_meta_and_impl_bodies_call_the_members_of_their_structured_base():
    files = [cpp_facts("aten/src/ATen/TensorIterator.cpp", ITERATOR), cpp_facts("aten/src/ATen/native/Activation.cpp",
                                                                                ACTIVATION)]
    edges = call_edges(link(files, [], [], [], {}, []))
    meta, impl = "at::meta::hardsigmoid", "at::native::hardsigmoid_out"
    assert (meta, "at::TensorIteratorBase::build_unary_op") in edges
    assert (impl, "at::TensorIteratorBase::device_type") in edges
    assert ("at::native::free_helper", "at::native::build_unary_op") in edges
    assert ("at::native::free_helper", "at::TensorIteratorBase::build_unary_op") not in edges
