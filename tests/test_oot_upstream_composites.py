"""Upstream composite operators of an installed torch, whose C++ the index does not hold.

The mini backend gains an XPU kernel for ``_local_scalar_dense`` and one for ``nonzero`` whose
helper calls ``.item<int64_t>()``. Upstream's ``item`` is CompositeImplicitAutograd and runs
``_local_scalar_dense``; an index of an installed torch has no C++ for it, so the op -> op edge
comes from execution: the masked_select script's small CPU run sees ``item`` run
``_local_scalar_dense``. A change to the XPU ``_local_scalar_dense`` then reaches ``item``, and
through the backend's own ``.item()`` call, ``nonzero``.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from indexer.native_yaml import OpFacts
from indexer.rules.ops import bodiless_composites
from tests.conftest import run_perfq
from tests.oot_fixture import OotRepo, make_indexed_oot_repo, script

YAML_ENTRIES = """
- func: _local_scalar_dense(Tensor self) -> Scalar
  dispatch:
    XPU: _local_scalar_dense_xpu

- func: nonzero(Tensor self) -> Tensor
  variants: method, function
  dispatch:
    XPU: nonzero_xpu
"""

FILES = {
    "src/ATen/native/xpu/XPUScalar.cpp": """\
#include <ATen/ATen.h>

namespace at::native {

Scalar _local_scalar_dense_xpu(const Tensor& self) {
  Scalar r = Scalar(0);
  return r;
}

} // namespace at::native
""",
    "src/ATen/native/xpu/Nonzero.cpp": """\
#include <ATen/ATen.h>

namespace at::native {

static int64_t count_of(const Tensor& self) {
  return at::sum(self).item<int64_t>();
}

Tensor nonzero_xpu(const Tensor& self) {
  Tensor out = at::empty({count_of(self), self.dim()}, self.options().dtype(kLong));
  return out;
}

} // namespace at::native
""",
    "test/microbench/scan.masked_select.py": script(
        """
        x = torch.randn(256, 256, device=device)
        mask = x > 0
        """,
        """
        output = torch.masked_select(x, mask)
        """,
    ),
    "test/microbench/scan.nonzero.py": script(
        """
        x = torch.randn(256, 256, device=device)
        """,
        """
        output = torch.nonzero(x)
        """,
    ),
}


def _op(name: str, composite: str | None, kernels: list[tuple[str, str]] | None = None) -> OpFacts:
    base, _, overload = name.partition(".")
    return OpFacts(name, base, overload, f"{name}(Tensor self) -> Tensor", False, None, "function", "", composite,
                   kernels or [])


def test_only_a_family_of_bodiless_implicit_composites_takes_what_its_base_was_seen_running():
    implicit = "CompositeImplicitAutograd"
    ops = [
        _op("item", implicit, [(implicit, "item")]),
        _op("max.other", implicit, [(implicit, "max")]),  # a trace's "aten::max" may be max.dim's CPU kernel
        _op("max.dim", None, [("CPU", "max")]),
        _op("contiguous", implicit, [(implicit, "contiguous")]),  # its C++ is in the index
        _op("to.dtype", implicit),
        _op("to.device", implicit),
    ]
    assert bodiless_composites(ops, {"contiguous"}) == {"item": ["item"], "to": ["to.dtype", "to.device"]}


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory) -> OotRepo:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("oot-composites")
    return make_indexed_oot_repo(root, FILES, YAML_ENTRIES, "_local_scalar_dense and nonzero kernels")


@pytest.mark.torch
def test_an_upstream_composite_seen_running_an_op_is_an_edge(oot: OotRepo):
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        edges = con.execute("SELECT op, caller_op FROM op_edges WHERE kind = 'upstream_composite'").fetchall()
    finally:
        con.close()
    assert ("_local_scalar_dense", "item") in edges
    assert not [e for e in edges if e[1] == "masked_select"]  # an op with kernels: its CPU kernel's calls


@pytest.mark.torch
def test_a_change_under_an_upstream_composite_reaches_the_backend_kernels_calling_it(oot: OotRepo):
    head = oot.commit_edit(
        "src/ATen/native/xpu/XPUScalar.cpp", "  Scalar r = Scalar(0);\n",
        "  TORCH_CHECK(self.numel() > 0);\n  Scalar r = Scalar(0);\n", "_local_scalar_dense checks"
    )
    proc = run_perfq(oot.path, "affected", f"{head}^..{head}", "--format", "json", "--explain")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {"_local_scalar_dense", "item", "nonzero"} <= set(doc["ops"])
