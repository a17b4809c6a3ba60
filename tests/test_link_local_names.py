"""Calls through names a file defines for itself: a functor constructed through a local type
alias (``using Functor = SbtopkGatherFunctor<...>; Functor functor(...)``) and a launch written
in a function-like macro of the file (``#define SINGLE_WG_LAUNCH(V, E) single_wg_launch_impl<...>(...)``).
Both are how torch-xpu-ops' single-workgroup topk kernel is reached; without them its changes
reached no operator (commit b9bb647953, 'Fix read/write races in topk single-workgroup kernel')."""

from __future__ import annotations

from indexer.link import link
from tests.cpp_facts import call_edges, cpp_facts

TOPK = """
namespace at::native::xpu {
template <typename scalar_t, int VEC>
struct GatherFunctor {
  void count(int x) const {
    helper_count(x);
  }
  void operator()(sycl::nd_item<1> item) const {
    count(item.get_local_id(0));
  }
  GatherFunctor(const scalar_t* input) : input_(input) {}
  const scalar_t* input_;
};

template <typename scalar_t, int VEC>
static void launch_impl(const scalar_t* input) {
  using Functor = GatherFunctor<scalar_t, VEC>;
  Functor functor(input);
  sycl_kernel_submit(64, 64, getCurrentSYCLQueue(), functor);
}

#define LAUNCH(V) \\
  launch_impl<scalar_t, V>(input)

template <typename scalar_t>
static void launch_kernel(const scalar_t* input, int vec) {
  if (vec == 4) {
    LAUNCH(4);
  } else {
    LAUNCH(1);
  }
}

typedef GatherFunctor<float, 1> FloatGather;

void float_gather(const float* input) {
  auto kfn = FloatGather(input);
  sycl_kernel_submit(64, 64, getCurrentSYCLQueue(), kfn);
}

void topk_kernel(const Tensor& self) {
  launch_kernel<float>(self.const_data_ptr<float>(), 4);
}
}  // namespace at::native::xpu
"""


def test_calls_through_a_local_type_alias_and_a_function_like_macro_are_linked():
    edges = call_edges(link([cpp_facts("src/xpu/sycl/TopKKernel.cpp", TOPK)], [], [], [], {}, []))
    ns = "at::native::xpu::"
    assert (f"{ns}launch_impl<scalar_t, VEC>", f"{ns}GatherFunctor::operator()") in edges  # via Functor
    assert (f"{ns}launch_kernel<scalar_t>", f"{ns}launch_impl<scalar_t, VEC>") in edges  # via LAUNCH
    assert (f"{ns}float_gather", f"{ns}GatherFunctor::operator()") in edges  # via the typedef
    assert (f"{ns}topk_kernel", f"{ns}launch_kernel<scalar_t>") in edges
