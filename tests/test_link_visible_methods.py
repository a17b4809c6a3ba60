"""A method called on an object (``method.run(...)``) whose name several classes define resolves
to those the calling file can see through its includes, when it sees any: a radix sort's
``method.run`` is not a reduction's ``ReduceOp::run`` (a false edge that made every sort
benchmark a reduction's). With none visible (a header that relies on its includer), every
candidate stays, unless there is only one: ``queue.wait()`` on a SYCL queue is not the one indexed
``WorkXCCL::wait``. A method defined out of line in ``X.cpp`` is visible where ``X.h`` is."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.link_cpp import CppCallLinker, _unit_of


def facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def method_header(cls: str) -> str:
    body = f"struct {cls} {{\n  void run(int n) {{ count_ = n; }}\n  int count_;\n}};\n"
    return f"namespace at::native::xpu {{\n{body}}}\n"


CALLER = """
{include}
namespace at::native::xpu {{
template <typename method_t>
void sort_pass(method_t& method, int n) {{
  method.run(n);
}}
}}
"""


def callees_of(caller_include: str) -> set[str]:
    files = [
        facts("src/xpu/sycl/Reduce.h", method_header("ReduceOp")),
        facts("src/xpu/sycl/SortingRadixSort.h", method_header("RadixSortUpsweep")),
        facts("src/xpu/sycl/Util.h", '#include "xpu/sycl/SortingRadixSort.h"\n'),
        facts("src/xpu/sycl/SortingKernels.h", CALLER.format(include=caller_include)),
    ]
    tables = link(files, [], [], [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    return {name[callee] for caller, callee, *_ in tables.rows["call_edges"] if "::sort_pass<" in name[caller]}


def test_a_method_call_resolves_to_the_classes_its_file_includes():
    assert callees_of('#include "xpu/sycl/SortingRadixSort.h"') == {"at::native::xpu::RadixSortUpsweep::run"}


def test_includes_are_followed_through_other_headers():
    assert callees_of('#include "xpu/sycl/Util.h"') == {"at::native::xpu::RadixSortUpsweep::run"}


def test_with_no_candidate_visible_every_candidate_stays():
    assert callees_of("") == {"at::native::xpu::RadixSortUpsweep::run", "at::native::xpu::ReduceOp::run"}


def single_candidate_callees(caller_include: str, out_of_line: bool = False) -> set[str]:
    """Callees of ``copy_kernel``'s ``queue.wait()`` when the only indexed ``wait`` is a
    method of WorkXCCL (defined in its header, or out of line in its .cpp)."""
    # (its parameter's default lets ``queue.wait()`` call it: tests/test_call_arity.py)
    header = "namespace c10d {\nstruct WorkXCCL {\n  bool wait(int timeout = 0)%s\n};\n}\n"
    files = [facts("src/xccl/WorkXCCL.hpp", header % (";" if out_of_line else " { return timeout > 0; }"))]
    if out_of_line:
        files.append(facts(
            "src/xccl/WorkXCCL.cpp",
            '#include "xccl/WorkXCCL.hpp"\nnamespace c10d {\n'
            "bool WorkXCCL::wait(int timeout) { return timeout > 0; }\n}\n",
        ))
    files.append(facts(
        "src/ATen/native/xpu/Copy.cpp",
        f"{caller_include}\nnamespace at::native::xpu {{\n"
        "void copy_kernel(sycl::queue& queue) {\n  queue.wait();\n}\n}\n",
    ))
    tables = link(files, [], [], [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    return {name[callee] for caller, callee, *_ in tables.rows["call_edges"] if name[caller].endswith("copy_kernel")}


def test_the_only_candidate_is_not_called_where_its_class_is_not_visible():
    assert single_candidate_callees("") == set()


def test_the_only_candidate_is_called_where_its_class_is_visible():
    assert single_candidate_callees('#include "xccl/WorkXCCL.hpp"') == {"c10d::WorkXCCL::wait"}


def test_a_method_defined_out_of_line_is_visible_where_its_header_is():
    assert single_candidate_callees('#include "xccl/WorkXCCL.hpp"', out_of_line=True) == {"c10d::WorkXCCL::wait"}
    assert single_candidate_callees("", out_of_line=True) == set()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 11), st.lists(st.integers(0, 11), max_size=4), max_size=12), st.data())
def test_the_units_a_file_sees_are_those_of_every_file_it_reaches(includes, data):
    """visible_units (one walk for every file it reaches, include cycles and files asked for in
    any order) gives each file the units of the files it reaches, itself included."""
    paths = {f: f"src/dir{f % 3}/unit{f % 5}.{'h' if f % 2 else 'cpp'}" for f in range(12)}
    linker = CppCallLinker((), (), set(), lambda kind, key: 0, paths, lambda: includes)
    for file_id in data.draw(st.permutations(range(12))):
        seen, stack = {file_id}, [file_id]
        while stack:
            for inc in includes.get(stack.pop(), ()):
                if inc not in seen:
                    seen.add(inc)
                    stack.append(inc)
        units = linker.visible_units(file_id)
        assert {u for u in range(12) if units & linker.unit_bit(u)} == {u for u in range(12) if any(
            _unit_of(paths[u]) == _unit_of(paths[f]) for f in seen)}
