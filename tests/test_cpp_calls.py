"""Call sites read from C++ text: each '(' (and '&', a template-id's '>') read backwards,
so a call is named by the identifier before its arguments, its template arguments or its
CUDA launch configuration, never by a variable compared with something."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts


def calls(source: str, path: str = "aten/src/ATen/native/cuda/Fixture.cu") -> set[tuple[str, str, str, int]]:
    facts = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(facts, FileFacts) and facts.status == "ok"
    return {(c.callee_name, c.qualifier, c.kind, c.line) for c in facts.calls}


def test_cuda_launches_name_their_kernel():
    found = calls(
        """
        namespace at::native {
        void launch(const Tensor& t) {
          fill_kernel<scalar_t><<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(t.data_ptr());
          plain_kernel<<<
              blocks, threads>>>(n);
          unrolled_kernel<func_t, elems_per_thread<io_size>()>
              <<<grid, num_threads(), 0, stream>>>(N, f);
        }
        }  // namespace at::native
        """
    )
    assert ("fill_kernel", "", "direct", 3) in found
    assert ("getCurrentCUDAStream", "at::cuda", "direct", 3) in found
    assert ("plain_kernel", "", "direct", 4) in found
    assert ("unrolled_kernel", "", "direct", 6) in found
    assert ("elems_per_thread", "", "direct", 6) in found
    assert ("num_threads", "", "direct", 7) in found


def test_comparisons_and_declarators_are_not_calls():
    found = calls(
        """
        namespace at::vec {
        template <> class Vectorized<int64_t> {
         public:
          Vectorized<int64_t> operator>(const Vectorized<int64_t>& other) const {
            return cmp_gt(values, other.values);
          }
        };
        void loop(int64_t n) {
          for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
            use(i < n && check<int64_t>(i));
          }
        }
        }  // namespace at::vec
        """,
        path="aten/src/ATen/cpu/vec/vec256/Fixture.h",
    )
    names = {name for name, *_ in found}
    assert "Vectorized" not in names  # the operator's return type, not a constructor call
    assert "i" not in names  # 'i < static_cast<...>(' compares, it calls nothing
    assert {"cmp_gt", "size", "use", "check"} <= names


def test_template_arguments_with_parentheses_and_values():
    found = calls(
        """
        namespace at::native {
        static void kernel(TensorIteratorBase& it) {
          auto v = mask_gather<sizeof(scalar_t)>(Vec(0), ptr);
          cpu_kernel_vec(it, scalar_op<scalar_t, std::optional<double>>, vec_op<scalar_t>);
          dispatch(it, &at::native::helper, and_stub);
        }
        }  // namespace at::native
        """,
        path="aten/src/ATen/native/cpu/Fixture.cpp",
    )
    assert ("mask_gather", "", "direct", 3) in found
    assert ("scalar_op", "", "direct", 4) in found and ("vec_op", "", "direct", 4) in found
    assert not any(name == "optional" for name, *_ in found)  # inside scalar_op's arguments
    assert ("helper", "at::native", "address", 5) in found
    assert ("and_stub", "", "value", 5) in found


def test_brace_temporaries_are_constructor_calls_and_blocks_are_not():
    found = calls(
        """
        namespace at::native::xpu {
        struct Acc { int total{0}; };
        void kernel(TensorIteratorBase& iter, bool flag) {
          gpu_kernel(iter, AbsDiffFunctor{});
          auto f = flag ? ns::ScaleFunctor<float>{2.0f} : ns::ScaleFunctor<float>{1.0f};
          if (flag) { use(iter); } else { skip(iter); }
          auto body = [&] { run(iter); };
          return ResultFunctor{iter};
        }
        void sum_kernel(TensorIterator& iter) {
          sum_functor<scalar_t>{}(iter);
          if (iter.numel()) { iter.run(); }
        }
        }  // namespace at::native::xpu
        """,
        path="src/ATen/native/xpu/sycl/Fixture.cpp",
    )
    names = {name for name, *_ in found}
    assert ("AbsDiffFunctor", "", "direct", 4) in found
    assert ("ScaleFunctor", "ns", "direct", 5) in found
    assert ("ResultFunctor", "", "direct", 8) in found
    assert ("sum_functor", "", "direct", 11) in found  # a temporary called at once
    assert not names & {"total", "int", "else", "flag", "xpu", "Acc"}
