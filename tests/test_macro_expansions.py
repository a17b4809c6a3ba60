"""A change inside a macro's definition reaches the functions the macro is expanded into (its
expansion sites, in any file that includes its header), not every function of its file: a
function-like macro is indexed as a function of kind ``macro`` spanning its ``#define`` lines,
and each expansion is a call of it by name (issue 40, item 3)."""

from __future__ import annotations

import json

from indexer.link import link
from tests.aten_fixture import commit_all, make_repo, replace_in
from tests.conftest import run_perfq
from tests.cpp_facts import call_edges, cpp_facts

HEADER = "aten/src/ATen/native/SoftmaxOp.h"
KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
OPS_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"


def _affected(repo, rev_range: str) -> dict:
    proc = run_perfq(repo, "affected", rev_range, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_macro_is_a_function_its_expansion_sites_call():
    facts = cpp_facts(
        "aten/src/ATen/native/Scale.cpp",
        """
        #define SCALE_BY(x, k) \\
          ((x) * (k))
        #define PLAIN 3
        namespace at::native {
        int twice(int x) { return SCALE_BY(x, 2); }
        int thrice(int x) { return SCALE_BY(x, PLAIN); }
        int other(int x) { return x; }
        }
        """,
    )
    (macro,) = [f for f in facts.functions if f.kind == "macro"]  # an object-like macro is not one
    assert (macro.name, macro.start_line, macro.end_line, macro.internal) == ("SCALE_BY", 1, 2, True)
    edges = call_edges(link([facts], [], [], []))
    assert {caller for caller, callee in edges if callee == "SCALE_BY"} == {"at::native::twice", "at::native::thrice"}


def test_a_header_macros_change_selects_its_expansion_sites_not_its_includers(tmp_path):
    repo = make_repo(tmp_path / "repo")
    replace_in(repo, HEADER, "#pragma once\n", "#pragma once\n#define SOFTMAX_OP_SCALE(v) \\\n  ((v) * 2)\n")
    replace_in(repo, KERNEL, "out[i] = out[i] * 2;", "out[i] = SOFTMAX_OP_SCALE(out[i]);")
    base = commit_all(repo, "a macro in the header, expanded by the CPU kernel")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, HEADER, "  ((v) * 2)\n", "  ((v) * 3)\n")
    head = commit_all(repo, "the macro's body changes")

    doc = _affected(repo, f"{base}..{head}")
    assert "softmax_op_test" in {b["name"] for b in doc["benchmarks"]}  # the kernel expands it
    assert "lonely" not in doc["no_benchmark_ops"]  # SoftmaxOp.cpp includes the header, never expands it
    assert "qthing_test" not in {b["name"] for b in doc["benchmarks"]}


def test_a_source_macros_change_selects_only_the_functions_expanding_it(tmp_path):
    repo = make_repo(tmp_path / "repo")
    replace_in(repo, OPS_FILE, "namespace at::native {\nDEFINE_DISPATCH", "#define LONELY_SIZE(n) make_size(n)\n"
               "namespace at::native {\nDEFINE_DISPATCH")
    replace_in(repo, OPS_FILE, "  make_size(3);\n", "  LONELY_SIZE(3);\n")
    base = commit_all(repo, "a macro of the ops file, expanded by lonely_kernel")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, OPS_FILE, "make_size(n)\n", "make_size((n) + 1)\n")
    head = commit_all(repo, "the macro's body changes")

    doc = _affected(repo, f"{base}..{head}")
    assert "lonely" in doc["no_benchmark_ops"]
    assert not {b["name"] for b in doc["benchmarks"]}  # softmax_op and fancy do not expand it


def test_an_expansion_calls_the_definition_in_force_at_its_line():
    """torch-xpu-ops r6-n01: Indexing.cpp defines ``SMALL_INDEX`` three times, with ``#undef``
    between; each expansion runs the ``#define`` before it, not the other two (a change inside
    the index_add functor that one of them names is not run by index_select)."""
    facts = cpp_facts(
        "src/ATen/native/xpu/sycl/Indexing.cpp",
        """
        namespace at::native {
        int add_kernel(int x);
        int select_kernel(int x);
        #define SMALL_INDEX(x) add_kernel(x)
        int index_add(int x) { return SMALL_INDEX(x); }
        #undef SMALL_INDEX
        #define SMALL_INDEX(x) select_kernel(x)
        int index_select(int x) { return SMALL_INDEX(x) + SMALL_INDEX(x + 1); }
        #undef SMALL_INDEX
        }
        """,
    )
    tables = link([facts], [], [], [])
    rows = {row[0]: row for row in tables.rows["functions"]}
    expanded = {(rows[caller][2], rows[callee][5]) for caller, callee, *_ in tables.rows["call_edges"]
                if rows[callee][3] == "SMALL_INDEX"}
    assert expanded == {("at::native::index_add", 4), ("at::native::index_select", 7)}
