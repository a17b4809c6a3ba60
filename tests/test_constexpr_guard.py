"""A change that only wraps statements of a function template in ``if constexpr (P)`` on a
``bool`` template parameter reaches the instantiations for which the condition fails, through
the call sites that instantiate them (torch-xpu-ops r02: RMSNorm's backward stopped summing
dbeta; layer_norm's instantiation runs the same code)."""

from __future__ import annotations

import difflib

import pytest

from common.config import Config
from common.diff import parse_diff
from query.changes import changed_functions
from query.equivalent import words
from query.instantiations import constexpr_guard

OLD = """\
namespace at::native::xpu {

template <typename T, bool rms_norm = false>
void norm_backward_impl(const Tensor& dY, Tensor* dbeta) {
  auto blocks = dY.sum(0);
  *dbeta = blocks.sum(0);
}

void layer_norm_backward_kernel(const Tensor& dY, Tensor* dbeta) {
  norm_backward_impl<float>(dY, dbeta);
}

void rms_norm_backward_kernel(const Tensor& dY, Tensor* dbeta) {
  norm_backward_impl<float, true>(dY, dbeta);
}

}  // namespace at::native::xpu
"""
WRAPPED = "  if constexpr (%s) {\n    *dbeta = blocks.sum(0);\n  }\n"


def _changes(new: str, old: str = OLD, path: str = "src/ATen/native/xpu/sycl/NormKernels.cpp"):
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    return changed_functions(files, lambda _p: old.encode(), lambda _p: new.encode(), Config(source_roots=("src",)))


def _bare(qualname: str) -> str:
    return qualname.split("<")[0]


def _wrap(cond: str, old: str = OLD) -> str:
    return old.replace("  *dbeta = blocks.sum(0);\n", WRAPPED % cond)


@pytest.mark.parametrize("cond, changed", [
    ("!rms_norm", "at::native::xpu::rms_norm_backward_kernel"),  # layer norm's default false: the same code
    ("rms_norm", "at::native::xpu::layer_norm_backward_kernel"),
])
def test_a_constexpr_wrapper_reaches_only_the_instantiations_it_changes(cond: str, changed: str):
    cs = _changes(_wrap(cond))
    assert [_bare(f.qualname) for f in cs.functions] == [changed]
    impl = [n for n in cs.no_ops if _bare(n.qualname) == "at::native::xpu::norm_backward_impl"]
    assert impl and f"if constexpr ({cond})" in (impl[0].why or "")


def test_a_call_without_template_arguments_instantiates_the_default():
    deduced = OLD.replace("norm_backward_impl<float>(dY, dbeta)", "norm_backward_impl(dY, dbeta)")
    cs = _changes(_wrap("rms_norm", deduced), deduced)
    assert [_bare(f.qualname) for f in cs.functions] == ["at::native::xpu::layer_norm_backward_kernel"]
    explicit = OLD.replace("bool rms_norm = false", "bool rms_norm").replace(
        "norm_backward_impl<float>(", "norm_backward_impl<float, false>(")  # no default: every call writes it
    cs = _changes(_wrap("rms_norm", explicit), explicit)
    assert [_bare(f.qualname) for f in cs.functions] == ["at::native::xpu::layer_norm_backward_kernel"]


def test_a_constexpr_wrapper_around_new_code_or_an_unknown_argument_is_a_change():
    added = OLD.replace("  *dbeta = blocks.sum(0);\n", WRAPPED.replace("blocks.sum(0)", "blocks.sum(1)") % "!rms_norm")
    assert [_bare(f.qualname) for f in _changes(added).functions] == ["at::native::xpu::norm_backward_impl"]
    unknown = OLD.replace("norm_backward_impl<float, true>", "norm_backward_impl<float, kRms>")
    changed = _changes(_wrap("!rms_norm", unknown), unknown).functions
    assert "at::native::xpu::norm_backward_impl" in [_bare(f.qualname) for f in changed]


def test_a_header_template_is_instantiated_elsewhere_too():
    cs = _changes(_wrap("!rms_norm"), path="src/ATen/native/xpu/sycl/NormKernels.h")
    assert "at::native::xpu::norm_backward_impl" in [_bare(f.qualname) for f in cs.functions]


@pytest.mark.parametrize("old, new, guard", [
    # a wrapper beside one the function already had (LayerNormKernels.cpp has several)
    ("if constexpr (P) { a(); } b(); }", "if constexpr (P) { a(); } if constexpr (!P) { b(); } }", ("P", False)),
    ("a(); b(); }", "if constexpr (P) { a(); } b(); }", ("P", True)),
    ("a(); b(); }", "if constexpr (P) { a(); } c(); }", None),  # and another change
    ("a(); b(); }", "if constexpr (P) { a(); } if constexpr (!P) { b(); } }", None),  # two forms
    ("a(); b(); }", "if (P) { a(); } b(); }", None),  # a run-time branch
])
def test_constexpr_guard(old: str, new: str, guard: tuple[str, bool] | None):
    found = constexpr_guard(words([old]), words([new]))
    assert (tuple(found) if found else None) == guard
