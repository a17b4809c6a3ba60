// perfq prelude: parsed before every C++/CUDA/ObjC++ file so that ATen's macros come
// out as real functions without a build (no generated headers, no compile_commands).
// Registrations (DispatchStub, TORCH_LIBRARY_IMPL) are read from the token text by
// indexer/registrations.py; here they only need to parse.

// Structured kernels: the definitions become functions named after the kernel
// (TORCH_IMPL_FUNC(softmax_cpu_out) -> at::native::softmax_cpu_out); the indexer
// marks their kind from the macro name.
#define TORCH_IMPL_FUNC(name) void name
#define TORCH_META_FUNC(name) void name
#define TORCH_META_FUNC2(name, overload) void name##_##overload
#define TORCH_PRECOMPUTE_META_FUNC(name) void name
#define TORCH_PRECOMPUTE_META_FUNC2(name, overload) void name##_##overload
#define TORCH_PRECOMPUTE_STRUCT(name) structured_##name
#define TORCH_PRECOMPUTE_STRUCT2(name, overload) structured_##name##_##overload

// DispatchStub declarations and registrations: harmless declarations. Headers write
// DECLARE_DISPATCH(...) without ';' (the real macro ends in one): without it here the
// declaration would swallow the definition after it.
#define DECLARE_DISPATCH(fn, name) extern int name;
#define DEFINE_DISPATCH(name) int name
#define REGISTER_DISPATCH(name, fn) static int __perfq_reg_##name
#define REGISTER_ARCH_DISPATCH(name, arch, fn) static int __perfq_reg_##name##_##arch
#define REGISTER_AVX512_DISPATCH(name, fn) static int __perfq_reg_avx512_##name
#define REGISTER_AVX2_DISPATCH(name, fn) static int __perfq_reg_avx2_##name
#define REGISTER_VSX_DISPATCH(name, fn) static int __perfq_reg_vsx_##name
#define REGISTER_ZVECTOR_DISPATCH(name, fn) static int __perfq_reg_zvector_##name
#define REGISTER_SVE256_DISPATCH(name, fn) static int __perfq_reg_sve256_##name
#define ALSO_REGISTER_AVX512_DISPATCH(name, fn) static int __perfq_also_avx512_##name
#define ALSO_REGISTER_SVE256_DISPATCH(name, fn) static int __perfq_also_sve256_##name
#define REGISTER_NO_CPU_DISPATCH(name) static int __perfq_nocpu_##name
#define REGISTER_NO_AVX512_DISPATCH(name) static int __perfq_noavx512_##name
#define REGISTER_CUDA_DISPATCH(name, fn) static int __perfq_cuda_##name
#define REGISTER_HIP_DISPATCH(name, fn) static int __perfq_hip_##name
#define REGISTER_MPS_DISPATCH(name, fn) static int __perfq_mps_##name
#define REGISTER_XPU_DISPATCH(name, fn) static int __perfq_xpu_##name
#define REGISTER_PRIVATEUSE1_DISPATCH(name, fn) static int __perfq_pu1_##name
#define REGISTER_MTIA_DISPATCH(name, fn) static int __perfq_mtia_##name

// Library registrations become functions so that their m.impl/m.def bodies are scanned.
#define TORCH_LIBRARY(ns, m) void __perfq_torch_library_##ns(Library& m)
#define TORCH_LIBRARY_FRAGMENT(ns, m) void __perfq_torch_library_fragment_##ns(Library& m)
#define TORCH_LIBRARY_IMPL(ns, k, m) void __perfq_torch_library_impl_##ns##_##k(Library& m)
#define TORCH_FN(f) (&f)
#define TORCH_SELECTIVE_NAME(n) n
#define TORCH_SELECTIVE_SCHEMA(n) n

// Attributes and qualifiers that would otherwise break declarations.
#define C10_ALWAYS_INLINE inline
#define C10_ALWAYS_INLINE_ATTRIBUTE
#define C10_NOINLINE
#define C10_HOST_DEVICE
#define C10_HOST
#define C10_DEVICE
#define C10_API
#define C10_EXPORT
#define C10_IMPORT
#define C10_UNUSED
#define C10_NODISCARD
#define C10_USED
#define C10_RESTRICT
#define C10_LIKELY(x) (x)
#define C10_UNLIKELY(x) (x)
#define TORCH_API
#define TORCH_PYTHON_API
#define TORCH_CUDA_CPP_API
#define TORCH_CUDA_CU_API
#define TORCH_XPU_API
#define AT_CUDA_API
#define CAFFE2_API
#define C10_CUDA_API
#define C10_LAUNCH_BOUNDS_0
#define C10_LAUNCH_BOUNDS_1(x)
#define C10_LAUNCH_BOUNDS_2(x, y)
#define __launch_bounds__(...)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__
#define __constant__
#define __restrict__
#define C10_DEPRECATED
#define C10_DEPRECATED_MESSAGE(m)
#define C10_DIAGNOSTIC_PUSH_AND_IGNORED_IF_DEFINED(w)
#define C10_DIAGNOSTIC_POP()
#define C10_CLANG_DIAGNOSTIC_PUSH()
#define C10_CLANG_DIAGNOSTIC_POP()
#define C10_CLANG_DIAGNOSTIC_IGNORE(w)
#define C10_DEFINE_REGISTRY(...)
#define C10_DECLARE_REGISTRY(...)
#define C10_REGISTER_CLASS(...)
#define C10_ALWAYS_INLINE_UNLESS_MOBILE inline
#define C10_HIP_HOST_DEVICE
#define C10_ERASE inline
#define C10_WARP_SIZE 32
// CUTLASS (the CUDA attention and mixed-dtype GEMM headers)
#define CUTLASS_HOST_DEVICE
#define CUTLASS_DEVICE
#define CUTLASS_HOST
#define CUTLASS_GLOBAL
#define CUTLASS_PRAGMA_UNROLL
#define CUTLASS_PRAGMA_NO_UNROLL
// UBSan exemptions (c10/macros/Macros.h)
#define __ubsan_ignore_float_divide_by_zero__
#define __ubsan_ignore_undefined__
#define __ubsan_ignore_signed_int_overflow__
#define __ubsan_ignore_pointer_overflow__
#define __ubsan_ignore_function__
#define __ubsan_ignore_float_cast_overflow__
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#define TORCH_ASSERT_NO_OPERATORS
