#!/usr/bin/env python3
"""Ground truth for `perfq affected` labels: the ops every operator benchmark test executes.

Runs each ``benchmarks/operator_benchmark/pt/*_test.py`` of a PyTorch checkout on CPU, one
file per child process, every config of every tag (short, long and the rest), forward and
backward tests, with two iterations under ``torch.profiler``. Every profiler op event is
kept, nested ones included (ops called inside other ops' kernels through the dispatcher),
with its input dtypes and parent op. Configs on ``cuda`` are dropped as the framework drops
them on a CPU-only machine (counted per file).

The framework builds a config's inputs in ``init`` before any tag filter, so a child here
builds the tests itself, one config at a time, and frees each before the next. A child over
``--rss-limit-mb`` is killed and restarted past the config it was building (listed as
skipped). Not a test; it writes labelling evidence:

    python bench/trace_truth.py [--corpus DIR] [--out /work/notes/trace_truth.json] [--only stack_test,cat_test]
    python bench/trace_truth.py --show aten::cat,aten::sigmoid_     # which benchmarks execute these ops (from --out)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

START = "TRACE-START "
TEST = "TRACE-TEST "
ITERATIONS = 2  # as in bench/trace_truth_worker.py
WORKER = Path(__file__).with_name("trace_truth_worker.py")
DEFAULT_CORPUS = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"


# ----------------------------------------------------------------------- parent side


@dataclass
class FileRun:
    """Everything the children of one benchmark file reported."""

    stem: str
    tests: list[dict] = field(default_factory=list)
    cuda_configs: int = 0
    skipped: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    restarts: int = 0


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _watch(proc: subprocess.Popen, limit_mb: float, deadline: float, verdict: dict) -> None:
    while proc.poll() is None:
        rss = _rss_mb(proc.pid)
        if rss > limit_mb:
            verdict["killed"] = f"rss {rss:.0f} MiB over the {limit_mb:.0f} MiB limit"
            proc.kill()
        elif time.monotonic() > deadline:
            verdict["killed"] = "timeout"
            proc.kill()
        time.sleep(0.05)


def _run_child(bench_root: Path, module: str, skip: set, args: argparse.Namespace, deadline: float) -> tuple:
    """(stdout lines, exit status, peak RSS MiB, stderr tail, kill reason) of one child run."""
    cmd = [sys.executable, str(WORKER), module, json.dumps(sorted(skip))]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(cmd, cwd=bench_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    verdict: dict = {}
    watcher = threading.Thread(target=_watch, args=(proc, args.rss_limit_mb, deadline, verdict), daemon=True)
    watcher.start()
    err_lines: list[str] = []
    err_reader = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    err_reader.start()
    out = list(proc.stdout)  # type: ignore[arg-type]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err_reader.join()
    tail = [line.strip() for line in err_lines if line.strip() and "Warning" not in line][-1:]
    return out, proc.returncode, usage.ru_maxrss / 1024, (tail[0][:300] if tail else ""), verdict.get("killed")


def trace_file(bench_root: Path, stem: str, args: argparse.Namespace) -> FileRun:
    """All configs of one benchmark file, restarting past a config that blew the memory limit."""
    run = FileRun(stem)
    skip: set[tuple[int, int]] = set()
    started = time.monotonic()
    deadline = started + args.timeout
    while True:
        out, code, peak, err, killed = _run_child(bench_root, f"pt.{stem}", skip, args, deadline)
        run.peak_rss_mb = max(run.peak_rss_mb, peak)
        current = None
        for line in out:
            if line.startswith(START):
                doc = json.loads(line[len(START):])
                run.cuda_configs += bool(doc.get("cuda"))
                current = None if doc.get("cuda") else doc
                if current:
                    skip.add((doc["meta"], doc["config"]))
            elif line.startswith(TEST):
                run.tests.append(json.loads(line[len(TEST):]))
        if code == 0 and not killed:
            break
        reason = killed or f"exit {code}: {err}"
        if current is None or killed == "timeout" or run.restarts >= args.max_restarts:
            run.errors.append(reason if current is None else f"{reason} while building config {current}")
            break
        run.skipped.append({"config": current, "reason": reason})
        run.restarts += 1
    run.wall_s = round(time.monotonic() - started, 1)
    return run


def _file_ops(tests: list[dict]) -> dict[str, dict]:
    """Per op executed by a file's timed phases: dtypes, parent ops, and the tests that run it."""
    merged: dict[str, dict[str, set]] = {}
    for test in tests:
        timed = {op for phase in ("forward", "backward") for op in test["ops"].get(phase, [])}
        for op in timed:
            info = test["op_info"].get(op, {})
            entry = merged.setdefault(op, {"dtypes": set(), "parents": set(), "tests": set(), "modules": set()})
            entry["dtypes"].update(info.get("dtypes", []))
            entry["parents"].update(info.get("parents", []))
            entry["tests"].add(test.get("test") or f"{test['class']}#{test['config']}")
            entry["modules"].add(test.get("module") or test["class"])
    return {op: {"dtypes": sorted(v["dtypes"]), "parents": sorted(v["parents"]), "n_tests": len(v["tests"]),
                 "modules": sorted(v["modules"])} for op, v in sorted(merged.items())}


def file_document(run: FileRun) -> dict:
    ok = [t for t in run.tests if not t.get("error")]
    status = "ok" if ok and not run.errors and not run.skipped and len(ok) == len(run.tests) else (
        "partial" if ok else "failed")
    return {
        "status": status,
        "wall_s": run.wall_s,
        "peak_rss_mb": round(run.peak_rss_mb),
        "n_tests": len(run.tests),
        "n_failed_tests": len(run.tests) - len(ok),
        "test_errors": sorted({t["error"] for t in run.tests if t.get("error")})[:10],
        "cuda_configs_dropped": run.cuda_configs,
        "skipped_configs": run.skipped,
        "errors": run.errors,
        "tags": sorted({str(t.get("tag")) for t in run.tests}),
        "ops": _file_ops(run.tests),
        "tests": run.tests,
    }


def op_index(files: dict[str, dict]) -> dict[str, list[str]]:
    """op -> benchmark stems whose timed forward/backward executes it."""
    index: dict[str, set[str]] = {}
    for stem, doc in files.items():
        for op in doc["ops"]:
            index.setdefault(op, set()).add(stem)
    return {op: sorted(stems) for op, stems in sorted(index.items())}


def show(doc: dict, ops: list[str]) -> None:
    """Print, per op, the benchmark files whose timed phases execute it: tests, input dtypes, parent ops."""
    for op in ops:
        print(op)
        for stem, file in sorted(doc["files"].items()):
            info = file["ops"].get(op)
            if info:
                print(f"  {stem:<28} tests={info['n_tests']:<4} dtypes={','.join(info['dtypes']) or '-'} "
                      f"parents={','.join(info['parents']) or '-'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--out", type=Path, default=Path("/work/notes/trace_truth.json"))
    ap.add_argument("--only", default="", help="comma separated file stems (e.g. stack_test,cat_test)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark file")
    ap.add_argument("--rss-limit-mb", type=float, default=8192)
    ap.add_argument("--max-restarts", type=int, default=20)
    ap.add_argument("--update", action="store_true", help="replace only the traced files in an existing --out")
    ap.add_argument("--show", default="", help="ops (aten::cat,...): print who executes them; no tracing")
    args = ap.parse_args()
    if args.show:
        if not args.out.is_file():
            sys.exit(f"error: no trace document at {args.out}")
        show(json.loads(args.out.read_text()), [op.strip() for op in args.show.split(",")])
        return
    bench_root = args.corpus / "benchmarks/operator_benchmark"
    if not (bench_root / "benchmark_core.py").is_file():
        sys.exit(f"error: no operator_benchmark framework under {bench_root}")
    stems = sorted(p.stem for p in (bench_root / "pt").glob("*_test.py"))
    if args.only:
        wanted = {s.strip() for s in args.only.split(",")}
        stems = [s for s in stems if s in wanted]
    started = time.monotonic()

    def one(stem: str) -> tuple[str, dict]:
        doc = file_document(trace_file(bench_root, stem, args))
        print(f"{stem:<32} {doc['status']:<8} tests={doc['n_tests']:<5} failed={doc['n_failed_tests']:<4} "
              f"{doc['wall_s']:>7.1f}s {doc['peak_rss_mb']:>6} MiB {'; '.join(doc['errors'])[:100]}", flush=True)
        return stem, doc

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        files = dict(pool.map(one, stems))
    wall = round(time.monotonic() - started, 1)
    if args.update and args.out.exists():
        previous = json.loads(args.out.read_text())
        files = {**previous["files"], **files}
        wall = previous["wall_s"]
    torch_version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True, cwd="/").stdout.strip()
    doc = {
        "torch": torch_version,
        "corpus": str(args.corpus),
        "settings": {"iterations": ITERATIONS, "tags": "all", "device": "cpu", "jobs": args.jobs,
                     "rss_limit_mb": args.rss_limit_mb, "timed_phases": ["forward", "backward"]},
        "wall_s": wall,
        "peak_rss_mb": max((f["peak_rss_mb"] for f in files.values()), default=0),
        "not_ok": {stem: f["status"] for stem, f in files.items() if f["status"] != "ok"},
        "op_benchmarks": op_index(files),
        "files": files,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"traced {len(files)} files in {doc['wall_s']}s, peak RSS {doc['peak_rss_mb']} MiB -> {args.out}")


if __name__ == "__main__":
    main()
