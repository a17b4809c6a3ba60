"""A change's dtypes and dispatch keys against what the traces ran.

A changed kernel line inside an ``AT_DISPATCH_*`` lambda (or an ``isReducedFloatingType``-style
branch) runs only for those dtypes (indexer.dtypes); a QuantizedCPU kernel runs only on
quantized tensors. A traced test sees the change when it ran one of the change's operators on
such a layout and dtype: the others are dropped from its selection, and an operator no test runs
so is a gap at that level ("leaky_relu, CPU, floating: NO BENCHMARK (benchmarked only on
QuantizedCPU)"). Pure: the store's rows in, hits and gaps out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from common.diff import FileChange
from indexer.dtypes import DtypeClass, DtypeScope, calls_scope, dtype_class, lines_scope, merge_scopes, scope_text
from query.document import DispatchGap
from schema.index_store import CallerExtent, TracedDtype, TracedHit
from schema.kinds import EdgeKind

CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".h", ".hpp", ".cuh", ".mm")
_NO_CODE = re.compile(r"\s*(?:#\s*include\b|$)")
_LAYOUT_KEYS = {"dense": "", "quantized": "Quantized", "sparse": "Sparse", "nested": "Nested", "mkldnn": "Mkldnn"}


def change_scope(changes: list[FileChange], text_of_base: Callable[[str], bytes | None],
                 text_of_head: Callable[[str], bytes | None],
                 known: Mapping[tuple[str, str, int], DtypeScope] | None = None) -> DtypeScope:
    """The dtypes every changed line of ``changes`` runs for (None: some line runs for any, or a
    file is not C++): removed lines in the base version, added ones in the head version. ``known``:
    the scopes of lines whose function's tokens tell ((sign, path, line): an element type
    ``if constexpr`` arm, query.changes); an ``#include`` or blank line selects nothing and is no line here."""
    if not all(fc.path.endswith(CPP_SUFFIXES) for fc in changes):
        return None
    known = known or {}
    scopes = []
    for fc in changes:
        for sign, path, lines, text_of in (("-", fc.old_path, fc.removed, text_of_base),
                                           ("+", fc.new_path, fc.added, text_of_head)):
            data = text_of(path) if path and lines else None
            text = data.decode(errors="replace") if data is not None else None
            rows = text.split("\n") if text is not None else []
            rest = sorted(n for n in lines if (sign, path, n) not in known and not _no_code(rows, n))
            scopes += [known[sign, path, n] for n in lines if (sign, path, n) in known]
            scope = lines_scope(text, rest) if text is not None and rest else None
            if rest and scope is None:
                return None  # (a wide diff stops at its first line that runs for any dtype)
            if rest:
                scopes.append(scope)
    return merge_scopes(scopes) if scopes else None


def callers_scope(
    ids: list[int], entries: list[CallerExtent], text_of_base: Callable[[str], bytes | None]
) -> DtypeScope:
    """The dtypes the functions ``ids`` run for when C++ calls are all that enters them and every
    such call sits inside a dtype construct of its caller (``fill_kernel``'s
    ``if (iter.dtype() == ScalarType::Half) { fill_non_native_type<at::Half>(...); }``): the
    union of those calls' scopes. None when one is entered otherwise (a registration, a kernel,
    a virtual call, a pointer), by no call, or by a call that runs for any dtype."""
    by_callee: dict[int, list[CallerExtent]] = {}
    for e in entries:
        by_callee.setdefault(e.callee, []).append(e)
    scopes: list[DtypeScope] = []
    for callee in ids:
        rows = by_callee.get(callee, [])
        if not rows or any(e.kind != EdgeKind.CALL or not e.path.endswith(CPP_SUFFIXES) for e in rows):
            return None
        for e in rows:
            data = text_of_base(e.path)
            scope = calls_scope(data.decode(errors="replace"), e.name, e.first, e.last) if data is not None else None
            if scope is None:
                return None
            scopes.append(scope)
    return merge_scopes(scopes) if scopes else None


def _no_code(rows: list[str], line: int) -> bool:
    """Whether 1-based ``line`` of a file's ``rows`` is an ``#include`` directive or blank."""
    return 1 <= line <= len(rows) and _NO_CODE.match(rows[line - 1]) is not None


def dispatch_key(layout: str, device: str) -> str:
    """The dispatch key of a layout on a device: CPU, QuantizedCPU, SparseCUDA..."""
    return _LAYOUT_KEYS.get(layout, layout.capitalize()) + device.upper()


def _runs_in(dtype: str, scope: DtypeScope) -> bool:
    return scope is None or dtype_class(dtype) in scope


def _by_dtype(scope: DtypeScope) -> bool:
    """Whether tests are told apart by their arguments' dtypes: not for quantized code, which
    dispatches on its output's (quantize_per_tensor takes a float tensor) and whose kernels the
    layout already tells apart."""
    return scope is not None and DtypeClass.quantized not in scope


def on_scope(hits: list[TracedHit], dtypes: list[TracedDtype], scope: DtypeScope) -> list[TracedHit]:
    """``hits`` less the tests that ran their operators on no dtype of ``scope`` (a test whose
    dtypes for the operator were not recorded stays: unknown is not 'other')."""
    if not _by_dtype(scope):
        return hits
    recorded: dict[tuple[str, str, str], set[str]] = {}  # (bench, test, op) -> dtypes
    for row in dtypes:
        recorded.setdefault((row.bench, row.test, row.op), set()).add(row.dtype)
    out = []
    for hit in hits:
        tests = tuple(t for t in hit.tests if _test_sees(recorded, hit, t, scope))
        if tests:
            out.append(hit._replace(tests=tests))
    return out


def _test_sees(recorded: dict[tuple[str, str, str], set[str]], hit: TracedHit, test: str, scope: DtypeScope) -> bool:
    known = [recorded[key] for op in hit.ops if (key := (hit.bench, test, op)) in recorded]
    return not known or any(_runs_in(d, scope) for ds in known for d in ds)


def gaps(
    ops: Iterable[str],
    layouts: dict[str, set[str]],
    scope: DtypeScope,
    traced_layouts: dict[str, dict[str, set[str]]],
    dtypes: list[TracedDtype],
    device: str,
) -> list[DispatchGap]:
    """The change's own operators that some benchmark runs, but on no layout (dispatch key) or
    dtype the changed lines run for: each with what its benchmarks do run."""
    scope = scope if _by_dtype(scope) else None
    by_op: dict[str, dict[str, set[str]]] = {}  # op -> layout -> dtypes traced
    for row in dtypes:
        by_op.setdefault(row.op, {}).setdefault(row.layout, set()).add(row.dtype)
    out = []
    for op in ops:
        ran = traced_layouts.get(op, {})
        wanted = layouts.get(op, {"any"})
        if not ran or ("any" in wanted and scope is None):
            continue
        on = set(ran) if "any" in wanted else set(ran) & wanted
        seen = [d for layout in on for d in by_op.get(op, {}).get(layout, set())]
        unknown = any(layout not in by_op.get(op, {}) for layout in on)
        if on and (unknown or any(_runs_in(d, scope) for d in seen)):
            continue
        keys = sorted(wanted - {"any"}) or ["dense"]
        gap = DispatchGap(
            op=op.split(".")[0],
            dispatch_key=", ".join(dispatch_key(layout, device) for layout in keys),
            dtypes=scope_text(scope),
            benchmarked_on=tuple(_benchmarked_on(ran, by_op.get(op, {}), device)),
        )
        if gap not in out:  # overloads of one operator (leaky_relu, leaky_relu.out) are one gap
            out.append(gap)
    return out


def _benchmarked_on(ran: dict[str, set[str]], dtypes: dict[str, set[str]], device: str) -> list[str]:
    """What the traces run an operator on: 'QuantizedCPU', 'CPU integral'..."""
    out = []
    for layout in sorted(ran):
        classes = sorted({c.value for d in dtypes.get(layout, ()) if (c := dtype_class(d)) is not None})
        key = dispatch_key(layout, device)
        out.append(f"{key} {', '.join(classes)}" if classes and layout == "dense" else key)
    return out
