"""CLI for `perfq ci`: write the GitHub Actions workflows, and the commands their steps run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from common.config import CONFIG_DIR_ENV
from perfq.ci.pipeline import (
    CommentRequest,
    InitRequest,
    ReportRequest,
    TrendRequest,
    add_coverage_night,
    ci_sides,
    index_cache_keys,
    init_workflows,
    post_comment,
    prepare_report,
    read_matrix,
    write_base_config,
)
from perfq.ci.workflows import DEFAULT_BUILD_ENV, DEFAULT_WHEEL_BUILD, WORKFLOW_DIR
from perfq.options import EXIT_GATE, EXIT_OK, RepoOpt

ci_app = typer.Typer(
    help="GitHub Actions for perfq: `perfq ci init` writes the workflows; the other commands are their steps.",
    no_args_is_help=True,
)

_WHERE = "Workflow"
_RUN = "Benchmark jobs"
_PR, _REPORT = "Pull request", "Output"
_SIDES = "Sides (built or fetched once per PR)"


@ci_app.command("init")
def init(
    perfq_spec: Annotated[str | None, typer.Option("--perfq-spec", rich_help_panel=_WHERE, help=(
        "pip requirement the workflows install perfq from: a git URL pinned to a commit "
        "(git+https://github.com/ORG/perfq@SHA) or a wheel URL; never PyPI's 'perfq'. "
        "Default: where this perfq was installed from, if that was a git URL."))] = None,
    python: Annotated[str, typer.Option("--python", rich_help_panel=_WHERE,
                                        help="Python version for actions/setup-python.")] = "3.11",
    base_branch: Annotated[str, typer.Option("--base-branch", rich_help_panel=_WHERE,
                                             help="Default branch: the nightly indexes it.")] = "main",
    torch_spec: Annotated[str, typer.Option("--torch-spec", rich_help_panel=_WHERE, help=(
        "What the select job (and the nightly) pip-install so the index is traced: 'torch', a pinned "
        "'torch==2.6.0', or a wheel path/URL. Default: the torch the repo pins, else 'torch'."))] = "",
    torch_index: Annotated[str, typer.Option("--torch-index", rich_help_panel=_WHERE, help=(
        "--index-url for --torch-spec ('' = pip's configured index)."))] = "https://download.pytorch.org/whl/cpu",
    upstream: Annotated[str | None, typer.Option("--upstream", rich_help_panel=_WHERE, help=(
        "Out-of-tree backend: the upstream its wheels run on ('torch'); the build and bench jobs install "
        "--torch-spec first. Default: [tool.perfq] upstream of the repository."))] = None,
    runner: Annotated[list[str] | None, typer.Option("--runner", rich_help_panel=_RUN, help=(
        "runs-on label of the benchmark jobs (repeat for several labels, e.g. --runner self-hosted "
        "--runner perf). Default ubuntu-latest: noisy, see docs/ci.md."))] = None,
    budget: Annotated[str, typer.Option("--budget", rich_help_panel=_RUN,
                                        help="Time budget of each benchmark shard (perfq run --budget).")] = "15m",
    shards: Annotated[int, typer.Option("--shards", rich_help_panel=_RUN, min=1,
                                        help="Benchmark jobs per PR: the plan is split in this many shards.")] = 2,
    bench_timeout: Annotated[int, typer.Option("--bench-timeout", rich_help_panel=_RUN, min=1,
                                               help="timeout-minutes of each benchmark job.")] = 90,
    run_flags: Annotated[str, typer.Option("--run-flags", rich_help_panel=_RUN,
                                           help="Extra `perfq run` flags, one string.")] = "",
    gate: Annotated[bool, typer.Option("--gate", rich_help_panel=_RUN, help=(
        "Fail the check on a regression, a failed benchmark or a missing result (the comment still goes out)."))
                    ] = False,
    wheel_build: Annotated[str, typer.Option("--wheel-build", rich_help_panel=_SIDES, help=(
        "Shell command run once per side in its checkout that leaves one wheel in dist/, after the build "
        "requirements (requirements.txt) are installed, with ccache in front of the compilers."))
                       ] = DEFAULT_WHEEL_BUILD,
    build_env: Annotated[list[str] | None, typer.Option("--build-env", rich_help_panel=_SIDES, metavar="NAME=VALUE",
        help=("Environment of the wheel build (repeat). Default: " + " ".join(DEFAULT_BUILD_ENV)
              + ", PyTorch's CPU build on a runner without a GPU; --build-env '' for none."))] = None,
    wheel_url: Annotated[str, typer.Option("--wheel-url", rich_help_panel=_SIDES, help=(
        "Instead of building: the URL of a commit's published wheel, {commit} standing for it."))] = "",
    build_runner: Annotated[list[str] | None, typer.Option("--build-runner", rich_help_panel=_SIDES,
                                                           help="runs-on label of the wheel builds.")] = None,
    build_timeout: Annotated[int, typer.Option("--build-timeout", rich_help_panel=_SIDES, min=1,
                                               help="timeout-minutes of each wheel build.")] = 240,
    cron: Annotated[str, typer.Option("--cron", rich_help_panel=_WHERE,
                                      help="When the nightly runs (UTC cron).")] = "17 3 * * *",
    force: Annotated[bool, typer.Option("--force", rich_help_panel=_WHERE,
                                        help="Overwrite existing workflow files.")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", rich_help_panel=_WHERE,
                                         help="Print the workflows instead of writing them.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Write perfq-benchmarks.yml (PRs), perfq-comment.yml and perfq-nightly.yml into .github/workflows.

    The build job checks the fork out with its submodules, installs its requirements.txt and builds
    each side's wheel through ccache; the base side's wheel is cached per commit (docs/ci.md).

    Examples:

        perfq ci init --perfq-spec git+https://github.com/ORG/perfq@3f2c...  # pinned perfq

        perfq ci init --perfq-spec ... --runner self-hosted --runner perf --gate --shards 4

        perfq ci init --perfq-spec ... --torch-spec torch==2.6.0 --upstream torch   # a backend repo

        perfq ci init --perfq-spec ... --build-runner self-hosted --build-env USE_CUDA=1   # a GPU build
    """
    answer = init_workflows(InitRequest(
        repo=repo, perfq_spec=perfq_spec, python=python, base_branch=base_branch, torch_spec=torch_spec,
        torch_index=torch_index, upstream=upstream, runners=tuple(runner or ("ubuntu-latest",)), budget=budget,
        shards=shards, bench_timeout=bench_timeout, run_flags=run_flags, gate=gate, wheel_build=wheel_build,
        build_env=None if build_env is None else tuple(build_env), wheel_url=wheel_url,
        build_runners=tuple(build_runner or ("ubuntu-latest",)), build_timeout=build_timeout, cron=cron,
        force=force, stdout=stdout))
    if stdout:
        for name, text in answer.workflows.items():
            print(f"# ---- {WORKFLOW_DIR}/{name}\n{text}", end="")


@ci_app.command("cache-key")
def cache_key(
    rev: Annotated[str, typer.Argument(help="The commit whose index is wanted (HEAD^1 of a PR merge commit).")],
    ancestors: Annotated[int, typer.Option("--ancestors", min=0, help=(
        "Restore keys for this many first-parent ancestors present in the clone, nearest first."))] = 50,
    repo: RepoOpt = None,
) -> None:
    """Print key= and restore-keys= (multi-line) for caching .git/perfq/ (append to $GITHUB_OUTPUT).

    The key is the perfq version, the index schema version and the commit. The restore keys are
    the same for the commit's nearest ancestors, then any index of this perfq: a PR restores the
    index of its base, else of the nearest ancestor the nightly saved, and patches it.

    Example:

        perfq ci cache-key HEAD^1 >> "$GITHUB_OUTPUT"
    """
    keys = index_cache_keys(repo, rev, ancestors)
    print(f"key={keys.key}")
    print(f"restore-keys<<{keys.delimiter}")
    print("\n".join(keys.restore_keys))
    print(keys.delimiter)


@ci_app.command("base-config")
def base_config(
    rev: Annotated[str, typer.Argument(help="The PR's base (HEAD^1 of its merge commit).")],
    out: Annotated[Path, typer.Option("--out", help="Directory the committed config files are written to.")],
    repo: RepoOpt = None,
) -> None:
    """Write the config committed at REV into --out, and print PERFQ_CONFIG_DIR=<it> (for $GITHUB_ENV).

    With PERFQ_CONFIG_DIR set, every perfq command reads its config there, not in the checkout: a
    pull request's own perfq.toml (an exclude of the kernel it changes) cannot select fewer
    benchmarks; it takes effect after merge.

    Example:

        perfq ci base-config HEAD^1 --out "$RUNNER_TEMP/perfq-config" >> "$GITHUB_ENV"
    """
    print(f"{CONFIG_DIR_ENV}={write_base_config(repo, rev, out)}")


@ci_app.command("matrix")
def matrix(
    file: Annotated[Path, typer.Argument(help="The output of `perfq affected --format gha-matrix`.")],
) -> None:
    """Print matrix= (one line) and count= for $GITHUB_OUTPUT from a gha-matrix file (empty shards dropped).

    Example:

        perfq ci matrix perfq-out/matrix.json >> "$GITHUB_OUTPUT"
    """
    include = read_matrix(file)
    print(f"matrix={json.dumps({'include': include}, separators=(',', ':'))}")
    print(f"count={len(include)}")


@ci_app.command("coverage-trend")
def coverage_trend(
    report: Annotated[Path, typer.Argument(help="Tonight's `perfq coverage --format json` report.")],
    trend: Annotated[Path, typer.Option("--trend", help="The trend file (JSON), updated in place.")],
    commit: Annotated[str, typer.Option("--commit", help="The commit the report describes.")],
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the trend as markdown.")] = None,
    date: Annotated[str | None, typer.Option("--date", help="The night (YYYY-MM-DD; default today).")] = None,
) -> None:
    """Add tonight's coverage totals to the trend over nights (the nightly workflow's last step).

    Example:

        perfq ci coverage-trend coverage.json --trend trend/trend.json --commit "$(git rev-parse HEAD)"
    """
    add_coverage_night(TrendRequest(report, trend, commit, markdown, date))


@ci_app.command("sides")
def sides(
    base: Annotated[str, typer.Argument(help="Base revision (HEAD^1 of a PR merge commit).")],
    head: Annotated[str, typer.Argument(help="Head revision (HEAD).")],
    build: Annotated[str, typer.Option("--build", help="Build command, {python}: the side's interpreter.")
                     ] = "{python} -m pip install .",
    out_dir: Annotated[Path, typer.Option("--dir", help="Where the sides go: DIR/{base,head}/{src,venv}.")
                       ] = Path("perfq-sides"),
    repo: RepoOpt = None,
) -> None:
    """Check base and head out side by side (git worktrees), each with a venv, and build them.

    `perfq run --ab --base-python DIR/base/venv/bin/python --head-python DIR/head/venv/bin/python`
    then runs them interleaved.

    Example:

        perfq ci sides HEAD^1 HEAD --build "{python} -m pip install ." --dir "$RUNNER_TEMP/perfq-sides"
    """
    ci_sides(repo, base, head, build, out_dir)


@ci_app.command("report")
def report(
    inputs: Annotated[Path, typer.Argument(help="Directory with affected.md, matrix.json and results-*.json.")],
    label: Annotated[str, typer.Option("--label", rich_help_panel=_PR, help="The label `perfq run` used.")],
    pr: Annotated[int, typer.Option("--pr", min=1, rich_help_panel=_PR, help="Pull request number.")],
    head_sha: Annotated[str, typer.Option("--head-sha", rich_help_panel=_PR, help="The PR's head commit.")],
    out: Annotated[Path, typer.Option("--out", rich_help_panel=_REPORT,
                                      help="Output directory (comment.md, pr.json, ...).")] = Path("perfq-comment"),
    fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", rich_help_panel=_REPORT, help=(
        f"Exit {EXIT_GATE} on a regression, a failed benchmark or a selected benchmark without a result, "
        "after writing everything."))] = False,
    base: Annotated[str | None, typer.Option("--base", rich_help_panel=_PR, help=(
        "Read the thresholds and ignore list ([tool.perfq.compare]) from this commit's committed config "
        "(the PR's base, HEAD^1 of its merge commit), never from the checkout the PR controls; a PR (HEAD) "
        "that changes the config gets a line saying it takes effect after merge. "
        "Without it: perfq's defaults."))] = None,
    repo: RepoOpt = None,
) -> None:
    """Prepare the PR comment: the affected summary, then the base-vs-head verdicts.

    Also writes it to the job summary ($GITHUB_STEP_SUMMARY) when there is one.

    Example:

        perfq ci report perfq-in --label pr-12 --pr 12 --head-sha "$HEAD_SHA" --base HEAD^1 --fail-on-regression
    """
    answer = prepare_report(ReportRequest(inputs, label, pr, head_sha, out, fail_on_regression, base, repo))
    if answer.exit_code != EXIT_OK:
        raise typer.Exit(answer.exit_code)


@ci_app.command("comment")
def comment(
    prepared: Annotated[Path, typer.Argument(help="The perfq-comment artifact (comment.md, pr.json).")],
    repository: Annotated[str, typer.Option("--repository", help="OWNER/NAME (${{ github.repository }}).")],
    head_sha: Annotated[str, typer.Option("--head-sha", help=(
        "The commit the benchmarks ran on, from the event (${{ github.event.workflow_run.head_sha }}).")
    )],
    api_url: Annotated[str | None, typer.Option("--api-url", help=(
        "GitHub REST API root (default $GITHUB_API_URL or https://api.github.com)."))] = None,
) -> None:
    """Create or update the PR's one sticky comment (found by a hidden marker); token from $GH_TOKEN.

    The PR number in the artifact is checked against the PR's current head commit: a stale or
    forged artifact comments nowhere.

    Example:

        GH_TOKEN=... perfq ci comment perfq-comment --repository ORG/REPO --head-sha "$HEAD_SHA"
    """
    post_comment(CommentRequest(prepared, repository, head_sha, api_url))


def register(app: typer.Typer) -> None:
    """Add the `ci` command group to ``app``."""
    app.add_typer(ci_app, name="ci")
