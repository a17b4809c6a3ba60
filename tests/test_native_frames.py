"""Native truth's pure part: perf script text -> samples -> index functions (no perf needed)."""

from __future__ import annotations

import pytest

from indexer.native import choose_tests
from indexer.native_frames import (
    Frame,
    FunctionMatcher,
    frame_names,
    mangled_symbols,
    normalize_name,
    parse_perf_script,
    profile,
    renamed,
)

LIB = "/site-packages/torch/lib/libtorch_cpu.so"

_NEG_LAMBDA = "at::native::AVX2::neg_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}"
NEG = (
    "c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::native::AVX2::VectorizedLoop2d<"
    f"{_NEG_LAMBDA}::operator()() const::{{lambda(float)#1}}, "
    f"{_NEG_LAMBDA}::operator()() const::{{lambda(at::vec::AVX2::Vectorized<float>)#1}}> >"
)
_SOFTMAX_LAMBDA = (
    "at::native::(anonymous namespace)::_vec_softmax_lastdim<float>(float const*, float*, long, long)"
    "::{lambda(long, long)#1}"
)
SOFTMAX = (
    f"at::internal::invoke_parallel<at::parallel_for<{_SOFTMAX_LAMBDA}>(long, long, long, {_SOFTMAX_LAMBDA} const&)"
    "::{lambda(long, long)#1}>"
)

# written for these tests in the shape `perf script` prints (default fields): a header line per
# sample, then its frames leaf first, then a blank line
PERF_TEXT = f"""\
python 100 10.000001:     250000 cpu-clock:
\t 6c110ce {NEG}+0xfe ({LIB})
\t 1981340 at::TensorIteratorBase::serial_for_each+0x1d0 ({LIB})

python 100 10.000251:     250000 cpu-clock:
\t 7ad3ae1 {SOFTMAX}+0xa11 ({LIB})
\t 1c74277 at::native::structured_softmax_cpu_out::impl(at::Tensor const&, long, bool, at::Tensor const&)+0x37 ({LIB})

python 100 10.000501:     250000 cpu-clock:
\t 1ab70 _PyEval_EvalFrameDefault+0x70 (/usr/bin/python3.11)
\t ffffffff8164d459 kfree+0x69 ([kernel.kallsyms])

python 100 10.000751:     250000 cpu-clock:
\t 5ee909 at::native::DEFAULT::add_kernel(at::TensorIteratorBase&, c10::Scalar const&) [clone .constprop.0]+0x9 ({LIB})
\t 5ee9a0 c10::impl::some_unindexed_helper(int)+0x9 ({LIB})
"""

INDEX = [
    (1, "at::native::CPU_CAPABILITY::neg_kernel"),
    (2, "at::native::(anonymous namespace)::_vec_softmax_lastdim"),
    (3, "at::native::structured_softmax_cpu_out::impl"),
    (4, "at::native::CPU_CAPABILITY::add_kernel"),
    (5, "at::TensorIteratorBase::serial_for_each"),
    (6, "other::ns::neg_kernel"),  # same last part, other namespace: not a match
]


def test_parse_splits_samples_and_keeps_the_library_of_each_frame():
    samples = parse_perf_script(PERF_TEXT.splitlines())
    assert len(samples) == 4
    assert [len(s.frames) for s in samples] == [2, 2, 2, 2]
    assert samples[0].frames[1] == Frame("at::TensorIteratorBase::serial_for_each", LIB)
    assert samples[2].frames[1].dso == "[kernel.kallsyms]"
    assert samples[0].frames[0].symbol.startswith("c10::function_ref<void (char**")  # its own parentheses kept


def test_parse_reads_the_terse_fields_form():
    text = "\n\t 6c110ce at::native::foo (/x/libtorch_cpu.so)\n\t 77 bar (/x/libc.so.6)\n\n"
    (sample,) = parse_perf_script(text.splitlines())
    assert sample.frames == (Frame("at::native::foo", "/x/libtorch_cpu.so"), Frame("bar", "/x/libc.so.6"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("at::native::AVX2::neg_kernel", "at::native::neg_kernel"),
        ("at::native::AVX512::foo.constprop.0", "at::native::foo"),
        ("at::native::(anonymous namespace)::GeluKernelImpl", "at::native::GeluKernelImpl"),
        ("at::vec::Vectorized<float>::exp", "at::vec::Vectorized::exp"),
        ("at::native::DEFAULT::x.isra.0.part.1", "at::native::x"),
    ],
)
def test_normalize_strips_isa_clones_anonymous_and_templates(raw, expected):
    assert normalize_name(raw) == expected


def test_frame_names_finds_kernels_inside_template_arguments_and_lambda_scopes():
    samples = parse_perf_script(PERF_TEXT.splitlines())
    assert samples[0].frames[0].symbol == NEG and samples[1].frames[0].symbol == SOFTMAX
    assert frame_names(NEG) == ("c10::function_ref::callback_fn", "at::native::neg_kernel")
    assert frame_names(SOFTMAX) == ("at::internal::invoke_parallel", "at::native::_vec_softmax_lastdim")
    assert frame_names("at::native::foo(int) [clone .constprop.0]")[0] == "at::native::foo"


def test_matcher_by_qualified_name_then_last_two_parts():
    m = FunctionMatcher(INDEX)
    assert m.match("at::native::neg_kernel") == (1,)
    assert m.match("xyz::native::neg_kernel") == (1,)  # last two parts
    assert m.match("neg_kernel") == ()  # a single part is never matched by its tail
    assert m.match("at::native::nowhere") == ()


def test_profile_shares_and_match_rate():
    samples = parse_perf_script(PERF_TEXT.splitlines())
    prof = profile(samples, FunctionMatcher(INDEX))
    shares = dict(prof.shares)
    assert prof.total == 4
    assert shares == {1: 0.25, 5: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}
    # 3 samples in the library, all mapped; 6 distinct library symbols, the unindexed helper not mapped
    assert (prof.rate.samples, prof.rate.samples_mapped) == (3, 3)
    assert (prof.rate.frames, prof.rate.frames_mapped) == (6, 5)


def test_profile_min_share_drops_rare_functions():
    samples = parse_perf_script(PERF_TEXT.splitlines())
    prof = profile(samples * 1 + samples[:1] * 4, FunctionMatcher(INDEX), min_share=0.3)
    assert [fid for fid, _ in prof.shares] == [1, 5]  # neg and serial_for_each are on 5 of 8 samples


def test_renamed_replaces_the_symbols_perf_left_mangled():
    text = "\n\t 1 _ZN2at6native3fooEv (/x/libtorch_cpu.so)\n\t 2 at::native::bar (/x/libtorch_cpu.so)\n\n"
    samples = parse_perf_script(text.splitlines())
    assert mangled_symbols(samples) == ["_ZN2at6native3fooEv"]
    (sample,) = renamed(samples, {"_ZN2at6native3fooEv": "at::native::foo()"})
    assert [f.symbol for f in sample.frames] == ["at::native::foo()", "at::native::bar"]


def test_a_benchmark_without_real_tests_is_sampled_with_its_first_cpu_forward_test(tmp_path):
    """gelu_test has only ``long`` configs (traced on meta, or sampled from them): it is sampled
    all the same; a module with a real test keeps it, and the per-file bound holds."""
    root = tmp_path / "benchmarks/operator_benchmark"
    (root / "pt").mkdir(parents=True)
    for harness in ("benchmark_pytorch.py", "benchmark_core.py"):
        (root / harness).write_text("")
    for name in ("gelu_test", "softmax_test"):
        (root / "pt" / f"{name}.py").write_text("")
    benchmarks = [(name, f"benchmarks/operator_benchmark/pt/{name}.py", "operator_benchmark")
                  for name in ("gelu_test", "softmax_test")]
    rows = [  # id, bench, test, module, class, tag, backward, device, mode, kernels_seen
        (0, "gelu_test", "Gelu_N1_cpu", "Gelu", "Gelu", "long", False, "cpu", "meta", False),
        (1, "gelu_test", "Gelu_N4_cpu", "Gelu", "Gelu", "long", False, "cpu", "sampled", False),
        (2, "softmax_test", "Softmax_N1_cpu", "Softmax", "S", "long", False, "cpu", "meta", False),
        (3, "softmax_test", "Softmax_N8_cpu", "Softmax", "S", "short", False, "cpu", "real", True),
        (4, "softmax_test", "Softmax_bwd_cpu", "Softmax", "S", "short", True, "cpu", "real", True),
        (5, "softmax_test", "LogSoftmax_N1_cuda", "LogSoftmax", "S", "short", False, "cuda", "meta", False),
    ]
    chosen = choose_tests(tmp_path, benchmarks, rows, per_file=2)
    assert [(t.bench, t.test, t.module) for t in chosen] == [
        ("gelu_test", "Gelu_N1_cpu", "pt.gelu_test"),
        ("softmax_test", "Softmax_N8_cpu", "pt.softmax_test"),
    ]
