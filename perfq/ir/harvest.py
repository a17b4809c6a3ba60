"""`perfq ir harvest`: import the IR files a run left in a Triton cache or dump directory
(``TRITON_CACHE_DIR``, ``TRITON_KERNEL_DUMP=1`` + ``TRITON_DUMP_DIR``).

Each compiled kernel is a directory ``<hash>/`` holding ``<name>.json`` (metadata: target,
num_warps, num_stages, triton_version) next to ``<name>.ttir``, ``.ttgir``, ``.llir``, ...
The hash differs between Triton versions, so the specialization key is rebuilt from the IR
itself: the kernel's argument types and hints (TTIR signature), its tensor shapes and the
launch options. The kernel id is ``<source file stem>:<function>`` (from the TTIR location).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from common.errors import PerfqError
from perfq.ir.collect import relative_source
from perfq.ir.compile import KNOWN_STAGES
from perfq.ir.normalize import normalize_ir
from perfq.ir.store import IRRecord

_FILE_LOC = re.compile(r'^#loc\d*\s*=\s*loc\("([^"]+)":\d+:\d+\)', re.M)
_FUNC = re.compile(r"^\s*tt\.func\s+(?:public\s+|private\s+)?@[\w$.]+\((.*)\)", re.M)
_SHAPE = re.compile(r"tensor<((?:\d+x)+)")
_TARGET = re.compile(r'ttg\.target\s*=\s*"([^"]+)"')


def _target(meta: dict, texts: dict[str, str]) -> str:
    tgt = meta.get("target")
    if isinstance(tgt, dict) and tgt.get("backend") and tgt.get("arch") is not None:
        return f"{tgt['backend']}:{tgt['arch']}"
    m = _TARGET.search(texts.get("ttgir", ""))
    return m.group(1) if m else "unknown"


def specialization_key(texts: dict[str, str], meta: dict) -> str:
    """A ref-independent key: TTIR argument types/hints, tensor shapes, launch options."""
    ttir = normalize_ir(texts.get("ttir", "") or texts.get("source", ""), "ttir")
    func = _FUNC.search(ttir)
    args = re.sub(r"%v\d+:\s*", "", func.group(1)) if func else "?"
    shapes = sorted({s.rstrip("x") for s in _SHAPE.findall(ttir)}, key=lambda s: (len(s), s))
    meta = dict(meta)
    for key, attr in (("num_warps", "ttg.num-warps"), ("num_ctas", "ttg.num-ctas")):
        found = re.search(rf'"{re.escape(attr)}"\s*=\s*(\d+)', texts.get("ttgir", ""))
        if key not in meta and found:  # dump directories have no metadata JSON
            meta[key] = int(found.group(1))
    opts = ",".join(f"{k}={meta[k]}" for k in ("num_warps", "num_stages", "num_ctas") if k in meta)
    return f"args({args}) shapes({' '.join(shapes)});{opts}"


def harvest(directory: Path, stages: tuple[str, ...], repo: Path | None = None) -> list[IRRecord]:
    """IRRecords for every kernel found under ``directory`` (recursively)."""
    if not directory.is_dir():
        raise PerfqError(f"{directory} is not a directory")
    records: list[IRRecord] = []
    seen: set[tuple[str, str, str, str]] = set()
    groups: dict[tuple[Path, str], dict[str, Path]] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith("__grp__"):
            continue
        stem, _, ext = path.name.rpartition(".")
        if ext in (*KNOWN_STAGES, "json", "source"):
            groups.setdefault((path.parent, stem), {})[ext] = path
    for (_parent, name), files in sorted(groups.items()):
        if not any(s in files for s in stages):
            continue
        meta: dict = {}
        if "json" in files:
            try:
                meta = json.loads(files["json"].read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError, UnicodeDecodeError):
                meta = {}
        texts = {}
        for ext in (*stages, "ttir", "ttgir", "source"):
            if ext in files and ext not in texts:
                try:
                    texts[ext] = files[ext].read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
        loc = _FILE_LOC.search(texts.get("ttir", "") or texts.get("source", ""))
        source_file = loc.group(1) if loc else ""
        function = str(meta.get("name") or name)
        kernel = f"{Path(source_file).stem or 'unknown'}:{function}"
        target = _target(meta, texts)
        spec = specialization_key(texts, meta)
        for stage in stages:
            if stage not in texts:
                continue
            key = (kernel, spec, target, stage)
            if key in seen:
                continue
            seen.add(key)
            rel = relative_source(source_file, repo)
            records.append(IRRecord(
                kernel=kernel, specialization=spec, target=target, stage=stage, raw=texts[stage],
                source_file=rel, function=function, triton_version=str(meta.get("triton_version", "")),
                spec={"harvested_from": str(files[stage]), "hash": meta.get("hash", "")},
            ))
    return records
