"""Where a changed function the index does not hold starts the walk. A functor's ``operator()``
is found by its class too: a kernel file has dozens of operator()s, and a changed functor that
the index lacks (renamed or removed since; torch-xpu-ops' b0e262470a against a later index)
used to start from every operator() of the file, selecting every indexing script. Not found, it
is reached through the places that construct its class, not through every call of a functor."""

from __future__ import annotations

import duckdb

from query.affected import _starts
from query.changes import ChangedFunction, ChangeSet
from query.document import Confidence
from schema.index_store import FunctionInFile, IndexStore
from schema.writer import index_ddl

PATH = "src/ATen/native/xpu/sycl/Indexing.cpp"
ROWS = [
    FunctionInFile(1, PATH, "at::native::xpu::MaskedFillFunctor::operator()", "operator()", "method", 10, 14, False),
    FunctionInFile(2, PATH, "at::native::xpu::TakeFunctor<T>::operator()", "operator()", "method", 20, 24, False),
    FunctionInFile(3, PATH, "at::native::xpu::IndexAddFunctor<T>::operator()", "operator()", "method", 30, 34, False),
]


class FakeStore:
    def includers(self, paths):
        return {}

    def functions_in(self, paths):
        return [r for r in ROWS if r.path in paths]

    def callers_named(self, names):
        callers = {"IndexSelectFunctor": [40], "operator()": [1, 2, 3, 40]}
        return {name: callers[name] for name in names if name in callers}


def _start_ids(qualname: str) -> tuple[set[int], list]:
    cs = ChangeSet(functions=[ChangedFunction(PATH, qualname, "operator()", [31], "base", "modified")])
    starts, unmapped, _ = _starts(FakeStore(), cs)
    return {s.node for s in starts}, unmapped


def test_a_changed_functor_call_operator_starts_from_its_own_class_only():
    ids, _ = _start_ids("at::native::xpu::IndexAddFunctor<scalar_t>::operator()")
    assert ids == {3}


def test_a_functor_the_index_lacks_is_reached_where_its_class_is_constructed():
    cs = ChangeSet(functions=[ChangedFunction(PATH, "at::native::xpu::IndexSelectFunctor<T>::operator()",
                                              "operator()", [50], "base", "deleted")])
    starts, _, _ = _starts(FakeStore(), cs)
    assert [(s.node, s.confidence) for s in starts] == [(40, Confidence.medium)]
    ids, unmapped = _start_ids("at::native::xpu::GoneFunctor::operator()")
    assert ids == set() and "nothing calls GoneFunctor" in unmapped[0].reason


def test_callers_of_several_lacking_functions_are_read_at_once_and_bounded():
    con = duckdb.connect()
    con.execute(index_ddl())
    calls = [(caller, "IndexSelectFunctor", "", "direct", 1) for caller in (7, 3, 5, 3)]
    calls += [(caller, "gone_helper", "", "direct", 1) for caller in (9, 8)]
    con.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?, NULL)", calls)
    store = IndexStore(con)
    assert store.callers_named(["IndexSelectFunctor", "gone_helper", "never_called"]) == {
        "IndexSelectFunctor": [3, 5, 7],
        "gone_helper": [8, 9],
    }
    assert store.callers_named(["IndexSelectFunctor", "gone_helper"], limit=2) == {
        "IndexSelectFunctor": [3, 5],
        "gone_helper": [8, 9],
    }
    assert store.callers_named([]) == {}
