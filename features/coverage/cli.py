"""CLI for `perfq coverage`: operators without benchmarks ranked by churn, and `--scaffold OP`."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import duckdb
import typer

from perfq.common.cli import DbOption, RepoOption, resolve_db, resolve_repo
from perfq.common.render import console
from perfq.coverage.report import CoverageReport
from perfq.errors import PerfqError


class CoverageFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    html = "html"


def open_index(path: Path) -> duckdb.DuckDBPyConnection:
    """Open the index read-only; a missing file says to run `perfq index`."""
    from perfq.schema.db import open_db

    if not path.exists():
        raise PerfqError(f"no perfq index at {path}; run `perfq index` first")
    con = open_db(path, read_only=True)
    try:
        con.execute("SELECT 1 FROM ops LIMIT 1")
    except duckdb.Error:
        con.close()
        raise PerfqError(f"{path} is not a perfq index (no ops table); run `perfq index`") from None
    return con


def parse_dispatch(value: str | None) -> list[str]:
    return [k.strip() for k in (value or "").split(",") if k.strip()]


DEFAULT_INFRA_OPS = 200  # a changed function reaching more operators than this is shared infrastructure


def infra_bound(cfg_extra: dict, override: int | None) -> int:
    """The churn infrastructure bound: ``--infra-ops``, else ``[tool.perfq] coverage_infra_ops``, else 200."""
    if override is not None:
        return override
    value = cfg_extra.get("coverage_infra_ops", DEFAULT_INFRA_OPS)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PerfqError(f"[tool.perfq] coverage_infra_ops must be a positive integer, not {value!r}")
    return value


def collect_report(
    repo: Path,
    db: Path,
    since: str,
    dispatch: list[str],
    top: int | None,
    uncovered_only: bool = False,
    infra_ops: int | None = None,
) -> CoverageReport:
    """Load facts, compute churn from git history, build the report."""
    from perfq.config import load_config
    from perfq.coverage.churn import op_churn
    from perfq.coverage.facts import load_facts
    from perfq.coverage.report import build_report

    cfg = load_config(repo)
    bound = infra_bound(cfg.extra, infra_ops)
    con = open_index(db)
    try:
        facts = load_facts(con)
        op_commits, note = op_churn(repo, con, since, max_depth=cfg.max_depth, reach_bound=bound)
    finally:
        con.close()
    return build_report(facts, op_commits, dispatch=dispatch, top=top, uncovered_only=uncovered_only, history_note=note)


def _write(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PerfqError(f"cannot write {out}: {exc.strerror or exc}") from None
    console(stderr=True).print(f"wrote {out}")


def run_scaffold(repo: Path, db: Path, op: str, out: Path | None, force: bool) -> None:
    """Resolve ``op`` in the index and write its scaffolded benchmark."""
    from perfq.coverage.scaffold import pick_overload, scaffold

    con = open_index(db)
    try:
        namespace, _, bare = op.rpartition("::")
        namespace = namespace or "aten"
        name = bare if namespace == "aten" else op
        rows = con.execute("SELECT name, namespace, schema FROM ops WHERE name = ?", [name]).fetchall()
        if not rows:
            rows = con.execute(
                "SELECT name, namespace, schema FROM ops WHERE base = ? AND namespace = ?", [bare, namespace]
            ).fetchall()
        if not rows:
            raise PerfqError(f"unknown operator {op!r} (not in the index's ops)")
        chosen = pick_overload([r[2] for r in rows])
        _, namespace, schema = next(r for r in rows if r[2] == chosen)
        benches = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT bench FROM bench_ops WHERE op IN (SELECT unnest(?)) ORDER BY 1",
                [[r[0] for r in rows]],
            ).fetchall()
        ]
    finally:
        con.close()
    result = scaffold(schema, namespace=namespace)
    err = console(stderr=True)
    if benches:
        err.print(f"note: {op} is already covered by {', '.join(benches)}")
    if out is None:
        pt = repo / "benchmarks" / "operator_benchmark" / "pt"
        out = (pt if pt.is_dir() else Path.cwd()) / result.filename
    if out.exists() and not force:
        raise PerfqError(f"{out} exists; pass --force to overwrite or --out to choose another file")
    _write(result.text, out)
    bench_root = repo / "benchmarks" / "operator_benchmark"
    if out.resolve().parent == (bench_root / "pt").resolve():
        how = f"cd {bench_root} && python -m pt.{out.stem} --tag-filter short"
    else:
        how = f"cd <pytorch>/benchmarks/operator_benchmark && PYTHONPATH=. python {out.resolve()} --tag-filter short"
    err.print(f"benchmark for {result.op} calls {result.call}; run it with: {how}", markup=False)


def register(app: typer.Typer) -> None:
    """Add `perfq coverage` to ``app``."""

    @app.command()
    def coverage(
        since: Annotated[str, typer.Option("--since", help="History period (git approxidate).")] = "180.days",
        dispatch: Annotated[
            str | None,
            typer.Option("--dispatch", help="Only operators with any of these dispatch keys (CPU,CUDA)."),
        ] = None,
        top: Annotated[int | None, typer.Option("--top", min=0, help="Show the first N operators.")] = None,
        uncovered: Annotated[bool, typer.Option("--uncovered", help="Only operators without a benchmark.")] = False,
        fmt: Annotated[CoverageFormat, typer.Option("--format", help="Output format.")] = (CoverageFormat.table),
        out: Annotated[
            Path | None, typer.Option("--out", help="Write the report (or the scaffold) to this file.")
        ] = None,
        scaffold: Annotated[
            str | None,
            typer.Option("--scaffold", metavar="OP", help="Write an operator_benchmark file for OP instead."),
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="With --scaffold: overwrite the file.")] = False,
        infra_ops: Annotated[
            int | None,
            typer.Option(
                "--infra-ops",
                min=1,
                help="Churn: a changed function reaching more operators than "
                "this is shared infrastructure and counts for none (default 200).",
            ),
        ] = None,
        repo: Path | None = RepoOption,
        db: Path | None = DbOption,
    ) -> None:
        """Operators without benchmarks, ranked by how often their kernels changed; or scaffold one."""
        root = resolve_repo(repo)
        index = resolve_db(root, db)
        if scaffold:
            run_scaffold(root, index, scaffold, out, force)
            return
        from perfq.coverage import render as render

        report = collect_report(root, index, since, parse_dispatch(dispatch), top, uncovered, infra_ops)
        if fmt is CoverageFormat.json:
            _write(render.to_json_text(report), out)
        elif fmt is CoverageFormat.csv:
            _write(render.to_csv(report), out)
        elif fmt is CoverageFormat.markdown:
            _write(render.to_markdown(report), out)
        elif fmt is CoverageFormat.html:
            _write(render.to_html(report), out)
        elif out is not None:
            _write(render.to_text(report), out)
        else:
            con = console()
            con.print(render.to_rich_table(report))
            for line in render.summary_lines(report)[1:]:
                con.print(line, markup=False)
