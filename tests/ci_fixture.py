"""A repository whose operator benchmarks really run: the ATen fixture plus a tiny op_bench framework.

The fixture's ``torch`` package is plain Python (no real torch): ``torch.nn.functional.fancy_softmax``
is the "kernel" ``pt/softmax_op_test.py`` times. ``SLOW_PATCH`` makes it ~1000x slower, a change
``perfq affected`` maps to that benchmark (through the Python call) and ``perfq run`` measures.
Each side is a wheel of the fixture's ``torch`` (``WHEEL_BUILD``: tools/build_wheel.py), so base and
head import their own ``torch``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.aten_fixture import FILES, write_tree
from tests.conftest import git

OPBENCH = "benchmarks/operator_benchmark"

FRAMEWORK = {
    f"{OPBENCH}/benchmark_core.py": """\
        BENCHMARK_TESTER = []


        class BenchmarkRunner:
            def __init__(self, args):
                self.args = args

            def run(self):
                for test in BENCHMARK_TESTER:
                    test(self.args)
        """,
    f"{OPBENCH}/benchmark_runner.py": """\
        import argparse

        import benchmark_core


        def parse_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--tag-filter", "--tag_filter", default="short")
            parser.add_argument("--test-name", "--test_name")
            parser.add_argument("--operators")
            parser.add_argument("--device", default="None")
            parser.add_argument("--iterations", type=int, default=20)
            parser.add_argument("--num-runs", "--num_runs", type=int, default=1)
            parser.add_argument("--warmup-iterations", "--warmup_iterations", type=int, default=5)
            parser.add_argument("--omp-num-threads", type=int)
            parser.add_argument("--mkl-num-threads", type=int)
            return parser.parse_known_args()[0]


        def main():
            benchmark_core.BenchmarkRunner(parse_args()).run()
        """,
    f"{OPBENCH}/operator_benchmark.py": """\
        import itertools
        import time

        import benchmark_core
        import benchmark_runner  # noqa: F401  (pt files call op_bench.benchmark_runner.main())


        def cross_product_configs(**kwargs):
            tags = kwargs.pop("tags", ("short",))
            keys = list(kwargs)
            return [(dict(zip(keys, values)), tags) for values in itertools.product(*kwargs.values())]


        class TorchBenchmarkBase:
            pass


        def generate_pt_test(configs, cls):
            def run(args):
                for params, tags in configs:
                    if args.device not in ("None", params.get("device", args.device)):
                        continue
                    name = cls.__name__.replace("Benchmark", "") + "".join(f"_{k}{v}" for k, v in params.items())
                    if args.test_name and name != args.test_name:
                        continue
                    if not args.test_name and args.tag_filter not in tags and args.tag_filter != "all":
                        continue
                    bench = cls()
                    bench.init(**params)
                    for _ in range(args.warmup_iterations or 0):
                        bench.forward(**bench.inputs)
                    print("# Mode: Eager")
                    print(f"# Name: {name}")
                    print(f"# Input: {', '.join(f'{k}: {v}' for k, v in params.items())}")
                    for r in range(args.num_runs):
                        start = time.perf_counter()
                        for _ in range(args.iterations):
                            bench.forward(**bench.inputs)
                        us = (time.perf_counter() - start) / args.iterations * 1e6
                        print(f"Run: {r}, Forward Execution Time (us) : {us:.3f}")
            benchmark_core.BENCHMARK_TESTER.append(run)
        """,
    f"{OPBENCH}/pt/__init__.py": "",
    f"{OPBENCH}/pt/softmax_op_test.py": """\
        import operator_benchmark as op_bench
        import torch
        import torch.nn.functional as F

        configs = op_bench.cross_product_configs(N=(8, 64), device=("cpu",), tags=("short",))


        class SoftmaxOpBenchmark(op_bench.TorchBenchmarkBase):
            def init(self, N, device):
                self.inputs = {"x": torch.rand(N)}

            def forward(self, x):
                return F.fancy_softmax(x)


        op_bench.generate_pt_test(configs, SoftmaxOpBenchmark)

        if __name__ == "__main__":
            op_bench.benchmark_runner.main()
        """,
    "tools/build_wheel.py": """\
        # dist/torch-0.0.1-py3-none-any.whl of this checkout's torch/ (a wheel is a zip with a dist-info)
        import base64, hashlib, pathlib, sys, zipfile

        root = pathlib.Path(__file__).resolve().parents[1]
        dist = pathlib.Path(sys.argv[1])
        dist.mkdir(parents=True, exist_ok=True)
        info = "torch-0.0.1.dist-info"
        files = {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "torch").rglob("*.py"))}
        files[info + "/METADATA"] = b"Metadata-Version: 2.1\\nName: torch\\nVersion: 0.0.1\\n"
        files[info + "/WHEEL"] = b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        digest = {n: base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
                  for n, d in files.items()}
        record = [f"{name},sha256={digest[name]},{len(data)}" for name, data in files.items()]
        files[info + "/RECORD"] = ("\\n".join(record + [info + "/RECORD,,"]) + "\\n").encode()
        with zipfile.ZipFile(dist / "torch-0.0.1-py3-none-any.whl", "w") as whl:
            for name, data in files.items():
                whl.writestr(name, data)
        """,
    "torch/__init__.py": """\
        def rand(n):
            return [0.5] * n


        def softmax_op(x, dim):
            return x
        """,
}

# the "kernel" change of the PR: a Python function called by the benchmark gets ~1000x slower
SLOW_PATCH = ("torch/nn/functional.py", "    return torch.softmax_op(x, 0)\n",
              "    for _ in range(3000):\n        x = torch.softmax_op(x, 0)\n    return x\n")
# builds a side's wheel of the fixture's ``torch`` into dist/ (tools/build_wheel.py: no setuptools, offline)
WHEEL_BUILD = "python tools/build_wheel.py dist"


def make_ci_repo(root: Path) -> Path:
    """The fixture on branch main, one commit, files as in a PyTorch checkout (uploadpack filters on)."""
    write_tree(root, {**FILES, **{k: textwrap.dedent(v) for k, v in FRAMEWORK.items()}})
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "uploadpack.allowFilter", "true")
    git(root, "config", "uploadpack.allowAnySHA1InWant", "true")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def open_pr(origin: Path, number: int, patch: tuple[str, str, str] | None) -> dict[str, str]:
    """A PR branch with ``patch`` (None: a change no benchmark sees) and GitHub's merge ref for it."""
    base = git(origin, "rev-parse", "main").strip()
    git(origin, "checkout", "-q", "-b", f"pr{number}")
    rel, old, new = patch or ("README.md", "fixture\n", "fixture, reworded\n")
    path = origin / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    git(origin, "commit", "-qam", f"PR {number}")
    head = git(origin, "rev-parse", "HEAD").strip()
    git(origin, "checkout", "-q", "--detach", base)
    git(origin, "merge", "-q", "--no-ff", "-m", f"Merge {head} into {base}", head)
    merge = git(origin, "rev-parse", "HEAD").strip()
    git(origin, "update-ref", f"refs/pull/{number}/merge", merge)
    git(origin, "checkout", "-q", "main")
    return {"base": base, "head": head, "merge": merge}
