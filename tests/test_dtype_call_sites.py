"""A function whose lines no dispatch construct surrounds, but that only calls inside its
callers' dtype branches enter, runs for those dtypes (round six's ``fill_non_native_type``: its
lambda capture changed, and ``fill_kernel`` calls it only under ``iter.dtype() == ScalarType::Half``,
``BFloat16``, ``ComplexHalf`` and the ``Float8_*`` types)."""

from __future__ import annotations

from indexer.dtypes import DtypeClass, calls_scope, lines_scope
from query.dtype_gaps import callers_scope
from schema.index_store import CallerExtent

CALLER = """\
template <typename scalar_t>
void fill_non_native_type(TensorIterator& iter, const Scalar& value) {
  auto v = value.to<scalar_t>();
}

void fill_kernel(TensorIterator& iter, const Scalar& value) {
  if (iter.dtype() == ScalarType::Half) {
    fill_non_native_type<at::Half>(iter, value);
  } else if (iter.dtype() == ScalarType::ComplexHalf) {
    fill_non_native_type<c10::complex<at::Half>>(iter, value);
  } else if (iter.dtype() == ScalarType::Float8_e4m3fn) {
    fill_non_native_type<at::Float8_e4m3fn>(iter, value);
  } else {
    generic_fill(iter, value);
  }
}

void any_fill(TensorIterator& iter, const Scalar& value) {
  fill_non_native_type<float>(iter, value);
}
"""
FILL_KERNEL = (6, 16)
ANY_FILL = (18, 20)
SCOPE = frozenset({DtypeClass.reduced, DtypeClass.complex, DtypeClass.float8})


def test_an_equality_with_any_scalar_type_is_a_dtype_test():
    assert lines_scope(CALLER, [10]) == {DtypeClass.complex}  # ComplexHalf
    assert lines_scope(CALLER, [12]) == {DtypeClass.float8}  # Float8_e4m3fn
    assert lines_scope("void f() {\n  if (t == kBits8) {\n    g();\n  }\n}\n", [3]) is None  # no class holds it


def test_the_calls_of_a_function_in_its_callers_dtype_branches_give_its_dtypes():
    assert calls_scope(CALLER, "fill_non_native_type", *FILL_KERNEL) == SCOPE
    assert calls_scope(CALLER, "fill_non_native_type", *ANY_FILL) is None  # a call outside every branch
    assert calls_scope(CALLER, "not_called", *FILL_KERNEL) is None  # no call of that name: unknown


def test_a_function_entered_only_by_calls_in_dtype_branches_runs_for_their_dtypes():
    def text_of(path: str) -> bytes | None:
        return CALLER.encode() if path == "FillKernel.cpp" else None

    call = CallerExtent(1, "fill_non_native_type", "call", "FillKernel.cpp", *FILL_KERNEL)
    assert callers_scope([1], [call], text_of) == SCOPE
    assert callers_scope([1], [call, call._replace(first=ANY_FILL[0], last=ANY_FILL[1])], text_of) is None
    assert callers_scope([1], [call, call._replace(kind="registered", path="")], text_of) is None  # a stub's impl
    assert callers_scope([1, 2], [call], text_of) is None  # nothing enters function 2 that the index knows
    assert callers_scope([1], [call._replace(path="Other.cpp")], text_of) is None  # its text unreadable
