#!/usr/bin/env python3
"""Score `perfq affected` (or any command printing its JSON) on tests/data/affected_cases.json.

The figures are those of ../shared/eval/run_eval.py: mean recall over the cases with expected
benchmarks, the share of cases with every expected benchmark, extra benchmarks per case (outside
expected + acceptable), and the negatives (ops without a benchmark) and no-op changes (comments,
whitespace) that select nothing. The corpus is not written: the cases run in a shared clone
(``--work``, kept and reused when given) whose index ``--index-cmd`` builds once.
``--cases bench/pytorch-heldout-cases.json`` scores the 42 held-out cases labelled apart from
perfq (by hand from the sources and profiler runs, never from its output; each diff stored as
its hunks' new lines below a unique anchor line); ``bench/pytorch-heldout-cases-r2.json`` the 9 of
issue 31's second round (a case with ``compile_mode: true`` passes only when the answer sets
``compile_mode`` and runs a benchmark in compile mode).

    python bench/eval_cases.py [--repo CORPUS] [--work DIR] [--only ID,ID] [--cases FILE] \\
        [--perfq-cmd "perfq affected {base} --format json"] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.affected_cases import (  # noqa: E402 - the repo root is put on sys.path above
    CASES_FILE,
    CORPUS,
    Case,
    Score,
    Scratch,
    commit_case,
    failures,
    git,
    load_cases,
    make_scratch,
    run_affected,
    score,
)


def open_scratch(repo: Path, work: Path | None, index_cmd: str) -> Scratch:
    """A clone of ``repo`` at its HEAD with the index built: ``work`` when it already is one, else a new one."""
    if work is not None and (work / ".git").exists():
        base = git(repo, "rev-parse", "HEAD").strip()
        git(work, "checkout", "-q", "-f", "--detach", base)
        proc = subprocess.run(shlex.split(index_cmd) or ["true"], cwd=work, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"error: index command failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
        return Scratch(work, base)
    dest = work or Path(tempfile.mkdtemp(prefix="perfq-cases-")) / "pytorch-2.6.0"
    dest.parent.mkdir(parents=True, exist_ok=True)
    return make_scratch(repo, dest, index_cmd)


def run_case(scratch: Scratch, case: Case, cmd: str, timeout: int) -> tuple[Score | None, str]:
    try:
        commit_case(scratch, case)
        doc, wall = run_affected(scratch, cmd, timeout)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        return None, str(exc).splitlines()[0][:200]
    return score(case, doc, wall), ""


def summary(cases: list[Case], results: dict[str, Score | None]) -> dict:
    scored = [(c, results[c.id]) for c in cases if results.get(c.id) is not None]
    recalls = [r.recall for _, r in scored if r.recall is not None]
    full = [not r.missed for c, r in scored if c.expected_benchmarks]
    negatives = [(c, r) for c, r in scored if c.negative]
    walls = [r.wall_s for _, r in scored]
    return {
        "n_cases": len(cases),
        "n_errors": len(cases) - len(scored),
        "n_cases_with_expected": len(recalls),
        "mean_recall": sum(recalls) / len(recalls) if recalls else None,
        "full_recall_pct": _pct(full),
        "mean_selected": statistics.mean(len(r.selected) for _, r in scored) if scored else None,
        "mean_extra": statistics.mean(len(r.extra) for _, r in scored) if scored else None,
        "cases_with_extra": sum(1 for _, r in scored if r.extra),
        "negatives_empty": sum(1 for c, r in negatives if not c.no_op and not r.selected),
        "negatives_total": sum(1 for c, _ in negatives if not c.no_op),
        "no_ops_empty": sum(1 for c, r in negatives if c.no_op and not r.selected),
        "no_ops_reported": sum(1 for c, r in negatives if c.no_op and r.no_op_reported),
        "no_ops_total": sum(1 for c, _ in negatives if c.no_op),
        "cases_passing": sum(1 for c, r in scored if not failures(c, r)),
        "compile_signalled": sum(1 for c, r in scored if c.compile_mode and r.compile_signalled),
        "compile_total": sum(1 for c, _ in scored if c.compile_mode),
        "wall_s_median": statistics.median(walls) if walls else None,
    }


def per_class(cases: list[Case], results: dict[str, Score | None]) -> dict[str, dict]:
    """n, mean recall, full-recall share, mean extras and passing cases per case class."""
    rows: dict[str, dict] = {}
    for case in cases:
        r = results.get(case.id)
        if r is None:
            continue
        row = rows.setdefault(case.klass, {"n": 0, "recall": [], "extra": [], "passing": 0})
        row["n"] += 1
        row["extra"].append(len(r.extra))
        row["passing"] += not failures(case, r)
        if r.recall is not None:
            row["recall"].append(r.recall)
    return {k: {"n": v["n"], "mean_recall": statistics.mean(v["recall"]) if v["recall"] else None,
                "full_recall_pct": _pct([x == 1.0 for x in v["recall"]]),
                "mean_extra": float(statistics.mean(v["extra"])), "passing": v["passing"]}
            for k, v in sorted(rows.items())}


def _pct(flags: list[bool]) -> float | None:
    return 100.0 * sum(flags) / len(flags) if flags else None


def fmt(x: object, nd: int = 2) -> str:
    if x is None:
        return "-"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def print_table(cases: list[Case], results: dict[str, Score | None], errors: dict[str, str]) -> None:
    print(f"{'case':<38} {'class':<24} {'recall':>6} {'sel':>4} {'extra':>5} {'wall':>5}  verdict")
    for case in cases:
        r = results.get(case.id)
        if r is None:
            print(f"{case.id:<38} {case.klass:<24} {'ERR':>6} {'':>4} {'':>5} {'':>5}  {errors[case.id]}")
            continue
        rec = fmt(r.recall) if r.recall is not None else ("empty" if not r.selected else "SEL")
        problems = failures(case, r)
        print(f"{case.id:<38} {case.klass:<24} {rec:>6} {len(r.selected):>4} {len(r.extra):>5} {r.wall_s:>5.2f}  "
              + ("ok" if not problems else "; ".join(problems))[:160])


def print_summary(s: dict) -> None:
    print()
    print(f"cases: {s['n_cases']}   errors: {s['n_errors']}   passing every check: {s['cases_passing']}")
    print(f"mean recall (cases with expected benchmarks, n={s['n_cases_with_expected']}): {fmt(s['mean_recall'], 3)}")
    print(f"full recall: {fmt(s['full_recall_pct'], 1)}%")
    print(f"mean selected: {fmt(s['mean_selected'])}   mean extra (not expected/acceptable): {fmt(s['mean_extra'])}"
          f"   cases with extra: {s['cases_with_extra']}")
    print(f"negatives correctly empty: {s['negatives_empty']}/{s['negatives_total']}   no-ops empty: "
          f"{s['no_ops_empty']}/{s['no_ops_total']} (reported as no-op: {s['no_ops_reported']})")
    print(f"compile-only changes signalled: {s['compile_signalled']}/{s['compile_total']}")
    print(f"median wall per case: {fmt(s['wall_s_median'])}s")
    print()
    print(f"{'class':<26} {'n':>3} {'recall':>7} {'full%':>6} {'extra':>6} {'pass':>5}")
    for klass, row in s["per_class"].items():
        print(f"{klass:<26} {row['n']:>3} {fmt(row['mean_recall'], 3):>7} {fmt(row['full_recall_pct'], 1):>6} "
              f"{fmt(row['mean_extra']):>6} {row['passing']:>5}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=CORPUS, help="PyTorch 2.6.0 checkout (not written)")
    ap.add_argument("--cases", type=Path, default=CASES_FILE)
    ap.add_argument("--work", type=Path, default=None, help="scratch clone to create or reuse (default: a temp dir)")
    ap.add_argument("--perfq-cmd", default="perfq affected {base} --format json",
                    help="run at the scratch root; {base} is the corpus commit")
    ap.add_argument("--index-cmd", default="perfq index", help="run once at the scratch root ('' skips)")
    ap.add_argument("--only", default="", help="comma separated case ids")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "perfq-eval-cases.json")
    args = ap.parse_args()
    if not (args.repo / ".git").exists():
        sys.exit(f"error: no git checkout at {args.repo}")
    cases = load_cases(args.cases)
    if args.only:
        wanted = {x.strip() for x in args.only.split(",")}
        cases = [c for c in cases if c.id in wanted]
    scratch = open_scratch(args.repo, args.work, args.index_cmd)
    results: dict[str, Score | None] = {}
    errors: dict[str, str] = {}
    for case in cases:
        results[case.id], errors[case.id] = run_case(scratch, case, args.perfq_cmd, args.timeout)
    print_table(cases, results, errors)
    s = summary(cases, results)
    s["per_class"] = per_class(cases, results)
    print_summary(s)
    args.out.write_text(json.dumps({"command": args.perfq_cmd, "base": scratch.base, "summary": s,
                                    "cases": {k: (v.to_json() if v else {"error": errors[k]})
                                              for k, v in results.items()}}, indent=1))
    print(f"results written to {args.out} (scratch clone: {scratch.root})")


if __name__ == "__main__":
    main()
