"""Which operators a DispatchStub serves, one rule for the full link and the in-place patch."""

from __future__ import annotations

from indexer.devices import ops_of_stubs


def test_a_stub_named_like_an_operator_serves_the_layout_its_name_or_folder_says():
    served = ops_of_stubs([("add_stub", "add.Tensor", "Dense"), ("sparse_add_stub", "add.Tensor", "Sparse")], [])
    assert served == {"add_stub": {("add.Tensor", "dense")}, "sparse_add_stub": {("add.Tensor", "sparse")}}


def test_a_stub_called_by_a_kernel_serves_that_kernels_layout_and_a_composite_one_dense_tensors():
    served = ops_of_stubs([], [
        ("copy_stub", "copy_", "CPU"),
        ("copy_stub", "clone", "CompositeExplicitAutograd"),
        ("copy_stub", "_to_dense", "SparseCPU"),
    ])
    assert served == {"copy_stub": {("copy_", "dense"), ("clone", "dense"), ("_to_dense", "sparse")}}


def test_both_links_of_one_stub_add_up():
    served = ops_of_stubs([("cdist_stub", "cdist", "Dense")], [("cdist_stub", "_cdist_forward", "CPU")])
    assert served["cdist_stub"] == {("cdist", "dense"), ("_cdist_forward", "dense")}
    assert "other_stub" not in served
