"""A call qualified by a template parameter of its caller (``F::compute_indices_weights(...)``
in ``upsample_generic_Nd_kernel_impl<out_ndims, scale_t, F>``) calls a member of whichever
class the template is instantiated with: without types, the members of that name of the
classes in the caller's top namespace (visible through its includes first). Unlinked, a change
to ``HelperInterpCubic::compute_indices_weights`` reached no operator (a held-out bicubic
interpolation change missed interpolate_test)."""

from __future__ import annotations

from indexer.link import link
from indexer.link_cpp import template_params
from tests.cpp_facts import call_edges, cpp_facts

KERNEL = """
namespace at::native {
namespace {
struct HelperLinear {
  static int compute_weights(int n) { return n; }
};
struct HelperCubic {
  static int compute_weights(int n) { return n + 1; }
};
template <int out_ndims, typename F>
int generic_kernel(int n) {
  return F::compute_weights(n);
}
int bicubic_kernel(int n) {
  return generic_kernel<2, HelperCubic>(n) + HelperLinear::compute_weights(n);
}
}  // namespace
}  // namespace at::native
"""

ELSEWHERE = """
namespace torch::lazy {
struct Lowering {
  static int compute_weights(int n);
};
int Lowering::compute_weights(int n) { return n; }
}  // namespace torch::lazy
"""


def test_template_params_are_read_from_a_qualified_name():
    assert template_params("ns::(anonymous namespace)::impl<out_ndims, scale_t, F>") == {"out_ndims", "scale_t", "F"}
    assert template_params("ns::Foo<T>::run") == {"T"}
    assert template_params("ns::run") == frozenset()


def test_a_call_through_a_template_parameter_reaches_the_members_it_can_name():
    files = [cpp_facts("aten/src/ATen/native/cpu/UpSampleKernel.cpp", KERNEL),
             cpp_facts("torch/csrc/lazy/Lowering.cpp", ELSEWHERE)]
    tables = link(files, [], [], [], {}, [])
    edges = call_edges(tables)
    ns = "at::native::(anonymous namespace)::"
    generic = f"{ns}generic_kernel<out_ndims, F>"
    assert {(generic, f"{ns}HelperCubic::compute_weights"), (generic, f"{ns}HelperLinear::compute_weights")} <= edges
    assert (generic, "torch::lazy::Lowering::compute_weights") not in edges  # another top namespace
    bicubic = f"{ns}bicubic_kernel"
    assert (bicubic, f"{ns}HelperLinear::compute_weights") in edges  # a class qualifier still names its class
    # HelperCubic's member is reached as the policy bicubic_kernel gives generic_kernel, not by the call
    # qualified HelperLinear::
    qualname = {row[0]: row[2] for row in tables.rows["functions"]}
    kinds = {kind for caller, callee, kind, *_ in tables.rows["call_edges"]
             if (qualname[caller], qualname[callee]) == (bicubic, f"{ns}HelperCubic::compute_weights")}
    assert kinds == {"template_arg"}
