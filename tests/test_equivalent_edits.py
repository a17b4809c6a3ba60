"""Edits that change no behaviour (issue 40 item 5): a consistent rename (a block's local, a
parameter, a file's function at its definition and every use) and a dispatch type list that only
gains dtypes are no-ops; a swap of two names, a use redirected to an existing name, a rename of
only some uses and a list that loses a dtype are changes."""

from __future__ import annotations

import difflib

import pytest

from common.config import Config
from common.diff import parse_diff
from query.changes import changed_functions
from query.equivalent import Rename, dispatch_gain, scoped_rename, words

CPP = """\
namespace at::native {
namespace {

void clamp_kernel(TensorIteratorBase& iter, const Scalar& limit_) {
  if (at::isReducedFloatingType(iter.dtype())) {
    const float six(6.0f);
    cpu_kernel(iter, [&](float a) { return std::min(a, six); });
  } else {
    AT_DISPATCH_FLOATING_TYPES(iter.dtype(), "clamp_cpu", [&] {
      const scalar_t six(6.0f);
      auto limit = limit_.to<scalar_t>();
      cpu_kernel(iter, [&](scalar_t a) { return std::max(std::min(a, six), limit); });
    });
  }
}

static void other_kernel(TensorIteratorBase& iter) {
  AT_DISPATCH_INTEGRAL_TYPES_AND(ScalarType::Bool, iter.dtype(), "other_cpu", [&] {
    cpu_kernel(iter, [](scalar_t a) { return a; });
  });
}

}  // namespace

REGISTER_DISPATCH(clamp_stub, &clamp_kernel)
REGISTER_DISPATCH(other_stub, &other_kernel)

}  // namespace at::native
"""

ELSE_BRANCH = """\
      const scalar_t six(6.0f);
      auto limit = limit_.to<scalar_t>();
      cpu_kernel(iter, [&](scalar_t a) { return std::max(std::min(a, six), limit); });"""


def _changes(new: str, old: str = CPP, path: str = "aten/src/ATen/native/cpu/Clamp.cpp"):
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    return changed_functions(files, lambda _p: old.encode(), lambda _p: new.encode(), Config(source_roots=("aten",)))


@pytest.mark.parametrize("new", [
    CPP.replace(ELSE_BRANCH, ELSE_BRANCH.replace("six", "six_val")),  # a block's local, the other block's kept
    CPP.replace("limit_", "limit_scalar"),  # a parameter
    CPP.replace("other_kernel", "other_kernel_impl"),  # a file's function: definition and registration
])
def test_consistent_renames_are_no_ops(new: str):
    cs = _changes(new)
    assert cs.functions == [] and cs.file_level == []
    assert cs.no_ops and all("renamed to" in n.why for n in cs.no_ops)


@pytest.mark.parametrize("new", [
    CPP.replace("std::max(std::min(", "std::min(std::max("),  # two names swapped: a permutation, not a rename
    CPP.replace("std::min(a, six), limit)", "std::min(a, limit), limit)"),  # redirected to an existing name
    CPP.replace("return std::max(std::min(a, six)", "return std::max(std::min(a, six_val)")
       .replace("const scalar_t six(6.0f);", "const scalar_t six(6.0f);\n      const scalar_t six_val(7.0f);"),
    CPP.replace("std::min(a, six), limit", "std::min(a, six_val), limit"),  # some uses only: does not compile
])
def test_renames_that_change_what_runs_are_changes(new: str):
    cs = _changes(new)
    assert [f.qualname for f in cs.functions] == ["at::native::(anonymous namespace)::clamp_kernel"]


def test_a_dispatch_list_that_gains_dtypes_is_a_no_op_that_says_so():
    cs = _changes(CPP.replace("AT_DISPATCH_INTEGRAL_TYPES_AND(ScalarType::Bool,",
                              "AT_DISPATCH_INTEGRAL_TYPES_AND3(ScalarType::Bool, kUInt16, at::ScalarType::UInt32,"))
    assert cs.functions == [] and [f.qualname for f in cs.no_ops] == ["at::native::(anonymous namespace)::other_kernel"]
    assert "only gains UInt16, UInt32" in cs.no_ops[0].why and "new code with no benchmark" in cs.no_ops[0].why


@pytest.mark.parametrize("old, new, gained", [
    ("AT_DISPATCH_FLOATING_TYPES(t, \"n\", [&] {", "AT_DISPATCH_FLOATING_TYPES_AND(kHalf, t, \"n\", [&] {", ("Half",)),
    ("AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, t, \"n\", f)",
     "AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(kHalf, kBFloat16, t, \"n\", f)", ("ComplexDouble", "ComplexFloat")),
    ("AT_DISPATCH_ALL_TYPES(t, \"n\", f)", "AT_DISPATCH_ALL_TYPES_AND_COMPLEX(t, \"n\", f)",
     ("ComplexDouble", "ComplexFloat")),
    ("AT_DISPATCH_FLOATING_TYPES_AND(kHalf, t, \"n\", f)", "AT_DISPATCH_FLOATING_TYPES(t, \"n\", f)", None),  # loses
    ("AT_DISPATCH_FLOATING_TYPES(t, \"n\", f)", "AT_DISPATCH_FLOATING_TYPES_AND(kHalf, u, \"n\", f)", None),  # arg
    ("AT_DISPATCH_FLOATING_TYPES(t, \"n\", f)", "AT_DISPATCH_FLOATING_TYPES(t, \"n\", f)", None),  # nothing gained
    ("}), AT_EXPAND(AT_ALL_TYPES), kHalf);", "}), AT_EXPAND(AT_ALL_TYPES), kHalf, kBFloat16);", ("BFloat16",)),
    ("}), AT_EXPAND(AT_ALL_TYPES), kHalf);", "}), kBool, AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_FLOAT8_TYPES), kHalf);",
     ("Bool", "Float8_e4m3fn", "Float8_e4m3fnuz", "Float8_e5m2", "Float8_e5m2fnuz")),
    ("}), AT_EXPAND(AT_ALL_TYPES), kHalf);", "}), AT_EXPAND(AT_ALL_TYPES));", None),  # V2 loses one
    ("}), AT_EXPAND(AT_ALL_TYPES), kHalf);", "}), AT_EXPAND(AT_ALL_TYPES), kHalf, x);", None),  # not a dtype
    ("f(a, kHalf);", "f(a, kHalf, kBFloat16);", None),  # no dispatch list around
])
def test_dispatch_gain(old: str, new: str, gained: tuple[str, ...] | None):
    gain = dispatch_gain(words([old]), words([new]))
    assert (gain.dtypes if gain else None) == gained


def test_scoped_rename_needs_a_declaration_and_every_use_in_its_block():
    old = words(["{ int x = 1; f(x); } g(y);"])
    assert scoped_rename(old, words(["{ int z = 1; f(z); } g(y);"])) == Rename("x", "z")
    assert scoped_rename(old, words(["{ int x = 1; f(x); } g(z);"])) is None  # a use, not a declaration
    assert scoped_rename(old, words(["{ int y = 1; f(y); } g(y);"])) is None  # to a name in use


def test_a_moved_function_is_a_no_op():
    start, end = CPP.index("static void other_kernel"), CPP.index("}  // namespace\n")
    other = CPP[start:end]
    moved = CPP.replace(other, "").replace("void clamp_kernel(", other + "void clamp_kernel(")
    cs = _changes(moved)
    assert cs.functions == [] and cs.file_level == [] and cs.no_ops


def _two_file_changes(old: dict[str, str], new: dict[str, str]):
    diff = ""
    for path in sorted(old):
        hunks = difflib.unified_diff(old[path].splitlines(True), new[path].splitlines(True), f"a/{path}", f"b/{path}",
                                     n=0)
        diff += f"diff --git a/{path} b/{path}\n" + "".join(hunks)
    return changed_functions(parse_diff(diff), lambda p: old[p].encode(), lambda p: new[p].encode(),
                             Config(source_roots=("aten",)))


HELPERS = "namespace at::native {\nint keep(int x) {\n  return x;\n}\n}  // namespace at::native\n"
SCALE = "int scale(int x, int k) {\n  return x * k;\n}\n"


def test_a_function_moved_to_another_file_is_a_no_op_and_a_changed_one_is_not():
    a, b = "aten/src/ATen/native/A.cpp", "aten/src/ATen/native/B.cpp"
    before = {a: HELPERS.replace("namespace at::native {\n", "namespace at::native {\n" + SCALE), b: HELPERS}
    after = {a: HELPERS, b: HELPERS.replace("namespace at::native {\n", "namespace at::native {\n" + SCALE)}
    cs = _two_file_changes(before, after)
    assert cs.functions == []
    assert sorted(n.why for n in cs.no_ops) == [f"moved from {a}, same code tokens", f"moved to {b}, same code tokens"]
    after[b] = after[b].replace("x * k", "x * k + 1")
    changed = _two_file_changes(before, after)
    assert sorted((f.path, f.status) for f in changed.functions) == [(a, "deleted"), (b, "added")]


def test_an_address_taken_is_no_declaration():
    assert scoped_rename(words(["REGISTER(stub, &kernel);"]), words(["REGISTER(stub, &kernel_v2);"])) is None
    assert scoped_rename(words(["void f(const Scalar& v) { g(v); }"]), words(["void f(const Scalar& w) { g(w); }"])) \
        == Rename("v", "w")


def test_a_macro_defined_v2_list_that_gains_a_dtype_is_a_no_op():
    macro = ("#define DISPATCH_MUL_TYPES(TYPE, NAME, ...) \\\n  AT_DISPATCH_V2(TYPE, NAME, AT_WRAP(__VA_ARGS__), \\\n"
             "      kHalf, AT_EXPAND(AT_ALL_TYPES))\n")
    old = macro + CPP.replace("AT_DISPATCH_FLOATING_TYPES(iter.dtype()", "DISPATCH_MUL_TYPES(iter.dtype()")
    cs = _changes(old.replace("kHalf, AT_EXPAND", "kHalf, kBFloat16, AT_EXPAND"), old)
    assert cs.functions == [] and cs.file_level == []
    assert all("only gains BFloat16" in n.why for n in cs.no_ops) and cs.no_ops


MIGRATED = """\
static void other_kernel(TensorIteratorBase& iter) {
  AT_DISPATCH_V2(
      iter.dtype(),
      "other_cpu",
      AT_WRAP([&] {
    cpu_kernel(iter, [](scalar_t a) { return a; });
  }),
      AT_EXPAND(AT_INTEGRAL_TYPES),
      ScalarType::Bool,
      kUInt16);
}
"""


def test_a_list_moved_to_dispatch_v2_that_only_gains_a_dtype_is_a_no_op():
    """torch-xpu-ops r3 t09: ``AT_DISPATCH_*_AND3(kHalf, kBFloat16, kBool, ...)`` rewritten as
    ``AT_DISPATCH_V2(..., AT_WRAP(lambda), AT_EXPAND(...), kHalf, kBFloat16, kBool, kBComplex32)``:
    the lambda's lines are context, so the changed lines alone cannot be matched up; the whole
    function's tokens can (36 scripts were selected for add/mul/div kernels that only gained a dtype)."""
    old = CPP[CPP.index("static void other_kernel"):CPP.index("}  // namespace\n")]
    cs = _changes(CPP.replace(old, MIGRATED + "\n"))
    assert cs.functions == [] and [f.qualname for f in cs.no_ops] == ["at::native::(anonymous namespace)::other_kernel"]
    assert "only gains UInt16" in cs.no_ops[0].why
    lost = _changes(CPP.replace(old, MIGRATED.replace("      ScalarType::Bool,\n", "") + "\n"))  # Bool lost
    assert [f.qualname for f in lost.functions] == ["at::native::(anonymous namespace)::other_kernel"]
    # the type and name arguments on lines of their own, the same before and after: context lines
    split = CPP.replace('AT_DISPATCH_INTEGRAL_TYPES_AND(ScalarType::Bool, iter.dtype(), "other_cpu", [&] {',
                        'AT_DISPATCH_INTEGRAL_TYPES_AND(\n      ScalarType::Bool,\n      iter.dtype(),\n'
                        '      "other_cpu",\n      [&] {')
    cs = _changes(split.replace(split[split.index("static void other_kernel"):split.index("}  // namespace\n")],
                                MIGRATED + "\n"), old=split)
    assert cs.functions == [] and "only gains UInt16" in cs.no_ops[0].why


@pytest.mark.parametrize("old, new, gained", [
    ("AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(kHalf, kBFloat16, kBool, t, \"n\", [&]() { f(); });",
     "AT_DISPATCH_V2(t, \"n\", AT_WRAP([&]() { f(); }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), kHalf, kBFloat16, kBool,"
     " kBComplex32);", ("BComplex32",)),
    ("AT_DISPATCH_FLOATING_TYPES_AND(kHalf, t, \"n\", [&]() { f(); });",
     "AT_DISPATCH_V2(t, \"n\", AT_WRAP([&]() { g(); }), AT_EXPAND(AT_FLOATING_TYPES), kHalf, kBFloat16);", None),
    ("AT_DISPATCH_FLOATING_TYPES_AND(kHalf, t, \"n\", [&]() { f(); });",
     "AT_DISPATCH_V2(t, \"n\", AT_WRAP([&]() { f(); }), AT_EXPAND(AT_FLOATING_TYPES));", None),  # loses Half
])
def test_dispatch_gain_across_a_move_to_dispatch_v2(old: str, new: str, gained: tuple[str, ...] | None):
    gain = dispatch_gain(words([old]), words([new]))
    assert (gain.dtypes if gain else None) == gained


OPEN = "namespace at::native {\nnamespace {\n"
MACRO = CPP.replace(OPEN, OPEN + "#define SIX 6\n", 1).replace("const scalar_t six(6.0f);", "const scalar_t six(SIX);")


@pytest.mark.parametrize("constant", ["inline constexpr int SIX = 6;", "static constexpr int SIX = 6;",
                                      "constexpr int SIX{6};"])
def test_a_macro_constant_turned_into_a_constant_of_the_same_value_is_a_no_op(constant: str):
    """torch-xpu-ops r3 t01: ``#define SIMD 32`` became ``inline constexpr int SIMD = 32;``; the
    macro's line went to the functions using it, the constant's line (an upper-case name, read as
    a macro's) to every function of the header and of its includers (10 extra scripts)."""
    cs = _changes(MACRO.replace("#define SIX 6", constant), old=MACRO)
    assert cs.functions == [] and cs.file_level == []
    assert [f.why for f in cs.no_ops] == ["a macro constant turned into a constant of the same name and value"]


def test_a_macro_constant_given_another_value_is_a_change():
    cs = _changes(MACRO.replace("#define SIX 6", "inline constexpr int SIX = 7;"), old=MACRO)
    assert "at::native::(anonymous namespace)::clamp_kernel" in [f.qualname for f in cs.functions]
    cs = _changes(MACRO.replace("#define SIX 6", "inline constexpr int SIX = 6;").replace(
        "namespace at::native {\n", "namespace at::native {\n#if SIX > 4\n#endif\n", 1), old=MACRO)
    assert cs.no_ops == [] or all("macro constant" not in f.why for f in cs.no_ops)  # read by the preprocessor


_DIV = "AT_DISPATCH_FLOATING_TYPES_AND(kHalf, t, \"n\", [&]() { f(); });"
_DIV_V2 = "AT_DISPATCH_V2(t, \"n\", AT_WRAP([&]() { f(); }), AT_EXPAND(AT_FLOATING_TYPES), kHalf, kBComplex32);"
_OLD_BRANCH = "if (t == kComplexHalf) { g(); return; } "


@pytest.mark.parametrize("added, gained", [
    ("if (iter.common_dtype() == kBComplex32) { using scalar_t = c10::complex<at::BFloat16>; h(); return; } ",
     ("BComplex32",)),
    ("if (kBComplex32 == t) { h(); return; } ", ("BComplex32",)),
    ("if (t == kFloat) { h(); return; } ", None),  # a dtype the function already ran: a change for it
    ("if (t == kBComplex32) { h(); } else { f(); } ", None),  # an else: every dtype takes the branch
    ("if (t == kBComplex32 || n > 1) { h(); return; } ", None),  # not a dtype test alone
    ("h(); ", None),
])
def test_a_branch_added_for_a_dtype_the_function_never_ran_is_new_code_of_that_dtype(
    added: str, gained: tuple[str, ...] | None
):
    """torch-xpu-ops r3 t09: ``div_true_kernel`` gained ``if (iter.common_dtype() == kBComplex32)
    { ...; return; }`` next to a dispatch list that gained kBComplex32. The old function never ran
    that dtype (its lists and its other branches do not name it), so the branch is new code of the
    new dtype: the existing dtypes run the same code (10 scripts running div were selected)."""
    gain = dispatch_gain(words([_OLD_BRANCH + _DIV]), words([_OLD_BRANCH + added + _DIV_V2]))
    assert (gain.dtypes if gain else None) == gained


@pytest.mark.parametrize("old_path", [
    "if (isIntegralType(t, true)) { g(); return; } ",  # Int ran here without being named
    "switch (t) { case kComplexHalf: g(); return; default: break; } ",
])
def test_a_dtype_branch_is_a_change_when_the_old_function_may_have_run_that_dtype(old_path: str):
    added = "if (t == kInt) { h(); return; } "
    assert dispatch_gain(words([old_path + _DIV]), words([old_path + added + _DIV_V2])) is None
