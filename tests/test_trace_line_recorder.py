"""The tracer's per-test Python lines hold only what the test runs: a finalizer the cyclic garbage
collector happens to run during a test (garbage of an earlier test, collected when allocations
reach a threshold) is not the test's (the traced index differed between two runs of one code)."""

from __future__ import annotations

import gc
import importlib.util
import textwrap
from pathlib import Path

import pytest

from indexer.trace_driver import _LineRecorder

HARNESS = textwrap.dedent("""\
    class Node:
        def __init__(self):
            self.me = self

        def __del__(self):
            finalized = True
            return finalized


    def leave_garbage():
        Node()


    def collect():
        gc_module = __import__("gc")
        gc_module.collect()
        return 1
""")


@pytest.fixture
def harness(tmp_path: Path):
    (tmp_path / "harness.py").write_text(HARNESS)
    spec = importlib.util.spec_from_file_location("perfq_test_harness", tmp_path / "harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tmp_path, module


@pytest.mark.torch
def test_a_finalizer_run_by_the_garbage_collector_is_not_the_running_tests(harness):
    tree, module = harness
    recorder = _LineRecorder(str(tree), "bench/", str(tree / "own_test.py"))
    gc.disable()  # the collection happens where the test says, not at a threshold
    try:
        with recorder.recording(shapes_only=False):
            module.leave_garbage()
        first = recorder.take()
        with recorder.recording(shapes_only=False):
            module.collect()
        second = recorder.take()
    finally:
        gc.enable()
        gc.callbacks.remove(recorder._collection)
    assert first == {"bench/harness.py": [2, 3, 10, 11]}
    assert second == {"bench/harness.py": [14, 15, 16, 17]}  # not __del__'s 5-7
