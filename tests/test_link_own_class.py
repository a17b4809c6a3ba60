"""A class defined once per CPU architecture (``Vectorized<T>`` in every vec*/ header) calls,
from its own methods, the definitions of its own header, not those of every other
architecture's; the files of one unit (``ivalue.h`` and ``ivalue_inl.h``) still see each other."""

from __future__ import annotations

from indexer.link import link
from tests.cpp_facts import cpp_facts

ARCH = """
namespace at::vec {{
inline namespace CPU_CAPABILITY {{
template <> class Vectorized<float> {{
 public:
  Vectorized(float v) {{ values = {intrinsic}(v); }}
  Vectorized<float> abs() const {{
    return Vectorized<float>(clear_sign(values));
  }}
}};
}}  // namespace CPU_CAPABILITY
}}  // namespace at::vec
"""

KERNEL = """
namespace at::native {
void abs_kernel(float* out, float x) {
  *out = at::vec::Vectorized<float>(x).abs();
}
}  // namespace at::native
"""

UNIT_H = """
namespace c10 {
struct IValue {
  IValue(int64_t i) : tag(Tag::Int) { payload.i = i; }
  IValue to_list() const { return IValue(std::vector<int64_t>{payload.i}); }
};
}  // namespace c10
"""

UNIT_INL = """
namespace c10 {
inline IValue::IValue(std::vector<int64_t> v) : tag(Tag::List) { store(std::move(v)); }
}  // namespace c10
"""



def test_a_class_per_architecture_calls_its_own_definitions():
    files = [
        cpp_facts("aten/src/ATen/cpu/vec/vec256/vec256_float.h", ARCH.format(intrinsic="_mm256_set1_ps")),
        cpp_facts("aten/src/ATen/cpu/vec/vec512/vec512_float.h", ARCH.format(intrinsic="_mm512_set1_ps")),
        cpp_facts("aten/src/ATen/native/cpu/AbsKernel.cpp", KERNEL),
        cpp_facts("aten/src/ATen/core/ivalue.h", UNIT_H),
        cpp_facts("aten/src/ATen/core/ivalue_inl.h", UNIT_INL),
    ]
    tables = link(files, [], [], [], {}, [])
    where = {row[0]: (files[row[1]].path.rpartition("/")[2], row[3]) for row in tables.rows["functions"]}
    edges = {(where[caller], where[callee]) for caller, callee, *_ in tables.rows["call_edges"]}
    for header in ("vec256_float.h", "vec512_float.h"):
        callees = {callee for (caller, callee) in edges if caller == (header, "abs")}
        assert callees == {(header, "Vectorized")}
    # a kernel outside the class may run any architecture's definition
    assert {callee for (caller, callee) in edges if caller == ("AbsKernel.cpp", "abs_kernel")} == {
        ("vec256_float.h", "Vectorized"),
        ("vec512_float.h", "Vectorized"),
        ("vec256_float.h", "abs"),
        ("vec512_float.h", "abs"),
    }
    # ivalue.h's own constructor and ivalue_inl.h's: one unit
    assert {callee for (caller, callee) in edges if caller == ("ivalue.h", "to_list")} == {
        ("ivalue.h", "IValue"),
        ("ivalue_inl.h", "IValue"),
    }
