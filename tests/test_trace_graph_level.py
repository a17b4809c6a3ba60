"""The tracer tells the operators a test runs at graph level (called from Python, or inside
composite operators, which torch.compile decomposes) from those it runs only inside another
operator's kernel (``cat`` inside ``quantized_lstm``): a lowering of ``cat`` changes the first only."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from indexer.trace import TracedTest, TraceMode, graph_ops
from indexer.trace_driver import _MARK, _ops_per_marker

pytestmark = pytest.mark.torch  # composite operators are told by torch's dispatcher


@dataclass
class Event:
    label: str
    start: int
    end: int

    def name(self) -> str:
        return self.label

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def start_thread_id(self) -> int:
        return 1

    def dtypes(self) -> list:
        return []


def test_operators_inside_a_kernel_are_not_graph_level_and_inside_a_composite_they_are():
    pytest.importorskip("torch")
    events = [
        Event(f"{_MARK}0", 0, 100),
        Event("aten::quantized_lstm", 10, 50),  # a kernel of its own
        Event("aten::cat", 20, 30),
        Event(f"{_MARK}1", 200, 300),
        Event("aten::instance_norm", 210, 290),  # CompositeImplicitAutograd: decomposed when compiled
        Event("aten::cat", 220, 230),
        Event("aten::cat", 240, 250),
    ]
    markers = [(0, 100, "0"), (200, 300, "1")]
    graph: dict[str, set[str]] = {}
    ops = _ops_per_marker(events, markers, {"0": "real", "1": "real"}, graph)
    assert ops == {"0": {"aten::quantized_lstm", "aten::cat"}, "1": {"aten::instance_norm", "aten::cat"}}
    assert graph == {"0": {"aten::quantized_lstm"}, "1": {"aten::instance_norm", "aten::cat"}}


def test_a_fake_test_takes_the_graph_level_operators_of_its_modules_real_tests():
    def test(name: str, mode: TraceMode, ops: tuple[str, ...], inner: tuple[str, ...] = ()) -> TracedTest:
        return TracedTest(name, "lstm", "LSTM", "short", False, "cpu", mode, ops, inner=inner)

    tests = [
        test("real", TraceMode.real, ("aten::quantized_lstm", "aten::cat", "aten::stack"), ("aten::cat",)),
        test("fake", TraceMode.fake, ("aten::quantized_lstm",)),
    ]
    assert graph_ops(tests) == {
        "real": {"aten::quantized_lstm", "aten::stack"},
        "fake": {"aten::quantized_lstm", "aten::stack"},
    }
    assert TracedTest.from_json(tests[0].to_json()) == tests[0]
