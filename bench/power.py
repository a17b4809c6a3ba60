"""Power of `perfq run --ab` at defaults: does a known slowdown of one operator get flagged, and only there?

The head side gets a ``sitecustomize.py`` on its PYTHONPATH (``--head-env PYTHONPATH=DIR``) that
wraps one operator's entry point (default ``torch.Tensor.softmax``, what ``nn.Softmax`` and
``nn.Softmax2d`` of operator_benchmark's softmax_test end in) so that a fraction p of its calls run
the kernel a second time: the operator costs ``1 + p`` times as much, so a test that is that
operator gets about +p (+10%, +25%). The base side gets the same wrapper with p = 0 (a placebo:
the wrapper's own call overhead is on both sides, only the extra kernel runs differ). Each
process counts the calls and the extra runs and appends them to a file: the realised fraction is
printed next to p.

For every effect, one ``perfq run --ab`` at default settings over the softmax, add, layernorm,
sum and cat files of the PyTorch 2.6.0 operator_benchmark corpus (issue 30's set), then
``perfq compare --format json``. The tests that run the operator are fixed before measuring (by
name: ``--op-tests``); every other test is a control. Prints, with its target (issue 30):
the detection rate at +10% (>= 90%) and +25% (100%), false regressions or improvements on the
controls (0), and the wall time against the run's budget. The load average is printed before
and after (the machine is shared).

Usage: python bench/power.py [--effects 0.10,0.25] [--op torch.Tensor.softmax] [--bench NAME ...]
                             [--op-tests 'softmax_test/Softmax'] [--contended] [--keep DIR]
                             [-- EXTRA perfq run FLAGS]
``--keep DIR``: keep the history (``DIR/history.duckdb``, labels power10, power25 ...) and the call counts
in DIR instead of a temporary directory, e.g. to compare them again offline (``perfq compare``, bench/pairing.py).
``--contended``: the contended variant (issue 38): every run under bench/loadgen.py's load, with its
targets: +10% found on >= 75% and never called ``same``; no ``same`` wider than the minimum effect.
Needs torch and the corpus at $PERFQ_CORPUS/pytorch-2.6.0 (default ~/.cache/perfq-corpus).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import loadgen  # next to this file
from run_defaults import BENCHES, MIN_EFFECT, corpus, perfq  # the A/A bench next to this one

TARGETS = {0.10: 0.90, 0.25: 1.00}  # effect -> detection rate wanted
TARGETS_CONTENDED = {0.10: 0.75, 0.25: 0.75}
DEFAULT_BUDGET = 900.0  # perfq run's one default budget (perfq.run.plan.DEFAULT_BUDGET, "15m")

SITECUSTOMIZE = '''"""perfq power harness (bench/power.py): run one operator again on a fraction p of its calls."""
import atexit
import functools
import importlib
import os

_TARGET = os.environ.get("PERFQ_POWER_TARGET", "")
if _TARGET:
    _P = float(os.environ.get("PERFQ_POWER_P", "0"))
    _parts = _TARGET.split(".")
    _owner = functools.reduce(getattr, _parts[1:-1], importlib.import_module(_parts[0]))
    _original = getattr(_owner, _parts[-1])
    _state = {"calls": 0, "extra": 0, "credit": 0.0}

    def _slowed(*args, **kwargs):
        _state["calls"] += 1
        _state["credit"] += _P
        if _state["credit"] >= 1.0 - 1e-9:
            _state["credit"] -= 1.0
            _state["extra"] += 1
            _original(*args, **kwargs)
        return _original(*args, **kwargs)

    setattr(_owner, _parts[-1], _slowed)

    def _report():
        path = os.environ.get("PERFQ_POWER_COUNTS")
        if path and _state["calls"]:
            with open(path, "a") as out:
                out.write(f"{_state['calls']} {_state['extra']}\\n")

    atexit.register(_report)
'''


def realised(path: Path) -> tuple[int, int]:
    """(calls, extra kernel runs) summed over the side's processes."""
    calls = extra = 0
    if path.exists():
        for line in path.read_text().split("\n"):
            if line.strip():
                c, e = line.split()
                calls, extra = calls + int(c), extra + int(e)
    return calls, extra


def one_effect(effect: float, op: str, repo: Path, tmp: Path, benches: tuple[str, ...], extra: list[str]
               ) -> tuple[float, dict, tuple, tuple]:
    """(seconds, comparison document, base counts, head counts) of one injected run."""
    hook = tmp / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    label = f"power{round(effect * 100)}"
    counts = {side: tmp / f"{label}-{side}.counts" for side in ("base", "head")}
    args = ["run", "--label", label, "--ab", "--base-python", sys.executable, "--head-python", sys.executable,
            "--repo", str(repo), "--history", str(tmp / "history.duckdb")]
    for side, p in (("base", 0.0), ("head", effect)):
        args += [f"--{side}-env", f"PYTHONPATH={hook}", f"--{side}-env", f"PERFQ_POWER_TARGET={op}",
                 f"--{side}-env", f"PERFQ_POWER_P={p}", f"--{side}-env", f"PERFQ_POWER_COUNTS={counts[side]}"]
    for b in benches:
        args += ["--bench", b]
    start = time.monotonic()
    perfq(*args, *extra)
    seconds = time.monotonic() - start
    doc = json.loads(perfq("compare", label, "--format", "json", "--repo", str(repo), "--history",
                           str(tmp / "history.duckdb")).stdout)
    return seconds, doc, realised(counts["base"]), realised(counts["head"])


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[str]:
    """``keep`` (created) or a temporary directory removed afterwards."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="perfq-power-") as tmp:
            yield tmp
        return
    if (keep / "history.duckdb").exists():  # its labels would get a second pair of runs, compared together
        sys.exit(f"error: {keep / 'history.duckdb'} exists: --keep takes a new directory")
    keep.mkdir(parents=True, exist_ok=True)
    yield str(keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effects", default="0.10,0.25", help="fractions p of extra kernel runs (default 0.10,0.25)")
    parser.add_argument("--op", default="torch.Tensor.softmax", help="the wrapped entry point (dotted path)")
    parser.add_argument("--op-tests", default=r"^softmax_test/Softmax(2d)?_",
                        help="regex on benchmark/test naming the tests that run the operator")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="the run's budget in seconds (printed)")
    parser.add_argument("--bench", action="append", help="benchmark files (default: the five of BENCHES)")
    parser.add_argument("--contended", action="store_true", help="run under bench/loadgen.py's load")
    parser.add_argument("--keep", type=Path, help="keep the history and counts in this directory (default: a "
                        "temporary one)")
    parser.add_argument("extra", nargs="*", help="extra perfq run flags after --")
    args = parser.parse_args()
    repo = corpus()
    effects = [float(e) for e in args.effects.split(",")]
    benches = tuple(args.bench or BENCHES)
    runs_op = re.compile(args.op_tests)
    print(f"power: {args.op} run again on a fraction p of its calls (head; base: the same wrapper, p = 0), "
          f"{len(benches)} files ({', '.join(benches)}), {os.cpu_count()} cpus, load average "
          f"{os.getloadavg()[0]:.1f}, extra flags: {' '.join(args.extra) or '(none: defaults)'}")
    print(f"before: {loadgen.machine_state()}")
    if args.contended:
        print(loadgen.describe())
    load = loadgen.busy(2 * args.budget * len(effects)) if args.contended else contextlib.nullcontext()
    ok = True
    rows = []
    with load, _workdir(args.keep) as tmp:
        for effect in effects:
            seconds, doc, base_counts, head_counts = one_effect(effect, args.op, repo, Path(tmp), benches, args.extra)
            hit = [t for t in doc["tests"] if runs_op.search(f"{t['benchmark']}/{t['test']}")]
            controls = [t for t in doc["tests"] if t not in hit]
            found = sum(t["verdict"] == "regression" for t in hit)
            false = sum(t["verdict"] in ("regression", "improvement") for t in controls)
            rate = found / len(hit) if hit else 0.0
            target = (TARGETS_CONTENDED if args.contended else TARGETS).get(effect, 0.90)
            called_same = sum(t["verdict"] == "same" for t in hit)
            wide = sum(t["verdict"] == "same" and t["resolution"] > MIN_EFFECT for t in doc["tests"])
            share = head_counts[1] / head_counts[0] if head_counts[0] else float("nan")
            print(f"+{effect:.0%}: head ran the kernel again on {head_counts[1]}/{head_counts[0]} calls ({share:.1%});"
                  f" base {base_counts[1]}/{base_counts[0]}; {seconds:.0f} s; load average {os.getloadavg()[0]:.1f}")
            for t in hit:
                print(f"  {t['verdict']:<11} {t['test']}: change {t['change']:+.1%}, ci {t['ci']}, "
                      f"q {t['p_value']}, R {t['resolution']}, n {t['n_base']}/{t['n_head']} ({t.get('reason', '')})")
            print(f"  injected tests called same: {called_same}; same wider than {MIN_EFFECT:.0%}: {wide}; "
                  f"contended: base {doc['base'].get('contended', '')}, head {doc['head'].get('contended', '')}")
            flagged = [t for t in controls if t["verdict"] in ("regression", "improvement")]
            for t in flagged:
                print(f"  FALSE {t['verdict']}: {t['benchmark']}/{t['test']} change {t['change']:+.1%}")
            s = doc["summary"]
            print(f"  all tests: {s}")
            rows.append((effect, found, len(hit), rate, target, false, len(controls), seconds))
            ok &= rate >= target and false == 0 and seconds <= args.budget * 1.1 and bool(hit) and not wide
            ok &= not (args.contended and called_same)
    print()
    print("| injected | tests running the op flagged | target | false flags on the controls | target | time |")
    print("|---|---|---|---|---|---|")
    for effect, found, n, rate, target, false, controls, seconds in rows:
        print(f"| +{effect:.0%} | {found}/{n} = {rate:.0%} | >= {target:.0%} | {false}/{controls} | 0 | "
              f"{seconds:.0f} s (budget {args.budget:.0f} s) |")
    print(f"after: {loadgen.machine_state()}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
