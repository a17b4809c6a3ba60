#!/usr/bin/env python3
"""Score benchmark selection on labelled commits of an out-of-tree backend repo (not a test).

Default target: intel/torch-xpu-ops cloned at /work/oot/torch-xpu-ops, cases in
bench/oot/torch-xpu-ops-cases.json (real commits, each labelled with the test/microbench scripts
that must be selected). The user's clone is never modified: everything runs in a scratch
``git clone --shared`` of it at its HEAD, where ``--config FILE`` is copied in as ``perfq.toml``.

perfq mode (default)
  1. ``--index-cmd`` (default ``perfq index``) once at the scratch clone's HEAD,
  2. per case ``--perfq-cmd`` (default ``perfq affected {base}..{commit} --format json``; ``{base}``
     and ``{commit}`` are the case's full shas) in the scratch clone,
  3. selected = stems of ``benchmarks[].file`` plus the benchmarks of every ``canary`` set; a case
     counts as flagged shared infrastructure when ``shared_infrastructure`` is true or ``canary`` is
     non-empty.

``--baseline filename`` mode: no tool; a plain file-name matcher (see ``filename_selection``)
selects the scripts whose name matches a changed source file. It is the yardstick of issue 11.

Figures: mean recall over cases with expected benchmarks, full recall %, extras per case
(selected - expected - acceptable), negatives with an empty selection, canary cases flagged,
errors, wall time.

    python bench/eval_oot.py --config /tmp/xpu-perfq.toml
    python bench/eval_oot.py --baseline filename
    python bench/eval_oot.py --only k01-batchnorm-bwd-reduce-cl --keep
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_REPO = Path("/work/oot/torch-xpu-ops")
DEFAULT_CASES = HERE / "oot" / "torch-xpu-ops-cases.json"
DEFAULT_PERFQ_CMD = "perfq affected {base}..{commit} --format json"
DEFAULT_INDEX_CMD = "perfq index"
DEFAULT_SCRIPT_ROOT = "test/microbench"
SOURCE_SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh")
NAME_SUFFIXES = ("kernels", "kernel", "impl", "functors", "functor", "templates", "template", "utils", "ops", "op")
NAME_PREFIXES = ("tensor",)
ABBREVIATIONS = (("average", "avg"), ("pooling", "pool"))
MIN_CONTAIN = 4


class Mode(Enum):
    """What picks the benchmarks."""

    PERFQ = "perfq"
    FILENAME = "filename"


@dataclass(frozen=True)
class Case:
    """One labelled commit."""

    id: str
    commit: str
    base: str
    category: str
    expected: tuple[str, ...]
    acceptable: tuple[str, ...]
    canary: bool

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Case:
        return cls(
            id=str(raw["id"]),
            commit=raw["commit"],
            base=raw["base"],
            category=raw.get("category", ""),
            expected=tuple(raw.get("expected_benchmarks", [])),
            acceptable=tuple(raw.get("acceptable_benchmarks", [])),
            canary=bool(raw.get("canary")),
        )


@dataclass(frozen=True)
class Selection:
    """What a selector returned for one case."""

    benchmarks: tuple[str, ...]
    flagged: bool
    wall_s: float
    error: str = ""


@dataclass(frozen=True)
class CaseResult:
    """One case scored."""

    id: str
    category: str
    canary: bool
    selected: tuple[str, ...]
    hit: tuple[str, ...]
    missed: tuple[str, ...]
    extra: tuple[str, ...]
    recall: float | None
    full_recall: bool | None
    negative_ok: bool | None
    flagged: bool
    wall_s: float
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    """Figures over all cases."""

    mode: str
    n_cases: int
    errors: int
    mean_recall: float | None
    full_recall_pct: float | None
    extras_per_case: float | None
    negatives_empty: int
    negatives_total: int
    canary_flagged: int
    canary_total: int
    wall_s_median: float | None
    wall_s_total: float
    index_wall_s: float | None
    per_category: dict[str, dict[str, float | int | None]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- git


def git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def scratch_clone(repo: Path, root: Path, config: Path | None) -> Path:
    """A shared clone of ``repo`` at its HEAD, with ``config`` as its perfq.toml."""
    clone = root / repo.name
    git(["clone", "-q", "--shared", str(repo), str(clone)], root)
    head = git(["rev-parse", "HEAD"], repo).strip()
    git(["checkout", "-q", "--detach", head], clone)
    if config is not None:
        shutil.copyfile(config, clone / "perfq.toml")
    return clone


def changed_files(repo: Path, base: str, commit: str) -> list[str]:
    return [p for p in git(["diff", "--name-only", base, commit], repo).splitlines() if p]


def script_stems(repo: Path, root: str, rev: str = "HEAD") -> list[str]:
    listing = git(["ls-tree", "--name-only", f"{rev}:{root}"], repo).splitlines()
    return sorted(Path(p).stem for p in listing if p.endswith(".py") and not p.startswith("__"))


# ------------------------------------------------------------------------ selectors


def bench_stem(item: Any) -> str:
    """A benchmark's identity: the stem of its file (``test/microbench/distance.cdist.py`` -> ``distance.cdist``)."""
    if isinstance(item, dict):
        item = item.get("file") or item.get("name") or ""
    name = Path(str(item)).name
    return name[:-3] if name.endswith(".py") else name


def parse_affected(stdout: str) -> tuple[tuple[str, ...], bool]:
    """Benchmarks (plain and canary) and the shared-infrastructure flag of an affected JSON document."""
    doc = json.loads(stdout[stdout.index("{") :])
    names = {bench_stem(b) for b in doc.get("benchmarks") or []}
    canary = doc.get("canary") or []
    for entry in canary:
        members = entry.get("benchmarks", []) if isinstance(entry, dict) else [entry]
        names |= {bench_stem(b) for b in members}
    flagged = bool(doc.get("shared_infrastructure")) or bool(canary)
    return tuple(sorted(n for n in names if n)), flagged


def run_perfq(clone: Path, cmd_template: str, case: Case, timeout: int) -> Selection:
    cmd = shlex.split(cmd_template.format(base=case.base, commit=case.commit))
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=clone, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Selection((), False, float(timeout), f"timeout after {timeout}s")
    except FileNotFoundError as exc:
        return Selection((), False, 0.0, f"command not found: {exc.filename}")
    wall = time.perf_counter() - start
    try:
        benchmarks, flagged = parse_affected(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return Selection((), False, wall, f"rc={proc.returncode}: {tail[-1][:200] if tail else 'no output'}")
    return Selection(benchmarks, flagged, wall)


def name_key(text: str) -> str:
    """Lower-case, separators removed, common long words abbreviated: ``AveragePooling`` -> ``avgpool``."""
    key = re.sub(r"[^a-z0-9]", "", text.lower())
    for long, short in ABBREVIATIONS:
        key = key.replace(long, short)
    return key


def strip_affixes(key: str) -> str:
    """Drop Kernel(s)/Impl/Functor/Template/Utils/Ops suffixes, a Tensor prefix and a plural s."""
    changed = True
    while changed:
        changed = False
        for suffix in NAME_SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                key, changed = key[: -len(suffix)], True
    for prefix in NAME_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix) :]
    return key[:-1] if len(key) > 5 and key.endswith("s") and not key.endswith("ss") else key


def file_key(path: str) -> str:
    """The op-ish key of a changed source file (``BatchNormKernels.cpp`` -> ``batchnorm``)."""
    return strip_affixes(name_key(re.sub(r"_k\d+$", "", Path(path).stem)))


def keys_match(fkey: str, skey: str) -> bool:
    if fkey == skey:
        return True
    short, long = sorted((fkey, skey), key=len)
    return len(short) >= MIN_CONTAIN and short in long


def script_matches(fkey: str, stem: str) -> bool:
    """Equal to the family part, or equal to / containing / contained in the op part or the whole stem."""
    parts = stem.split(".")
    if len(parts) > 1 and fkey == name_key(parts[0]):
        return True
    return any(keys_match(fkey, name_key(k)) for k in (parts[-1], stem))


def filename_selection(files: list[str], stems: list[str]) -> tuple[str, ...]:
    """Scripts whose name matches a changed C++ source file under src/.

    The file key is the file stem lower-cased without separators, with average -> avg and
    pooling -> pool, without Kernel(s)/Impl/Functor/Template/Utils/Ops suffixes, a Tensor prefix,
    ``_kN`` and a plural s. A script matches when its family part (``distance`` in
    ``distance.cdist``) equals the key, or when its op part (``cdist``) or whole stem equals the
    key or one contains the other (the shorter at least 4 characters). Examples:
    BatchNormKernels.cpp -> batchnorm -> batch_norm_1d/2d/3d; AdaptiveAveragePooling2dKernels.cpp ->
    adaptiveavgpool2d -> adaptive_avg_pool2d; DilatedMaxPool2d.cpp -> dilatedmaxpool2d contains
    maxpool2d -> pooling.max_pool2d; DistanceKernels.cpp -> distance -> distance.cdist,
    distance.pdist; Reduce.h -> reduce -> reduce.max, reduce.sum. Tests, yaml and other non-source
    files select nothing.
    """
    keys = [file_key(f) for f in files if f.startswith("src/") and f.endswith(SOURCE_SUFFIXES)]
    return tuple(sorted(s for s in stems if any(script_matches(k, s) for k in keys)))


def run_filename(repo: Path, case: Case, stems: list[str]) -> Selection:
    start = time.perf_counter()
    try:
        files = changed_files(repo, case.base, case.commit)
    except RuntimeError as exc:
        return Selection((), False, 0.0, str(exc))
    return Selection(filename_selection(files, stems), False, time.perf_counter() - start)


# -------------------------------------------------------------------------- scoring


def score(case: Case, sel: Selection) -> CaseResult:
    expected, allowed, chosen = set(case.expected), set(case.expected) | set(case.acceptable), set(sel.benchmarks)
    ok = not sel.error
    hit = chosen & expected
    return CaseResult(
        id=case.id,
        category=case.category,
        canary=case.canary,
        selected=tuple(sorted(chosen)),
        hit=tuple(sorted(hit)),
        missed=tuple(sorted(expected - chosen)),
        extra=tuple(sorted(chosen - allowed)),
        recall=(len(hit) / len(expected)) if expected and ok else None,
        full_recall=(hit == expected) if expected and ok else None,
        negative_ok=(not chosen) if not expected and ok else None,
        flagged=sel.flagged,
        wall_s=round(sel.wall_s, 3),
        error=sel.error,
    )


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def category_figures(results: list[CaseResult]) -> dict[str, dict[str, float | int | None]]:
    cats: dict[str, list[CaseResult]] = {}
    for r in results:
        cats.setdefault(r.category, []).append(r)
    return {
        name: {
            "n": len(rs),
            "mean_recall": mean([r.recall for r in rs if r.recall is not None]),
            "extras_per_case": mean([float(len(r.extra)) for r in rs if not r.error]),
        }
        for name, rs in sorted(cats.items())
    }


def summarize(mode: Mode, results: list[CaseResult], index_wall: float | None) -> Summary:
    ok = [r for r in results if not r.error]
    recalls = [r.recall for r in ok if r.recall is not None]
    fulls = [r.full_recall for r in ok if r.full_recall is not None]
    negatives = [r for r in results if r.category == "negative"]
    canaries = [r for r in results if r.canary]
    walls = [r.wall_s for r in results]
    return Summary(
        mode=mode.value,
        n_cases=len(results),
        errors=len(results) - len(ok),
        mean_recall=mean(recalls),
        full_recall_pct=(100.0 * sum(fulls) / len(fulls)) if fulls else None,
        extras_per_case=mean([float(len(r.extra)) for r in ok]),
        negatives_empty=sum(1 for r in negatives if r.negative_ok),
        negatives_total=len(negatives),
        canary_flagged=sum(1 for r in canaries if r.flagged and not r.error),
        canary_total=len(canaries),
        wall_s_median=statistics.median(walls) if walls else None,
        wall_s_total=round(sum(walls), 2),
        index_wall_s=index_wall,
        per_category=category_figures(results),
    )


# --------------------------------------------------------------------------- output


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def case_line(r: CaseResult) -> str:
    if r.error:
        return f"{r.id:<34} {r.category:<10} ERROR {r.error[:90]}"
    score_text = fmt(r.recall) if r.recall is not None else ("neg-ok" if r.negative_ok else "NEG-X")
    flag = "C" if r.flagged else "-"
    chosen = ",".join(r.selected)[:60] or "(none)"
    missed = f" | missed: {','.join(r.missed)}" if r.missed else ""
    return f"{r.id:<34} {r.category:<10} {score_text:>6} {len(r.selected):>3} {len(r.extra):>3} {flag} {chosen}{missed}"


def print_report(results: list[CaseResult], s: Summary) -> None:
    print(f"{'id':<34} {'category':<10} {'recall':>6} sel ext C selected")
    for r in results:
        print(case_line(r))
    print()
    print(f"mode: {s.mode}   cases: {s.n_cases}   errors: {s.errors}")
    print(f"mean recall: {fmt(s.mean_recall, 3)}   full recall: {fmt(s.full_recall_pct, 1)}%")
    print(f"extras per case: {fmt(s.extras_per_case)}")
    print(f"negatives empty: {s.negatives_empty}/{s.negatives_total}")
    print(f"canary cases flagged: {s.canary_flagged}/{s.canary_total}")
    print(f"wall: median {fmt(s.wall_s_median)} s per case, total {s.wall_s_total} s, index {fmt(s.index_wall_s, 1)} s")
    for name, fig in s.per_category.items():
        print(f"  {name:<12} n={fig['n']:<3} recall={fmt(fig['mean_recall'], 3)} extras={fmt(fig['extras_per_case'])}")


# ----------------------------------------------------------------------------- main


def load_cases(path: Path, only: str | None) -> list[Case]:
    raw = json.loads(path.read_text())
    cases = [Case.from_json(c) for c in (raw.get("cases", []) if isinstance(raw, dict) else raw)]
    if only:
        wanted = {x.strip() for x in only.split(",")}
        cases = [c for c in cases if c.id in wanted]
    return cases


def build_index(clone: Path, index_cmd: str) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(shlex.split(index_cmd), cwd=clone, capture_output=True, text=True)
    except FileNotFoundError as exc:
        return 0.0, f"index command not found: {exc.filename}"
    wall = round(time.perf_counter() - start, 1)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return wall, f"index failed (rc={proc.returncode}): {tail[-1][:200] if tail else ''}"
    return wall, ""


def evaluate(args: argparse.Namespace, cases: list[Case], scratch: Path) -> tuple[list[CaseResult], float | None]:
    repo = args.repo.resolve()
    if args.baseline:
        stems = script_stems(repo, args.script_root)
        return [score(c, run_filename(repo, c, stems)) for c in cases], None
    clone = scratch_clone(repo, scratch, args.config)
    index_wall, index_error = build_index(clone, args.index_cmd)
    print(f"index: {index_wall} s {index_error}", file=sys.stderr)
    if index_error:
        return [score(c, Selection((), False, 0.0, index_error)) for c in cases], index_wall
    results = []
    for case in cases:
        results.append(score(case, run_perfq(clone, args.perfq_cmd, case, args.timeout)))
        print(case_line(results[-1]), file=sys.stderr, flush=True)
    return results, index_wall


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=DEFAULT_REPO, help="the backend's git clone (left untouched)")
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--config", type=Path, default=None, help="copied into the scratch clone as perfq.toml")
    ap.add_argument("--perfq-cmd", default=DEFAULT_PERFQ_CMD, help="{base} and {commit} are substituted")
    ap.add_argument("--index-cmd", default=DEFAULT_INDEX_CMD)
    ap.add_argument("--baseline", choices=[Mode.FILENAME.value], default=None, help="score a plain matcher instead")
    ap.add_argument("--script-root", default=DEFAULT_SCRIPT_ROOT, help="script benchmarks, for --baseline")
    ap.add_argument("--only", default=None, help="comma-separated case ids")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default: in the temp dir)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--keep", action="store_true", help="keep the scratch clone")
    return ap.parse_args(argv)


def check_inputs(args: argparse.Namespace) -> None:
    if not (args.repo / ".git").exists():
        sys.exit(f"error: {args.repo} is not a git clone")
    if not args.cases.is_file():
        sys.exit(f"error: no cases file at {args.cases}")
    if args.config is not None and not args.config.is_file():
        sys.exit(f"error: no config file at {args.config}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_inputs(args)
    mode = Mode(args.baseline) if args.baseline else Mode.PERFQ
    cases = load_cases(args.cases, args.only)
    if not cases:
        sys.exit("error: no case selected")
    scratch = Path(tempfile.mkdtemp(prefix="perfq-oot-eval-"))
    try:
        results, index_wall = evaluate(args, cases, scratch)
    finally:
        if args.keep:
            print(f"scratch clone kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    summary = summarize(mode, results, index_wall)
    out = args.out or Path(tempfile.gettempdir()) / f"perfq-oot-eval-{mode.value}.json"
    command = None if args.baseline else {"index": args.index_cmd, "affected": args.perfq_cmd}
    doc = {"summary": summary.to_json(), "command": command, "cases": [r.to_json() for r in results]}
    out.write_text(json.dumps(doc, indent=1))
    print_report(results, summary)
    print(f"\nresults written to {out}")


if __name__ == "__main__":
    main()
