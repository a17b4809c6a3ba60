"""``perfq affected``: from changed functions to the benchmarks that can see them, the
operators behind them, the operators with NO BENCHMARK, and why (reads the index)."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from perfq.config import Config
from perfq.query.changes import ChangeSet
from perfq.query.reach import Reach, device_of_path, op_backends, reaching_benchmarks, walk_up

_WEAK_EDGES = {"subclass", "method_of"}


@dataclass
class Start:
    node: int
    label: str
    confidence: str
    why: str
    device: str = ""  # device family of the changed file ('' = any)


@dataclass
class AffectedInput:
    base: str
    head: str
    changes: ChangeSet
    warnings: list[str] = field(default_factory=list)


def _canary_sets(con: duckdb.DuckDBPyConnection) -> list[dict]:
    files = dict(con.execute("SELECT name, file FROM benchmarks").fetchall())
    rows = con.execute("SELECT name, description, paths, functions, benchmarks FROM canary_sets").fetchall()
    return [
        {
            "name": n,
            "description": d,
            "paths": json.loads(p),
            "functions": json.loads(f),
            "benchmarks": json.loads(b),
            "files": files,
        }
        for n, d, p, f, b in rows
    ]


def _starts(con: duckdb.DuckDBPyConnection, cs: ChangeSet) -> tuple[list[Start], list[dict]]:
    """Index nodes the changes start from, and what could not be mapped."""
    starts: list[Start] = []
    unmapped: list[dict] = []
    paths = sorted({cf.path for cf in cs.functions} | {p for p, _, _ in cs.file_level})
    by_file: dict[str, list[tuple[int, str, str]]] = {}
    if paths:
        for path, fid, qualname, name in con.execute(
            "SELECT fi.path, f.id, f.qualname, f.name FROM functions f JOIN files fi ON fi.id = f.file_id"
            " WHERE fi.path IN (SELECT unnest(?::TEXT[]))",
            [paths],
        ).fetchall():
            by_file.setdefault(path, []).append((fid, qualname, name))
    for cf in cs.functions:
        indexed = by_file.get(cf.path, [])
        ids = [fid for fid, q, _ in indexed if q == cf.qualname] or [fid for fid, _, n in indexed if n == cf.name]
        label = f"{cf.path}:{cf.qualname}"
        dev = device_of_path(cf.path)
        if ids:
            starts += [Start(i, label, "high", f"{cf.status} function", dev) for i in ids]
            continue
        callers = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT caller_id FROM calls WHERE callee_name = ? LIMIT 500", [cf.name]
            ).fetchall()
        ]
        if callers:
            starts += [
                Start(i, label, "medium", f"{cf.status} function, reached through callers of {cf.name}", dev)
                for i in callers
            ]
        else:
            unmapped.append(
                {
                    "file": cf.path,
                    "function": cf.qualname,
                    "lines": cf.lines[:20],
                    "reason": f"{cf.status} function not in the index and nothing calls {cf.name}",
                }
            )
    for path, lines, why in cs.file_level:
        ids = [fid for fid, _, _ in by_file.get(path, [])]
        unmapped.append(
            {
                "file": path,
                "function": None,
                "lines": lines,
                "reason": why + (f"; falling back to the {len(ids)} functions of the file" if ids else ""),
            }
        )
        starts += [Start(i, f"{path} (file level)", "low", why, device_of_path(path)) for i in ids]
    if cs.yaml_ops:
        why = dict(reversed(cs.yaml_ops))
        rows = con.execute(
            "SELECT n.id, n.key, o.base FROM nodes n JOIN ops o ON o.name = n.key WHERE n.kind = 'op'"
            " AND (o.name IN (SELECT unnest(?::TEXT[])) OR o.base IN (SELECT unnest(?::TEXT[])))",
            [list(why), list(why)],
        ).fetchall()
        for nid, key, base in rows:
            starts.append(Start(nid, f"op {key}", "high", why.get(key) or why.get(base, "")))
    return starts, unmapped


def _canary_entry(s: dict, trigger: str) -> dict:
    return {
        "set": s["name"],
        "trigger": trigger,
        "description": s["description"],
        "benchmarks": [{"name": b, "file": s["files"].get(b, b)} for b in s["benchmarks"]],
    }


def _pattern_canaries(sets: list[dict], paths: list[str], qualnames: list[str]) -> list[dict]:
    """Canary sets whose path globs or function patterns match the change."""
    out = []
    for s in sets:
        hit = next((p for p in paths for g in s["paths"] if fnmatch.fnmatch(p, g)), None)
        hit = hit or next((q for q in qualnames for g in s["functions"] if fnmatch.fnmatch(q, g)), None)
        if hit:
            out.append(_canary_entry(s, f"changed {hit} matches the {s['name']} set"))
    return out


def _label(r: Reach, node: int, files: dict[int, str]) -> str:
    kind, key, label = r.kind.get(node, "?"), r.key.get(node, "?"), r.label.get(node, "?")
    if kind == "function":
        return f"{files.get(node, '?')}:{label}"
    if kind == "pyfunction":
        return label
    return f"{kind} {key}"


def _devices(changed_paths: list[str], bench_devices: list[str]) -> list[str]:
    """The benchmark's devices the change can be seen on (all when any file serves every device)."""
    families = {device_of_path(p) for p in changed_paths}
    wanted = [d for d in bench_devices if d in families] if changed_paths and "" not in families else []
    return wanted or list(bench_devices)


def affected(con: duckdb.DuckDBPyConnection, inp: AffectedInput, cfg: Config) -> dict:
    """The ``perfq affected`` document (see README for its JSON shape)."""
    cs = inp.changes
    starts, unmapped = _starts(con, cs)
    start_of = {s.node: s for s in starts}
    start_devices = {s.node: s.device for s in starts}
    # first the operators the change implements (no composite callers), to tell a
    # shared-infrastructure change; then everything, unless it is one
    backends = op_backends(con)
    r = walk_up(con, start_devices, cfg.max_depth, composite_hops=0, backends=backends)
    changed_paths = sorted({cf.path for cf in cs.functions} | {p for p, _, _ in cs.file_level})
    sets = _canary_sets(con)
    canary = _pattern_canaries(sets, changed_paths, [cf.qualname for cf in cs.functions])
    first_tier = len(r.nodes_of("op"))
    broad = next((s for s in sets if s["name"] == "broad"), None)
    if first_tier > cfg.reach_bound and not canary and broad is not None:
        canary.append(_canary_entry(broad, f"reaches {first_tier} operators of its own (bound {cfg.reach_bound})"))
    reached_ops = first_tier
    if not canary:
        # composite callers, transitively, except through hub ops (called from more than
        # hub_fanout C++ functions: their callers are most of ATen); when chains of
        # composites still fan out beyond the bound, follow fewer composite steps
        own_hubs: list[str] = []
        fell_back = True
        for hops in (None, 3, 2, 1):
            walk = walk_up(
                con, start_devices, cfg.max_depth, composite_hops=hops, hub_fanout=cfg.hub_fanout, backends=backends
            )
            if hops is None:
                reached_ops = len(walk.nodes_of("op"))
                own_hubs = sorted(walk.key[n] for n in walk.hubs if n in r.depth)
            if len(walk.nodes_of("op")) <= cfg.reach_bound:
                r, fell_back = walk, False
                break
        if broad is not None and (own_hubs or fell_back):
            why = (
                f"implements hub operator(s) {', '.join(own_hubs[:4])} (called from more than "
                f"{cfg.hub_fanout} C++ functions)"
                if own_hubs
                else f"reaches {reached_ops} operators (bound {cfg.reach_bound})"
            )
            canary.append(_canary_entry(broad, why))
    fn_nodes = [n for n, k in r.kind.items() if k == "function"]
    files = (
        dict(
            con.execute(
                "SELECT f.id, fi.path FROM functions f JOIN files fi ON fi.id = f.file_id"
                " WHERE f.id IN (SELECT unnest(?::INTEGER[]))",
                [fn_nodes],
            ).fetchall()
        )
        if fn_nodes
        else {}
    )
    bench_rows = {
        name: (file, json.loads(tests), json.loads(devices))
        for name, file, tests, devices in con.execute("SELECT name, file, tests, devices FROM benchmarks").fetchall()
    }
    compile_mode = bool(cs.compile_paths)
    modes = ["eager", "compile"] if compile_mode else ["eager"]

    ops = sorted((r.depth[n], r.key[n]) for n in r.nodes_of("op"))
    benchmarks: dict[str, dict] = {}
    for node in r.nodes_of("benchmark"):
        name = r.key[node]
        chain = r.chain(node)
        start = start_of.get(chain[0][0])
        weak = any(kind in _WEAK_EDGES for _, kind, _ in chain)
        confidence = start.confidence if start else "low"
        if weak and confidence == "high":
            confidence = "medium"
        file, tests, devices = bench_rows.get(name, (name, [], ["cpu"]))
        test = chain[-1][2].split(":", 1)[0] if chain[-1][2] else ""
        entry = benchmarks.setdefault(
            name,
            {
                "name": name,
                "file": file,
                "tests": [],
                "ops": [],
                "modes": modes,
                "devices": _devices(changed_paths, devices),
                "confidence": confidence,
                "reasons": [],
                "distance": r.depth[node],
            },
        )
        for found in sorted({test} | {d.split(":", 1)[0] for d in r.into_benchmark.get(node, ()) if ":" in d}):
            if found and found not in entry["tests"]:
                entry["tests"].append(found)
        entry["ops"] += [r.key[n] for n, _, _ in chain if r.kind.get(n) == "op" and r.key[n] not in entry["ops"]]
        entry["reasons"].append(
            {
                "function": start.label if start else _label(r, chain[0][0], files),
                "chain": [_label(r, n, files) + (f" [{k}]" if k != "start" else "") for n, k, _ in chain],
            }
        )
    for path in cs.benchmark_files:
        name = Path(path).stem
        file, tests, devices = bench_rows.get(name, (path, [], ["cpu"]))
        entry = benchmarks.setdefault(
            name,
            {
                "name": name,
                "file": path,
                "tests": [],
                "ops": [],
                "modes": modes,
                "devices": devices,
                "confidence": "high",
                "reasons": [],
                "distance": 0,
            },
        )
        entry["reasons"].append({"function": path, "chain": [f"benchmark file {path} changed"]})

    covered = reaching_benchmarks(r)
    covered_ops = {r.key[n] for n in r.nodes_of("op") if n in covered}
    no_benchmark = [key for _, key in ops if key not in covered_ops]
    result_benchmarks = sorted(benchmarks.values(), key=lambda b: (b["distance"], b["name"]))
    for b in result_benchmarks:
        b.pop("distance", None)
        b["reasons"] = b["reasons"][:3]
    return {
        "base": inp.base,
        "head": inp.head,
        "compile_mode": compile_mode,
        "shared_infrastructure": bool(canary),
        "reach": {"first_tier_ops": first_tier, "ops": reached_ops, "bound": cfg.reach_bound},
        "changed_functions": [cf.as_dict() for cf in cs.functions],
        "benchmarks": result_benchmarks,
        "canary": canary,
        "ops": [key for _, key in ops],
        "no_benchmark_ops": no_benchmark,
        "unmapped_changes": unmapped,
        "ignored_files": cs.ignored,
        "warnings": inp.warnings + cs.notes + (["reach truncated at max_depth"] if r.truncated else []),
    }


def affected_for_range(repo: Path, rev_range: str, db: Path | None = None) -> dict:
    """The affected document for ``A..B``; reads git, so it lives in runner/ (re-exported)."""
    from perfq.runner.affected_flow import affected_for_range as run

    return run(repo, rev_range, db)


def flag_ir_changes(doc: dict, changed_kernels: set[str], kernel_map: dict[str, list[str]]) -> dict:
    """Mark each benchmark whose Triton kernels' IR changed between two collections.

    A benchmark's kernels are those ``kernel_map`` lists for it (``[tool.perfq.ir.benchmarks]``)
    plus kernels whose module is the benchmark itself (``softmax_test:kernel``,
    ``pt.softmax_test:kernel``).
    """
    doc["ir_changed_kernels"] = sorted(changed_kernels)
    for b in doc["benchmarks"]:
        mine = {k for k in changed_kernels if k.split(":", 1)[0].rsplit(".", 1)[-1] == b["name"]}
        mine |= changed_kernels & set(kernel_map.get(b["name"], []))
        b["ir_changed"] = sorted(mine)
    return doc


def all_benchmarks(doc: dict) -> list[dict]:
    """Selected benchmarks plus those of triggered canary sets (deduplicated)."""
    seen = {b["name"] for b in doc["benchmarks"]}
    out = list(doc["benchmarks"])
    for c in doc["canary"]:
        for b in c["benchmarks"]:
            if b["name"] not in seen:
                seen.add(b["name"])
                out.append(
                    {
                        "name": b["name"],
                        "file": b["file"],
                        "tests": [],
                        "ops": [],
                        "modes": ["eager", "compile"] if doc["compile_mode"] else ["eager"],
                        "devices": ["cpu"],
                        "confidence": "canary",
                        "reasons": [{"function": "", "chain": [f"canary set {c['set']}: {c['trigger']}"]}],
                    }
                )
    return out


def names(doc: dict) -> list[str]:
    return [b["name"] for b in all_benchmarks(doc)]
