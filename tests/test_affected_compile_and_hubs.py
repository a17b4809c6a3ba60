"""Two selection rules of issue 31.

Compile-only Python: a changed function registered as an aten operator's decomposition or
inductor lowering (``@register_decomposition(aten.hardswish)``, ``@register_lowering([aten.cat.default])``)
is what torch.compile runs for that operator: it names the operator (every overload), and a helper
without such a decorator names none (held-out r2-c01..c03 selected nothing, or the compile set's
fixed list).

Branch hubs: a kernel registered for its own operator that a widely run kernel also calls on one
branch (``neg_kernel_cuda`` from the CUDA copy kernel's negative-bit branch) selects only the tests
that run its own operators, not every test running ``copy_`` (r2-d01 selected 16 extras)."""

from __future__ import annotations

import textwrap

import duckdb

from common.config import Config
from indexer.facts import FileFacts
from indexer.python_src import extract_python
from query.affected import Start, _compiled_ops, _drop_branch_hubs
from query.document import Confidence
from query.model import ChainStep, StepKind
from query.reach import Reach
from schema.index_store import IndexStore, TracedHit
from schema.writer import index_ddl

DECOMPOSITIONS = """
import torch
from torch._decomp import register_decomposition
aten = torch._ops.ops.aten

@register_decomposition(aten.hardswish)
def hardswish(self):
    return self * torch.clamp(self + 3, min=0, max=6) / 6

@register_decomposition([aten.cat.default])
def cat(tensors, dim=0):
    return _helper(tensors, dim)

def _helper(tensors, dim):
    return torch.ops.aten.cat.default(tensors, dim)
"""

PATH = "torch/_decomp/decompositions.py"


def _store() -> tuple[IndexStore, dict[str, int]]:
    facts = extract_python(PATH, textwrap.dedent(DECOMPOSITIONS), FileFacts(PATH, "python", "", 0))
    con = duckdb.connect()
    con.execute(index_ddl())
    ids = {f.name: i for i, f in enumerate(facts.functions, start=1)}
    con.executemany(
        "INSERT INTO functions VALUES (?, 0, ?, ?, ?, ?, ?, false, '', 0, NULL)",
        [(i, f.qualname, f.name, f.kind, f.start_line, f.end_line) for i, f in enumerate(facts.functions, start=1)],
    )
    con.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?, NULL)",
                    [(c.func_index + 1, c.callee_name, c.qualifier, c.kind, c.line) for c in facts.calls])
    ops = ["hardswish", "hardswish.out", "hardswish_", "cat", "cat.out", "clamp"]  # base: hardswish_ keeps its _
    con.executemany("INSERT INTO ops VALUES (?, ?, ?, 'aten', '', false, NULL, 'function', '', NULL)",
                    [(op, op.split(".")[0], op.partition(".")[2]) for op in ops])
    con.executemany("INSERT INTO nodes VALUES (?, 'op', ?, ?)", [(100 + i, op, op) for i, op in enumerate(ops)])
    return IndexStore(con), ids


def _start(node: int, name: str) -> Start:
    step = ChainStep(StepKind.FUNCTION, f"torch._decomp.decompositions.{name}", file=PATH)
    return Start(node, step, Confidence.high, "modified function")


def test_a_registered_decomposition_names_every_overload_of_its_operator():
    store, ids = _store()
    # (hardswish_ is its own base name: an in-place operator has its own registration)
    assert set(_compiled_ops(store, [_start(ids["hardswish"], "hardswish")])) == {"hardswish", "hardswish.out"}
    found = _compiled_ops(store, [_start(ids["cat"], "cat")])
    assert set(found) == {"cat", "cat.out"} and found["cat"] == "@register_decomposition(aten.cat)"


def test_a_helper_without_a_registration_names_no_operator():
    store, ids = _store()
    assert _compiled_ops(store, [_start(ids["_helper"], "_helper")]) == {}


def _reach() -> Reach:
    """neg_kernel (1) -registered-> neg_stub (2) -stub_call-> neg_out (3) -kernel-> neg.out (4);
    neg_kernel -call-> copy_kernel (5) -registered-> copy_stub (6) -stub_call-> copy_ (7) -kernel-> copy_ (8)."""
    r = Reach(kind={1: "function"}, key={1: "1"})
    for node, kind, key, parent, edge in [
        (2, "stub", "neg_stub", 1, "registered"),
        (3, "function", "3", 2, "stub_call"),
        (4, "op", "neg.out", 3, "kernel"),
        (5, "function", "5", 1, "call"),
        (6, "stub", "copy_stub", 5, "registered"),
        (7, "function", "7", 6, "stub_call"),
        (8, "op", "copy_", 7, "kernel"),
    ]:
        r.kind[node], r.key[node], r.parent[node] = kind, key, (parent, edge, "")
    return r


def _hit(op: str, bench: str) -> TracedHit:
    return TracedHit((op,), bench, (f"{bench}_cuda",), bench, "cuda", "eager", True, "")


def test_a_widely_run_caller_of_a_registered_kernel_selects_only_its_own_operators_tests():
    benches = [f"b{i}" for i in range(12)]
    hits = [_hit("copy_", b) for b in benches] + [_hit("neg.out", "unary_test")]
    kept, dropped, path = _drop_branch_hubs(_reach(), ["neg.out", "copy_"], hits, set(benches) | {"unary_test"},
                                            Config())
    assert [h.bench for h in kept] == ["unary_test"]
    assert dropped == {"copy_"} and path == {5, 7}


def test_a_callers_breadth_counts_the_tests_running_it_on_any_dtype():
    # r2-d03 (conj_kernel_cuda's complex branch): after the dtype filter only the tests whose
    # copy_ dtypes were not recorded are left; the hub is a hub by every test that runs copy_
    benches = [f"b{i}" for i in range(12)]
    every = [_hit("copy_", b) for b in benches] + [_hit("neg.out", "unary_test")]
    scoped = every[:3]  # those of unknown dtype
    traced = set(benches) | {"unary_test"}
    kept, dropped, _ = _drop_branch_hubs(_reach(), ["neg.out", "copy_"], scoped, traced, Config(), every)
    assert kept == [] and dropped == {"copy_"}


def test_a_caller_few_benchmarks_run_is_kept():
    hits = [_hit("copy_", "b0"), _hit("neg.out", "unary_test")]
    kept, dropped, _ = _drop_branch_hubs(_reach(), ["neg.out", "copy_"], hits, {f"b{i}" for i in range(20)}, Config())
    assert kept == hits and dropped == set()


def test_a_helper_only_reached_through_callers_keeps_them():
    r = _reach()
    r.parent[2] = (5, "call", "")  # no operator of its own: every operator is through a caller
    hits = [_hit("copy_", f"b{i}") for i in range(12)]
    assert _drop_branch_hubs(r, ["neg.out", "copy_"], hits, {f"b{i}" for i in range(12)}, Config())[0] == hits


class _Graph:
    def __init__(self, callers: dict[int, list[int]]) -> None:
        self.callers = callers

    def into(self, node: int) -> list[tuple[int, str]]:
        return [(src, "call") for src in self.callers.get(node, [])]


class _GraphStore:
    def __init__(self, callers: dict[int, list[int]]) -> None:
        self._graph = _Graph(callers)

    def graph(self) -> _Graph:
        return self._graph


def test_a_helper_with_one_caller_is_narrow_whatever_its_path():
    """A pstl helper with one (sparse) caller, in a path the device-runtime canary set names
    (torch-xpu-ops r04), is not shared infrastructure because of its path; a helper several
    functions call, lines outside any function, or a Python module of the compiler are."""
    from query.affected import _narrow_paths
    from query.changes import ChangedFunction, ChangeSet

    pstl, reduce_h = "src/ATen/native/xpu/sycl/pstl/PSTLFunctions.h", "src/ATen/native/xpu/sycl/Reduce.h"
    lowering = "torch/_inductor/lowering.py"
    cs = ChangeSet(functions=[ChangedFunction(p, f"f{i}", f"f{i}", [1], "both", "modified")
                              for i, p in enumerate((pstl, reduce_h, lowering))])
    starts = [Start(i, ChainStep(StepKind.FUNCTION, f"f{i - 1}", file=path), Confidence.high, "")
              for i, path in enumerate((pstl, reduce_h, lowering), 1)]
    store = _GraphStore({1: [10], 2: [20, 21]})
    assert _narrow_paths(store, cs, starts) == {pstl}
    cs.file_level.append((pstl, [3], "outside any function"))
    assert _narrow_paths(store, cs, starts) == set()
