"""Shared infrastructure by breadth: a change whose own operators most traced benchmarks
execute (an out-of-tree backend's device-to-device copy, which every script's ``.to("xpu")``
and ``clone`` runs: 64 of 71 scripts) is flagged with a canary set, though it implements
three operators and matches no canary set's pattern; a kernel that a handful of scripts run
is not, and neither is anything in a suite too small to need a canary."""

from __future__ import annotations

from common.config import Config
from query.affected import _broad, _canary_hits, _traced_benchmarks
from schema.index_store import BenchmarkInfo, CanarySet, TracedHit


def _bench(name: str, devices: tuple[str, ...] = ("xpu",), status: str = "ok") -> BenchmarkInfo:
    return BenchmarkInfo(name, f"test/microbench/{name}.py", "script", devices, status)


def test_traced_benchmarks_are_those_with_a_usable_trace_on_a_reachable_device():
    benches = {
        "copy": _bench("copy"),
        "partial": _bench("partial", status="partial"),
        "failed": _bench("failed", status="failed"),
        "untraced": _bench("untraced", status=""),
        "cuda_only": _bench("cuda_only", devices=("cuda",)),
        "any_device": _bench("any_device", devices=()),
    }
    assert _traced_benchmarks(benches, {"xpu"}) == {"copy", "partial", "any_device"}
    assert _traced_benchmarks(benches, set()) == {"copy", "partial", "cuda_only", "any_device"}


def test_most_traced_benchmarks_executing_the_change_make_it_shared():
    traced = {f"s{i}" for i in range(71)}
    cfg = Config()
    why = _broad(False, 3, {f"s{i}" for i in range(64)}, set(), traced, cfg)
    assert why == "its operators are executed by 64 of the 71 traced benchmarks (shared_fraction 0.5)"
    assert _broad(False, 3, {f"s{i}" for i in range(11)}, set(), traced, cfg) == ""  # fmod/remainder: 11 of 71
    assert _broad(False, 3, {f"s{i}" for i in range(11)}, set(), traced, Config(shared_fraction=0.15)) != ""
    assert _broad(False, 3, {"s1", "s2", "s3"}, set(), {"s1", "s2", "s3", "s4"}, cfg) == ""  # a small suite runs whole
    assert _broad(True, 632, set(), set(), traced, cfg) == "implements 632 operators (bound 100)"


def test_a_broad_change_gets_the_fewest_benchmarks_covering_its_operators():
    benches = {name: _bench(name) for name in ("clone_test", "pool", "upsample")}
    hits = [
        TracedHit(("copy_",), "pool", ("pool_1",), "pool", "xpu", "real", True, ""),
        TracedHit(("copy_", "_to_copy"), "clone_test", ("clone_1",), "clone", "xpu", "real", True, ""),
        TracedHit(("_to_copy",), "upsample", ("up_1",), "up", "xpu", "real", True, ""),
    ]
    broad = CanarySet("broad", "changes reaching many operators", (), (), ())
    (hit,) = _canary_hits([], "its operators are executed by 3 of the 3 traced benchmarks", ["copy_", "_to_copy"],
                       hits, benches, [broad])
    assert hit.set == "broad" and hit.trigger.startswith("its operators are executed by 3")
    assert [b.name for b in hit.benchmarks] == ["clone_test"]
    assert _canary_hits([], "", ["copy_"], hits, benches, [broad]) == []


def test_a_set_change_no_trace_covers_samples_the_set_and_the_suite():
    # Dispatcher::call (held-out r4-u06): every operator call runs it, but the operators its
    # static reach finds are run by no traced benchmark; the set's three view benchmarks alone
    # would leave the suite's elementwise, reduction and softmax benchmarks out
    names = ("add_test", "as_strided_test", "unary_test", "sum_test", "softmax_test", "pool")
    benches = {name: _bench(name) for name in names}
    dispatch = CanarySet("dispatch", "the dispatcher", ("aten/src/ATen/core/dispatch/**",), (),
                         ("add_test", "as_strided_test"))
    broad = CanarySet("broad", "a sample", (), (), ("add_test", "unary_test", "sum_test", "softmax_test"))
    (hit,) = _canary_hits([(dispatch, "aten/src/ATen/core/dispatch/Dispatcher.h")], "", ["lift_fresh_copy"], [],
                       benches, [dispatch, broad])
    assert [b.name for b in hit.benchmarks] == ["add_test", "as_strided_test", "unary_test", "sum_test", "softmax_test"]
    # traces covering the change's operators choose the fewest benchmarks, as before
    hits = [TracedHit(("copy_",), "pool", ("pool_1",), "pool", "xpu", "real", True, "")]
    (hit,) = _canary_hits([(dispatch, "x")], "", ["copy_"], hits, benches, [dispatch, broad])
    assert [b.name for b in hit.benchmarks] == ["pool"]
    # a walk cut at max_depth (alloc_cpu, r4-u05) found only some of the operators the change
    # runs in: the benchmarks covering those are not the whole answer, the samples join them
    (hit,) = _canary_hits([(dispatch, "x")], "", ["copy_"], hits, benches, [dispatch, broad], walk_complete=False)
    assert [b.name for b in hit.benchmarks] == ["pool", "add_test", "as_strided_test", "unary_test", "sum_test",
                                                "softmax_test"]
