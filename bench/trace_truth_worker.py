"""Child of bench/trace_truth.py: trace every config of one operator_benchmark module.

Run from ``benchmarks/operator_benchmark``: ``python trace_truth_worker.py pt.stack_test '[[0, 3]]'``
(the second argument lists (test group, config) pairs to skip). Prints one ``TRACE-START`` line
before building each config and one ``TRACE-TEST`` line per test case, as JSON.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

START = "TRACE-START "
TEST = "TRACE-TEST "
OP_EVENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z0-9_.]+$")
NOT_OPS = ("autograd::", "ProfilerStep")
ITERATIONS = 2

Events = list[tuple[str, list[str], "str | None"]]


def _is_op(name: str) -> bool:
    return bool(OP_EVENT.match(name)) and not name.startswith(NOT_OPS)


def _op_events(prof: profile) -> Events:
    """(op, input dtypes, nearest parent op) for every op event of a finished profile."""
    rows = []
    for event in prof.events():
        if not _is_op(event.name):
            continue
        parent = event.cpu_parent
        while parent is not None and not _is_op(parent.name):
            parent = parent.cpu_parent
        dtypes = [d for d in (event.input_dtypes or []) if d and d[0].islower() and "List" not in d]
        rows.append((event.name, dtypes, parent.name if parent is not None else None))
    return rows


def _profiled(fn: Callable[[], object]) -> Events:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    return _op_events(prof)


@dataclass(frozen=True)
class ConfigPlan:
    """One config of one registered test group, as benchmark_core._build_test reads it."""

    meta: int
    index: int
    attrs: dict
    tag: str | None
    cuda: bool


def plans(meta_index: int, configs: list) -> Iterator[ConfigPlan]:
    for index, config in enumerate(configs):
        attrs: dict = {}
        tag = None
        for attr in config:
            if "tags" in attr:
                tag = attr["tags"]
                continue
            attrs.update(attr)
        yield ConfigPlan(meta_index, index, attrs, tag, "cuda" in attrs.values())


def _freeze_module_params(op: torch.nn.Module) -> None:
    for attr in vars(op).values():
        if isinstance(attr, torch.nn.Module):
            for param in attr.parameters():
                param.requires_grad = False


def build_ops(bench_op: type, plan: ConfigPlan, run_backward: bool, op_name_function: dict | None) -> Iterator:
    """(op object, backward input name, init events) as benchmark_core._build_test makes them for one config."""
    op = bench_op()
    init_dict = copy.deepcopy(plan.attrs)
    if op_name_function is not None:
        init_dict["op_func"] = op_name_function["op_func"]
        op.set_module_name(op_name_function["op_name"])
    op._set_backward_test(run_backward)
    init_events = _profiled(lambda: op.init(**init_dict))
    op.extract_inputs_tuple()
    if not run_backward:
        _freeze_module_params(op)
    yield op, ("all" if op._num_inputs_require_grads > 0 else None), init_events
    for i in range(op._num_inputs_require_grads):
        op._pass_count += 1
        op._auto_set_counter = 0
        new_op = copy.deepcopy(op)
        new_op.init(**init_dict)
        yield new_op, i + 1, []


def run_case(case: object, run_backward: bool) -> dict[str, Events]:
    """Profiled forward (and output mean + backward) of one test case, ``ITERATIONS`` times each."""
    phases = {"forward": _profiled(lambda: case.run_forward(ITERATIONS, False, False))}
    if run_backward:
        phases["output_mean"] = _profiled(case._output_mean)
        phases["backward"] = _profiled(lambda: case.run_backward(ITERATIONS, False))
    return phases


def summarise(phases: dict[str, Events]) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """Ops per phase, and per op its input dtypes and parent ops."""
    ops = {phase: sorted({name for name, _, _ in rows}) for phase, rows in phases.items()}
    info: dict[str, dict[str, set]] = {}
    for rows in phases.values():
        for name, dtypes, parent in rows:
            entry = info.setdefault(name, {"dtypes": set(), "parents": set()})
            entry["dtypes"].update(dtypes)
            if parent:
                entry["parents"].add(parent)
    return ops, {k: {kk: sorted(vv) for kk, vv in v.items()} for k, v in info.items()}


def emit(prefix: str, doc: dict) -> None:
    sys.stdout.write(prefix + json.dumps(doc) + "\n")
    sys.stdout.flush()


def _error(exc: BaseException) -> str:
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def trace_config(core: object, meta: tuple, plan: ConfigPlan) -> None:
    """Run and report every test case one config makes."""
    _, bench_op, test_case_factory, run_backward, *rest = meta
    op_name_function = rest[0] if rest else None
    for op, bwd_input, init_events in build_ops(bench_op, plan, run_backward, op_name_function):
        started = time.perf_counter()
        doc: dict = {"meta": plan.meta, "config": plan.index, "class": bench_op.__name__, "tag": plan.tag,
                     "run_backward": run_backward, "variant": bwd_input, "module": op.module_name()}
        try:
            _, case = core._create_test(op, plan.attrs, plan.tag, test_case_factory, run_backward, bwd_input)
            doc.update(test=case.test_config.test_name, input=case.test_config.input_config)
            phases = run_case(case, run_backward)
        except Exception as exc:  # noqa: BLE001 - a benchmark's own failure is data here
            doc["error"] = _error(exc)
            phases = {}
        phases["init"] = init_events
        doc["ops"], doc["op_info"] = summarise(phases)
        doc["seconds"] = round(time.perf_counter() - started, 3)
        emit(TEST, doc)


def main(module: str, skip: set[tuple[int, int]]) -> None:
    """Import one benchmark module from the operator_benchmark dir and trace every config."""
    sys.path.insert(0, os.getcwd())
    sys.argv = [module]
    torch.set_num_threads(1)
    core = importlib.import_module("benchmark_core")
    importlib.import_module(module)
    for meta_index, meta in enumerate(core.BENCHMARK_TESTER):
        for plan in plans(meta_index, meta[0]):
            if plan.cuda:
                emit(START, {"meta": meta_index, "config": plan.index, "cuda": True})
                continue
            if (meta_index, plan.index) in skip:
                continue
            emit(START, {"meta": meta_index, "config": plan.index, "class": meta[1].__name__, "tag": plan.tag,
                         "attrs": {k: repr(v)[:120] for k, v in plan.attrs.items()}})
            try:
                trace_config(core, meta, plan)
            except Exception as exc:  # noqa: BLE001 - building a config failed: record it and go on
                emit(TEST, {"meta": meta_index, "config": plan.index, "class": meta[1].__name__, "tag": plan.tag,
                            "error": f"init: {_error(exc)}", "ops": {}, "op_info": {}})


if __name__ == "__main__":
    main(sys.argv[1], {(a, b) for a, b in json.loads(sys.argv[2] if len(sys.argv) > 2 else "[]")})
