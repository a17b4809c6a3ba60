"""A script that draws its inputs on the CPU runs the random-number kernels on the host, not on its
device: torch-xpu-ops' ``avg_pool2d.py`` times ``torch.randn(N, C, H, W).to(device)``, and its
trace (on the meta device, devices remapped) held ``normal_`` as if the xpu kernel ran it, so a
change to the xpu random helper selected 27 scripts that only draw on the CPU. The tracer records
the operators a script runs on host tensors as a second test of the script, on the CPU: a change to
the device's kernel selects only the scripts that draw on the device, and a change to the CPU's
kernel still selects those that draw on the host.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.conftest import run_perfq
from tests.oot_fixture import OotRepo, make_indexed_oot_repo, script

pytestmark = [pytest.mark.torch]

YAML_ENTRIES = """
- func: normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor(a!)
  device_check: NoCheck   # TensorIterator
  variants: method
  dispatch:
    CPU: normal_cpu_
    XPU: normal_xpu_
"""


def _kernel(family: str) -> str:
    return f"""\
#include <ATen/ATen.h>

namespace at::native {{

static float philox_{family}(uint64_t seed) {{
  return static_cast<float>(seed % 7);
}}

Tensor& normal_{family}_(Tensor& self, double mean, double std, std::optional<Generator> gen) {{
  philox_{family}(0);
  return self;
}}

}} // namespace at::native
"""


FILES = {
    "src/ATen/native/xpu/sycl/DistributionKernels.cpp": _kernel("xpu"),
    "src/ATen/native/cpu/DistributionKernels.cpp": _kernel("cpu"),
    # draws its input on the host, then runs a device op on it
    "test/microbench/host_draw.py": script(
        "",
        """
        x = torch.randn(64, 64).to(device)
        output = torch.flip(x, [0])
        """,
    ),
    # draws on the device (and on the host, sized by its device tensor: torch.rand(x.shape))
    "test/microbench/device_draw.py": script(
        "",
        """
        x = torch.randn(64, 64, device=device)
        output = torch.flip(x, [0])
        """,
    ),
}


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory) -> OotRepo:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("oot-host-ops")
    return make_indexed_oot_repo(root, FILES, YAML_ENTRIES, "normal_ kernels, scripts drawing on host and device")


def _selected(oot: OotRepo, path: str, old: str, new: str) -> set[str]:
    head = oot.commit_edit(path, old, new, f"edit {path}")
    proc = run_perfq(oot.path, "affected", f"{head}^..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return {b["name"] for b in json.loads(proc.stdout)["benchmarks"]}


def test_host_operators_are_a_cpu_test_of_the_script(oot: OotRepo):
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        tests = con.execute("SELECT bench, test, device FROM bench_tests WHERE bench IN ('host_draw', 'device_draw')"
                            " ORDER BY ALL").fetchall()
        ops = con.execute("SELECT bench, test, base FROM trace_ops WHERE base IN ('normal_', 'flip')").fetchall()
    finally:
        con.close()
    assert tests == [("device_draw", "device_draw", "xpu"), ("host_draw", "host_draw", "xpu"),
                     ("host_draw", "host_draw[host]", "cpu")]
    assert sorted(ops) == [("device_draw", "device_draw", "flip"), ("device_draw", "device_draw", "normal_"),
                           ("host_draw", "host_draw", "flip"), ("host_draw", "host_draw[host]", "normal_")]


def test_a_device_random_kernel_change_selects_only_scripts_drawing_on_the_device(oot: OotRepo):
    picks = _selected(oot, "src/ATen/native/xpu/sycl/DistributionKernels.cpp", "seed % 7", "seed % 5")
    assert picks == {"device_draw"}


def test_a_cpu_random_kernel_change_selects_scripts_drawing_on_the_host(oot: OotRepo):
    picks = _selected(oot, "src/ATen/native/cpu/DistributionKernels.cpp", "seed % 7", "seed % 5")
    assert picks == {"host_draw"}
