"""A tiny ATen-style repository, written by the tests: one of each construct perfq indexes."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.conftest import git
from tests.conftest import run_perfq as perfq  # noqa: F401  (the CLI for these tests)

NATIVE_FUNCTIONS = """\
- func: softmax_op(Tensor self, int dim) -> Tensor
  structured_delegate: softmax_op.out
  variants: function, method

- func: softmax_op.out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU: softmax_op_cpu_out
    CUDA: softmax_op_cuda_out

- func: fancy(Tensor self) -> Tensor
  variants: function
  dispatch:
    CompositeExplicitAutograd: fancy

- func: lonely(Tensor self) -> Tensor
  variants: function
  dispatch:
    CPU, CUDA: lonely_kernel

- func: composite_thing(Tensor self) -> Tensor
  variants: function
"""

FILES = {
    "aten/src/ATen/native/native_functions.yaml": NATIVE_FUNCTIONS,
    "aten/src/ATen/native/SoftmaxOp.h": """\
        #pragma once
        namespace at::native {
        using softmax_op_fn = void (*)(const Tensor&, const Tensor&, int64_t);
        DECLARE_DISPATCH(
            softmax_op_fn,
            softmax_op_stub);
        }
        """,
    "aten/src/ATen/native/SoftmaxOp.cpp": """\
        #include <ATen/native/SoftmaxOp.h>
        namespace at::meta {
        TORCH_META_FUNC(softmax_op)(const Tensor& self, int64_t dim) {
          set_output_raw_strided(0, self.sizes(), {}, self.options());
        }
        }  // namespace at::meta
        namespace at::native {
        DEFINE_DISPATCH(softmax_op_stub);

        TORCH_IMPL_FUNC(softmax_op_cpu_out)(const Tensor& self, int64_t dim, const Tensor& out) {
          softmax_op_stub(kCPU, out, self, dim);
        }

        Tensor fancy(const Tensor& self) {
          return at::softmax_op(self, 0);
        }

        static int make_size(int x) {
          return x + 1;
        }

        Tensor lonely_kernel(const Tensor& self) {
          make_size(3);
          return self;
        }

        Tensor composite_thing(const Tensor& self) {
          return self;
        }
        }  // namespace at::native
        """,
    "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp": """\
        #include <ATen/native/SoftmaxOp.h>
        namespace at::native {
        namespace {
        template <typename scalar_t>
        void inner_loop(scalar_t* out, std::optional<double> eps) {
          for (int i = 0; i < 4; i++) {
            out[i] = out[i] * 2;
          }
        }

        void softmax_op_kernel_impl(const Tensor& out, const Tensor& self, int64_t dim) {
          AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), "softmax_op", [&] {
            inner_loop<scalar_t>(out.data_ptr<scalar_t>(), std::nullopt);
          });
        }
        }  // namespace

        REGISTER_DISPATCH(softmax_op_stub, &softmax_op_kernel_impl);
        }  // namespace at::native
        """,
    "aten/src/ATen/native/cuda/SoftmaxOp.cu": """\
        namespace at::native {
        __global__ void softmax_op_cuda_kernel(float* out) {
          out[threadIdx.x] = 0;
        }
        TORCH_IMPL_FUNC(softmax_op_cuda_out)(const Tensor& self, int64_t dim, const Tensor& out) {
          softmax_op_cuda_kernel<<<1, 32>>>(out.data_ptr<float>());
        }
        }  // namespace at::native
        """,
    "aten/src/ATen/native/quantized/cpu/qthing.cpp": """\
        namespace at::native {
        namespace {
        Tensor qthing_impl(Tensor x) {
          return x;
        }
        }  // namespace
        TORCH_LIBRARY(quantized, m) {
          m.def("qthing(Tensor x) -> Tensor");
        }
        TORCH_LIBRARY_IMPL(quantized, QuantizedCPU, m) {
          m.impl(TORCH_SELECTIVE_NAME("quantized::qthing"), TORCH_FN(qthing_impl));
        }
        }  // namespace at::native
        """,
    "torch/__init__.py": "",
    "torch/nn/__init__.py": "from .functional import fancy_softmax\n",
    "torch/nn/functional.py": """\
        import torch


        def fancy_softmax(x):
            return torch.softmax_op(x, 0)
        """,
    "benchmarks/operator_benchmark/pt/softmax_op_test.py": """\
        import operator_benchmark as op_bench
        import torch
        import torch.nn.functional as F

        configs = op_bench.cross_product_configs(N=(8,), device=("cpu", "cuda"), tags=("short",))


        class SoftmaxOpBenchmark(op_bench.TorchBenchmarkBase):
            def init(self, N, device):
                self.inputs = {"x": torch.rand(N)}

            def forward(self, x):
                return F.fancy_softmax(x)


        op_bench.generate_pt_test(configs, SoftmaxOpBenchmark)
        """,
    "benchmarks/operator_benchmark/pt/fancy_test.py": """\
        import operator_benchmark as op_bench
        import torch


        class FancyBenchmark(op_bench.TorchBenchmarkBase):
            def init(self, N):
                self.inputs = {"x": torch.rand(N)}

            def forward(self, x):
                return torch.fancy(x)
        """,
    "benchmarks/operator_benchmark/pt/qthing_test.py": """\
        import operator_benchmark as op_bench
        import torch


        class QThingBenchmark(op_bench.TorchBenchmarkBase):
            def init(self, N):
                self.inputs = {"x": torch.rand(N)}

            def forward(self, x):
                return torch.ops.quantized.qthing(x)
        """,
    "README.md": "fixture\n",
}


def write_tree(root: Path, files: dict[str, str] | None = None) -> Path:
    """Write the fixture files under ``root``."""
    for rel, text in (files or FILES).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def make_repo(root: Path) -> Path:
    """The fixture as a git repository with one commit on branch main."""
    write_tree(root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def commit_all(root: Path, message: str = "change") -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD").strip()


def replace_in(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
