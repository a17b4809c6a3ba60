"""Rendering a ``perfq bisect`` report document as text or markdown (pure)."""

from __future__ import annotations

from typing import Any


def _v(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _headline(doc: dict[str, Any]) -> list[str]:
    fb, lg, unit = doc.get("first_bad"), doc.get("last_good"), (doc.get("metric") or {}).get("unit") or ""
    lines = []
    if fb and doc["status"] in ("found", "ambiguous"):
        lines.append(f"first bad commit: {fb['commit']}")
        lines.append(f"  {fb.get('subject', '')}")
        if fb.get("author"):
            lines.append(f"  author {fb['author']}, {fb.get('date', '')}")
        if lg:
            lines.append(f"last good commit: {lg['commit'][:12]}  {lg.get('subject', '')}")
            lines.append(f"value: {_v(lg['value'])} -> {_v(fb['value'])} {unit} ({_pct(fb.get('change'))})")
    if doc.get("via_merge"):
        lines.append(f"(brought in by merge {doc['via_merge'][:12]})")
    return lines


def render_text(doc: dict[str, Any]) -> str:
    """A plain-text report for a terminal."""
    base = doc.get("baseline") or {}
    metric = doc.get("metric") or {}
    unit = metric.get("unit") or ""
    out = [f"status: {doc['status']}: {doc['message']}"]
    if doc.get("last_error") and doc["status"] in ("failures", "baseline_failed"):
        out.append(f"last failure: {doc['last_error']}")
    out += _headline(doc)
    if doc.get("suspects") and len(doc["suspects"]) > 1:
        out.append("the first bad commit is one of: " + ", ".join(c[:12] for c in doc["suspects"]))
    out.append(f"baselines: good {_v(base.get('good'))} {unit}, bad {_v(base.get('bad'))} {unit} "
               f"({_pct(base.get('change'))}); threshold {_v(base.get('threshold'))}; "
               f"{metric.get('polarity') or ''}")
    pr = doc.get("pruned") or {}
    if pr.get("commits"):
        out.append(f"pruned {pr['commits']} commit(s) that cannot reach the benchmark "
                   f"({pr['candidates']} candidates); about {pr['runs_saved_estimate']} run(s) saved")
    out.append(f"benchmark runs: {doc['runs']}; skipped: {len(doc['skipped'])}; "
               f"ambiguous: {len(doc.get('ambiguous', []))}")
    out.append("steps:")
    for s in doc["steps"]:
        vals = " ".join(_v(v) for v in s["values"][-8:])
        more = f" (+{len(s['values']) - 8} more)" if len(s["values"]) > 8 else ""
        note = f"  [{s['note']}]" if s.get("note") else ""
        out.append(f"  {s['phase']:<8} {s['commit'][:12]}  {s['verdict']:<9} {vals}{more}{note}")
    if doc.get("files"):
        out.append("files changed:")
        for f in doc["files"][:30]:
            out.append(f"  +{f['added'] if f['added'] is not None else '-'} "
                       f"-{f['removed'] if f['removed'] is not None else '-'}  {f['path']}")
    if doc.get("hints"):
        out.append("root-cause hints (leads, not a diagnosis):")
        for h in doc["hints"]:
            out.append(f"  {h['kind']}: {h['message']}\n    {h['file']}:{h['line']}: {h['text']}")
    return "\n".join(out)


def render_markdown(doc: dict[str, Any]) -> str:
    """A markdown report (for an issue or a PR comment)."""
    base = doc.get("baseline") or {}
    unit = (doc.get("metric") or {}).get("unit") or ""
    out = ["## perfq bisect", "", f"**{doc['status']}**: {doc['message']}", ""]
    fb, lg = doc.get("first_bad"), doc.get("last_good")
    if fb and doc["status"] in ("found", "ambiguous"):
        out += [f"- first bad: `{fb['commit']}` {fb.get('subject', '')} ({fb.get('author', '')}, "
                f"{fb.get('date', '')})"]
        if lg:
            out += [f"- last good: `{lg['commit'][:12]}` {lg.get('subject', '')}",
                    f"- value: {_v(lg['value'])} -> {_v(fb['value'])} {unit} ({_pct(fb.get('change'))})"]
    if doc.get("suspects") and len(doc["suspects"]) > 1:
        out.append("- could be any of: " + ", ".join(f"`{c[:12]}`" for c in doc["suspects"]))
    out += [f"- baselines: good {_v(base.get('good'))}, bad {_v(base.get('bad'))} "
            f"({_pct(base.get('change'))}), threshold {_v(base.get('threshold'))}",
            f"- benchmark runs: {doc['runs']}", "",
            "| phase | commit | verdict | values |", "|---|---|---|---|"]
    for s in doc["steps"]:
        out.append(f"| {s['phase']} | `{s['commit'][:12]}` | {s['verdict']} | "
                   f"{' '.join(_v(v) for v in s['values'])} |")
    if doc.get("files"):
        out += ["", "| file | + | - |", "|---|---|---|"]
        out += [f"| `{f['path']}` | {f['added']} | {f['removed']} |" for f in doc["files"][:30]]
    if doc.get("hints"):
        out += ["", "Root-cause hints (leads, not a diagnosis):"]
        out += [f"- **{h['kind']}** `{h['file']}:{h['line']}`: {h['message']} (`{h['text']}`)"
                for h in doc["hints"]]
    return "\n".join(out)
