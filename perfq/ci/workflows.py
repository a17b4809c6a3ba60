"""The GitHub Actions workflows `perfq ci init` writes, filled from templates in ``data/ci``.

Pure: templates in, YAML text out. Every value a user gives is checked and written as a JSON
(= YAML double-quoted) string or a shell-quoted word; none may contain ``${{`` (an expression
in a value would be evaluated by GitHub). Actions are pinned by full commit SHA (``PINS``).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from importlib import resources

WORKFLOW_FILES = ("perfq-benchmarks.yml", "perfq-comment.yml", "perfq-nightly.yml")
WORKFLOW_DIR = ".github/workflows"
BUILD_STEPS = "perfq-build-steps.yml"  # the wheel build's steps, in the PR and nightly workflows
# against the build requirements the job installed (PyTorch's requirements.txt), as PyTorch builds itself
DEFAULT_WHEEL_BUILD = "python -m pip wheel --no-deps --no-build-isolation --wheel-dir dist ."
# a CPU build on a runner without a GPU (PyTorch's setup.py reads these); the fork's tests are not built;
# the compilers by the names ccache-action puts ccache under (a Python built elsewhere may name its
# compiler x86_64-linux-gnu-gcc, and a setuptools build would then bypass the cache)
DEFAULT_BUILD_ENV = ("USE_CUDA=0", "USE_ROCM=0", "USE_XPU=0", "BUILD_TEST=0", "CC=gcc", "CXX=g++")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Pin:
    """An action pinned by full commit SHA; ``version`` is the release tag that commit carries."""

    action: str
    version: str
    sha: str

    def uses(self) -> str:
        return f"{self.action}@{self.sha} # {self.version}"


# All on the node24 runtime; the tag each SHA carries is written next to it.
PINS = {
    "checkout": Pin("actions/checkout", "v7.0.1", "3d3c42e5aac5ba805825da76410c181273ba90b1"),
    "setup-python": Pin("actions/setup-python", "v7.0.0", "5fda3b95a4ea91299a34e894583c3862153e4b97"),
    "cache-restore": Pin("actions/cache/restore", "v5.0.5", "27d5ce7f107fe9357f9df03efb73ab90386fccae"),
    "cache-save": Pin("actions/cache/save", "v5.0.5", "27d5ce7f107fe9357f9df03efb73ab90386fccae"),
    "upload-artifact": Pin("actions/upload-artifact", "v7.0.0", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f"),
    "download-artifact": Pin("actions/download-artifact", "v8.0.1", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c"),
    "ccache": Pin("hendrikmuhs/ccache-action", "v1.2.23", "d62db5f07c26379fc4b4e0916f098a92573c3b03"),
}

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")
_PYTHON = re.compile(r"^3\.\d+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLAIN_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([<>=!~].*)?$")


@dataclass(frozen=True)
class WorkflowOptions:
    """What `perfq ci init` asks for."""

    perfq_spec: str  # a pip requirement that is not PyPI's "perfq": a git URL pinned to a commit, a wheel URL
    python_version: str = "3.11"
    base_branch: str = "main"
    runner: tuple[str, ...] = ("ubuntu-latest",)
    bench_timeout: int = 90
    run_flags: tuple[str, ...] = ()
    gate: bool = False
    budget: str = "15m"  # per shard
    shards: int = 2
    torch_spec: str = "torch"  # what the select job (and an out-of-tree backend's jobs) install
    torch_index: str = CPU_INDEX  # '' = pip's configured index
    wheel_build: str = DEFAULT_WHEEL_BUILD  # run once per side in its checkout; leaves one wheel in dist/
    wheel_url: str = ""  # instead of building: a per-commit wheel URL with {commit}
    build_runner: tuple[str, ...] = ("ubuntu-latest",)
    build_timeout: int = 240
    upstream: str = ""  # an out-of-tree backend ([tool.perfq] upstream = "torch"): its jobs install torch too
    history_depth: int = 50  # commits the select job fetches: how far back the cache finds an ancestor's index
    cron: str = "17 3 * * *"
    nightly_timeout: int = 360
    build_env: tuple[str, ...] = DEFAULT_BUILD_ENV  # NAME=VALUE for the wheel build


def _text(name: str, value: str) -> str:
    if not value.strip():
        raise ValueError(f"{name} is empty")
    if "\n" in value or "\r" in value or "${{" in value:
        raise ValueError(f"{name} may not contain a newline or '${{{{'")
    return value


def check_spec(spec: str) -> str:
    """``spec`` when it is an installable reference that is not a bare package name (PyPI)."""
    _text("--perfq-spec", spec)
    if _PLAIN_NAME.match(spec):
        raise ValueError(
            f"--perfq-spec {spec!r} is a package name: pip would install whatever PyPI serves under it; "
            "give a git URL pinned to a commit (git+https://host/org/perfq@<sha>) or a wheel URL"
        )
    return spec


_BUDGET = re.compile(r"^\d+(\.\d+)?(s|m|h)?$")
_CRON = re.compile(r"^[0-9*/,-]+( [0-9*/,A-Za-z-]+){4}$")


def check(options: WorkflowOptions) -> WorkflowOptions:
    """``options`` when every value is safe to write; ValueError naming the bad one otherwise."""
    check_spec(options.perfq_spec)
    if not _PYTHON.match(options.python_version):
        raise ValueError(f"--python {options.python_version!r}: expected 3.N")
    if not _BRANCH.match(options.base_branch):
        raise ValueError(f"--base-branch {options.base_branch!r}: not a plain branch name")
    for flag, labels in (("--runner", options.runner), ("--build-runner", options.build_runner)):
        if not labels or not all(_LABEL.match(label) for label in labels):
            raise ValueError(f"{flag} {list(labels)!r}: labels are letters, digits, '_', '.', '-'")
    _text("--torch-spec", options.torch_spec)
    for flag, value in (("--torch-index", options.torch_index), ("--upstream", options.upstream)):
        if value:
            _text(flag, value)
    if options.wheel_url:
        _text("--wheel-url", options.wheel_url)
        if "{commit}" not in options.wheel_url:
            raise ValueError("--wheel-url must contain {commit} (each side's wheel is that commit's)")
    else:
        _text("--wheel-build", options.wheel_build)
    for assignment in options.build_env:
        name, eq, value = assignment.partition("=")
        if not eq or not _ENV_NAME.match(name):
            raise ValueError(f"--build-env {assignment!r}: expected NAME=VALUE")
        _text("--build-env", assignment)
    if not _BUDGET.match(options.budget):
        raise ValueError(f"--budget {options.budget!r}: a duration such as 15m, 900s or 1h")
    if not _CRON.match(options.cron):
        raise ValueError(f"--cron {options.cron!r}: five cron fields")
    for flag, value in (("--shards", options.shards), ("--bench-timeout", options.bench_timeout),
                        ("--build-timeout", options.build_timeout), ("--history-depth", options.history_depth),
                        ("--nightly-timeout", options.nightly_timeout)):
        if value < 1:
            raise ValueError(f"{flag} must be at least 1")
    for flag in options.run_flags:
        _text("--run-flag", flag)
        if flag.split("=", 1)[0] == "--tag-filter":
            raise ValueError("--run-flags may not hold --tag-filter: a selected test is never dropped by a tag")
    return options


def _env_lines(assignments: tuple[str, ...], indent: int) -> str:
    """``NAME: "value"`` lines of an ``env:`` block (values as JSON strings); the token's line when empty."""
    pairs = (a.partition("=") for a in assignments)
    return "\n".join(f"{' ' * indent}{name}: {json.dumps(value)}" for name, _, value in pairs)


def _runner(labels: tuple[str, ...]) -> str:
    return labels[0] if len(labels) == 1 else json.dumps(list(labels))


def template(name: str) -> str:
    """The shipped template of workflow file ``name``."""
    return resources.files("data").joinpath(f"ci/{name}.in").read_text(encoding="utf-8")


def _blocks(text: str, keep: dict[str, bool]) -> str:
    """``text`` with each ``@BEGIN name@`` ... ``@END name@`` block kept (markers dropped) or removed."""
    for name, wanted in keep.items():
        pattern = re.compile(rf"^@BEGIN {name}@\n(.*?)^@END {name}@\n", re.S | re.M)
        text = pattern.sub(lambda m, keep_it=wanted: m.group(1) if keep_it else "", text)
    return text


def render(options: WorkflowOptions, perfq_version: str) -> dict[str, str]:
    """``{file name: YAML text}`` of the three workflows."""
    check(options)
    build = not options.wheel_url
    values = {
        "@PERFQ_VERSION@": perfq_version,
        "@PERFQ_SPEC@": json.dumps(options.perfq_spec),
        "@PYTHON_VERSION@": json.dumps(options.python_version),
        "@PYTHON_VERSION_KEY@": f"py{options.python_version}",
        "@BASE_BRANCH@": json.dumps(options.base_branch),
        "@RUNNER@": _runner(options.runner),
        "@BUILD_RUNNER@": _runner(options.build_runner),
        "@BENCH_TIMEOUT@": str(options.bench_timeout),
        "@BUILD_TIMEOUT@": str(options.build_timeout),
        "@NIGHTLY_TIMEOUT@": str(options.nightly_timeout),
        "@HISTORY_DEPTH@": str(options.history_depth),
        "@RUN_FLAGS@": shlex.join(options.run_flags),
        "@REPORT_FLAGS@": "--fail-on-regression" if options.gate else "",
        "@BUDGET@": json.dumps(options.budget),
        "@SHARDS@": json.dumps(str(options.shards)),
        "@NATIVE_SHARD_LIST@": json.dumps(list(range(1, options.shards + 1))),
        "@TORCH_SPEC@": json.dumps(options.torch_spec),
        "@TORCH_INDEX@": json.dumps(options.torch_index),
        "@WHEEL_BUILD@": options.wheel_build,
        "@BUILD_ENV@": _env_lines(options.build_env, 10),
        "@WHEEL_URL@": json.dumps(options.wheel_url),
        "@BENCH_NEEDS@": "select, build" if build else "select",
        "@REPORT_NEEDS@": "select, build, bench" if build else "select, bench",
        "@CRON@": options.cron,
        **{f"@{key}@": pin.uses() for key, pin in PINS.items()},
    }
    keep = {"build": build, "url": not build, "upstream": bool(options.upstream)}
    out = {}
    for name in WORKFLOW_FILES:
        text = _blocks(template(name).replace("@BUILD_STEPS@\n", template(BUILD_STEPS)), keep)
        for token, value in values.items():
            text = text.replace(token, value)
        leftover = re.search(r"@[A-Za-z_ -]+@", text)
        if leftover:  # a template token without a value: a bug in perfq, not in the input
            raise AssertionError(f"{name}: unfilled {leftover.group(0)}")
        out[name] = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    return out
