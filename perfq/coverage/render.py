"""Renderers for a coverage report: rich table, CSV, JSON, markdown and a self-contained HTML page.

The HTML page embeds its CSS and SVG charts (no script, no network): summary cards, the top
uncovered operators by churn (or kernel size without history), coverage by area and by
dispatch key, the ranked table and the stale benchmark files.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from common.render import finite_json, html_text, md_code, md_text, plain
from perfq.coverage.report import CoverageReport, LinkSource, OpRow, covered_text, gap_text
from perfq.terminal import Name, folded_table

NO_BENCHMARK = "NO BENCHMARK"
CSV_FIELDS = [
    "rank",
    "op",
    "covered",
    "churn",
    "kernel_lines",
    "dispatch_keys",
    "overloads",
    "benchmarks",
    "areas",
]



def period(since: str) -> str:
    """A git approxidate as words: ``180.days`` -> 'in the last 180 days', else 'since <it>'."""
    m = re.fullmatch(r"(\d+)[. _](day|week|month|year)s?(?:[. _]ago)?", since.strip())
    if m is None:
        return f"since {since}"
    n, unit = int(m.group(1)), m.group(2)
    return f"in the last {unit}" if n == 1 else f"in the last {n} {unit}s"

def _churn(row: OpRow) -> str:
    return "-" if row.churn is None else str(row.churn)


def headline(report: CoverageReport) -> str:
    """One line: covered/total and how the rows are ranked."""
    s = report.summary
    note = s.history.note if s.history is not None and s.history.note else ""
    line = (
        f"{s.ops_covered}/{s.ops_total} operators covered ({100 * s.ops_ratio:.1f}%), "
        f"{s.overloads_covered}/{s.overloads_total} overloads; ranked by {s.ranking}"
    )
    return f"{line}. {note}" if note else line


def link_marks(row: OpRow) -> dict[str, str]:
    """Benchmark -> its mark: `` (traced)`` when only links a trace saw found it, `` (inferred)`` when only
    links the trace inferred did (never "traced" for what no trace saw), '' when a static link did."""
    sources: dict[str, set[LinkSource]] = {}
    for link in row.links:
        sources.setdefault(link.bench, set()).add(link.source)
    marks = {}
    for bench in row.benchmarks:
        found = sources.get(bench, {LinkSource.static})
        marks[bench] = ("" if LinkSource.static in found else " (traced)" if LinkSource.traced in found
                        else " (inferred)")
    return marks


def bench_labels(row: OpRow) -> str:
    """Benchmarks of a row, each with its :func:`link_marks` mark."""
    return ", ".join(f"{b}{mark}" for b, mark in link_marks(row).items())


def _short_keys(keys: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" +{len(keys) - limit}" if len(keys) > limit else "")


def to_rich_table(report: CoverageReport) -> Table:
    """The ranked rows, coverage first (NO BENCHMARK in red), names folded: legible at 80 columns."""
    table = folded_table(("benchmarks", "f"), ("#", "r"), ("operator", "f"), ("churn", "r"), ("lines", "r"),
                         ("dispatch keys", "f"), ("ovl", "r"), title=escape(plain(headline(report))))
    for i, row in enumerate(report.rows, 1):
        uncovered = f"[bold red]{escape(gap_text(row) or NO_BENCHMARK)}[/]"
        benches = Name(covered_text(row, bench_labels(row))) if row.covered else uncovered
        table.add_row(
            benches,
            str(i),
            Name(row.op),
            _churn(row),
            str(row.kernel_lines),
            Name(_short_keys(row.dispatch_keys)),
            str(len(row.overloads)),
        )
    return table


def to_text(report: CoverageReport, width: int = 200) -> str:
    """The rich table and summary as plain text (for ``--format table --out FILE``)."""
    con = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    con.print(to_rich_table(report))
    for line in summary_lines(report)[1:]:
        con.print(plain(line), markup=False)
    return con.export_text()


def summary_lines(report: CoverageReport, limit: int = 12) -> list[str]:
    """Plain-text summary: by dispatch key, by area, stale benchmarks."""
    s = report.summary
    out = [headline(report)]
    for title, key in (("by dispatch key", "by_dispatch_key"), ("by area", "by_area")):
        items = list(getattr(s, key).items())
        parts = [f"{k} {v.covered}/{v.total}" for k, v in items[:limit]]
        more = f", ... (+{len(items) - limit})" if len(items) > limit else ""
        out.append(f"{title}: " + ", ".join(parts) + more)
    stale = s.stale_benchmarks
    if stale:
        out.append("benchmarks covering nothing that exists: " + ", ".join(f"{b.bench} ({b.file})" for b in stale))
    unlinked = s.unlinked_benchmarks
    if unlinked:
        out.append(f"benchmark files linked to no operator ({len(unlinked)}): " + ", ".join(unlinked))
    return out


def to_csv(report: CoverageReport) -> str:
    """One line per operator group; list fields are ';'-joined."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for i, row in enumerate(report.rows, 1):
        writer.writerow(
            [
                i,
                row.op,
                int(row.covered),
                "" if row.churn is None else row.churn,
                row.kernel_lines,
                ";".join(row.dispatch_keys),
                ";".join(row.overloads),
                ";".join(row.benchmarks),
                ";".join(row.areas),
            ]
        )
    return buf.getvalue()


def to_json_text(report: CoverageReport) -> str:
    return json.dumps(finite_json(report.to_json()), indent=2, allow_nan=False) + "\n"


def to_markdown(report: CoverageReport) -> str:
    """A markdown summary and table."""
    s = report.summary
    lines = ["# Operator benchmark coverage", "", headline(report), ""]
    lines += [
        "| # | operator | churn | kernel lines | dispatch keys | overloads | benchmarks |",
        "|---:|---|---:|---:|---|---|---|",
    ]
    for i, row in enumerate(report.rows, 1):
        uncovered = f"**{md_text(gap_text(row) or NO_BENCHMARK)}**"
        benches = md_text(covered_text(row, bench_labels(row))) if row.covered else uncovered
        lines.append(
            f"| {i} | {md_code(row.op)} | {_churn(row)} | {row.kernel_lines} "
            f"| {md_text(', '.join(row.dispatch_keys))} "
            f"| {md_text(', '.join(row.overloads))} | {benches} |"
        )
    for title, key in (("By dispatch key", "by_dispatch_key"), ("By area", "by_area")):
        lines += ["", f"## {title}", "", "| | covered | total | % |", "|---|---:|---:|---:|"]
        for k, v in getattr(s, key).items():
            lines.append(f"| {md_text(k)} | {v.covered} | {v.total} | {100 * v.ratio:.1f} |")
    lines += ["", "## Benchmarks covering nothing that exists any more", ""]
    lines += [f"- {md_code(b.bench)} ({md_text(b.file)}): {md_text(', '.join(b.ops))}" for b in s.stale_benchmarks
              ] or ["- none"]
    unlinked = s.unlinked_benchmarks
    lines += ["", "## Benchmark files linked to no operator", ""]
    lines += [f"- {md_code(b)}" for b in unlinked] or ["- none"]
    return "\n".join(lines) + "\n"


# --- HTML ------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1f2933;background:#f7f8fa}
h1{margin:0 0 4px}h2{margin:28px 0 8px;font-size:18px}.sub{color:#52606d;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border-radius:8px;padding:12px 16px;
box-shadow:0 1px 3px rgba(0,0,0,.12);min-width:150px}.card .v{font-size:26px;font-weight:700}
.card .l{color:#616e7c;font-size:13px}.panel{background:#fff;border-radius:8px;padding:12px;
box-shadow:0 1px 3px rgba(0,0,0,.12);margin-top:8px;overflow-x:auto}
.tools{display:flex;gap:16px;align-items:center;margin-bottom:8px;font-size:14px}
.tools input[type=search]{width:28em;padding:4px 8px}#shown{color:#52606d}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #e4e7eb;text-align:left;vertical-align:top}
th{cursor:pointer;user-select:none;white-space:nowrap;background:#f0f2f5;position:sticky;top:0}
th[data-dir=asc]::after{content:" \25B2"}th[data-dir=desc]::after{content:" \25BC"}
td.n{text-align:right}td.cov{min-width:9em;max-width:16em}td.op{max-width:20em}
td.wrap{overflow-wrap:break-word;max-width:13em}td.ovl{max-width:16em}
.nob{white-space:nowrap}details{display:inline}summary{cursor:pointer;color:#616e7c}
.nob{color:#c62828;font-weight:700}.more{color:#616e7c;font-size:12px}a{color:#1a4fa0}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
svg text{font-size:12px;fill:#1f2933}code{font-size:12px}
"""

# Sort by a click on a column header (numbers by data-v), filter by text and to NO BENCHMARK rows; the
# view lives in the address's #fragment (q=TEXT&nob=1&sort=COLUMN:asc|desc) so it can be shared.
_JS = """
(function(){
const t=document.getElementById('ops');if(!t)return;
const q=document.getElementById('q'),nob=document.getElementById('nob'),shown=document.getElementById('shown');
const body=t.tBodies[0],rows=Array.from(body.rows),heads=t.tHead.rows[0].cells;let sort='';
function save(){const p=new URLSearchParams();if(q.value)p.set('q',q.value);if(nob.checked)p.set('nob','1');
if(sort)p.set('sort',sort);history.replaceState(null,'','#'+p.toString());}
function apply(){const s=q.value.trim().toLowerCase();let n=0;
for(const r of rows){const ok=(!nob.checked||r.dataset.covered==='0')&&(!s||r.dataset.text.includes(s));
r.hidden=!ok;if(ok)n++;}shown.textContent=n+' of '+rows.length+' operators shown';}
function sortBy(i,dir){const th=heads[i];if(!th)return;const num=th.dataset.type==='num';
for(const h of heads)delete h.dataset.dir;th.dataset.dir=dir;sort=i+':'+dir;
const key=function(r){const c=r.cells[i],v=c.dataset.v!==undefined?c.dataset.v:c.textContent;
return num?parseFloat(v):v.toLowerCase();};
rows.sort(function(a,b){const x=key(a),y=key(b);return (x<y?-1:x>y?1:0)*(dir==='asc'?1:-1);});
for(const r of rows)body.appendChild(r);}
q.addEventListener('input',function(){apply();save();});nob.addEventListener('change',function(){apply();save();});
t.tHead.addEventListener('click',function(e){const th=e.target.closest('th');if(!th)return;
sortBy(th.cellIndex,th.dataset.dir==='asc'?'desc':'asc');save();});
const p=new URLSearchParams(location.hash.slice(1));
if(p.has('q'))q.value=p.get('q');if(p.get('nob')==='1')nob.checked=true;
if(p.has('sort')){const s=p.get('sort').split(':');sortBy(parseInt(s[0],10),s[1]==='desc'?'desc':'asc');}
apply();})();
"""
COVERED, UNCOVERED, ACCENT = "#2e7d32", "#e57373", "#3f51b5"
_CHAR_W = 7  # px per character of a 12px label (generous: labels are never cut)


def _label_width(labels: Sequence[str]) -> int:
    return 12 + _CHAR_W * max((len(label) for label in labels), default=10)


def _bar_chart(items: Sequence[tuple[str, float]], color: str, unit: str) -> str:
    """Horizontal bars, one per (label, value); labels in full."""
    if not items:
        return "<p>nothing to show</p>"
    label_w, bar_w, row_h = _label_width([label for label, _ in items]), 520, 20
    peak = max(v for _, v in items) or 1
    height = row_h * len(items) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" role="img">']
    for i, (label, value) in enumerate(items):
        y = 5 + i * row_h
        w = max(1.0, bar_w * value / peak) if value else 0
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{html_text(label)}</text>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" fill="{color}" rx="2">'
            f"<title>{html_text(label)}: {value:g} {unit}</title></rect>"
        )
        parts.append(f'<text x="{label_w + w + 5:.1f}" y="{y + 14}">{value:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _stacked_chart(items: Sequence[tuple[str, int, int]]) -> str:
    """Stacked bars of covered (green) and uncovered (red) counts, one per (label, total, covered)."""
    if not items:
        return "<p>nothing to show</p>"
    label_w, bar_w, row_h = _label_width([label for label, _, _ in items]), 480, 20
    peak = max(t for _, t, _ in items) or 1
    height = row_h * len(items) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 120}" height="{height}" role="img">']
    for i, (label, total, covered) in enumerate(items):
        y = 5 + i * row_h
        wc = bar_w * covered / peak
        wu = bar_w * (total - covered) / peak
        pct = 100 * covered / total if total else 0
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{html_text(label)}</text>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{wc:.1f}" height="{row_h - 5}" fill="{COVERED}">'
            f"<title>{html_text(label)}: {covered} covered</title></rect>"
        )
        parts.append(
            f'<rect x="{label_w + wc:.1f}" y="{y + 2}" width="{wu:.1f}" height="{row_h - 5}" '
            f'fill="{UNCOVERED}"><title>{html_text(label)}: {total - covered} uncovered</title></rect>'
        )
        parts.append(f'<text x="{label_w + wc + wu + 5:.1f}" y="{y + 14}">{covered}/{total} ({pct:.0f}%)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    return (
        f'<div class="legend"><span style="background:{COVERED}"></span>covered'
        f'<span style="background:{UNCOVERED}"></span>no benchmark</div>'
    )


def source_href(link_base: str, path: str, line: int = 0) -> str:
    """The address of ``path`` (line ``line``) under ``link_base`` (a file:// root or a blob URL)."""
    anchor = f"#L{line}" if line else ""
    return html_text(f"{link_base.rstrip('/')}/{path}{anchor}")


def _a(link_base: str, path: str, line: int, text: str) -> str:
    """``text`` linked to ``path`` under ``link_base`` (plain ``text`` without a base)."""
    return f'<a href="{source_href(link_base, path, line)}">{text}</a>' if link_base and path else text


def _coverage_cell(row: OpRow, link_base: str) -> tuple[str, str]:
    """(sort key, cell HTML): NO BENCHMARK, or the benchmarks linked to their files."""
    if not row.covered:
        return "0", f'<span class="nob">{html_text(gap_text(row) or NO_BENCHMARK)}</span>'
    files = dict(zip(row.benchmarks, row.benchmark_files, strict=False))
    parts = [_a(link_base, files.get(b, ""), 0, html_text(b + mark)) for b, mark in link_marks(row).items()]
    return f"1:{','.join(row.benchmarks)}", ", ".join(parts)


def _operator_cell(row: OpRow, link_base: str) -> str:
    """The operator linked to its first kernel's source; every kernel file:line below it."""
    name = f"<code>{html_text(row.op)}</code>"
    if not row.kernel_sources:
        return name
    first = row.kernel_sources[0]
    kernels = [_a(link_base, k.path, k.line, html_text(f"{k.path.rsplit('/', 1)[-1]}:{k.line}"))
               for k in row.kernel_sources]
    return _a(link_base, first.path, first.line, name) + f'<div class="more">{_folded(kernels, 3)}</div>'


def _folded(items: Sequence[str], shown: int = 6) -> str:
    """The first ``shown`` items, the rest behind a "+N more" toggle (rows stay short)."""
    if len(items) <= shown:
        return ", ".join(items)
    rest = ", ".join(items[shown:])
    return ", ".join(items[:shown]) + f", <details><summary>+{len(items) - shown} more</summary>{rest}</details>"


def _ops_table(report: CoverageReport, link_base: str) -> list[str]:
    esc = html_text
    head = [("benchmarks", "text"), ("#", "num"), ("operator", "text"), ("churn", "num"), ("kernel lines", "num"),
            ("dispatch keys", "text"), ("overloads", "text")]
    out = [
        '<div class="tools"><input id="q" type="search" placeholder="filter: operator, overload, benchmark, '
        'dispatch key" aria-label="filter"><label><input id="nob" type="checkbox"> only NO BENCHMARK</label>'
        '<span id="shown"></span></div>',
        '<table id="ops"><thead><tr>' + "".join(f'<th data-type="{t}">{esc(h)}</th>' for h, t in head)
        + "</tr></thead><tbody>",
    ]
    for i, row in enumerate(report.rows, 1):
        key, cov = _coverage_cell(row, link_base)
        text = " ".join([row.op, *row.overloads, *row.benchmarks, *row.dispatch_keys,
                         "" if row.covered else NO_BENCHMARK]).lower()
        churn = -1 if row.churn is None else row.churn
        out.append(
            f'<tr data-covered="{int(row.covered)}" data-text="{esc(text)}">'
            f'<td class="cov" data-v="{esc(key)}">{cov}</td><td class="n">{i}</td>'
            f'<td class="op">{_operator_cell(row, link_base)}</td><td class="n" data-v="{churn}">{_churn(row)}</td>'
            f'<td class="n">{row.kernel_lines}</td><td class="wrap">{esc(", ".join(row.dispatch_keys))}</td>'
            f'<td class="wrap ovl">{_folded([esc(o) for o in row.overloads])}</td></tr>'
        )
    out.append("</tbody></table>")
    return out


def to_html(report: CoverageReport, chart_rows: int = 25, link_base: str = "") -> str:
    """A self-contained HTML page: inline CSS, SVG charts and a little script (sort, filter); no network.

    ``link_base`` is where operator kernels and benchmark files link to: a ``file://`` root of the
    checkout or a blob URL (``https://github.com/pytorch/pytorch/blob/<commit>``); '' links nowhere.
    """
    s = report.summary
    hist = s.history
    pool = list(report.ranked or report.rows)
    uncovered = [r for r in pool if not r.covered]
    by_churn = any(r.churn for r in uncovered)
    metric = "churn (commits)" if by_churn else "kernel lines"
    shown = [r for r in uncovered if r.churn] if by_churn else uncovered
    top = [(r.op, float(r.churn if by_churn else r.kernel_lines)) for r in shown[:chart_rows]]
    areas = [(k, v.total, v.covered) for k, v in s.by_area.items()][:chart_rows]
    keys = [(k, v.total, v.covered) for k, v in s.by_dispatch_key.items()][:chart_rows]
    esc = html_text
    cards = [
        (f"{s.ops_covered}/{s.ops_total}", "operators covered"),
        (f"{100 * s.ops_ratio:.1f}%", "coverage"),
        (f"{s.overloads_covered}/{s.overloads_total}", "overloads covered"),
        (str(hist.commits) if hist else "-", f"commits {period(hist.since) if hist else 'in the history'}"),
        (str(len(s.stale_benchmarks)), "stale benchmark files"),
    ]
    body = [
        "<h1>Operator benchmark coverage</h1>",
        f'<div class="sub">{esc(headline(report))}</div>',
        '<div class="cards">',
    ]
    body += [
        f'<div class="card"><div class="v">{esc(v)}</div><div class="l">{esc(label)}</div></div>' for v, label in cards
    ]
    body.append("</div>")
    body.append('<div class="sub">jump to: <a href="#charts">charts</a> · <a href="#stale">stale benchmark files</a>'
                "</div>")
    body.append('<h2>Operators (click a column to sort)</h2><div class="panel">')
    body += _ops_table(report, link_base)
    body.append("</div>")
    body.append(f'<h2 id="charts">Top uncovered operators by {esc(metric)}</h2>')
    body.append(f'<div class="panel">{_bar_chart(top, ACCENT, metric)}</div>')
    body.append("<h2>Coverage by area (folder of the kernel files)</h2>")
    body.append(f'<div class="panel">{_legend()}{_stacked_chart(areas)}</div>')
    body.append("<h2>Coverage by dispatch key</h2>")
    body.append(f'<div class="panel">{_legend()}{_stacked_chart(keys)}</div>')
    body.append('<h2 id="stale">Benchmark files covering nothing that exists any more</h2><div class="panel"><ul>')
    body += [
        f"<li><code>{esc(b.bench)}</code> ({esc(b.file)}): {esc(', '.join(b.ops))}</li>" for b in s.stale_benchmarks
    ] or ["<li>none</li>"]
    body.append("</ul></div>")
    unlinked = s.unlinked_benchmarks
    body.append('<h2>Benchmark files linked to no operator</h2><div class="panel"><ul>')
    body += [f"<li><code>{esc(b)}</code></li>" for b in unlinked] or ["<li>none</li>"]
    body.append("</ul></div>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>perfq coverage</title><style>" + _CSS + "</style></head><body>" + "\n".join(body)
        + "<script>" + _JS + "</script></body></html>\n"
    )
