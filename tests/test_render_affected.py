"""The terminal view of `perfq affected --explain`: one tree per benchmark, chains that start
alike drawn once, file paths shortened to their base names (the JSON keeps them whole)."""

from __future__ import annotations

import io

from rich.console import Console

from perfq.cli.render_affected import explain_tree
from query.document import Confidence, Reason, SelectedBenchmark, Source
from query.model import ChainStep, StepKind

FILE = "aten/src/ATen/native/cpu/SoftMaxKernel.cpp"
KERNEL = ChainStep(StepKind.FUNCTION, "at::native::vec_host_softmax_lastdim::apply", file=FILE)


def _bench() -> SelectedBenchmark:
    shared = (KERNEL, ChainStep(StepKind.FUNCTION, "at::native::softmax_kernel_impl", file=FILE, via="call"),
              ChainStep(StepKind.STUB, "softmax_lastdim_kernel", via="registered"))
    bench = ChainStep(StepKind.BENCHMARK, "softmax_test", via="traced")
    reasons = (
        Reason(KERNEL.text, (*shared, ChainStep(StepKind.OP, "_softmax", via="kernel"), bench)),
        Reason(KERNEL.text, (*shared, ChainStep(StepKind.OP, "_softmax.out", via="kernel"), bench)),
    )
    return SelectedBenchmark("softmax_test", "pt/softmax_test.py", (), (), ("_softmax",), ("eager",), ("cpu",),
                             Confidence.high, Source.traced, reasons)


def test_explain_tree_draws_a_shared_start_once_at_80_columns():
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(explain_tree(_bench()))
    text = out.getvalue()
    assert text.count("softmax_kernel_impl") == 1 and text.count("stub softmax_lastdim_kernel") == 1
    assert "op _softmax [kernel]" in text and "op _softmax.out [kernel]" in text
    assert text.count("benchmark softmax_test") == 2
    assert "aten/src/ATen" not in text and "SoftMaxKernel.cpp:at::native::vec_host_softmax_lastdim::apply" in text
    assert max(len(line) for line in text.splitlines()) <= 80
