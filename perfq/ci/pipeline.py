"""``perfq ci`` as functions: each subcommand's typed request in, its result out, through named stages.

``perfq.ci.cli`` turns each command line into its request and calls the function beside it; a
script or a test calls the same function. The stages print to stderr what the command prints
there (notes, the files written); what goes to stdout (the workflows of ``init --stdout``, the
``$GITHUB_OUTPUT`` lines) is the command's to print from the result::

    answer = init_workflows(InitRequest(perfq_spec="git+https://github.com/ORG/perfq@3f2c...", stdout=True))
    outcome = prepare_report(ReportRequest(Path("perfq-in"), "pr-12", 12, head_sha, base="HEAD^1"))
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import files
from common.errors import PerfqError
from perfq.ci.workflows import DEFAULT_BUILD_ENV, DEFAULT_WHEEL_BUILD, WorkflowOptions
from perfq.options import EXIT_GATE, EXIT_OK, resolve_repo
from perfq.terminal import console

if TYPE_CHECKING:  # the run's modules load only when `ci report` runs
    from perfq.ci.artifacts import ReportOutcome
    from perfq.ci.cache import CacheKeys
    from perfq.ci.comment import PullRequestRef
    from perfq.ci.coverage_trend import Night
    from perfq.ci.github import Posted
    from perfq.ci.sides import BuiltSide
    from perfq.run.api import Settings

_UBUNTU = ("ubuntu-latest",)


# --------------------------------------------------------------------------- init


@dataclass(frozen=True)
class InitRequest:
    """What ``perfq ci init`` is asked: the workflows' settings (``None``: the option's default)."""

    repo: Path | None = None  # None: the current git worktree
    perfq_spec: str | None = None  # None: where this perfq was installed from, if a git URL
    python: str = "3.11"
    base_branch: str = "main"
    torch_spec: str = ""  # '': the torch the repo pins, else 'torch'
    torch_index: str = "https://download.pytorch.org/whl/cpu"
    upstream: str | None = None  # None: [tool.perfq] upstream of the repository
    runners: tuple[str, ...] = _UBUNTU
    budget: str = "15m"
    shards: int = 2
    bench_timeout: int = 90
    run_flags: str = ""  # one string, split as a shell would
    gate: bool = False
    wheel_build: str = DEFAULT_WHEEL_BUILD
    build_env: tuple[str, ...] | None = None  # None: the CPU build's defaults; '' entries are dropped
    wheel_url: str = ""
    build_runners: tuple[str, ...] = _UBUNTU
    build_timeout: int = 240
    cron: str = "17 3 * * *"
    force: bool = False
    stdout: bool = False  # render only: nothing is written


@dataclass(frozen=True)
class InitAnswer:
    """The workflows rendered (file name -> text) and the files written (none with ``stdout``)."""

    options: WorkflowOptions
    workflows: dict[str, str]
    written: tuple[Path, ...] = ()


def installed_spec() -> str:
    """A pip requirement for the perfq running now, when it was installed from a git URL ('' otherwise)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        raw = distribution("perfq").read_text("direct_url.json")
    except PackageNotFoundError:
        return ""
    try:
        info = json.loads(raw or "{}")
    except ValueError:
        return ""
    vcs = info.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id") and str(info.get("url", "")).startswith("https://"):
        return f"git+{info['url']}@{vcs['commit_id']}"
    return ""


def workflow_options(request: InitRequest, root: Path, spec: str) -> WorkflowOptions:
    """Stage 1: the request as the workflows' options, the repository's defaults filled in."""
    from common.config import load_config
    from perfq.ci.cache import pinned_torch

    upstream = load_config(root).upstream if request.upstream is None else request.upstream
    build_env = DEFAULT_BUILD_ENV if request.build_env is None else tuple(a for a in request.build_env if a)
    return WorkflowOptions(
        spec, request.python, request.base_branch, request.runners, request.bench_timeout,
        tuple(shlex.split(request.run_flags)), request.gate, request.budget, request.shards,
        request.torch_spec or pinned_torch(root) or "torch", request.torch_index, request.wheel_build,
        request.wheel_url, request.build_runners, request.build_timeout, upstream, cron=request.cron,
        build_env=build_env)


def render_workflows(options: WorkflowOptions) -> dict[str, str]:
    """Stage 2: the workflow files' texts (options checked first)."""
    from common.version import __version__
    from perfq.ci.workflows import render

    return render(options, __version__)


def write_workflows(root: Path, workflows: dict[str, str], force: bool) -> tuple[Path, ...]:
    """Stage 3: the files written into the repository's workflow folder (none overwritten without ``force``)."""
    from perfq.ci.workflows import WORKFLOW_DIR

    err = console(stderr=True)
    target = root / WORKFLOW_DIR
    existing = [name for name in workflows if (target / name).exists()]
    if existing and not force:
        raise PerfqError(f"{target / existing[0]} exists (--force overwrites)")
    target.mkdir(parents=True, exist_ok=True)
    for name, text in workflows.items():
        (target / name).write_text(text, encoding="utf-8")
        err.print(f"wrote {target / name}")
    err.print("next: commit the files; the comment and nightly workflows run from the default branch once merged "
              "there; docs/ci.md lists what to set by hand", markup=False)
    return tuple(target / name for name in workflows)


def init_workflows(request: InitRequest) -> InitAnswer:
    """``perfq ci init``: options -> rendered workflows -> written (unless ``request.stdout``)."""
    spec = request.perfq_spec or installed_spec()
    if not spec:
        raise PerfqError("give --perfq-spec (git+https://.../perfq@<commit>): this perfq was not installed from git")
    root = resolve_repo(request.repo)
    try:
        options = workflow_options(request, root, spec)
        workflows = render_workflows(options)
    except ValueError as exc:
        raise PerfqError(str(exc)) from None
    console(stderr=True).print(f"torch for the traced index: {options.torch_spec}"
                               + (f" (upstream of this backend: {options.upstream})" if options.upstream else ""),
                               markup=False)
    if request.stdout:
        return InitAnswer(options, workflows)
    return InitAnswer(options, workflows, write_workflows(root, workflows, request.force))


# --------------------------------------------------------------------------- the workflows' steps


def index_cache_keys(repo: Path | None, rev: str, ancestors: int) -> CacheKeys:
    """``perfq ci cache-key``: the index cache's key for ``rev`` and its restore keys."""
    from common.version import __version__
    from perfq.ci.cache import cache_keys

    return cache_keys(resolve_repo(repo), rev, f"perfq-index-{__version__}", ancestors)


def write_base_config(repo: Path | None, rev: str, out: Path) -> Path:
    """``perfq ci base-config``: the config committed at ``rev`` written into ``out`` (returned, absolute)."""
    from perfq.ci.gate import write_committed_config

    written = write_committed_config(resolve_repo(repo), rev, out)
    console(stderr=True).print(f"config of {rev}: {', '.join(written) or 'none (perfq defaults)'}", markup=False)
    return out.absolute()


def read_matrix(file: Path) -> list[Any]:
    """``perfq ci matrix``: the entries of a gha-matrix file that run something (empty shards dropped)."""
    from perfq.ci.artifacts import runnable

    try:
        data = json.loads(files.read_input(file, files.InputKind.matrix))
    except OSError as exc:
        raise PerfqError(f"cannot read the matrix {file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PerfqError(f"cannot read the matrix {file}: {exc}") from None
    include = data.get("include") if isinstance(data, dict) else None
    if not isinstance(include, list):
        raise PerfqError(f"{file}: not a gha-matrix document (no 'include' list)")
    return runnable(include)  # a shard of the plan with no benchmark gets no job


@dataclass(frozen=True)
class TrendRequest:
    """What ``perfq ci coverage-trend`` is asked: tonight's report, added to the trend file."""

    report: Path
    trend: Path
    commit: str
    markdown: Path | None = None
    date: str | None = None  # YYYY-MM-DD; None: today


def add_coverage_night(request: TrendRequest) -> list[Night]:
    """``perfq ci coverage-trend``: tonight's totals added -> the trend written (JSON, markdown)."""
    from perfq.ci.coverage_trend import add_night, night_from_report, read_trend, trend_markdown

    nights = add_night(read_trend(request.trend), night_from_report(request.report, request.commit, request.date))
    request.trend.parent.mkdir(parents=True, exist_ok=True)
    tmp = request.trend.with_name(request.trend.name + ".tmp")
    tmp.write_text(json.dumps({"nights": [n.to_json() for n in nights]}, indent=1) + "\n", encoding="utf-8")
    tmp.replace(request.trend)
    if request.markdown is not None:
        request.markdown.write_text(trend_markdown(nights), encoding="utf-8")
    console(stderr=True).print(f"{request.trend}: {len(nights)} night(s)", markup=False)
    return nights


def ci_sides(repo: Path | None, base: str, head: str, build: str, out_dir: Path) -> list[BuiltSide]:
    """``perfq ci sides``: both sides checked out and built -> ``out_dir/sides.json``."""
    from perfq.ci.sides import build_sides

    err = console(stderr=True)
    built = build_sides(resolve_repo(repo), base, head, build, out_dir.resolve(), log=lambda m: err.print(m))
    (out_dir / "sides.json").write_text(json.dumps([s.to_json() for s in built], indent=1) + "\n", encoding="utf-8")
    return built


# --------------------------------------------------------------------------- report and comment


@dataclass(frozen=True)
class ReportRequest:
    """What ``perfq ci report`` is asked: the artifacts, the pull request, where the comment goes."""

    inputs: Path
    label: str
    pr: int
    head_sha: str
    out: Path = Path("perfq-comment")
    fail_on_regression: bool = False
    base: str | None = None  # the commit whose committed config holds the thresholds; None: perfq's defaults
    repo: Path | None = None


@dataclass(frozen=True)
class ReportAnswer:
    """The written report and the exit status the command ends with (``EXIT_GATE``: the gate failed)."""

    outcome: ReportOutcome
    exit_code: int = EXIT_OK


def pull_request(request: ReportRequest) -> PullRequestRef:
    """Stage 1: the pull request, checked as ``perfq ci comment`` will read it back."""
    from perfq.ci.comment import PullRequestRef, parse_pr

    try:
        return parse_pr(json.dumps(PullRequestRef(request.pr, request.head_sha).to_json()))
    except ValueError as exc:
        raise PerfqError(str(exc)) from None


def compare_settings(request: ReportRequest) -> tuple[Settings, str]:
    """Stage 2: the thresholds (the base commit's committed config, else perfq's defaults) and the
    comment's note on a config the pull request changes."""
    from perfq.ci.comment import config_note
    from perfq.ci.gate import base_settings, changed_config
    from perfq.run.api import Settings

    if request.base is None:
        console(stderr=True).print(
            "compare settings: perfq's defaults (--base REV reads the base commit's [tool.perfq.compare])")
        return Settings(), ""
    settings = base_settings(resolve_repo(request.repo), request.base)
    return settings, config_note(changed_config(resolve_repo(request.repo), request.base, "HEAD"))


def job_summary(outcome: ReportOutcome) -> None:
    """Stage 4: the comment appended to the job's summary ($GITHUB_STEP_SUMMARY), when there is one."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(outcome.comment.read_text(encoding="utf-8"))


def gate(request: ReportRequest, outcome: ReportOutcome) -> int:
    """Stage 5: what was written said on stderr; ``EXIT_GATE`` when the gate is on and fails."""
    err = console(stderr=True)
    err.print(f"wrote {outcome.comment}: {outcome.result_files} result file(s), "
              f"{outcome.regressions} regression(s), {outcome.failures} failed benchmark invocation(s)")
    if outcome.missing:
        err.print(f"no result for {len(outcome.missing)} selected benchmark(s): {', '.join(outcome.missing)}")
    failed = outcome.regressions or outcome.failures or outcome.missing
    return EXIT_GATE if request.fail_on_regression and failed else EXIT_OK


def prepare_report(request: ReportRequest) -> ReportAnswer:
    """``perfq ci report``: pull request -> settings -> the comment and its companions -> job summary -> gate."""
    from perfq.ci.artifacts import build_report

    ref = pull_request(request)
    settings, note = compare_settings(request)
    outcome = build_report(request.inputs, request.label, ref, request.out, settings, note)
    job_summary(outcome)
    return ReportAnswer(outcome, gate(request, outcome))


@dataclass(frozen=True)
class CommentRequest:
    """What ``perfq ci comment`` is asked: the prepared comment, where it goes (token: $GH_TOKEN)."""

    prepared: Path
    repository: str  # OWNER/NAME
    head_sha: str  # the commit the benchmarks ran on, from the event
    api_url: str | None = None  # None: $GITHUB_API_URL or https://api.github.com


def post_comment(request: CommentRequest) -> Posted:
    """``perfq ci comment``: the prepared artifact read and checked -> the sticky comment created or updated."""
    from perfq.ci.comment import COMMENT_FILE, PR_FILE, parse_pr
    from perfq.ci.github import GitHub, post_sticky

    prepared = request.prepared
    try:
        pr = parse_pr(files.input_text(prepared / PR_FILE, files.InputKind.report, (prepared,)))
        body = files.input_text(prepared / COMMENT_FILE, files.InputKind.report, (prepared,), errors="replace")
    except OSError as exc:
        raise PerfqError(f"cannot read the prepared comment in {prepared}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PerfqError(str(exc)) from None
    posted = post_sticky(GitHub.from_env(request.repository, request.api_url), pr, request.head_sha, body)
    err = console(stderr=True)
    if posted.action == "skipped":
        err.print(f"not commenting: {posted.reason}")
    else:
        err.print(f"{posted.action} the perfq comment on #{pr.number}: {posted.url}")
    return posted
