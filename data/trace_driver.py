"""Run one operator_benchmark module with minimal iterations under torch.profiler and
print, per benchmark class, the aten ops its timed forward (and backward) executed.

Run from the operator_benchmark directory: ``python trace_driver.py pt.softmax_test``.
Prints one line ``PERFQ-TRACE {"Class": ["aten::softmax", ...]}`` at the end. perfq runs
it in a subprocess (runner/bench_trace.py); it is not imported by perfq itself.
"""

import importlib
import json
import os
import sys

sys.path.insert(0, os.getcwd())

import benchmark_pytorch  # noqa: E402  (the framework of the benchmark being traced)
from torch.profiler import ProfilerActivity, profile  # noqa: E402

TRACED: dict[str, set[str]] = {}


def _record(case, run, *args, **kwargs):
    name = type(case.op_bench).__name__
    if name in TRACED and TRACED[name]:
        return run(*args, **kwargs)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = run(*args, **kwargs)
    TRACED.setdefault(name, set()).update(e.name for e in prof.events() if e.name.startswith(("aten::", "quantized::")))
    return result


_forward = benchmark_pytorch.PyTorchOperatorTestCase.run_forward
_backward = benchmark_pytorch.PyTorchOperatorTestCase.run_backward


def _traced_forward(self, num_runs, print_per_iter, cuda_sync):
    return _record(self, _forward, self, 1, False, cuda_sync)


def _traced_backward(self, num_runs, print_per_iter=False):
    return _record(self, _backward, self, 1, False)


benchmark_pytorch.PyTorchOperatorTestCase.run_forward = _traced_forward
benchmark_pytorch.PyTorchOperatorTestCase.run_backward = _traced_backward

if __name__ == "__main__":
    module = sys.argv[1]
    sys.argv = [module, "--tag-filter", "short", "--device", "cpu", "--iterations", "1", "--warmup-iterations", "0",
                "--min-time-per-test", "0", "--num-runs", "1"]
    importlib.import_module(module)
    from benchmark_runner import main

    try:
        main()
    finally:
        print("PERFQ-TRACE " + json.dumps({k: sorted(v) for k, v in TRACED.items()}), flush=True)
