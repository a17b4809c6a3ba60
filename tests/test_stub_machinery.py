"""The DispatchStub machinery: every call of a stub runs the call operator of the stub's class
(the class template beside the stub-declaring macro), so a change to what that operator calls
(choosing and loading the kernel pointer) reaches every operator whose kernel calls a stub."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.aten_fixture import FILES, commit_all, git, perfq, replace_in, write_tree
from tests.conftest import db_rows
from tests.test_affected_sampled import _affected_after

MACHINERY_H = "aten/src/ATen/native/DispatchStub.h"
MACHINERY_CPP = "aten/src/ATen/native/DispatchStub.cpp"

FILES_WITH_MACHINERY = {
    **FILES,
    MACHINERY_H: """\
        #pragma once
        #include <atomic>
        namespace at::native {
        struct DispatchStubImpl {
          void* get_call_ptr(int device_type, void* DEFAULT);
          void* try_get_call_ptr(int device_type, void* DEFAULT);
          void* choose_cpu_impl(void* DEFAULT);
          std::atomic<void*> cpu_dispatch_ptr{nullptr};
          void* cuda_dispatch_ptr = nullptr;
        };

        template <typename FnPtr, typename T>
        struct DispatchStub;

        template <typename rT, typename T, typename... Args>
        struct DispatchStub<rT (*)(Args...), T> {
          using FnPtr = rT (*)(Args...);

         private:
          FnPtr get_call_ptr(int device_type) {
            return reinterpret_cast<FnPtr>(impl.get_call_ptr(device_type, reinterpret_cast<void*>(DEFAULT)));
          }

         public:
          template <typename... ArgTypes>
          rT operator()(int device_type, ArgTypes&&... args) {
            FnPtr call_ptr = get_call_ptr(device_type);
            return (*call_ptr)(std::forward<ArgTypes>(args)...);
          }

          bool is_device_supported(int device_type) {
            return impl.try_get_call_ptr(device_type, reinterpret_cast<void*>(DEFAULT)) != nullptr;
          }

          void set_cuda_dispatch_ptr(FnPtr fn_ptr) {
            impl.cuda_dispatch_ptr = reinterpret_cast<void*>(fn_ptr);
          }

          static TORCH_API FnPtr DEFAULT;

         private:
          DispatchStubImpl impl;
        };

        #define DECLARE_DISPATCH(fn, name)                                                        \\
          struct name##_DECLARE_DISPATCH_type : DispatchStub<fn, name##_DECLARE_DISPATCH_type> {  \\
            name##_DECLARE_DISPATCH_type() = default;                                             \\
          };                                                                                      \\
          extern TORCH_API struct name##_DECLARE_DISPATCH_type name;

        #define DEFINE_DISPATCH(name) struct name##_DECLARE_DISPATCH_type name
        }  // namespace at::native
        """,
    MACHINERY_CPP: """\
        #include <ATen/native/DispatchStub.h>
        namespace at::native {
        void* DispatchStubImpl::try_get_call_ptr(int device_type, void* DEFAULT) {
          if (device_type == 0) {
            auto fptr = cpu_dispatch_ptr.load(std::memory_order_relaxed);
            if (fptr == nullptr) {
              fptr = choose_cpu_impl(DEFAULT);
            }
            return fptr;
          }
          return nullptr;
        }

        void* DispatchStubImpl::get_call_ptr(int device_type, void* DEFAULT) {
          return try_get_call_ptr(device_type, DEFAULT);
        }

        void* DispatchStubImpl::choose_cpu_impl(void* DEFAULT) {
          return DEFAULT;
        }
        }  // namespace at::native
        """,
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_tree(tmp_path_factory.mktemp("stub_machinery"), FILES_WITH_MACHINERY)
    header = "aten/src/ATen/native/SoftmaxOp.h"
    replace_in(root, header, "#pragma once\n", "#pragma once\n#include <ATen/native/DispatchStub.h>\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "base")
    proc = perfq(root, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    return root


def test_pointer_load_reaches_the_operators_whose_kernels_call_a_stub(repo):
    doc = _affected_after(repo, MACHINERY_CPP, "std::memory_order_relaxed", "std::memory_order_acquire")
    assert [c["function"] for c in doc["changed_functions"]] == ["at::native::DispatchStubImpl::try_get_call_ptr"]
    # softmax_op_cpu_out calls softmax_op_stub: the stub's call runs DispatchStub::operator(),
    # which loads the pointer through get_call_ptr
    assert {"softmax_op.out", "softmax_op"} <= set(doc["ops"])
    chain = next(b for b in doc["benchmarks"] if b["name"] == "softmax_op_test")["reasons"][0]["chain"]
    assert any("DispatchStub::operator()" in s for s in chain)
    assert "stub softmax_op_stub [call]" in chain
    # still shared infrastructure (the dispatch canary set), not a plain kernel change
    assert doc["shared_infrastructure"] is True
    assert [c["set"] for c in doc["canary"]] == ["dispatch"]
    # an operator whose kernel calls no stub is not reached
    assert "lonely" not in doc["ops"]


def test_only_the_call_operator_is_what_a_stub_call_runs(repo):
    edges = db_rows(
        repo / ".git" / "perfq" / "index.duckdb",
        """SELECT s.key, f.label, e.detail FROM reach_edges e JOIN nodes s ON s.id = e.src
           JOIN nodes f ON f.id = e.dst WHERE s.kind = 'stub' AND e.kind = 'call'""",
    )
    # the called stub only (the index holds none of the setters or other methods as its calls)
    assert [(stub, function) for stub, function, _ in edges] == [
        ("softmax_op_stub", "at::native::DispatchStub::operator()<ArgTypes>")
    ]
