"""A method called on an object (``method.run(...)``) whose name several classes define resolves
to those the calling file can see through its includes, when it sees any: a radix sort's
``method.run`` is not a reduction's ``ReduceOp::run`` (a false edge that made every sort
benchmark a reduction's). With none visible (a header that relies on its includer), every
candidate stays."""

from __future__ import annotations

import textwrap

from perfq.indexer.extract import file_facts
from perfq.indexer.facts import FileFacts
from perfq.indexer.link import link


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
