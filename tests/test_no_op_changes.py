"""Changes that leave the code tokens as they were (comments, whitespace, formatting) are
no-ops: listed apart, they select nothing. Any token change is a change."""

from __future__ import annotations

import difflib

import pytest

from common.config import Config
from common.diff import parse_diff
from query.changes import changed_functions

CPP = """\
#include <cstdint>

namespace at::native {

// the kernel
static void scale_kernel(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    out[i] = in[i] * 2.0f;
  }
}

int answer() { return 42; }

}  // namespace at::native
"""

PY = """\
import torch


def relu6(x):
    # clamp between 0 and 6
    return torch.clamp(x, 0, 6)


def other(x):
    return x
"""


def _changes(path: str, old: str, new: str):
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    cfg = Config(source_roots=("aten",), python_roots=("torch",))
    return changed_functions(files, lambda _p: old.encode(), lambda _p: new.encode(), cfg)


@pytest.mark.parametrize(
    "old, new",
    [
        ("    out[i] = in[i] * 2.0f;\n", "    out[i] = in[i] * 2.0f;  // twice\n"),  # comment in a body
        ("    out[i] = in[i] * 2.0f;\n", "        out[i] = in[i] * 2.0f;\n"),  # re-indented
        ("    out[i] = in[i] * 2.0f;\n", "    out[i] =\n        in[i] * 2.0f;\n"),  # reflowed
        ("    out[i] = in[i] * 2.0f;\n", "    /* the\n       scale */ out[i] = in[i] * 2.0f;\n"),  # block comment
        ("// the kernel\n", "// the scaling kernel\n// (vectorised by the compiler)\n"),  # outside functions
    ],
)
def test_cpp_layout_only_edits_are_no_ops(old: str, new: str):
    cs = _changes("aten/src/ATen/native/cpu/Scale.cpp", CPP, CPP.replace(old, new))
    assert cs.functions == [] and cs.file_level == []
    assert cs.no_ops


def test_cpp_token_change_is_a_change():
    cs = _changes("aten/src/ATen/native/cpu/Scale.cpp", CPP, CPP.replace("* 2.0f;", "* 3.0f;"))
    assert [f.qualname for f in cs.functions] == ["at::native::scale_kernel"]
    assert cs.no_ops == []


def test_python_comment_is_a_no_op_but_indentation_is_syntax():
    comment = _changes("torch/nn/functional_x.py", PY, PY.replace("# clamp between 0 and 6", "# clamp to [0, 6]"))
    assert comment.functions == [] and [f.name for f in comment.no_ops] == ["relu6"]
    body = _changes("torch/nn/functional_x.py", PY, PY.replace("torch.clamp(x, 0, 6)", "torch.clamp(x, 0, 7)"))
    assert [f.name for f in body.functions] == ["relu6"]


def test_a_blank_line_dropped_beside_a_real_change_elsewhere_is_a_no_op_of_its_function():
    new = CPP.replace("  for (int64_t i = 0;", "\n  for (int64_t i = 0;").replace("return 42;", "return 43;")
    cs = _changes("aten/src/ATen/native/cpu/Scale.cpp", CPP, new)
    assert [f.qualname for f in cs.functions] == ["at::native::answer"]
    assert [f.qualname for f in cs.no_ops] == ["at::native::scale_kernel"]


def test_a_line_moved_within_a_function_is_a_change():
    body = "    out[i] = in[i] * 2.0f;\n"
    new = CPP.replace(body, "").replace("  for (int64_t i", body + "  for (int64_t i").replace("42", "43")
    cs = _changes("aten/src/ATen/native/cpu/Scale.cpp", CPP, new)
    assert sorted(f.qualname for f in cs.functions) == ["at::native::answer", "at::native::scale_kernel"]
