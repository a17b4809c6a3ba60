"""The link runs in two steps (indexer/link.py NativeLink): C++ files and operators first, while a
build still parses its Python files, then Python files and benchmarks. Python functions are
numbered after the nodes the first step made (operators, stubs), which keep their ids; node ids
equal function ids, every edge joins the same things, and the order files come in does not matter."""

from __future__ import annotations

import random
import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import NativeLink, link
from indexer.native_yaml import OpFacts

CPP = {
    "aten/native/Add.cpp": """
        namespace at::native {
        DEFINE_DISPATCH(add_stub);
        Tensor add_cpu(const Tensor& a, const Tensor& b) { add_stub(kCPU, a, b); return a; }
        Tensor mul_cpu(const Tensor& a, const Tensor& b) { return at::add(a, b); }
        }
    """,
    "aten/native/cpu/AddKernel.cpp": """
        namespace at::native {
        static void add_kernel(const Tensor& a, const Tensor& b) {}
        REGISTER_DISPATCH(add_stub, &add_kernel);
        }
    """,
}
PYTHON = {
    "torch/nn/functional.py": """
        import torch

        def plus(a, b):
            return torch.add(a, b)

        def twice(a):
            return plus(a, a)
    """,
    "torch/nn/other.py": """
        import torch

        def times(a, b):
            return torch.mul(a, b)
    """,
}
OPS = [
    OpFacts("add.Tensor", "add", "Tensor", "add.Tensor(Tensor self, Tensor other) -> Tensor", False, None,
            "function, method", "", None, [("CPU", "add_cpu")]),
    OpFacts("mul.Tensor", "mul", "Tensor", "mul.Tensor(Tensor self, Tensor other) -> Tensor", False, None,
            "function, method", "", None, [("CPU", "mul_cpu")]),
]


def facts(kind: str, path: str, source: str) -> FileFacts:
    out = file_facts(kind, path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def named_edges(tables) -> set[tuple]:
    """The reach edges with their ends named (kind, key or qualname), not numbered."""
    qualname = {row[0]: row[2] for row in tables.rows["functions"]}
    name = {nid: (kind, qualname.get(nid, key)) for nid, kind, key, _ in tables.rows["nodes"]}
    return {(name[dst], name[src], kind, detail) for dst, src, kind, detail in tables.rows["reach_edges"]}


def test_python_functions_follow_the_first_steps_nodes_and_every_edge_keeps_its_ends():
    cpp = [facts("cpp", p, s) for p, s in CPP.items()]
    python = [facts("python", p, s) for p, s in PYTHON.items()]
    native = NativeLink(cpp, OPS)
    first_step = named_edges(native.ctx.tables)
    first_nodes = list(native.ctx.tables.rows["nodes"])
    first_edges = list(native.ctx.tables.rows["reach_edges"])
    tables = native.finish(python, [], [], {}, [])

    n_cpp = sum(len(f.functions) for f in cpp)
    functions = tables.rows["functions"]
    ids = [row[0] for row in functions]
    assert ids[:n_cpp] == list(range(n_cpp))  # C++ first, from 0
    assert ids[n_cpp:] == list(range(len(first_nodes), len(first_nodes) + 3))  # after the first step's nodes
    assert {row[2] for row in functions[n_cpp:]} == {"torch.nn.functional.plus", "torch.nn.functional.twice",
                                                     "torch.nn.other.times"}
    nodes = {nid: (kind, key) for nid, kind, key, _ in tables.rows["nodes"]}
    assert sorted(nodes) == list(range(len(nodes)))
    for gid, *_ in functions:  # node id == function id
        assert nodes[gid] == ("function" if gid < n_cpp else "pyfunction", str(gid))
    # nothing the first step made moved: those rows are written ahead, while finish runs
    assert tables.rows["nodes"][: len(first_nodes)] == first_nodes
    assert tables.rows["reach_edges"][: len(first_edges)] == first_edges

    edges = named_edges(tables)
    assert first_step <= edges
    assert (("op", "add.Tensor"), ("pyfunction", "torch.nn.functional.plus"), "op_call",
            "torch.add line 4") in edges
    assert (("stub", "add_stub"), ("function", "at::native::add_cpu"), "stub_call", "line 3") in edges
    assert (("function", "at::native::add_cpu"), ("op", "add.Tensor"), "kernel", "CPU") in edges
    assert (("op", "add.Tensor"), ("function", "at::native::mul_cpu"), "op_call", "at::add line 4") in edges


def test_the_order_files_come_in_does_not_change_the_tables():
    files = [*(facts("cpp", p, s) for p, s in CPP.items()), *(facts("python", p, s) for p, s in PYTHON.items())]
    expected = link(files, [], OPS, [], {}, [])
    shuffled = files[:]
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        # the same relative order within each language: the ids are those of C++ first, then Python
        ordered = sorted(shuffled, key=lambda f: (f.lang == "python", files.index(f)))
        got = link(shuffled, [], OPS, [], {}, [])
        assert link(ordered, [], OPS, [], {}, []).rows == expected.rows
        assert named_edges(got) == named_edges(expected)
