"""Changed C++ lines outside function bodies: a functor's fields and ``template <...>`` head belong
to its methods, ``#include`` lines and comments select nothing; only other lines (globals, macros,
declarations) fall back to the whole file. torch-xpu-ops' index_add/index_select rewrite (commit
b0e262470a) changed fields of its functors and two includes, and the fallback selected every
indexing script (12) where three run the changed kernels."""

from __future__ import annotations

import difflib

from common.config import Config
from common.diff import parse_diff
from query.changes import changed_functions

PATH = "aten/src/ATen/native/xpu/sycl/Indexing.cpp"

BASE = """\
#include <ATen/ops/empty.h>

namespace at::native::xpu {

template <typename T, typename IndexType>
struct IndexAddFunctor {
  void operator()(int item) const {
    dst_[item] += src_[item];
  }
  IndexAddFunctor(T* dst, const T* src) : dst_(dst), src_(src) {}

 private:
  T* dst_;
  const T* src_;
};

static int kSlmSize = 1024;

void index_fill_kernel(int n) {
  fill(n);
}
}  // namespace at::native::xpu
"""


def _changed(new: str):
    diff = "".join(difflib.unified_diff(BASE.splitlines(True), new.splitlines(True), f"a/{PATH}", f"b/{PATH}", n=0))
    files = parse_diff(f"diff --git a/{PATH} b/{PATH}\n{diff}")
    return changed_functions(files, lambda _p: BASE.encode(), lambda _p: new.encode(), Config(source_roots=("aten",)))


def test_a_changed_field_or_template_head_is_a_change_of_the_class_methods():
    cs = _changed(BASE.replace("  const T* src_;\n", "  const T* src_;\n  IndexType slm_offset_;\n"))
    assert {cf.qualname for cf in cs.functions} == {
        "at::native::xpu::IndexAddFunctor::operator()",
        "at::native::xpu::IndexAddFunctor::IndexAddFunctor",
    }
    assert cs.file_level == []
    cs = _changed(BASE.replace("typename IndexType>", "typename IndexType, int VEC>"))
    assert "at::native::xpu::IndexAddFunctor::operator()" in {cf.qualname for cf in cs.functions}
    assert cs.file_level == []


def test_include_and_comment_lines_select_nothing_other_globals_fall_back():
    include = "#include <ATen/ops/empty.h>\n"
    cs = _changed(BASE.replace(include, include + "#include <ATen/ops/gather.h>\n", 1))
    assert cs.functions == [] and cs.file_level == []
    assert any("#include" in note for note in cs.notes)
    cs = _changed(BASE.replace(include, "#include <ATen/ops/empty_like.h>\n", 1))  # removed and added
    includes = [note for note in cs.notes if "#include" in note]
    assert includes == [f"{PATH}: #include lines changed (nothing selected for them)"]
    cs = _changed(BASE.replace("static int kSlmSize", "// the work-group's local memory\nstatic int kSlmSize"))
    assert cs.file_level == []
    cs = _changed(BASE.replace("kSlmSize = 1024", "kSlmSize = 4096"))
    assert [path for path, _, _ in cs.file_level] == [PATH]  # a global: every function of the file


HEADER = """\
#pragma once
#include <ATen/core/Tensor.h>

namespace at::native::xpu {

TORCH_XPU_API void index_select_kernel(
    const Tensor& self,
    int64_t dim,
    const Tensor& index,
    Tensor& out);

REGISTER_XPU_DISPATCH(index_stub, &index_kernel);

}  // namespace at::native::xpu
"""


def test_a_changed_prototype_is_a_change_of_the_function_it_declares():
    path = "src/ATen/native/xpu/sycl/IndexingKernels.h"
    new = HEADER.replace("TORCH_XPU_API void index_select_kernel(", "TORCH_XPU_API Tensor& index_select_kernel(")
    new = new.replace("    Tensor& out);", "    Tensor& out,\n    bool use_slm);")
    diff = "".join(difflib.unified_diff(HEADER.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    cs = changed_functions(files, lambda _p: HEADER.encode(), lambda _p: new.encode(), Config(source_roots=("src",)))
    assert {cf.name for cf in cs.functions} == {"index_select_kernel"} and cs.file_level == []
    moved = HEADER.replace("&index_kernel);", "&index_kernel_v2);")  # a registration: the file falls back
    diff = "".join(difflib.unified_diff(HEADER.splitlines(True), moved.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    cs = changed_functions(files, lambda _p: HEADER.encode(), lambda _p: moved.encode(), Config(source_roots=("src",)))
    assert cs.functions == [] and [p for p, _, _ in cs.file_level] == [path]


SPECIALIZED = """\
namespace at::native::xpu {

template <typename T>
struct AddFunctor {
  void operator()(T* dst, const T* src) const {
    *dst += *src;
  }
};

template <>
struct AddFunctor<bool> {
  void operator()(bool* dst, const bool* src) const {
    *dst = *dst || *src;
  }
};

static AddFunctor<float> reduce_add;

void index_add_kernel(float* dst, const float* src) {
  reduce_add(dst, src);
}

void index_fill_kernel(float* dst) {
  *dst = 0;
}
}  // namespace at::native::xpu
"""


def _changed_cpp(old: str, new: str):
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{PATH}", f"b/{PATH}", n=0))
    files = parse_diff(f"diff --git a/{PATH} b/{PATH}\n{diff}")
    return changed_functions(files, lambda _p: old.encode(), lambda _p: new.encode(), Config(source_roots=("aten",)))


def test_an_explicit_specialization_head_and_a_global_belong_to_their_users():
    head = "template <>\nstruct AddFunctor<bool> {"
    cs = _changed_cpp(SPECIALIZED, SPECIALIZED.replace(head, head.replace(" {", " final {")))
    assert {cf.qualname for cf in cs.functions} == {"at::native::xpu::AddFunctor::operator()"}
    assert cs.file_level == []
    cs = _changed_cpp(SPECIALIZED, SPECIALIZED.replace("AddFunctor<float> reduce_add", "AddFunctor<double> reduce_add"))
    assert {cf.qualname for cf in cs.functions} == {"at::native::xpu::index_add_kernel"} and cs.file_level == []


MACRO = """\
namespace at::native::xpu {

#define DWCONV_LAUNCH                                              \\
  {                                                                \\
    int64_t global_range = std::min(n / 256 + 1, (int64_t)65536);  \\
    auto kfn = KernelClass(input, output);                         \\
    sycl_kernel_submit(global_range, 256, queue, kfn);             \\
  }

void conv_depthwise3d_kernel(int n) {
  DWCONV_LAUNCH
}

void conv_depthwise3d_backward(int n) {
  other(n);
}
}  // namespace at::native::xpu
"""


def test_a_changed_macro_body_is_a_change_of_the_functions_that_use_the_macro():
    """Calls in a ``#define``'s body are not prototypes (held-out x06 on torch-xpu-ops: a launch
    macro's ``sycl_kernel_submit(...)`` line read as a declaration of that helper, which every
    kernel calls, selected all 75 scripts): the macro's users changed."""
    new = MACRO.replace("std::min(n / 256 + 1, (int64_t)65536);  ", "xpuKernelLoopGroupRange(n, 256);           ")
    new = new.replace("(global_range, 256, queue, kfn);", "(global_range, 128, queue, kfn);")
    cs = _changed_cpp(MACRO, new)
    assert {cf.qualname for cf in cs.functions} == {"at::native::xpu::conv_depthwise3d_kernel"}
    assert cs.file_level == []
    use = "void conv_depthwise3d_kernel(int n) {\n  DWCONV_LAUNCH\n}"
    unused, changed = (text.replace(use, "void conv_depthwise3d_kernel(int n) {}") for text in (MACRO, new))
    cs = _changed_cpp(unused, changed)  # a macro nothing here uses: the file falls back, as before
    assert cs.functions == [] and [p for p, _, _ in cs.file_level] == [PATH]


def test_a_declaration_after_a_macro_is_read_from_the_macros_end():
    """``constexpr int N = 1024;`` right after a ``#define`` whose body calls ``item.get_local_range(0)``
    is a global, not a prototype of ``get_local_range`` (held-out x06 again: every kernel calls the
    SYCL member of that name, and the deleted 'function' was reached through all of them)."""
    old = """\
#define KERNEL_LOOP(item, i, n)                     \\
  for (int i = item.get_local_range(0); i < (n);   \\
       i += item.get_group_range(0))

constexpr int NUM_THREADS = 1024;

void fill_kernel(int n) {
  other(n);
}
"""
    new = old.replace("constexpr int NUM_THREADS = 1024;\n", "")
    cs = _changed_cpp(old, new)
    assert cs.functions == [] and [p for p, _, _ in cs.file_level] == [PATH]
