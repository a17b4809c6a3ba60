"""A tiny out-of-tree device backend repository (torch-xpu-ops style), written by the tests.

Its kernels live in ``src/ATen/native/xpu/`` (op entry files) and ``src/ATen/native/xpu/sycl/``
(kernels), its own ``yaml/native/native_functions.yaml`` adds ``XPU:`` dispatch entries, and its
script benchmarks in ``test/microbench/`` call the upstream ``torch`` API on ``device = "xpu"``.
What links a script to a kernel here runs through upstream code that is not in the repo:

- ``distance.cdist.py``: ``torch.cdist`` (upstream composite) -> ``_cdist_forward`` / backward
  ``_cdist_backward`` (upstream kernels named in this yaml) -> ``cdist_stub`` /
  ``cdist_backward_stub`` (declared upstream) -> ``REGISTER_XPU_DISPATCH`` in ``xpu/Distance.cpp``
  -> ``xpu::cdist_kernel`` in ``sycl/DistanceKernels.cpp`` (uses ``sycl/Loops.h``).
- ``upsample_nearest2d.py``: ``F.interpolate(mode="nearest")`` (upstream Python) ->
  ``upsample_nearest2d`` -> structured ``upsample_nearest2d.out`` ->
  ``TORCH_IMPL_FUNC(upsample_nearest2d_out_xpu)`` -> ``sycl/UpSampleNearest2dKernels.cpp``.
- ``batch_norm_2d.py``: ``torch.nn.BatchNorm2d`` -> ``batch_norm`` -> ``native_batch_norm``
  (``XPU: batch_norm_xpu``, an op also defined upstream) and, backward,
  ``native_batch_norm_backward`` (``XPU: batch_norm_backward_xpu``).
- ``eltwise.add.py``: ``torch.add`` -> structured ``add.out`` -> ``TORCH_IMPL_FUNC(add_out_xpu)``
  -> ``add_stub`` -> ``REGISTER_XPU_DISPATCH(add_stub, ...)`` -> ``sycl/BinaryKernels.cpp``
  (uses ``sycl/Loops.h``).
- ``_fused_scale_shift_`` is a new op (not upstream) with an XPU kernel and no benchmark.

``sycl/Loops.h`` is the shared header (two kernels include it). ``perfq.toml`` is the config issue
11 describes, with ``upstream = "torch"``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

LONG_SCHEMAS = {
    "native_batch_norm": "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
    "Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    "native_batch_norm_backward": "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
    "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, "
    "bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    "upsample_nearest2d_out": "upsample_nearest2d.out(Tensor self, SymInt[2] output_size, float? scales_h=None, "
    "float? scales_w=None, *, Tensor(a!) out) -> Tensor(a!)",
}

NATIVE_FUNCTIONS_TEMPLATE = """\
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  device_check: NoCheck   # TensorIterator
  structured_delegate: add.out
  variants: function, method

- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  device_check: NoCheck   # TensorIterator
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    XPU: add_out_xpu

- func: _cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor
  dispatch:
    XPU: _cdist_forward
  autogen: _cdist_forward.out

- func: _cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor
  dispatch:
    XPU: _cdist_backward
  autogen: _cdist_backward.out

- func: {native_batch_norm}
  dispatch:
    XPU: batch_norm_xpu

- func: {native_batch_norm_backward}
  dispatch:
    XPU: batch_norm_backward_xpu

- func: {upsample_nearest2d_out}
  python_module: nn
  structured: True
  dispatch:
    XPU: upsample_nearest2d_out_xpu

- func: upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor
  python_module: nn
  structured_delegate: upsample_nearest2d.out

- func: _fused_scale_shift_(Tensor(a!) self, float scale, float shift) -> Tensor(a!)
  variants: function
  dispatch:
    XPU: _fused_scale_shift_xpu_
"""
NATIVE_FUNCTIONS = NATIVE_FUNCTIONS_TEMPLATE.format(**LONG_SCHEMAS)

PERFQ_TOML = """\
[tool.perfq]
upstream = "torch"
source_roots = ["src"]
native_functions = ["yaml/native/native_functions.yaml"]
derivatives = []
python_roots = []
benchmark_roots = []
script_benchmark_roots = ["test/microbench"]
"""

LOOPS_H = """\
#pragma once
#include <ATen/native/TensorIterator.h>

namespace at::native::xpu {

template <typename func_t>
struct ElementwiseFunctor {
  void operator()(int64_t i) const {
    out_[i] = f_(a_[i], b_[i]);
  }
  func_t f_;
  float* out_;
  const float* a_;
  const float* b_;
};

template <typename func_t>
void gpu_kernel(TensorIteratorBase& iter, const func_t& f) {
  ElementwiseFunctor<func_t> kfn{f, nullptr, nullptr, nullptr};
  for (int64_t i = 0; i < iter.numel(); i++) {
    kfn(i);
  }
}

} // namespace at::native::xpu
"""

BINARY_KERNELS_CPP = """\
#include <ATen/native/xpu/sycl/BinaryKernels.h>
#include <ATen/native/xpu/sycl/Loops.h>

namespace at::native::xpu {

struct AddFunctor {
  float operator()(float a, float b) const {
    return a + alpha_ * b;
  }
  float alpha_;
};

void add_kernel(TensorIteratorBase& iter, const Scalar& alpha) {
  gpu_kernel(iter, AddFunctor{alpha.to<float>()});
}

} // namespace at::native::xpu
"""

BINARY_OPS_CPP = """\
#include <ATen/native/BinaryOps.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/xpu/sycl/BinaryKernels.h>

namespace at::native {

REGISTER_XPU_DISPATCH(add_stub, &xpu::add_kernel);

TORCH_IMPL_FUNC(add_out_xpu)
(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& output) {
  xpu::add_kernel(*this, alpha);
}

} // namespace at::native
"""

DISTANCE_KERNELS_CPP = """\
#include <ATen/native/xpu/sycl/DistanceKernels.h>
#include <ATen/native/xpu/sycl/Loops.h>

namespace at::native::xpu {

struct AbsDiffFunctor {
  float operator()(float a, float b) const {
    return a > b ? a - b : b - a;
  }
};

static float p_norm_scale(double p) {
  return p == 0.0 ? 1.0f : static_cast<float>(1.0 / p);
}

void cdist_kernel(Tensor& result, const Tensor& x1, const Tensor& x2, double p) {
  auto iter = TensorIterator::borrowing_binary_op(result, x1, x2);
  gpu_kernel(iter, AbsDiffFunctor{});
  result.mul_(p_norm_scale(p));
}

void cdist_backward_kernel(
    Tensor& grad_x1, const Tensor& grad, const Tensor& x1, const Tensor& x2, double p, const Tensor& cdist) {
  grad_x1.copy_(grad);
}

} // namespace at::native::xpu
"""

DISTANCE_CPP = """\
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Distance.h>
#include <ATen/native/xpu/sycl/DistanceKernels.h>

namespace at::native {

REGISTER_XPU_DISPATCH(cdist_stub, &xpu::cdist_kernel);
REGISTER_XPU_DISPATCH(cdist_backward_stub, &xpu::cdist_backward_kernel);

} // namespace at::native
"""

UPSAMPLE_CPP = """\
#include <ATen/native/UpSample.h>
#include <ATen/native/xpu/sycl/UpSampleNearest2dKernels.h>

namespace at::native {

TORCH_IMPL_FUNC(upsample_nearest2d_out_xpu)
(const Tensor& input,
 IntArrayRef output_size,
 std::optional<double> scales_h,
 std::optional<double> scales_w,
 const Tensor& output) {
  xpu::upsample_nearest2d_kernel(output, input, output_size, scales_h, scales_w);
}

} // namespace at::native
"""

UPSAMPLE_KERNELS_CPP = """\
#include <ATen/native/xpu/sycl/UpSampleNearest2dKernels.h>

namespace at::native::xpu {

static int64_t nearest_index(int64_t out_index, float scale, int64_t in_size) {
  const int64_t index = static_cast<int64_t>(out_index * scale);
  return index < in_size - 1 ? index : in_size - 1;
}

void upsample_nearest2d_kernel(
    const Tensor& output,
    const Tensor& input,
    IntArrayRef output_size,
    std::optional<double> scales_h,
    std::optional<double> scales_w) {
  const float scale = static_cast<float>(input.size(2)) / output_size[0];
  for (int64_t h = 0; h < output_size[0]; h++) {
    nearest_index(h, scale, input.size(2));
  }
}

} // namespace at::native::xpu
"""

BATCH_NORM_CPP = """\
#include <ATen/native/xpu/sycl/BatchNormKernels.h>

namespace at::native {

std::tuple<Tensor, Tensor, Tensor> batch_norm_xpu(
    const Tensor& input,
    const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var,
    bool training,
    double momentum,
    double eps) {
  return xpu::batch_norm_kernel(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_xpu(
    const Tensor& grad_out,
    const Tensor& input,
    const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd,
    bool train,
    double eps,
    std::array<bool, 3> output_mask) {
  return xpu::batch_norm_backward_kernel(grad_out, input, weight, save_mean, save_invstd, train, eps);
}

Tensor& _fused_scale_shift_xpu_(Tensor& self, double scale, double shift) {
  return xpu::scale_shift_kernel_(self, scale, shift);
}

} // namespace at::native
"""

BATCH_NORM_KERNELS_CPP = """\
#include <ATen/native/xpu/sycl/BatchNormKernels.h>

namespace at::native::xpu {

static float inv_std(float var, double eps) {
  return 1.0f / (var + static_cast<float>(eps));
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_kernel(
    const Tensor& input,
    const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var,
    bool training,
    double momentum,
    double eps) {
  auto out = at::empty_like(input);
  auto mean = at::empty({input.size(1)}, input.options());
  auto invstd = at::empty({input.size(1)}, input.options());
  inv_std(1.0f, eps);
  return std::make_tuple(out, mean, invstd);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_kernel(
    const Tensor& grad_out,
    const Tensor& input,
    const std::optional<Tensor>& weight,
    const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd,
    bool train,
    double eps) {
  return std::make_tuple(at::empty_like(input), at::empty_like(input), at::empty_like(input));
}

Tensor& scale_shift_kernel_(Tensor& self, double scale, double shift) {
  return self.mul_(scale).add_(shift);
}

} // namespace at::native::xpu
"""


def header(decls: str) -> str:
    """A kernel header declaring ``decls`` in at::native::xpu."""
    ns = "namespace at::native::xpu"
    return f"#pragma once\n#include <ATen/ATen.h>\n\n{ns} {{\n\n{decls}\n}} // {ns}\n"


SYCL_HEADERS = {
    "BinaryKernels.h": "void add_kernel(TensorIteratorBase& iter, const Scalar& alpha);\n",
    "DistanceKernels.h": (
        "void cdist_kernel(Tensor& result, const Tensor& x1, const Tensor& x2, double p);\n"
        "void cdist_backward_kernel(\n    Tensor& grad_x1, const Tensor& grad, const Tensor& x1, const Tensor& x2,"
        " double p, const Tensor& cdist);\n"
    ),
    "UpSampleNearest2dKernels.h": (
        "void upsample_nearest2d_kernel(\n    const Tensor& output, const Tensor& input, IntArrayRef output_size,\n"
        "    std::optional<double> scales_h, std::optional<double> scales_w);\n"
    ),
    "BatchNormKernels.h": (
        "std::tuple<Tensor, Tensor, Tensor> batch_norm_kernel(\n    const Tensor& input,"
        " const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,\n"
        "    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,\n"
        "    bool training, double momentum, double eps);\n"
        "std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_kernel(\n    const Tensor& grad_out,"
        " const Tensor& input, const std::optional<Tensor>& weight,\n"
        "    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train,"
        " double eps);\n"
        "Tensor& scale_shift_kernel_(Tensor& self, double scale, double shift);\n"
    ),
}


def script(setup: str, body: str) -> str:
    """A microbench script: device = "xpu", a warm-up, a profiled timed loop and an E2E loop."""
    step = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    e2e = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 4)
    return (
        "import time\n\nimport torch\nfrom torch.profiler import profile, ProfilerActivity\n\n"
        'device = "xpu"\nnum_iter = 20\n\n'
        f"{textwrap.dedent(setup).strip()}\n\n"
        "# warm up\n"
        f"{textwrap.dedent(body).strip()}\n\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.XPU], record_shapes=True) as prof:\n"
        "    for i in range(num_iter):\n"
        f"{step}\n"
        'print(prof.key_averages().table(sort_by="xpu_time_total"))\n\n'
        "torch.xpu.synchronize()\nt1 = time.time()\nfor i in range(num_iter):\n"
        f"{e2e}\n"
        "torch.xpu.synchronize()\n"
        'print("E2E total time:", (time.time() - t1) / num_iter)\n'
    )


SCRIPTS = {
    "batch_norm_2d.py": script(
        """
        input = torch.randn(8, 16, 32, 32, device=device, requires_grad=True)
        grad = torch.randn(8, 16, 32, 32, device=device)
        """,
        """
        m = torch.nn.BatchNorm2d(16, device=device)
        output = m(input)
        output.backward(grad)
        """,
    ),
    "distance.cdist.py": script(
        """
        x1 = torch.rand(10, 64, device=device, requires_grad=True)
        x2 = torch.rand(12, 64, device=device, requires_grad=True)
        """,
        """
        output = torch.cdist(x1, x2, 1.0)
        output.backward(torch.ones_like(output))
        """,
    ),
    "upsample_nearest2d.py": script(
        """
        input = torch.randn(4, 3, 64, 64, device=device)
        """,
        """
        output = torch.nn.functional.interpolate(input, scale_factor=2, mode="nearest")
        """,
    ),
    "eltwise.add.py": script(
        """
        a = torch.randn(1024, 1024, device=device)
        b = torch.randn(1024, 1024, device=device)
        """,
        """
        output = torch.add(a, b)
        """,
    ),
}


def repo_files() -> dict[str, str]:
    """Every file of the fixture repository, by repo-relative path."""
    files = {
        "perfq.toml": PERFQ_TOML,
        "yaml/native/native_functions.yaml": NATIVE_FUNCTIONS,
        "src/ATen/native/xpu/BinaryOps.cpp": BINARY_OPS_CPP,
        "src/ATen/native/xpu/Distance.cpp": DISTANCE_CPP,
        "src/ATen/native/xpu/UpSampleNearest2d.cpp": UPSAMPLE_CPP,
        "src/ATen/native/xpu/BatchNorm.cpp": BATCH_NORM_CPP,
        "src/ATen/native/xpu/sycl/Loops.h": LOOPS_H,
        "src/ATen/native/xpu/sycl/BinaryKernels.cpp": BINARY_KERNELS_CPP,
        "src/ATen/native/xpu/sycl/DistanceKernels.cpp": DISTANCE_KERNELS_CPP,
        "src/ATen/native/xpu/sycl/UpSampleNearest2dKernels.cpp": UPSAMPLE_KERNELS_CPP,
        "src/ATen/native/xpu/sycl/BatchNormKernels.cpp": BATCH_NORM_KERNELS_CPP,
    }
    files |= {f"src/ATen/native/xpu/sycl/{name}": header(decls) for name, decls in SYCL_HEADERS.items()}
    files |= {f"test/microbench/{name}": text for name, text in SCRIPTS.items()}
    return files


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@dataclass(frozen=True)
class OotRepo:
    """The fixture on disk: its root and its first commit."""

    path: Path
    head: str

    def commit_edit(self, rel_path: str, old: str, new: str, message: str) -> str:
        """Replace ``old`` by ``new`` (exactly once) in ``rel_path``, commit, and return the new sha."""
        file = self.path / rel_path
        text = file.read_text()
        if text.count(old) != 1:
            raise ValueError(f"{old!r} occurs {text.count(old)} times in {rel_path}")
        file.write_text(text.replace(old, new))
        git(self.path, "commit", "-qam", message)
        return git(self.path, "rev-parse", "HEAD")


def make_oot_repo(root: Path) -> OotRepo:
    """Write the backend repository under ``root/torch-xpu-ops-mini``, ``git init`` it and commit it."""
    repo = root / "torch-xpu-ops-mini"
    for rel, text in repo_files().items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "mini xpu backend")
    return OotRepo(repo, git(repo, "rev-parse", "HEAD"))


def make_indexed_oot_repo(root: Path, files: dict[str, str], yaml_entries: str, message: str) -> OotRepo:
    """The fixture with ``files`` added and ``yaml_entries`` appended to its yaml, committed as
    ``message`` and indexed (the CLI, in a subprocess)."""
    repo = make_oot_repo(root)
    for rel, text in files.items():
        path = repo.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    yaml = repo.path / "yaml/native/native_functions.yaml"
    yaml.write_text(yaml.read_text() + yaml_entries)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", message)
    proc = subprocess.run([sys.executable, "-m", "perfq", "index", "-q"], cwd=repo.path, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"perfq index failed: {proc.stderr.strip()}")
    return OotRepo(repo.path, git(repo.path, "rev-parse", "HEAD"))

