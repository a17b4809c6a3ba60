"""The GitHub Actions workflows `perfq ci init` writes, filled from templates in ``perfq.data/ci``.

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

WORKFLOW_FILES = ("perfq-benchmarks.yml", "perfq-comment.yml")
WORKFLOW_DIR = ".github/workflows"
DEFAULT_BUILD = "{python} -m pip install ."
DEFAULT_RUN_FLAGS = ("--adaptive", "--budget", "1800")


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
}

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")
_PYTHON = re.compile(r"^3\.\d+$")
_PLAIN_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([<>=!~].*)?$")


@dataclass(frozen=True)
class WorkflowOptions:
    """What `perfq ci init` asks for."""

    perfq_spec: str  # a pip requirement that is not PyPI's "perfq": a git URL pinned to a commit, a wheel URL
    python_version: str = "3.11"
    base_branch: str = "main"
    runner: tuple[str, ...] = ("ubuntu-latest",)
    build: str = DEFAULT_BUILD
    bench_timeout: int = 90
    run_flags: tuple[str, ...] = DEFAULT_RUN_FLAGS
    gate: bool = False


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


def check(options: WorkflowOptions) -> WorkflowOptions:
    """``options`` when every value is safe to write; ValueError naming the bad one otherwise."""
    check_spec(options.perfq_spec)
    if not _PYTHON.match(options.python_version):
        raise ValueError(f"--python {options.python_version!r}: expected 3.N")
    if not _BRANCH.match(options.base_branch):
        raise ValueError(f"--base-branch {options.base_branch!r}: not a plain branch name")
    if not options.runner or not all(_LABEL.match(label) for label in options.runner):
        raise ValueError(f"--runner {list(options.runner)!r}: labels are letters, digits, '_', '.', '-'")
    _text("--build", options.build)
    if "{python}" not in options.build:
        raise ValueError("--build must use {python} (the side's interpreter), e.g. '{python} -m pip install .'")
    if options.bench_timeout < 1:
        raise ValueError("--bench-timeout must be at least 1 minute")
    for flag in options.run_flags:
        _text("--run-flag", flag)
    return options


def _runner(labels: tuple[str, ...]) -> str:
    return labels[0] if len(labels) == 1 else json.dumps(list(labels))


def template(name: str) -> str:
    """The shipped template of workflow file ``name``."""
    return resources.files("perfq.data").joinpath(f"ci/{name}.in").read_text(encoding="utf-8")


def render(options: WorkflowOptions, perfq_version: str) -> dict[str, str]:
    """``{file name: YAML text}`` of both workflows."""
    check(options)
    values = {
        "@PERFQ_VERSION@": perfq_version,
        "@PERFQ_SPEC@": json.dumps(options.perfq_spec),
        "@PYTHON_VERSION@": json.dumps(options.python_version),
        "@BASE_BRANCH@": json.dumps(options.base_branch),
        "@RUNNER@": _runner(options.runner),
        "@BUILD@": json.dumps(options.build),
        "@BENCH_TIMEOUT@": str(options.bench_timeout),
        "@RUN_FLAGS@": shlex.join(options.run_flags),
        "@REPORT_FLAGS@": "--fail-on-regression" if options.gate else "",
        **{f"@{key}@": pin.uses() for key, pin in PINS.items()},
    }
    out = {}
    for name in WORKFLOW_FILES:
        text = template(name)
        for token, value in values.items():
            text = text.replace(token, value)
        leftover = re.search(r"@[A-Za-z_-]+@", text)
        if leftover:  # a template token without a value: a bug in perfq, not in the input
            raise AssertionError(f"{name}: unfilled {leftover.group(0)}")
        out[name] = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    return out
