"""CLI for `perfq ir`: collect / capture / harvest Triton IR, list labels, diff two labels."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from perfq.common.render import print_json
from perfq.errors import PerfqError
from perfq.options import EXIT_ERROR, EXIT_GATE, Format, HistoryOpt, RepoOpt, resolve_history, resolve_repo
from perfq.terminal import console, print_unified_diff

ir_app = typer.Typer(
    name="ir",
    help="Triton IR: collect it per ref, normalize it, and report which kernels changed.",
    no_args_is_help=True,
)

_STORE, _COMPILE, _FILTER, _OUT = "What to store", "What to compile", "Which IRs", "Output"
LabelOpt = Annotated[str, typer.Option("--label", "-l", rich_help_panel=_STORE,
                                       help="Name of this collection (e.g. a ref or commit).")]
TargetOpt = Annotated[list[str] | None, typer.Option(
    "--target", "-t", rich_help_panel=_COMPILE, help="Compile target backend:arch, repeatable (cuda:90, hip:gfx942).")]
StageOpt = Annotated[list[str] | None, typer.Option(
    "--stage", "-s", rich_help_panel=_FILTER, help="IR stages, comma-separated (default ttir,ttgir,llir).")]
ManifestOpt = Annotated[Path | None, typer.Option("--manifest", "-m", rich_help_panel=_COMPILE,
                                                  help="Manifest file (default perfq-ir.yaml).")]
KernelFilterOpt = Annotated[list[str] | None, typer.Option("--kernel", "-k", rich_help_panel=_FILTER,
                                                           help="Only kernels whose name contains this.")]
TargetFilterOpt = Annotated[list[str] | None, typer.Option("--target", "-t", rich_help_panel=_FILTER,
                                                           help="Only these targets.")]
CacheOpt = Annotated[bool, typer.Option(
    "--triton-cache", rich_help_panel=_COMPILE,
    help="Reuse Triton's cache instead of a fresh temporary TRITON_CACHE_DIR.")]
CommitOpt = Annotated[str | None, typer.Option("--commit", rich_help_panel=_STORE,
                                               help="Commit to record (default: HEAD of --repo).")]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
                                           help="table, json or markdown.")]


def _stages(values: list[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    from perfq.ir.collect import check_stages

    if not values:
        return default
    return check_stages(tuple(s.strip() for v in values for s in v.split(",") if s.strip()))


def _targets(values: list[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    from perfq.ir.collect import check_targets

    targets = tuple(t.strip() for v in (values or []) for t in v.split(",") if t.strip()) or default
    return check_targets(targets)


def _report_collect(label: str, result, stored: int, fmt: Format, collection_id: str, **extra: Any) -> None:
    from perfq.ir.report import IRCollectDocument

    doc = IRCollectDocument(label, result.triton_version, stored, result.compiles, round(result.seconds, 2),
                            tuple(result.errors), collection_id, **extra)
    if fmt == Format.json:
        print_json(doc.to_json())
    else:
        err = console(stderr=True)
        for e in result.errors:
            err.print(f"[yellow]warning:[/] {e}", markup=True, highlight=False)
        console().print(
            f"{label}: stored {stored} IRs from {result.compiles} compiles in {result.seconds:.1f}s "
            f"(triton {result.triton_version}, {len(result.errors)} errors)"
        )
    if stored == 0:
        raise typer.Exit(EXIT_ERROR)


def _store(history: Path, label: str, source: str, records, repo: Path, commit: str | None, details: dict):
    from perfq.ir.collect import git_commit
    from perfq.ir.store import store_collection

    return store_collection(
        history, label, source, records, commit if commit is not None else git_commit(repo), details
    )


@ir_app.command()
def collect(
    label: LabelOpt,
    target: TargetOpt = None,
    stage: StageOpt = None,
    manifest: ManifestOpt = None,
    kernel: KernelFilterOpt = None,
    triton_cache: CacheOpt = False,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Compile the manifest's kernels for each target and store every IR under LABEL.

    Examples:

        perfq ir collect --label base --target cuda:90 --target hip:gfx942

        perfq ir collect -l head -m perfq-ir.yaml -k softmax --stage ttir,ttgir
    """
    from dataclasses import replace

    from perfq.ir.collect import collect as run_collect
    from perfq.ir.collect import require_triton
    from perfq.ir.manifest import load_manifest

    repo_path = resolve_repo(repo)
    require_triton()
    spec = load_manifest(repo_path, manifest)
    if kernel:
        spec = replace(spec, kernels=tuple(k for k in spec.kernels if any(s in k.kernel for s in kernel)))
        if not spec.kernels:
            raise PerfqError(f"no manifest kernel matches {', '.join(kernel)}")
    targets = _targets(target, spec.targets)
    stages = _stages(stage, spec.stages)
    result = run_collect(spec, targets, stages, repo_path, fresh_cache=not triton_cache)
    details = {"targets": targets, "stages": stages, "manifest": spec.origin, "errors": result.errors,
               "seconds": round(result.seconds, 2)}
    cid = _store(resolve_history(repo_path, history), label, "manifest", result.records, repo_path, commit,
                 details)
    _report_collect(label, result, len(result.records), fmt, cid)


@ir_app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(
    ctx: typer.Context,
    label: LabelOpt,
    target: TargetOpt = None,
    stage: StageOpt = None,
    triton_cache: CacheOpt = False,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Run `-- COMMAND...` (a benchmark), record every Triton specialization it compiles or
    launches (TRITON_INTERPRET=1 works on CPU), then compile them for each target.

    Examples:

        perfq ir capture --label head --target cuda:90 -- python bench.py --size 4096

        TRITON_INTERPRET=1 perfq ir capture -l base -t hip:gfx942 -- python -m pt.softmax_test
    """
    from perfq.ir.capture import capture as run_capture
    from perfq.ir.collect import require_triton
    from perfq.ir.compile import DEFAULT_STAGES

    repo_path = resolve_repo(repo)
    require_triton()
    command = list(ctx.args)
    targets = _targets(target, ("cuda:90",) if not target else ())
    stages = _stages(stage, DEFAULT_STAGES)
    status, result, n_specs = run_capture(command, targets, stages, Path.cwd(), repo_path,
                                          fresh_cache=not triton_cache)
    if status != 0:
        result.errors.insert(0, f"command exited with status {status}")
    if n_specs == 0:
        result.errors.append("no Triton specialization was compiled or launched by the command")
    details = {"targets": targets, "stages": stages, "command": command, "command_status": status,
               "specializations": n_specs, "errors": result.errors}
    cid = _store(resolve_history(repo_path, history), label, "capture", result.records, repo_path, commit,
                 details)
    _report_collect(label, result, len(result.records), fmt, cid, specializations=n_specs, command_status=status)


@ir_app.command()
def harvest(
    label: LabelOpt,
    directory: Annotated[
        Path | None, typer.Argument(help="Cache/dump dir (default $TRITON_DUMP_DIR, $TRITON_CACHE_DIR, "
                                         "~/.triton/cache).")
    ] = None,
    stage: StageOpt = None,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Import the IR files a run left in a Triton cache or dump directory.

    Examples:

        perfq ir harvest ~/.triton/cache --label base

        TRITON_DUMP_DIR=dump python bench.py && perfq ir harvest dump --label head
    """
    import time

    from perfq.ir.collect import CollectResult
    from perfq.ir.compile import DEFAULT_STAGES
    from perfq.ir.harvest import harvest as run_harvest

    repo_path = resolve_repo(repo)
    if directory is None:
        env = os.environ.get("TRITON_DUMP_DIR") or os.environ.get("TRITON_CACHE_DIR")
        directory = Path(env) if env else Path.home() / ".triton" / "cache"
    stages = _stages(stage, DEFAULT_STAGES)
    start = time.perf_counter()
    records = run_harvest(directory, stages, repo_path)
    versions = sorted({r.triton_version for r in records if r.triton_version})
    result = CollectResult(records, [], 0, time.perf_counter() - start, ",".join(versions))
    if not records:
        result.errors.append(f"no Triton IR files ({', '.join(stages)}) found under {directory}")
    cid = _store(resolve_history(repo_path, history), label, "harvest", records, repo_path, commit,
                 {"directory": str(directory), "stages": stages})
    _report_collect(label, result, len(records), fmt, cid, directory=str(directory))


@ir_app.command("list")
def list_labels(
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """List the stored IR collections (label, number of IRs, Triton versions).

    Examples:

        perfq ir list

        perfq ir list --format json
    """
    from perfq.ir.store import labels, open_for_reading

    con = open_for_reading(resolve_history(resolve_repo(repo), history))
    try:
        rows = labels(con)
    finally:
        con.close()
    if fmt == Format.json:
        print_json([row._asdict() for row in rows])
        return
    for row in rows:
        print(f"{row.label}\t{row.irs} IRs\ttriton {row.triton_version}")


def _render_terminal(diffs, raw: bool, no_diff: bool) -> None:
    from rich.markup import escape

    from perfq.ir.diff import IDENTICAL, buckets, format_delta
    from perfq.ir.report import summary_line

    con = console()
    colors = {"structural": "red", "attributes-only": "yellow", "added": "cyan", "removed": "magenta"}
    con.print(summary_line(diffs), soft_wrap=True)
    groups = buckets(diffs)
    if groups:
        con.print("[bold]triage:[/]")
        for bucket, group in groups:
            con.print(f"  {len(group):3d} x {escape(bucket)}", soft_wrap=True)
        con.print("[bold]changed:[/]")
        width = max(len(d.kernel) for d in diffs if d.status != IDENTICAL)
        several = len({d.specialization for d in diffs}) > 1
        for d in diffs:
            if d.status == IDENTICAL:
                continue
            spec = f"  [dim]{escape(d.specialization)}[/]" if several else ""
            con.print(
                f"  [{colors[d.status]}]{d.status:<15}[/] {escape(d.kernel):<{width}}  {d.target:<11}"
                f" {d.stage:<6} {escape(format_delta(d.op_delta, 6))}{spec}",
                soft_wrap=True,
            )
    if no_diff:
        return
    for d in diffs:
        if d.status == IDENTICAL and not (raw and d.raw_diff):
            continue
        con.print(f"\n[bold]{escape(d.kernel)}[/] {d.target} {d.stage}: {d.status}"
                  f"  ({escape(d.specialization)})", soft_wrap=True)
        print_unified_diff(d.diff)
        if raw and d.raw_diff:
            con.print("[bold]raw diff:[/]")
            print_unified_diff(d.raw_diff)


@ir_app.command()
def diff(
    a: Annotated[str, typer.Argument(help="Label of the base collection.")],
    b: Annotated[str, typer.Argument(help="Label of the new collection.")],
    fmt: FormatOpt = Format.table,
    raw: Annotated[bool, typer.Option("--raw", rich_help_panel=_OUT,
                                      help="Show the diff of the raw (unnormalized) IR too.")] = False,
    no_diff: Annotated[bool, typer.Option("--no-diff", rich_help_panel=_OUT,
                                          help="Table only (no unified diffs).")] = False,
    kernel: KernelFilterOpt = None,
    target: TargetFilterOpt = None,
    stage: StageOpt = None,
    context: Annotated[int, typer.Option("--context", "-U", rich_help_panel=_OUT,
                                         help="Lines of context in diffs.")] = 3,
    fail_on_change: Annotated[bool, typer.Option("--fail-on-change", rich_help_panel=_OUT,
                                                 help=f"Exit {EXIT_GATE} when any IR changed.")] = False,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Per kernel/target/stage: identical, attributes-only or structural, with op-count deltas
    and diffs of the normalized IR. Exits 0 whatever changed (unless --fail-on-change).

    Examples:

        perfq ir diff base head

        perfq ir diff base head -k softmax --stage ttgir --format markdown > ir.md

        perfq ir diff base head --no-diff --fail-on-change
    """
    from perfq.ir.diff import IDENTICAL, diff_collections, load_collection
    from perfq.ir.report import to_json, to_markdown
    from perfq.ir.store import labels, open_for_reading

    con = open_for_reading(resolve_history(resolve_repo(repo), history))
    try:
        known = [row.label for row in labels(con)]
        for lbl in (a, b):
            if lbl not in known:
                raise PerfqError(f"no IR collection labelled {lbl!r}; known: {', '.join(known) or 'none'}")
        col_a, col_b = load_collection(con, a), load_collection(con, b)
    finally:
        con.close()
    stages = set(_stages(stage, ())) if stage else None
    targets = {t.strip() for v in target for t in v.split(",")} if target else None

    def keep(key) -> bool:
        return ((not kernel or any(k in key.kernel for k in kernel)) and (targets is None or key.target in targets)
                and (stages is None or key.stage in stages))

    col_a = {k: v for k, v in col_a.items() if keep(k)}
    col_b = {k: v for k, v in col_b.items() if keep(k)}
    diffs = diff_collections(col_a, col_b, a, b, with_raw=raw, context=context)
    changed = any(d.status != IDENTICAL for d in diffs)
    if fmt == Format.json:
        print_json(to_json(a, b, diffs))
    elif fmt == Format.markdown:
        sys.stdout.write(to_markdown(a, b, diffs, raw=raw))
    else:
        _render_terminal(diffs, raw, no_diff)
    if fail_on_change and changed:
        raise typer.Exit(EXIT_GATE)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.add_typer(ir_app, name="ir")
