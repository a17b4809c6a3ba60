"""Header-less C++ extraction finds every function definition a build would, with the
qualified name and the extent (first and last line) the index maps changed lines by.

Each fixture is a small header written for one class of definitions that libclang's
single-file parse loses without the real headers (unknown attribute macros, statement
macros without ';', members of class templates, alias-template return types, #if
branches, ...)."""

from __future__ import annotations

import textwrap

import pytest

from indexer.cpp import clang_definitions
from indexer.cpp_fallback import text_functions
from indexer.extract import file_facts
from indexer.facts import FileFacts, Function
from indexer.source_text import blank_spans, blank_strings, preprocessor_spans, strip_c_comments


def extract(source: str, path: str = "aten/src/ATen/native/Fixture.h", functions_only: bool = True) -> FileFacts:
    facts = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode(), functions_only=functions_only)
    assert isinstance(facts, FileFacts) and facts.status == "ok"
    return facts


def spans(facts: FileFacts) -> dict[str, tuple[int, int] | list[tuple[int, int]]]:
    """qualname -> (first line, last line), or the list of them for a name defined more
    than once (overloads, #if branches)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for f in facts.functions:
        found.setdefault(f.qualname, []).append((f.start_line, f.end_line))
    return {name: lines[0] if len(lines) == 1 else lines for name, lines in found.items()}


def scanned(source: str) -> list[Function]:
    """The text scanner's definitions alone (what it recovers where clang fails)."""
    code = blank_strings(strip_c_comments(textwrap.dedent(source).lstrip("\n")))
    directives, unseen = preprocessor_spans(code)
    return text_functions(blank_spans(code, directives + unseen))


def test_attribute_macros_before_definitions():
    facts = extract(
        """
        namespace cutlass::epilogue {
        template <typename T>
        struct Relu {
          CUTLASS_HOST_DEVICE
          Relu() {}

          CUTLASS_DEVICE T operator()(T const& x) const {
            return x > T(0) ? x : T(0);
          }
        };
        }  // namespace cutlass::epilogue
        namespace at::native {
        __ubsan_ignore_float_divide_by_zero__ inline float safe_div(float a, float b) {
          return a / b;
        }
        __forceinline__ __device__ float twice(float a) {
          return 2 * a;
        }
        MYLIB_UNKNOWN_INLINE MYLIB_HOST_DEVICE float thrice(float a) {
          return 3 * a;
        }
        }  // namespace at::native
        """
    )
    got = spans(facts)
    assert got["cutlass::epilogue::Relu::Relu"] == (4, 5)
    assert got["cutlass::epilogue::Relu::operator()"] == (7, 9)
    assert got["at::native::safe_div"] == (13, 15)
    assert got["at::native::twice"] == (16, 18)
    assert got["at::native::thrice"] == (19, 21)


def test_functions_defined_by_the_files_own_macros():
    """A file whose macros define functions is parsed by clang too (with the prelude in
    front: single-file parsing skips -include files), which expands their uses; a macro
    that stands for a function's head (``DEFINE_KERNEL(name, ...) {``) counts as well."""
    facts = extract(
        """
        #define DEFINE_UNARY(name, expr) \\
          __forceinline__ float name(float a) { return expr; }
        #define DEFINE_KERNEL(name, ...) template <typename T, __VA_ARGS__> __global__ void name(T* out)
        namespace at::native {
        DEFINE_UNARY(twice, 2 * a)
        DEFINE_UNARY(thrice, 3 * a)
        DEFINE_KERNEL(fill_kernel, int N) {
          out[0] = T(N);
        }
        __ubsan_ignore_float_divide_by_zero__ inline float safe_div(float a, float b) {
          return a / b;
        }
        }  // namespace at::native
        """
    )
    got = spans(facts)
    assert got["at::native::twice"] == (5, 5)
    assert got["at::native::thrice"] == (6, 6)
    assert got["at::native::fill_kernel<T, N>"] == (7, 9)
    assert got["at::native::safe_div"] == (10, 12)


def test_library_blocks_and_macro_named_functions_without_clang():
    """Without macros of its own a file is read by the text scanner alone: library
    registration blocks are named as the prelude names them, ``TEST(...) {`` is a function
    named after its macro, and structured kernels whose parameters start a new line keep
    their names."""
    facts = extract(
        """
        namespace at::native {
        TORCH_IMPL_FUNC(add_out_cpu)
        (const Tensor& self, const Tensor& other, const Tensor& out) {
          add_stub(kCPU, *this);
        }
        TORCH_META_FUNC2(add, Tensor)
        (const Tensor& self, const Tensor& other) {
          build_borrowing_binary_op(maybe_get_output(), self, other);
        }
        TORCH_LIBRARY_IMPL(aten, CPU, m) {
          m.impl("add.out", TORCH_FN(add_out_cpu));
        }
        namespace {
        TORCH_LIBRARY_FRAGMENT(quantized, m) {
          m.def("quantized::add(Tensor qa, Tensor qb) -> Tensor");
        }
        }  // namespace
        TEST(AddTest, Basic) {
          EXPECT_TRUE(add(a, b).equal(c));
        }
        enum status run_op(int x) {
          return status_ok;
        }
        }  // namespace at::native
        """,
        path="aten/src/ATen/native/Fixture.cpp",
    )
    by_name = {f.qualname: f for f in facts.functions}
    assert by_name["at::native::add_out_cpu"][2:5] == ("structured_impl", 2, 5)
    assert by_name["at::native::add_Tensor"][2:5] == ("structured_meta", 6, 9)
    assert by_name["at::native::__perfq_torch_library_impl_aten_CPU"][2:5] == ("registration", 10, 12)
    fragment = by_name["at::native::(anonymous namespace)::__perfq_torch_library_fragment_quantized"]
    assert fragment.kind == "registration" and fragment.internal
    assert by_name["at::native::TEST"][3:5] == (18, 20)
    assert by_name["at::native::run_op"][3:5] == (21, 23)
    assert not any(f.usr for f in facts.functions)  # no real parse, no USRs


def test_macro_cased_constructor_of_a_class_template_specialisation():
    got = spans(
        extract(
            """
            template <unsigned N>
            class Sorter {
              template <class A, int I, int J>
              struct PB {
                CUTLASS_HOST_DEVICE PB(A& a) {
                  a.swap(I, J);
                }
              };
              template <class A, int I>
              struct PB<A, I, 1> {
                CUTLASS_HOST_DEVICE PB(A& a) {}
              };
            };
            """
        )
    )
    assert got["Sorter::PB::PB"] == [(5, 7), (11, 11)]


def test_the_definition_after_a_declare_dispatch_without_semicolon():
    facts = extract(
        """
        namespace at::native {
        using pool_fn = void (*)(int);
        DECLARE_DISPATCH(pool_fn, pool_stub)

        inline int64_t first_index(int64_t a, int64_t b, int64_t c) {
          return (a / b) * c;
        }

        DECLARE_DISPATCH(pool_fn, other_stub)
        template <typename scalar_t>
        void copy_rows(scalar_t* out, const scalar_t* in, int64_t n) {
          for (int64_t i = 0; i < n; i++) out[i] = in[i];
        }
        }  // namespace at::native
        """
    )
    got = spans(facts)
    assert got["at::native::first_index"] == (5, 7)
    assert got["at::native::copy_rows<scalar_t>"] == (10, 13)
    assert next(f for f in facts.functions if f.name == "copy_rows").kind == "template"


def test_methods_inside_class_templates_and_their_specialisations():
    facts = extract(
        """
        namespace at::vec {
        inline namespace CPU_CAPABILITY {
        template <typename scalar_t, typename Op>
        struct ReduceAll : public ReduceBase<scalar_t, std::function<void(Op)>> {
          static inline scalar_t apply(const Op& vec_fun, const Vectorized<scalar_t>& acc) {
            return reduce_all(vec_fun, acc, Vectorized<scalar_t>::size());
          }
          ReduceAll() : count_{0}, ops_(make_ops<Op>()) {
          }
          explicit operator bool() const noexcept {
            return count_ > 0;
          }
          bool operator<(const ReduceAll& other) const { return count_ < other.count_; }
          int count_;
        };
        template <typename Op>
        struct ReduceAll<float, Op> {
          static inline float apply(const Op& vec_fun, const Vectorized<float>& acc) {
            return vec_fun(acc);
          }
        };
        }  // namespace CPU_CAPABILITY
        }  // namespace at::vec
        """
    )
    got = spans(facts)
    prefix = "at::vec::CPU_CAPABILITY::ReduceAll::"
    assert got[prefix + "apply"] == [(5, 7), (18, 20)]
    assert got[prefix + "ReduceAll"] == (8, 9)
    assert got[prefix + "operator bool"] == (10, 12)
    assert got[prefix + "operator<"] == (13, 13)
    assert {f.kind for f in facts.functions} == {"method"}


def test_template_returning_an_alias_template_of_its_parameter():
    facts = extract(
        """
        namespace at::native {
        inline namespace CPU_CAPABILITY {
        template <typename T>
        std::pair<opmath_t<T>, opmath_t<T>> RowwiseMomentsImpl(const T* X, int64_t N, int64_t ddof = 0) {
          using math_t = opmath_t<T>;
          math_t m1 = 0;
          return std::make_pair(m1, m1);
        }
        template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
        inline C10_HOST_DEVICE T clamp_min(T x, T lo) {
          return x < lo ? lo : x;
        }
        template <>
        inline c10::complex<float> clamp_min<c10::complex<float>>(c10::complex<float> x, c10::complex<float> lo) {
          return x;
        }
        }  // namespace CPU_CAPABILITY
        }  // namespace at::native
        """
    )
    got = spans(facts)
    ns = "at::native::CPU_CAPABILITY::"
    assert got[ns + "RowwiseMomentsImpl<T>"] == (3, 8)
    assert got[ns + "clamp_min<T, ?>"] == (9, 12)
    assert got[ns + "clamp_min"] == (13, 16)  # the explicit specialisation: no template parameters


def test_out_of_line_members_of_class_templates():
    got = spans(
        extract(
            """
            namespace c10 {
            template <class Key, class Value>
            Dict<Key, Value>::Dict() : impl_(make_intrusive<detail::DictImpl>()) {
            }
            template <class Key, class Value>
            template <class... Args>
            std::pair<typename Dict<Key, Value>::iterator, bool> Dict<Key, Value>::emplace(Args&&... args) const {
              return impl_->emplace(std::forward<Args>(args)...);
            }
            }  // namespace c10
            """
        )
    )
    assert got["c10::Dict::Dict"] == (2, 4)
    assert got["c10::Dict::emplace<Args>"] == (5, 9)


def test_unbalanced_if_branches_keep_the_first_and_the_next_definitions():
    got = spans(
        extract(
            """
            namespace c10::detail {
            inline uint16_t round_even(float src) {
            #if defined(USE_ROCM)
              if (src != src) {
            #else
              if (std::isnan(src)) {
            #endif
                return 0x7FC0;
              }
              return 0;
            }
            #if defined(CPU_CAPABILITY_AVX512)
            struct alignas(64) Packed : public Base {
            #else
            struct Packed {
            #endif
              int size() const { return 4; }
            };
            inline float after(float x) {
              return x;
            }
            }  // namespace c10::detail
            """
        )
    )
    assert got["c10::detail::round_even"] == (2, 11)
    assert got["c10::detail::Packed::size"] == (17, 17)
    assert got["c10::detail::after"] == (19, 21)


def test_balanced_if_branches_are_all_definitions():
    got = spans(
        extract(
            """
            namespace at::vec {
            #if defined(CPU_CAPABILITY_AVX2)
            inline int lanes() { return 8; }
            #elif defined(CPU_CAPABILITY_AVX512)
            inline int lanes() { return 16; }
            #else
            inline int lanes() { return 1; }
            #endif
            #if 0
            inline int never() { return 0; }
            #endif
            }  // namespace at::vec
            """
        )
    )
    assert got["at::vec::lanes"] == [(3, 3), (5, 5), (7, 7)]
    assert "at::vec::never" not in got


def test_code_inside_raw_strings_and_macro_bodies_is_not_a_definition():
    got = spans(
        extract(
            """
            static const char* SHADERS = R"SHADERS(
            #include <metal_stdlib>
            kernel void add(texture2d<half> in[[texture(0)]]) {
              return;
            }
            )SHADERS";
            #define MAKE_OP(name) \\
              inline int name() { /* a comment \\
                 on two lines */  \\
                return 1;         \\
              }
            inline int real_one() {
              return 1;
            }
            """
        )
    )
    assert got == {"MAKE_OP": (7, 11), "real_one": (12, 14)}  # the macro is one (kind macro), not what it defines


def test_function_try_block_ends_after_its_handlers():
    got = spans(
        extract(
            """
            namespace c10::detail {
            bool log_usage(const std::string& event) try {
              return true;
            } catch (std::bad_function_call&) {
              return false;
            }
            }  // namespace c10::detail
            """,
            path="c10/util/Fixture.cpp",
        )
    )
    assert got["c10::detail::log_usage"] == (2, 6)


def test_calls_in_a_recovered_body_belong_to_it():
    facts = extract(
        """
        namespace at::native {
        template <typename T>
        std::pair<opmath_t<T>, opmath_t<T>> moments(const T* X, int64_t N) {
          return welford_combine(X, N);
        }
        }  // namespace at::native
        """,
        functions_only=False,
    )
    (fn,) = facts.functions
    assert (fn.qualname, fn.start_line, fn.end_line) == ("at::native::moments<T>", 2, 5)
    assert [(c.callee_name, c.line) for c in facts.calls] == [("welford_combine", 4)]


CLEAN = """
namespace at::native {
namespace {
static int helper(int x) { return x + 1; }
}  // namespace
struct Accumulator {
  explicit Accumulator(int start) : total_(start) {}
  ~Accumulator() {}
  int add(int x) { total_ += helper(x); return total_; }
  template <typename U>
  U as() const { return static_cast<U>(total_); }
  friend bool operator==(const Accumulator& a, const Accumulator& b) { return a.total_ == b.total_; }
  int total_;
};
int Accumulator_sum(const Accumulator& a) { return a.total_; }
template <typename T, int N>
T scaled(T x) { return x * N; }
}  // namespace at::native
"""


@pytest.mark.parametrize("path", ["aten/src/ATen/native/Clean.h", "aten/src/ATen/native/Clean.cpp"])
def test_scanner_names_definitions_as_clang_does(path):
    """Where clang parses a definition, the text scanner (which stands in for it where it
    cannot) gives the same qualified name, kind, linkage and extent."""
    by_clang = clang_definitions(path, textwrap.dedent(CLEAN).lstrip("\n"))
    assert len(by_clang) == 8
    # no macros of its own: the scanner's definitions alone (with the argument counts they accept)
    assert [f._replace(least_args=0, most_args=None) for f in extract(CLEAN, path).functions] == scanned(CLEAN)
    assert [(f.qualname, f.kind, f.internal, f.start_line, f.end_line) for f in scanned(CLEAN)] == [
        (f.qualname, f.kind, f.internal, f.start_line, f.end_line) for f in by_clang
    ]


def test_a_function_template_passed_by_name_is_a_call_site():
    """A header template handed to a loop helper (``cpu_kernel_vec(it, scalar_op<T>,
    vectorized_op<T>)``) links its caller to it, so a change in it reaches the kernel."""
    facts = extract(
        """
        namespace at::native {
        static void gelu_kernel(TensorIteratorBase& it, bool fast) {
          cpu_kernel_vec(it, scalar_gelu<scalar_t>, vectorized_gelu<scalar_t>, grain_size);
          check(a < b, c > d);
        }
        }  // namespace at::native
        """,
        path="aten/src/ATen/native/cpu/Activation.cpp",
        functions_only=False,
    )
    assert {(c.callee_name, c.kind) for c in facts.calls} == {
        ("cpu_kernel_vec", "direct"),
        ("scalar_gelu", "direct"),
        ("vectorized_gelu", "direct"),
        ("check", "direct"),
    }
