"""Operators a DispatchStub declared upstream is linked to by its name (an out-of-tree backend)."""

from __future__ import annotations

from indexer.stub_names import StubNames

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
