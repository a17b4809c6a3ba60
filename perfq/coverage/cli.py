"""CLI for `perfq coverage`: operators without benchmarks ranked by churn, and `--scaffold OP`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from common.errors import PerfqError
from common.render import plain
from perfq.coverage.pipeline import CoverageRequest, coverage_report
from perfq.options import DbOpt, RepoOpt, resolve_db, resolve_repo
from perfq.terminal import console, write_output


class CoverageFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    html = "html"


def parse_dispatch(value: str | None) -> list[str]:
    return [k.strip() for k in (value or "").split(",") if k.strip()]


_RANK, _OUT, _SCAFFOLD = "What to rank", "Output", "Scaffold"
def run_scaffold(repo: Path, db: Path, op: str, out: Path | None, force: bool) -> None:
    """Resolve ``op`` in the index and write its scaffolded benchmark."""
    from perfq.coverage.report import PRIMARY_KEY, key_gaps
    from perfq.coverage.scaffold import pick_overload, scaffold
    from schema.index_store import IndexStore
    from schema.reader import open_index

    namespace, _, bare = op.rpartition("::")
    namespace = namespace or "aten"
    with open_index(db) as con:
        store = IndexStore(con)
        rows = store.ops_named(bare if namespace == "aten" else op) or store.ops_of_base(bare, namespace)
        if not rows:
            raise PerfqError(f"unknown operator {op!r} (not in the index's ops)")
        chosen = next(r for r in rows if r.schema == pick_overload([r.schema for r in rows]))
        benches = store.benchmarks_of_ops([r.name for r in rows])
        group = {r.name for r in store.ops_of_base(chosen.base, chosen.namespace)} | {r.name for r in rows}
        layouts = set().union(*store.traced_layouts(sorted(group)).values())
        gaps, ran = key_gaps({k.dispatch_key for k in store.kernels() if k.op in group}, layouts)
    namespace, schema = chosen.namespace, chosen.schema
    result = scaffold(schema, namespace=namespace)
    if out is None:
        pt = repo / "benchmarks" / "operator_benchmark" / "pt"
        out = (pt if pt.is_dir() else Path.cwd()) / result.filename
    if out.exists() and not force:  # before any note: an error is the one line printed
        raise PerfqError(f"{out} exists; pass --force to overwrite or --out to choose another file")
    err = console(stderr=True)
    if PRIMARY_KEY in gaps:
        err.print(f"note: {op} has NO BENCHMARK on {', '.join(gaps)}: {', '.join(benches)} run it only on "
                  f"{', '.join(ran)}; this scaffold times its {PRIMARY_KEY} kernel", markup=False)
    elif benches:
        err.print(f"note: {op} is already covered by {', '.join(benches)}")
    write_output(result.text, out)
    bench_root = repo / "benchmarks" / "operator_benchmark"
    if out.resolve().parent == (bench_root / "pt").resolve():
        how = f"cd {bench_root} && python -m pt.{out.stem} --tag-filter short"
    else:
        how = f"cd <pytorch>/benchmarks/operator_benchmark && PYTHONPATH=. python {out.resolve()} --tag-filter short"
    err.print(f"benchmark for {result.op} calls {result.call}; run it with: {how}", markup=False)


def register(app: typer.Typer) -> None:
    """Add `perfq coverage` to ``app``."""
    app.command()(coverage)


def coverage(
    since: Annotated[str, typer.Option("--since", rich_help_panel=_RANK,
        help="History period for churn (git approxidate).")] = "180.days",
    dispatch: Annotated[str | None, typer.Option("--dispatch", rich_help_panel=_RANK,
        help="Only operators with any of these dispatch keys (CPU,CUDA).")] = None,
    top: Annotated[int | None, typer.Option("--top", min=0, rich_help_panel=_RANK,
        help="Show the first N operators.")] = None,
    uncovered: Annotated[bool, typer.Option("--uncovered", rich_help_panel=_RANK,
        help="Only operators without a benchmark.")] = False,
    infra_ops: Annotated[int | None, typer.Option("--infra-ops", min=1, rich_help_panel=_RANK,
        help="Churn: a changed function reaching more operators than this is shared infrastructure "
             "and counts for none (default 200).")] = None,
    fmt: Annotated[CoverageFormat, typer.Option("--format", metavar="FORMAT", rich_help_panel=_OUT,
        help="table, csv, json, markdown, or html (one self-contained page: sort, filter, charts).")
        ] = CoverageFormat.table,
    out: Annotated[Path | None, typer.Option("--out", rich_help_panel=_OUT,
        help="Write the report (or the scaffold) to this file.")] = None,
    link_base: Annotated[str | None, typer.Option("--link-base", rich_help_panel=_OUT,
        help="HTML: where kernel and benchmark links point, e.g. "
             "https://github.com/pytorch/pytorch/blob/v2.6.0 (default: file:// of the checkout).")] = None,
    scaffold: Annotated[str | None, typer.Option("--scaffold", metavar="OP", rich_help_panel=_SCAFFOLD,
        help="Write an operator_benchmark file for OP instead of a report.")] = None,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=_SCAFFOLD,
        help="With --scaffold: overwrite the file.")] = False,
    repo: RepoOpt = None,
    db: DbOpt = None,
) -> None:
    """Operators without benchmarks, ranked by how often their kernels changed; or scaffold one.

    Examples:

        perfq coverage --uncovered --top 20

        perfq coverage --format html --out coverage.html --link-base https://github.com/pytorch/pytorch/blob/v2.6.0

        perfq coverage --scaffold lerp
    """
    root = resolve_repo(repo)
    index = resolve_db(root, db)
    if scaffold is not None:
        if not scaffold.strip():
            raise PerfqError("--scaffold needs an operator name, e.g. --scaffold add.Tensor")
        run_scaffold(root, index, scaffold.strip(), out, force)
        return
    from perfq.coverage import render as render

    report = coverage_report(CoverageRequest(root, index, since, tuple(parse_dispatch(dispatch)), top, uncovered,
                                             infra_ops))
    if fmt is CoverageFormat.json:
        write_output(render.to_json_text(report), out)
    elif fmt is CoverageFormat.csv:
        write_output(render.to_csv(report), out)
    elif fmt is CoverageFormat.markdown:
        write_output(render.to_markdown(report), out)
    elif fmt is CoverageFormat.html:
        write_output(render.to_html(report, link_base=link_base or root.resolve().as_uri()), out)
    elif out is not None:
        write_output(render.to_text(report), out)
    else:
        con = console()
        con.print(render.to_rich_table(report))
        for line in render.summary_lines(report)[1:]:
            con.print(plain(line), markup=False)
