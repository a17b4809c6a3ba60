"""A kernel that calls another operator's kernel as a plain C++ function (``unsafe_split``
calls ``at::native::split``) runs it past the dispatcher: a profiler records the caller,
never the operator the change implements. A change to the called kernel must select the
benchmarks whose traces run the caller, though they saw inside kernels; a caller that goes
through the dispatcher (``at::split``) would show in a real trace itself.
"""

from __future__ import annotations

import json

import pytest

from query.affected import _direct_callers, _via_backward
from query.reach import Reach
from tests.conftest import run_perfq
from tests.oot_fixture import OotRepo, make_indexed_oot_repo, script

pytestmark = [pytest.mark.torch]

YAML_ENTRIES = """
- func: split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]
  variants: function, method
  dispatch:
    XPU: split_xpu

- func: unsafe_split.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]
  variants: function, method
  dispatch:
    XPU: unsafe_split_xpu
"""

FILES = {
    "src/ATen/native/xpu/TensorShape.cpp": """\
#include <ATen/ATen.h>

namespace at::native {

std::vector<Tensor> split_xpu(const Tensor& self, int64_t split_size, int64_t dim) {
  int64_t n = self.size(dim);
  std::vector<Tensor> splits;
  for (int64_t i = 0; i < n; i += split_size) {
    splits.push_back(self.narrow(dim, i, std::min(split_size, n - i)));
  }
  return splits;
}

std::vector<Tensor> unsafe_split_xpu(const Tensor& self, int64_t split_size, int64_t dim) {
  auto result = at::native::split_xpu(self, split_size, dim);
  return result;
}

} // namespace at::native
""",
    "test/microbench/tensor.unsafe_chunk.py": script(
        """
        x = torch.randn(64, 64, device=device)
        """,
        """
        output = torch.unsafe_chunk(x, 4)
        """,
    ),
    "test/microbench/tensor.split.py": script(
        """
        x = torch.randn(64, 64, device=device)
        """,
        """
        output = torch.split(x, 16)
        """,
    ),
}


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory) -> OotRepo:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("oot-direct-calls")
    return make_indexed_oot_repo(root, FILES, YAML_ENTRIES, "split and unsafe_split kernels")


def test_a_kernel_called_directly_selects_the_benchmarks_running_its_caller(oot: OotRepo):
    head = oot.commit_edit(
        "src/ATen/native/xpu/TensorShape.cpp", "std::min(split_size, n - i)", "std::min(n - i, split_size)", "split"
    )
    proc = run_perfq(oot.path, "affected", f"{head}^..{head}", "--format", "json", "--explain")
    assert proc.returncode == 0, proc.stderr
    found = {b["name"]: b for b in json.loads(proc.stdout)["benchmarks"]}
    assert set(found) == {"tensor.split", "tensor.unsafe_chunk"}
    chain = " ".join(step for reason in found["tensor.unsafe_chunk"]["reasons"] for step in reason["chain"])
    assert "unsafe_split_xpu" in chain and "unsafe_split.Tensor" in chain


def _reach(paths: dict[str, list[tuple[str, str]]]) -> Reach:
    """A one-step walk from function 1 (the changed kernel): per operator, its path as
    (node kind, edge kind into it) after the start."""
    r = Reach(kind={1: "function"}, key={1: "1"})
    node = 1
    for op, steps in paths.items():
        parent = 1
        for kind, edge in steps:
            node += 1
            r.kind[node], r.key[node], r.parent[node] = kind, op if kind == "op" else str(node), (parent, edge, "")
            parent = node
    return r


def test_only_callers_reached_by_plain_calls_are_hidden_from_a_trace():
    r = _reach({
        "split.Tensor": [("op", "kernel")],
        "unsafe_split.Tensor": [("function", "call"), ("op", "kernel")],
        "chunk": [("op", "kernel"), ("function", "op_call"), ("op", "kernel")],
        "split_backward": [("op", "kernel"), ("op", "backward")],
    })
    callers = ["unsafe_split.Tensor", "chunk", "split_backward"]
    assert _direct_callers(r, callers) == {"unsafe_split.Tensor"}


def test_a_forward_operator_reached_through_its_backward_formula_is_not_a_traced_caller():
    """A change to ``max_pool2d_with_indices_backward``'s kernel reaches ``max_pool2d_with_indices``
    through derivatives.yaml; a test whose trace ran the forward only never ran the change (held-out
    x01 on torch-xpu-ops: pooling.max_unpool2d, forward only, was selected), and a test that ran the
    backward shows the backward operator itself in its trace."""
    r = _reach({
        "max_pool2d_with_indices_backward": [("op", "kernel")],
        "max_pool2d_with_indices": [("op", "kernel"), ("op", "backward")],
        "max_pool2d": [("op", "kernel"), ("function", "op_call"), ("op", "kernel")],
    })
    assert _via_backward(r) == {"max_pool2d_with_indices"}
