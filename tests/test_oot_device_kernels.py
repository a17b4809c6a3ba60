"""What a device backend's own kernels run, which a CPU trace of its scripts cannot see.

The mini backend gains ``nonzero`` and ``masked_select`` XPU kernels (as torch-xpu-ops has):
``masked_select_xpu`` runs ``at::index_out`` with the boolean mask, whose upstream code (not in
the repo) runs ``nonzero``. On the CPU, ``masked_select`` has a kernel of its own, so the
script's trace never shows ``nonzero``; a small CPU run of ``x[mask]`` shows ``index`` running
it. A change to the XPU nonzero kernel must select both scripts, the masked_select one as
inferred (how, in its explanation) and with less confidence than a traced pick.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.conftest import run_perfq
from tests.oot_fixture import OotRepo, make_indexed_oot_repo, script

pytestmark = [pytest.mark.torch]

YAML_ENTRIES = """
- func: nonzero(Tensor self) -> Tensor
  variants: method, function
  dispatch:
    XPU: nonzero_xpu

- func: masked_select(Tensor self, Tensor mask) -> Tensor
  variants: method, function
  dispatch:
    XPU: masked_select_xpu
"""

FILES = {
    "src/ATen/native/xpu/Nonzero.cpp": """\
#include <ATen/ATen.h>
#include <ATen/native/xpu/sycl/NonzeroKernel.h>

namespace at::native {

Tensor nonzero_xpu(const Tensor& self) {
  Tensor out = at::empty({0}, self.options().dtype(kLong));
  xpu::nonzero_kernel(self, out);
  return out;
}

} // namespace at::native
""",
    "src/ATen/native/xpu/sycl/NonzeroKernel.h": """\
#pragma once
#include <ATen/ATen.h>

namespace at::native::xpu {

void nonzero_kernel(const Tensor& self, Tensor& out);

} // namespace at::native::xpu
""",
    "src/ATen/native/xpu/sycl/NonzeroKernel.cpp": """\
#include <ATen/native/xpu/sycl/NonzeroKernel.h>

namespace at::native::xpu {

void nonzero_kernel(const Tensor& self, Tensor& out) {
  int64_t n = self.numel();
  out.resize_({n, self.dim()});
}

} // namespace at::native::xpu
""",
    "src/ATen/native/xpu/Indexing.cpp": """\
#include <ATen/ATen.h>

namespace at::native {

static Tensor& masked_select_out_impl(Tensor& result, const Tensor& self, const Tensor& mask) {
  at::index_out(result, self, c10::List<std::optional<at::Tensor>>({mask}));
  return result;
}

Tensor masked_select_xpu(const Tensor& self, const Tensor& mask) {
  Tensor result = at::empty({0}, self.options());
  return masked_select_out_impl(result, self, mask);
}

} // namespace at::native
""",
    "src/ATen/native/xpu/sycl/DistanceKernels.cpp": """\
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>

namespace at::native::xpu {

static void cdist_kernel_xpu(Tensor& result, const Tensor& x1, const Tensor& x2, double p) {
  result.copy_(at::sum(x1));
}

} // namespace at::native::xpu

namespace at::native {
REGISTER_XPU_DISPATCH(cdist_stub, &xpu::cdist_kernel_xpu);
} // namespace at::native
""",
    "test/microbench/distance.cdist.py": script(
        """
        x = torch.randn(64, 8, device=device)
        """,
        """
        output = torch.cdist(x, x)
        """,
    ),
    "test/microbench/scan.masked_select.py": script(
        """
        x = torch.randn(256, 256, device=device)
        mask = x > 0
        """,
        """
        output = torch.masked_select(x, mask)
        """,
    ),
    "test/microbench/indexing.index.py": script(
        """
        x = torch.randn(256, 256, device=device)
        mask = x > 0
        """,
        """
        output = x[mask]
        """,
    ),
}


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory) -> OotRepo:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("oot-kernels")
    return make_indexed_oot_repo(root, FILES, YAML_ENTRIES, "nonzero and masked_select kernels")


def test_ops_run_inside_device_kernels_are_recorded_as_inferred(oot: OotRepo):
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT base, inferred FROM trace_ops WHERE bench = 'scan.masked_select' AND namespace = 'aten'"
        ).fetchall()
        index_rows = dict(con.execute("SELECT base, inferred FROM trace_ops WHERE bench = 'indexing.index'").fetchall())
    finally:
        con.close()
    why = dict(rows)
    assert why["masked_select"] == ""  # the trace saw it
    assert "masked_select_out_impl" in why["index"] and "xpu kernel of masked_select" in why["index"]
    assert why["nonzero"].startswith("inside aten::index in a small CPU run")
    assert index_rows["nonzero"] == ""  # its own small CPU run saw index run nonzero


def test_a_device_dispatch_stub_impl_is_the_kernel_of_its_operator(oot: OotRepo):
    """The XPU impl of the upstream ``cdist_stub`` runs what it calls for a script running cdist."""
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        why = dict(con.execute("SELECT base, inferred FROM trace_ops WHERE bench = 'distance.cdist'").fetchall())
    finally:
        con.close()
    assert why["sum"] == "called by at::native::xpu::cdist_kernel_xpu (xpu kernel of cdist)"


def test_a_device_kernel_change_selects_scripts_whose_kernels_run_it(oot: OotRepo):
    head = oot.commit_edit(
        "src/ATen/native/xpu/sycl/NonzeroKernel.cpp", "out.resize_({n, self.dim()});",
        "out.resize_({n, self.dim() + 0});", "nonzero"
    )
    proc = run_perfq(oot.path, "affected", f"{head}^..{head}", "--format", "json", "--explain")
    assert proc.returncode == 0, proc.stderr
    picks = {b["name"]: b for b in json.loads(proc.stdout)["benchmarks"]}
    assert set(picks) == {"indexing.index", "scan.masked_select"}
    assert (picks["indexing.index"]["confidence"], picks["indexing.index"]["source"]) == ("high", "traced")
    masked = picks["scan.masked_select"]
    assert (masked["confidence"], masked["source"]) == ("medium", "inferred")
    chain = " ".join(step for reason in masked["reasons"] for step in reason["chain"])
    assert "[inferred: 1 test(s) run nonzero, inside aten::index" in chain
    assert "masked_select_out_impl" in chain


def inferred_after_a_new_call(oot: OotRepo, path: str, line: str, call: str, bench: str) -> dict[str, str]:
    """Commit ``call`` after ``line`` of ``path``, index, check the build re-linked (a patch
    would keep what the kernel was taken to run) and return ``bench``'s op -> why inferred."""
    oot.commit_edit(path, line, f"{line}  {call}\n", f"a new call in {path}")
    proc = run_perfq(oot.path, "index", "--format", "json", "-q")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mode"] == "linked"
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        return dict(con.execute("SELECT base, inferred FROM trace_ops WHERE bench = ?", [bench]).fetchall())
    finally:
        con.close()


def test_a_new_call_in_a_device_kernel_is_linked_again_not_patched(oot: OotRepo):
    why = inferred_after_a_new_call(
        oot, "src/ATen/native/xpu/Indexing.cpp", "  Tensor result = at::empty({0}, self.options());\n",
        "(void)at::sum(mask);", "scan.masked_select",
    )
    assert why["sum"] == "called by at::native::masked_select_xpu (xpu kernel of masked_select)"


def test_a_new_call_in_a_device_stub_impl_is_linked_again_not_patched(oot: OotRepo):
    why = inferred_after_a_new_call(
        oot, "src/ATen/native/xpu/sycl/DistanceKernels.cpp", "  result.copy_(at::sum(x1));\n",
        "(void)at::prod(x2);", "distance.cdist",
    )
    assert why["prod"] == "called by at::native::xpu::cdist_kernel_xpu (xpu kernel of cdist)"
