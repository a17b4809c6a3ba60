"""Kernels registered as lambdas, and dispatch lines naming several devices.

``TORCH_LIBRARY_IMPL(quantized, QuantizedCPU, m) { m.impl("quantized::layer_norm", [](...) {
return quantized_layer_norm_impl(...); }); }``: the functions a registered lambda calls implement
its operator, so a change to the file-static ``quantized_layer_norm_impl`` (or to the DispatchStub
kernel it calls) reaches ``quantized::layer_norm`` and no other operator of the block (issue 31:
held-out r2-q01/q02 reached nothing). ``CPU, CUDA: neg_out`` gives ``neg_out`` one kernel edge per
device, so a CUDA kernel behind its stub reaches ``neg.out`` (r2-d01 reached only copy_)."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.native_yaml import OpFacts
from indexer.registrations import LAMBDA_KERNEL

NORMALIZATION = """
namespace at::native {
DEFINE_DISPATCH(qnormalize_stub);
static Tensor quantized_layer_norm_impl(const Tensor& input, double eps) {
  Tensor y = input;
  qnormalize_stub(kCPU, input, eps, &y);
  return y;
}
static Tensor quantized_group_norm_impl(const Tensor& qx, int64_t groups, double eps) {
  Tensor y = qx;
  qnormalize_stub(kCPU, qx, eps, &y);
  return y;
}
static Tensor unrelated_helper(const Tensor& x) {
  return x;
}
TORCH_LIBRARY_IMPL(quantized, QuantizedCPU, m) {
  m.impl(TORCH_SELECTIVE_NAME("quantized::layer_norm"), [](Tensor input, double eps) {
    return quantized_layer_norm_impl(input, eps);
  });
  m.impl(TORCH_SELECTIVE_NAME("quantized::group_norm"), [](Tensor qx, int64_t groups, double eps) {
    return quantized_group_norm_impl(qx, groups, eps);
  });
  m.impl(TORCH_SELECTIVE_NAME("quantized::identity"), TORCH_FN(unrelated_helper));
}
}
"""

KERNEL = """
namespace at::native {
namespace {
void qnormalize_kernel(const Tensor& x, double eps, Tensor* y) {
  parallel_for(0, 10, 800, [](int64_t b, int64_t e) {});
}
}
REGISTER_DISPATCH(qnormalize_stub, &qnormalize_kernel)
}
"""

UNARY = """
namespace at::native {
DEFINE_DISPATCH(neg_stub);
TORCH_IMPL_FUNC(neg_out) (const Tensor& self, const Tensor& result) {
  neg_stub(device_type(), *this);
}
}
"""

CUDA_KERNEL = """
namespace at::native {
void neg_kernel_cuda(TensorIteratorBase& iter) {
  gpu_kernel(iter, [](float a) { return -a; });
}
REGISTER_DISPATCH(neg_stub, &neg_kernel_cuda)
}
"""

NEG = [OpFacts("neg.out", "neg", "out", "neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", True, None,
               "function", "", None, [("CPU", "neg_out"), ("CUDA", "neg_out")])]


def facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def reached(tables, start_suffix: str, allow=lambda kind, detail: True) -> set[tuple[str, str]]:
    """The (kind, key) of the nodes the walk up from the function ending in ``start_suffix`` reaches."""
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    nodes = {nid: (kind, key) for nid, kind, key, _ in tables.rows["nodes"]}
    up: dict[int, set[int]] = {}
    for dst, src, kind, detail in tables.rows["reach_edges"]:
        if allow(kind, detail):
            up.setdefault(dst, set()).add(src)
    start = next(gid for gid, q in name.items() if q.endswith(start_suffix))
    seen, todo = {start}, [start]
    while todo:
        for nxt in up.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return {nodes[n] for n in seen if n in nodes}


def test_a_registered_lambda_is_read_as_a_lambda_kernel():
    f = facts("aten/src/ATen/native/quantized/cpu/qnormalization.cpp", NORMALIZATION)
    kernels = {li.op: li.kernel_name for li in f.library_impls}
    assert kernels == {"layer_norm": LAMBDA_KERNEL, "group_norm": LAMBDA_KERNEL, "identity": "unrelated_helper"}


def test_the_functions_a_registered_lambda_calls_reach_its_operator_only():
    files = [facts("aten/src/ATen/native/quantized/cpu/qnormalization.cpp", NORMALIZATION),
             facts("aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp", KERNEL)]
    tables = link(files, [], [], [], {}, [])
    ops = lambda found: {key for kind, key in found if kind == "op"}  # noqa: E731
    assert ops(reached(tables, "quantized_layer_norm_impl")) == {"quantized::layer_norm"}
    assert ops(reached(tables, "quantized_group_norm_impl")) == {"quantized::group_norm"}
    # the stub kernel both impls call reaches both operators, through the stub
    assert ops(reached(tables, "qnormalize_kernel")) == {"quantized::layer_norm", "quantized::group_norm"}
    assert ops(reached(tables, "unrelated_helper")) == {"quantized::identity"}


def test_a_dispatch_line_naming_two_devices_is_a_kernel_edge_for_each():
    files = [facts("aten/src/ATen/native/UnaryOps.cpp", UNARY),
             facts("aten/src/ATen/native/cuda/UnarySignKernels.cu", CUDA_KERNEL)]
    tables = link(files, [], NEG, [], {}, [])
    details = sorted(d for _, _, kind, d in tables.rows["reach_edges"] if kind == "kernel")
    assert details == ["CPU", "CUDA"]
    # a walk keeping to CUDA edges (what a .cu change may cross) reaches neg.out
    cuda_only = lambda kind, detail: kind != "kernel" or detail == "CUDA"  # noqa: E731
    assert ("op", "neg.out") in reached(tables, "neg_kernel_cuda", cuda_only)
