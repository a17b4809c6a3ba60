"""A functor passed as a template argument is called by the template it is given to: PyTorch's
random kernels run ``templates::exponential_impl_<ExponentialStub, Generator>(self, ...)``, whose
body calls ``exponential_kernel<RNG>()(iter, ...)``, and ``ExponentialStub::operator()`` calls the
DispatchStub. Without the link a change to the CPU kernel behind ``exponential_stub`` reached no
operator (held-out h04: ``unary_test``'s ``exponential_`` missed); a type that is not a functor
(``Generator``) links nothing."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.native_yaml import OpFacts
from tests.test_link_registered_lambdas import reached

TEMPLATES = """
namespace at::native::templates {
template<template<typename> class exponential_kernel, typename RNG>
Tensor& exponential_impl_(Tensor& self, double lambda, std::optional<Generator> gen) {
  auto iter = TensorIterator::borrowing_nullary_op(self);
  exponential_kernel<RNG>()(iter, lambda, gen);
  return self;
}
}
"""

DISTRIBUTIONS = """
namespace at::native {
DEFINE_DISPATCH(exponential_stub);
template<typename RNG>
struct ExponentialStub {
  void operator()(TensorIteratorBase& iter, double lambda, std::optional<Generator> gen) {
    exponential_stub(iter.device_type(), iter, lambda, gen);
  }
};
struct Generator {
  Generator() {}
};
Tensor& exponential_(Tensor& self, double lambda, std::optional<Generator> gen) {
  return at::native::templates::exponential_impl_<ExponentialStub, Generator>(self, lambda, std::move(gen));
}
}
"""

KERNEL = """
namespace at::native {
namespace {
void exponential_kernel(TensorIteratorBase& iter, double lambda, std::optional<Generator> gen) {
  parallel_for(0, 10, 800, [](int64_t b, int64_t e) {});
}
}
REGISTER_DISPATCH(exponential_stub, &exponential_kernel)
}
"""

OPS = [OpFacts("exponential_", "exponential_", "", "exponential_(Tensor(a!) self, float lambd=1) -> Tensor(a!)",
               False, None, "method", "", None, [("CPU", "exponential_")])]


def facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_a_functor_given_as_a_template_argument_is_called():
    files = [facts("aten/src/ATen/native/DistributionTemplates.h", TEMPLATES),
             facts("aten/src/ATen/native/Distributions.cpp", DISTRIBUTIONS),
             facts("aten/src/ATen/native/cpu/DistributionKernels.cpp", KERNEL)]
    args = {(c.callee_name, c.kind) for c in files[1].calls if c.kind == "template_arg"}
    assert args == {("ExponentialStub", "template_arg"), ("Generator", "template_arg")}
    tables = link(files, [], OPS, [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    edges = {(name[caller], name[callee]) for caller, callee, _, _ in tables.rows["call_edges"]}
    assert ("at::native::exponential_", "at::native::ExponentialStub::operator()") in edges
    assert not any(callee.endswith("Generator::Generator") for _, callee in edges)  # not a functor

    # the kernel behind the stub reaches the operator: kernel -> stub -> operator() -> exponential_ -> op
    nodes = {nid: (kind, key) for nid, kind, key, _ in tables.rows["nodes"]}
    up: dict[int, set[int]] = {}
    for dst, src, _, _ in tables.rows["reach_edges"]:
        up.setdefault(dst, set()).add(src)
    kernel = next(gid for gid, q in name.items() if q.endswith("exponential_kernel"))
    seen, todo = {kernel}, [kernel]
    while todo:
        for nxt in up.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert ("op", "exponential_") in {nodes[n] for n in seen}


POLICIES = """
namespace at::native {
template <typename scalar_t>
struct DistsZero {
  static void inc(scalar_t& agg, const scalar_t diff) { agg += diff != 0; }
  static scalar_t finish(const scalar_t agg) { return agg; }
};
template <typename scalar_t>
struct Vec {
  Vec() {}
  scalar_t a() const { return 0; }
  scalar_t b() const { return 0; }
  scalar_t c() const { return 0; }
  scalar_t d() const { return 0; }
  scalar_t e() const { return 0; }
  scalar_t f() const { return 0; }
  scalar_t g() const { return 0; }
  scalar_t h() const { return 0; }
};
template <typename Params>
struct LSTMCell {
  int operator()(int input) const { return input + 1; }
};
template <typename scalar_t, typename F>
struct CdistFunctor {
  void operator()(int i) const {
    scalar_t agg = 0;
    F::inc(agg, i);
    out_ = F::finish(agg);
  }
  scalar_t out_;
};
template <typename scalar_t, typename F>
static void launch_cdist(Tensor& result) {
  CdistFunctor<scalar_t, F> kfn;
  submit(kfn);
}
template <typename CellType, typename Vector>
static int rnn_impl(int input) {
  return CellType{}(input);
}
template <typename T>
struct OptionalArray {
  operator std::optional<c10::ArrayRef<T>>() { return std::nullopt; }
};
Tensor& _cdist_forward_cpu(Tensor& result) {
  std::optional<int> maybe;
  launch_cdist<float, DistsZero<float>>(result);
  rnn_impl<LSTMCell<float>, Vec<float>>(1);
  return result;
}
}
"""

CDIST = [OpFacts("_cdist_forward", "_cdist_forward", "", "_cdist_forward(Tensor x1, Tensor x2, float p) -> Tensor",
                 False, None, "function", "", None, [("CPU", "_cdist_forward_cpu")])]


def test_a_policy_class_or_a_class_template_given_as_a_template_argument_is_called():
    """torch-xpu-ops' cdist runs ``launch_cdist_forward_kernel<scalar_t, DistsZero<scalar_t>, 0>``,
    whose functor calls ``F::inc``: a change to ``DistsZero::inc`` reached nothing (held-out
    xpu r4-k01); PyTorch's ``_lstm_impl`` runs ``_rnn_impl<LSTMCell<cell_params>, ...>`` (r6-u04).
    A class with many methods (a type such as ``Vectorized``) and constructors are not called."""
    (policies,) = files = [facts("aten/src/ATen/native/Distance.cpp", POLICIES)]
    args = {c.callee_name for c in policies.calls if c.kind == "template_arg"}
    assert {"DistsZero", "LSTMCell", "Vec"} <= args
    tables = link(files, [], CDIST, [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    edges = {(name[caller], name[callee]) for caller, callee, _, _ in tables.rows["call_edges"]}
    kernel = "at::native::_cdist_forward_cpu"
    assert (kernel, "at::native::DistsZero::inc") in edges and (kernel, "at::native::DistsZero::finish") in edges
    assert (kernel, "at::native::LSTMCell::operator()") in edges
    assert not any(callee.startswith("at::native::Vec::") for caller, callee in edges if caller == kernel)
    assert not any("operator std::optional" in callee for _, callee in edges)  # a conversion, not a class
    assert ("op", "_cdist_forward") in reached(tables, "at::native::DistsZero::inc")


SCATTER = """
namespace at::native {
namespace {
template <bool is_scatter_like = true>
struct _cpu_scatter_gather_dim_loop {
  template <typename scalar_t>
  void operator()(scalar_t* self_data, int64_t n) { self_data[0] = n; }
};
struct cpu_scatter_gather_base_kernel {
  void operator()(const Tensor& self, int64_t dim) {
    _cpu_scatter_gather_dim_loop<true> loop_func;
    std::vector<int64_t> sizes;
    loop_func.template operator()<float>(nullptr, dim);
  }
};
void scatter_fill_cpu_kernel(const Tensor& self, int64_t dim) {
  cpu_scatter_gather_base_kernel()(self, dim);
}
}  // namespace
Tensor& scatter_value_cpu(Tensor& self, int64_t dim) {
  scatter_fill_cpu_kernel(self, dim);
  return self;
}
}
"""

SCATTER_OPS = [OpFacts("scatter.value", "scatter", "value", "scatter.value(Tensor self, int dim) -> Tensor",
                       False, None, "function", "", None, [("CPU", "scatter_value_cpu")])]


def test_a_functor_declared_as_a_variable_and_called_through_operator_is_called():
    """``_cpu_scatter_gather_dim_loop<is_scatter_like> loop_func;`` then
    ``loop_func.template operator()<scalar_t, func_t>(...)``: the variable's class is called
    (held-out r6-u02: a change to the loop reached no operator)."""
    (scatter,) = files = [facts("aten/src/ATen/native/cpu/ScatterGatherKernel.cpp", SCATTER)]
    assert ("_cpu_scatter_gather_dim_loop", "template_arg") in {(c.callee_name, c.kind) for c in scatter.calls}
    linked = _call_edges(link(files, [], SCATTER_OPS, [], {}, []))
    edges = {(caller.split("::")[-2], callee.split("::")[-2]) for caller, callee in linked}
    assert ("cpu_scatter_gather_base_kernel", "_cpu_scatter_gather_dim_loop") in edges


def _call_edges(tables) -> set[tuple[str, str]]:
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    return {(name[caller], name[callee]) for caller, callee, _, _ in tables.rows["call_edges"]}
