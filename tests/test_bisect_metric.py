"""Reading a benchmark's metric and inferring which direction is better."""

from __future__ import annotations

import pytest

from common.errors import PerfqError
from perfq.bisect.metric import MetricSpec, extract, polarity, unit_polarity
from perfq.bisect.request import OPBENCH_METRIC, opbench_command

OPBENCH_OUT = """\
# ----------------------------------------
# PyTorch/Caffe2 Operator Micro-benchmarks
# Mode: Eager
# Name: add_M64_N64_K64_cpu
# Input: M: 64, N: 64, K: 64, device: cpu
Forward Execution Time (us) : 12.500

# Name: add_M64_N64_K128_cpu
# Input: M: 64, N: 64, K: 128, device: cpu
Forward Execution Time (us) : 20.250
"""


def test_auto_detects_one_number_with_a_unit():
    r = extract("iteration 1 of 3\nresult: time: 12.5 ms\n", MetricSpec())
    assert (r.value, r.unit) == (12.5, "ms")
    r = extract("copy bandwidth 812.4 GB/s (3 runs)", MetricSpec())
    assert (r.value, r.unit) == (812.4, "GB/s")


def test_auto_detect_refuses_several_numbers_or_none():
    with pytest.raises(PerfqError, match="--metric"):
        extract("fwd 1.0 ms\nbwd 2.0 ms\n", MetricSpec())
    with pytest.raises(PerfqError, match="no number with a unit"):
        extract("all good, 3 tests\n", MetricSpec())


def test_regex_first_group_unit_after_match_and_aggregates():
    r = extract("t=3.25 us\nt=4.75 us\n", MetricSpec(regex=r"t=([0-9.]+)"))
    assert (r.value, r.unit) == (3.25, "us")
    assert extract("t=3.25 us\nt=4.75 us\n", MetricSpec(regex=r"t=([0-9.]+)", aggregate="sum")).value == 8.0
    assert extract("t=3.25 us\nt=4.75 us\n", MetricSpec(regex=r"t=([0-9.]+)", aggregate="last")).value == 4.75
    with pytest.raises(PerfqError, match="matched nothing"):
        extract("nothing", MetricSpec(regex=r"t=([0-9.]+)"))
    with pytest.raises(PerfqError, match="group"):
        extract("t=1", MetricSpec(regex=r"t=[0-9]"))
    with pytest.raises(PerfqError, match="not a valid regular expression"):
        extract("t=1", MetricSpec(regex=r"t=(["))


def test_json_dotted_path():
    out = 'log line\n{"results": [{"name": "a", "latency_ms": 1.5}, {"name": "b", "latency_ms": 2.5}]}\n'
    r = extract(out, MetricSpec(json_path="results.1.latency_ms"))
    assert r.value == 2.5 and r.unit == "ms"
    with pytest.raises(PerfqError, match="no 'missing'"):
        extract(out, MetricSpec(json_path="results.0.missing"))
    with pytest.raises(PerfqError, match="not JSON"):
        extract("plain text", MetricSpec(json_path="a"))
    with pytest.raises(PerfqError, match="not a number"):
        extract('{"a": "fast"}', MetricSpec(json_path="a"))


def test_polarity_from_flags_and_units():
    assert unit_polarity("ms") is True and unit_polarity("us") is True and unit_polarity("s") is True
    assert unit_polarity("GB/s") is False and unit_polarity("TFLOPS") is False
    assert unit_polarity("it/s") is False and unit_polarity("widgets") is None
    assert polarity(None, None, "ms")[0] is True
    assert "inferred from the unit GB/s" in polarity(None, None, "GB/s")[1]
    assert polarity(None, True, "ms")[0] is False  # an explicit flag wins
    with pytest.raises(PerfqError, match="lower or higher"):
        polarity(None, None, None)
    with pytest.raises(PerfqError, match="contradict"):
        polarity(True, True, None)


def test_operator_benchmark_command_and_metric():
    argv, cwd, spec = opbench_command("add_test")
    assert argv[1:] == ["-m", "pt.add_test", "--tag-filter", "short", "--device", "cpu"]
    assert cwd == "benchmarks/operator_benchmark" and spec.regex == OPBENCH_METRIC
    assert extract(OPBENCH_OUT, spec).value == pytest.approx(32.75)  # sum of the printed tests
    argv, _, spec = opbench_command("add_test", "add_M64_N64_K128_cpu")
    assert argv[3:5] == ["--test-name", "add_M64_N64_K128_cpu"] and spec.aggregate == "first"


def test_non_finite_values_are_rejected():
    with pytest.raises(PerfqError, match="not a finite number"):
        extract('{"t": NaN}', MetricSpec(json_path="t"))


CAT_OUT = """\
# Name: cat_sizes[<function<lambda>at0x7f1e0088ae80>]_N100_dim0_cpu
# Input: sizes: [<function <lambda> at 0x7f1e0088ae80>], N: 100, dim: 0, device: cpu
Forward Execution Time (us) : 3663.317

# Name: cat_sizes[<function<lambda>at0x7f1e0088af20>]_N1000_dim0_cpu
# Input: sizes: [<function <lambda> at 0x7f1e0088af20>], N: 1000, dim: 0, device: cpu
Forward Execution Time (us) : 41000.5
"""


@pytest.mark.parametrize("asked", ["cat_sizes[<function<lambda>>]_N1000_dim0_cpu",  # as perfq shows it
                                   "cat_sizes[<function<lambda>at0x7f0000000000>]_N1000_dim0_cpu"])  # another process's
def test_a_test_named_with_an_address_is_read_from_the_output_not_selected_by_the_runner(asked):
    """The runner's exact --test-name compares the name its own process gives (cat_test's lambda: a new address in
    every process), so it would measure nothing; the test is picked from the output by its stable name."""
    argv, _, spec = opbench_command("cat_test", asked)
    assert "--test-name" not in argv and argv[3:5] == ["--tag-filter", "all"]
    assert extract(CAT_OUT, spec).value == pytest.approx(41000.5)
    with pytest.raises(PerfqError, match="matched nothing"):
        extract(CAT_OUT.replace("N1000", "N2000"), spec)
