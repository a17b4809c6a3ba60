"""Library impls serve the tensors of their dispatch key only (issue 40, held-out r3-u01).

functorch registers batching rules for aten operators (``TORCH_LIBRARY_IMPL(aten,
FuncTorchBatched, m) { m.impl("addmm.out", addmm_decomp); }``), and a rule calls other
operators (``at::add_out``). A SparseCPU ``add`` kernel thus reaches ``addmm.out`` through the
rule, but the rule runs only for vmapped (batched) tensors: the operator reached that way must
not carry the dense layout that the traced dense ``add_test`` ran it on."""

from __future__ import annotations

import textwrap

import pytest

from indexer.devices import device_of_key, layout_of_key
from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.native_yaml import OpFacts
from query.affected import on_reached_devices
from query.reach import Reach
from schema.index_store import TracedHit
from schema.model import EdgeKind, NodeKind

SPARSE = """
namespace at::native {
Tensor& add_out_sparse_cpu(const Tensor& t, const Tensor& src, const Scalar& value, Tensor& r) {
  return r;
}
}
"""

BATCH_RULES = """
namespace at::functorch {
namespace {
Tensor& addmm_decomp(const Tensor& self, const Tensor& mat1, const Tensor& mat2, Tensor& out) {
  return at::add_out(out, self, at::mm(mat1, mat2));
}
}
TORCH_LIBRARY_IMPL(aten, FuncTorchBatched, m) {
  m.impl("addmm.out", addmm_decomp);
}
}
"""

OPS = [
    OpFacts("add.out", "add", "out", "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)"
            " -> Tensor(a!)", True, None, "function", "", None, [("SparseCPU", "add_out_sparse_cpu")]),
    OpFacts("addmm.out", "addmm", "out", "addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Tensor(a!) out)"
            " -> Tensor(a!)", True, None, "function", "", None, [("CPU", "addmm_out_cpu")]),
]


def _facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def _walk_up(tables, start_suffix: str) -> Reach:
    """Every node reached upward from the function ending in ``start_suffix``, with the edges
    into operators a query walk records (``Reach.into_op``)."""
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    kinds = {nid: kind for nid, kind, _, _ in tables.rows["nodes"]}
    keys = {nid: key for nid, _, key, _ in tables.rows["nodes"]}
    up: dict[int, list[tuple[int, str, str]]] = {}
    for dst, src, kind, detail in tables.rows["reach_edges"]:
        up.setdefault(dst, []).append((src, kind, detail))
    r = Reach()
    start = next(gid for gid, q in name.items() if q.endswith(start_suffix))
    seen, todo = {start}, [start]
    while todo:
        dst = todo.pop()
        for src, kind, detail in up.get(dst, ()):
            if kinds.get(src) == NodeKind.OP:
                r.into_op.append((dst, src, EdgeKind(kind), detail))
                r.key[src], r.kind[src] = keys[src], NodeKind.OP
            if src not in seen:
                seen.add(src)
                todo.append(src)
    return r


def test_an_operator_reached_through_a_batching_rule_serves_batched_tensors_only():
    files = [_facts("aten/src/ATen/native/sparse/SparseTensorMath.cpp", SPARSE),
             _facts("aten/src/ATen/functorch/BatchRulesLinearAlgebra.cpp", BATCH_RULES)]
    r = _walk_up(link(files, [], OPS, [], {}, []), "add_out_sparse_cpu")
    layouts = {r.key[op]: found for op, found in r.layouts().items()}
    assert layouts["add.out"] == {"sparse"}  # its SparseCPU kernel
    assert layouts["addmm.out"] == {"batched"}  # through addmm_decomp: not the dense tests' addmm


@pytest.mark.parametrize(
    "key", ["FuncTorchBatched", "FuncTorchBatchedDecomposition", "FuncTorchVmapMode", "Batched", "VmapMode",
            "BatchedNestedTensor", "FuncTorchDynamicLayerFrontMode"],
)
def test_functorch_keys_serve_batched_tensors(key):
    assert layout_of_key(key) == "batched"
    assert device_of_key(key) == ""


@pytest.mark.parametrize(("key", "device"), [("Vulkan", "vulkan"), ("Metal", "metal"), ("MPS", "mps")])
def test_backends_not_in_a_cpu_build_are_device_families_of_their_own(key, device):
    assert device_of_key(key) == device


@pytest.mark.parametrize(("key", "layout"), [("CPU", "dense"), ("SparseCPU", "sparse"), ("QuantizedCPU", "quantized"),
                                             ("CompositeImplicitAutograd", "any"), ("CatchAll", "any")])
def test_the_other_keys_keep_their_layouts(key, layout):
    assert layout_of_key(key) == layout


VULKAN = """
namespace at::native::vulkan::ops {
namespace {
Tensor clamp(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return self;
}
}
TORCH_LIBRARY_IMPL(aten, Vulkan, m) {
  m.impl("clamp", clamp);
}
}
"""

CLAMP_CPU = """
namespace at::native {
Tensor clamp_cpu(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return self;
}
}
"""

CLAMP_OPS = [OpFacts("clamp", "clamp", "", "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", True,
                     None, "function", "", None, [("CPU", "clamp_cpu")])]


def test_an_operator_reached_through_another_backends_registration_runs_on_that_device_only():
    """held-out r5-n01: a Vulkan kernel of ``clamp`` is not what a CPU test of clamp runs."""
    files = [_facts("aten/src/ATen/native/vulkan/ops/Clamp.cpp", VULKAN),
             _facts("aten/src/ATen/native/TensorCompare.cpp", CLAMP_CPU)]
    tables = link(files, [], CLAMP_OPS, [], {}, [])
    vulkan = _walk_up(tables, "vulkan::ops::(anonymous namespace)::clamp")
    assert {vulkan.key[op]: found for op, found in vulkan.devices().items()} == {"clamp": {"vulkan"}}
    cpu = _walk_up(tables, "clamp_cpu")
    assert {cpu.key[op]: found for op, found in cpu.devices().items()} == {"clamp": {"cpu"}}


def _hit(op: str, device: str) -> TracedHit:
    return TracedHit((op,), f"{op}_test", ("t",), "M", device, "eager", True, "")


def test_traced_tests_count_on_the_devices_the_walk_reached_each_operator_for():
    hits = [_hit("clamp", "cpu"), _hit("topk", "cpu"), _hit("neg", "cuda"), _hit("neg", "cpu")]
    reached = {"clamp": {"vulkan"}, "topk": {"cpu", "vulkan"}, "neg": {"cuda"}}
    assert [(h.ops[0], h.device) for h in on_reached_devices(hits, reached)] == [("topk", "cpu"), ("neg", "cuda")]
    assert on_reached_devices(hits, {"clamp": {""}, "topk": {""}, "neg": {""}}) == hits  # a composite: every device
    assert on_reached_devices(hits, {}) == hits  # not reached through a registration: unknown, kept
