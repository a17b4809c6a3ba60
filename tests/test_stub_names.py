"""Operators a DispatchStub declared upstream is linked to by its name (an out-of-tree backend)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from indexer.extract import file_facts
from indexer.link import link
from indexer.native_yaml import load_native_functions
from indexer.stub_names import StubNames
from schema.model import EdgeKind

# (overload, base, composite kind) as native_functions.yaml gives them
OPS = [
    ("div.Tensor", "div", None),
    ("div.Tensor_mode", "div", None),
    ("div.Scalar", "div", "CompositeExplicitAutograd"),
    ("divide.Tensor", "divide", "CompositeImplicitAutograd"),
    ("true_divide.Tensor", "true_divide", "CompositeImplicitAutograd"),
    ("floor_divide", "floor_divide", None),
    ("floor_divide.Scalar", "floor_divide", "CompositeExplicitAutograd"),
    ("add.Tensor", "add", None),
    ("layer_norm", "layer_norm", "CompositeImplicitAutograd"),
    ("native_layer_norm", "native_layer_norm", None),
    ("random_.from", "random_", None),
    ("index_put_", "index_put_", None),
]


def test_a_stub_set_apart_by_a_qualifier_goes_to_the_operator_naming_all_its_words():
    names = StubNames(OPS)
    # div_floor_stub runs floor division: floor_divide, not every div (whose own stub is div_true_stub)
    assert names.ops_named_like("div_floor_stub") == ["floor_divide", "floor_divide.Scalar"]


def test_an_operator_that_only_decomposes_is_no_stubs_caller():
    # true_divide (CompositeImplicitAutograd) runs div: div_true_stub stays with div
    assert StubNames(OPS).ops_named_like("div_true_stub") == ["div.Tensor", "div.Tensor_mode", "div.Scalar"]


def test_exact_names_and_dropped_trailing_words_still_link():
    names = StubNames(OPS)
    assert names.ops_named_like("add_stub") == ["add.Tensor"]
    assert names.ops_named_like("LayerNormKernel") == ["layer_norm", "native_layer_norm"]
    assert names.ops_named_like("random_from_to_stub") == ["random_.from"]
    assert names.ops_named_like("index_put_with_sort_stub") == ["index_put_"]
    assert names.ops_named_like("unknown_thing_stub") == []


YAML = """\
- func: div.Tensor(Tensor self, Tensor other) -> Tensor
  structured_delegate: div.out
- func: div.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU, CUDA, XPU: div_out
- func: true_divide.Tensor(Tensor self, Tensor other) -> Tensor
- func: floor_divide(Tensor self, Tensor other) -> Tensor
  dispatch:
    CPU, CUDA, XPU: floor_divide
"""

BINARY_OPS = """
#include <ATen/native/BinaryOps.h>
namespace at::native {
REGISTER_XPU_DISPATCH(div_true_stub, &xpu::div_true_kernel);
REGISTER_XPU_DISPATCH(div_floor_stub, &xpu::div_floor_kernel);
}
"""

KERNELS = """
namespace at::native::xpu {
void div_true_kernel(TensorIteratorBase& iter) { gpu_kernel(iter, DivTrueFunctor()); }
void div_floor_kernel(TensorIteratorBase& iter) { gpu_kernel(iter, DivFloorFunctor()); }
}
"""


def test_an_upstream_stub_is_linked_to_the_operators_its_whole_name_says(tmp_path: Path):
    # a backend registering upstream's stubs: div_floor_stub serves floor_divide, not div
    yaml_path = tmp_path / "native_functions.yaml"
    yaml_path.write_text(YAML)
    ops, _ = load_native_functions(tmp_path, yaml_path)
    files = [
        file_facts("cpp", path, textwrap.dedent(text).encode())
        for path, text in (("src/ATen/native/xpu/BinaryOps.cpp", BINARY_OPS),
                           ("src/ATen/native/xpu/sycl/BinaryKernels.cpp", KERNELS))
    ]
    tables = link(files, [], ops, [])
    key = {nid: k for nid, _, k, _ in tables.rows["nodes"]}
    by_name = {
        (key[dst], key[src]) for dst, src, kind, _ in tables.rows["reach_edges"] if kind == EdgeKind.STUB_NAME
    }
    assert by_name == {("div_true_stub", "div.Tensor"), ("div_true_stub", "div.out"),
                       ("div_floor_stub", "floor_divide")}
