"""An unqualified call inside a method finds its own class's member first: C++ name lookup stops
at class scope, so a free function of the same name is not called. torch-xpu-ops' single-workgroup
topk functor has its own ``findPattern`` and ``countRadixUsingMask``; the free ones of the header
it includes (SortingRadixSelect.h) serve kthvalue and median, which no script runs. Linking both
made a change to the header's ``findPattern`` select the topk scripts; and a free function cannot
call another class's method (other than a constructor) without an object."""

from __future__ import annotations

from indexer.link import link
from tests.cpp_facts import call_edges, cpp_facts

HEADER = """
namespace at::native::xpu {
template <typename scalar_t>
void findPattern(scalar_t* smem, int desired) {
  smem[0] = desired;
}
}  // namespace at::native::xpu
"""

KERNEL = """
#include "SortingRadixSelect.h"
namespace at::native::xpu {
template <typename scalar_t>
struct GatherFunctor {
  void findPattern(scalar_t* smem, int desired) const {
    smem[1] = desired;
  }
  void radixSelect(scalar_t* smem) const {
    findPattern(smem, 3);
  }
};

template <typename scalar_t>
void kthvalue_kernel(scalar_t* smem) {
  findPattern(smem, 1);
}

struct KthValueLauncher {
  template <typename scalar_t, int Dim>
  void launch(scalar_t* smem) const {
    kthvalue_kernel<scalar_t>(smem);
  }
};

struct MedianLauncher {
  template <typename scalar_t, int Dim>
  void launch(scalar_t* smem) const {
    kthvalue_kernel<scalar_t>(smem);
  }
};

template <typename func_t>
void launch(func_t f) {  // a free function of the same name
  f();
}

template <typename scalar_t, typename Launcher>
void run_launcher(scalar_t* smem, const Launcher& l) {
  l.template launch<scalar_t, 1>(smem);  // a member template through a dependent object
}
}  // namespace at::native::xpu
"""



def test_an_unqualified_call_in_a_method_calls_its_own_class_member():
    files = [cpp_facts("src/xpu/sycl/SortingRadixSelect.h", HEADER), cpp_facts("src/xpu/sycl/TopKKernel.cpp", KERNEL)]
    edges = call_edges(link(files, [], [], [], {}, []))
    ns = "at::native::xpu::"
    radix = f"{ns}GatherFunctor::radixSelect"
    assert (radix, f"{ns}GatherFunctor::findPattern") in edges
    assert (radix, f"{ns}findPattern<scalar_t>") not in edges
    kth = f"{ns}kthvalue_kernel<scalar_t>"
    assert (kth, f"{ns}findPattern<scalar_t>") in edges  # a free function's call
    assert (kth, f"{ns}GatherFunctor::findPattern") not in edges  # a method needs an object
    launcher = f"{ns}run_launcher<scalar_t, Launcher>"
    assert {(launcher, f"{ns}{c}Launcher::launch<scalar_t, Dim>") for c in ("KthValue", "Median")} <= edges
