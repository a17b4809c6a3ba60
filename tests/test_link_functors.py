"""A functor constructed in a declaration is a call of its constructor, and constructing a
functor reaches its operator(): SYCL kernels (intel/torch-xpu-ops) are launched this way,
``KernelFunctor<scalar_t, opmath_t> kfn(...); sycl_kernel_submit(..., kfn);``."""

from __future__ import annotations

from indexer.link import link
from tests.cpp_facts import call_edges, cpp_facts

KERNELS = """
namespace at::native::xpu {
template <typename scalar_t, typename opmath_t>
struct AdaptiveAvgPool2dBwdSLMKernelFunctor {
  void operator()(sycl::nd_item<1> item) const {
    accumulate_slm(item, grad_input_, grad_output_);
  }
  AdaptiveAvgPool2dBwdSLMKernelFunctor(scalar_t* grad_input, const scalar_t* grad_output)
      : grad_input_(grad_input), grad_output_(grad_output) {}

 private:
  scalar_t* grad_input_;
  const scalar_t* grad_output_;
};

template <typename scalar_t>
struct FillFunctor {  // an aggregate: no constructor of its own
  void operator()(sycl::item<1> item) const {
    out[item] = value;
  }
  scalar_t* out;
  scalar_t value;
};

void adaptive_avg_pool2d_backward_kernel(Tensor& grad_input, const Tensor& grad_output) {
  AdaptiveAvgPool2dBwdSLMKernelFunctor<scalar_t, opmath_t> kfn(
      grad_input.data_ptr<scalar_t>(), grad_output.data_ptr<scalar_t>());
  sycl_kernel_submit(global_range, local_range, getCurrentSYCLQueue(), kfn);
}

void fill_kernel(Tensor& self, float value) {
  FillFunctor<float> ffn{self.data_ptr<float>(), value};
  sycl_kernel_submit(range, getCurrentSYCLQueue(), ffn);
}

void copy_kernel(Tensor& dst) {
  auto cfn = CopyFunctor<float>(dst.data_ptr<float>());
  sycl_kernel_submit(range, getCurrentSYCLQueue(), cfn);
}

struct AbsDiffFunctor {
  float operator()(float a, float b) const {
    return a > b ? a - b : b - a;
  }
};

void abs_diff_kernel(TensorIteratorBase& iter) {
  gpu_kernel(iter, AbsDiffFunctor{});  // a temporary passed to the launcher
}

void fill_scalar_kernel(TensorIteratorBase& iter) {
  gpu_kernel(iter, xpu::FillFunctor<float>{nullptr, 1.0f});
}
}  // namespace at::native::xpu
"""

HELPERS = """
namespace at::native::xpu {
template <typename scalar_t>
struct CopyFunctor {
  explicit CopyFunctor(scalar_t* dst) : dst_(dst) {}
  void operator()(sycl::item<1> item) const {
    dst_[item] = scalar_t(0);
  }
  scalar_t* dst_;
};

// named like the variables above: a declared variable is not a call of it
inline void kfn(int n) {}
inline void ffn(int n) {}
}  // namespace at::native::xpu
"""



def test_constructing_a_functor_reaches_its_call_operator():
    files = [
        cpp_facts("src/xpu/sycl/AdaptiveAveragePooling2dKernels.cpp", KERNELS),
        cpp_facts("src/xpu/sycl/CopyFunctors.h", HELPERS),
    ]
    edges = call_edges(link(files, [], [], [], {}, []))
    ns = "at::native::xpu::"
    assert (
        f"{ns}adaptive_avg_pool2d_backward_kernel",
        f"{ns}AdaptiveAvgPool2dBwdSLMKernelFunctor::operator()",
    ) in edges
    assert (f"{ns}fill_kernel", f"{ns}FillFunctor::operator()") in edges
    assert (f"{ns}copy_kernel", f"{ns}CopyFunctor::operator()") in edges
    assert (f"{ns}abs_diff_kernel", f"{ns}AbsDiffFunctor::operator()") in edges
    assert (f"{ns}fill_scalar_kernel", f"{ns}FillFunctor::operator()") in edges
    assert not {callee for _, callee in edges} & {f"{ns}kfn", f"{ns}ffn"}
