"""bench/eval_oot.py: the file-name matcher, the affected-JSON reader and a baseline run on the fixture."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.oot_fixture import make_oot_repo

BENCH = Path(__file__).resolve().parent.parent / "bench" / "eval_oot.py"


@pytest.fixture(scope="module")
def ev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_oot", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_oot"] = module
    spec.loader.exec_module(module)
    return module


STEMS = ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm_1d", "batch_norm_2d", "distance.cdist", "distance.pdist",
         "pooling.max_pool2d", "pooling.max_unpool2d", "reduce.sum", "scan.topk", "softmax", "distribution.normal"]


@pytest.mark.parametrize(
    ("path", "selected"),
    [
        ("src/ATen/native/xpu/sycl/BatchNormKernels.cpp", ("batch_norm_1d", "batch_norm_2d")),
        ("src/ATen/native/xpu/sycl/AdaptiveAveragePooling2dKernels.cpp", ("adaptive_avg_pool2d", "avg_pool2d")),
        ("src/ATen/native/xpu/sycl/DilatedMaxPool2d.cpp", ("pooling.max_pool2d",)),
        ("src/ATen/native/xpu/sycl/DistanceKernels.cpp", ("distance.cdist", "distance.pdist")),
        ("src/ATen/native/xpu/sycl/TensorTopKSbtopkKernel_k4.cpp", ("scan.topk",)),
        ("src/ATen/native/xpu/Distributions.cpp", ("distribution.normal",)),
        ("src/ATen/native/xpu/ForeachReduceOp.cpp", ()),
        ("test/regressions/test_softmax.py", ()),
    ],
)
def test_filename_matcher(ev: ModuleType, path: str, selected: tuple[str, ...]) -> None:
    assert ev.filename_selection([path], STEMS) == selected


def test_parse_affected_takes_files_and_canary_sets(ev: ModuleType) -> None:
    doc = {
        "shared_infrastructure": False,
        "benchmarks": [{"name": "x", "file": "test/microbench/distance.cdist.py"}],
        "canary": [
            {"set": "reductions", "benchmarks": [{"name": "reduce.sum", "file": "test/microbench/reduce.sum.py"}]}
        ],
    }
    benchmarks, flagged = ev.parse_affected("log line\n" + json.dumps(doc))
    assert benchmarks == ("distance.cdist", "reduce.sum")
    assert flagged


def test_score_counts_extras_and_negatives(ev: ModuleType) -> None:
    case = ev.Case("c", "b" * 40, "a" * 40, "kernel", ("softmax",), ("layer_norm",), False)
    result = ev.score(case, ev.Selection(("layer_norm", "softmax", "sort"), False, 0.1))
    assert (result.recall, result.full_recall, result.extra) == (1.0, True, ("sort",))
    negative = ev.Case("n", "b" * 40, "a" * 40, "negative", (), (), False)
    assert ev.score(negative, ev.Selection((), False, 0.1)).negative_ok


def test_baseline_run_on_the_fixture_repo(ev: ModuleType, tmp_path: Path) -> None:
    repo = make_oot_repo(tmp_path)
    sha = repo.commit_edit("src/ATen/native/xpu/sycl/DistanceKernels.cpp", "a > b ?", "a >= b ?", "cdist tie")
    cases = [{"id": "k1", "commit": sha, "base": repo.head, "category": "kernel",
              "expected_benchmarks": ["distance.cdist"], "acceptable_benchmarks": []}]
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(cases))
    out = tmp_path / "out.json"
    ev.main(["--repo", str(repo.path), "--cases", str(cases_file), "--baseline", "filename", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["summary"]["mean_recall"] == 1.0
    assert doc["cases"][0]["selected"] == ["distance.cdist"]
