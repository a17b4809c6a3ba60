"""CLI conventions: --version, shell completion, help text on every option, options in panels with
examples in every command's help, --format where a command prints a result, one exit code table."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from common.version import __version__
from perfq.cli import app
from perfq.options import EXIT_ERROR, EXIT_OK, EXIT_USAGE

# commands that print one thing only (a version, an exit code for git bisect run, GitHub step outputs)
NO_FORMAT = {"version", "bisect-step", "ci init", "ci cache-key", "ci base-config", "ci matrix", "ci sides",
             "ci report", "ci comment", "ci coverage-trend"}
PANELS_FROM = 6  # commands with this many options group them into help panels


def _commands(cmd=None, path=()):
    cmd = cmd or typer.main.get_command(app)
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


COMMANDS = dict(_commands())


def _options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option" and p.name != "help"]


def test_every_command_is_checked():
    assert {"index", "affected", "run", "compare", "history", "import", "bisect", "coverage", "ir diff",
            "ci init"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_options_have_help_panels_and_examples(name):
    cmd = COMMANDS[name]
    opts = _options(cmd)
    assert not [p.opts[0] for p in opts if not (p.help or "").strip()], "options without help"
    assert not [p.name for p in cmd.params if p.param_type_name == "argument" and not (p.help or "").strip()]
    if len(opts) >= PANELS_FROM:
        assert not [p.opts[0] for p in opts if not getattr(p, "rich_help_panel", None)], "options outside panels"
    assert "Example" in (cmd.help or ""), "no examples in the help"
    if name not in NO_FORMAT:
        assert any("--format" in p.opts for p in opts), "no --format"


def _perfq(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfq", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_version_and_completion():
    for flag in ("--version", "-V", "version"):
        res = _perfq(flag)
        assert (res.returncode, res.stdout) == (EXIT_OK, f"perfq {__version__}\n")
    res = _perfq(_PERFQ_COMPLETE="complete_bash", COMP_WORDS="perfq hist", COMP_CWORD="1")
    assert res.stdout.split() == ["history"]
    res = _perfq(_PERFQ_COMPLETE="complete_bash", COMP_WORDS="perfq compare x --base", COMP_CWORD="3")
    assert "--baseline" in res.stdout.split()
    # the script --show-completion prints for bash (named here: --show-completion guesses the shell
    # from the parent processes, and a test runner's parent need not be a shell)
    assert "_perfq_completion" in _perfq(_PERFQ_COMPLETE="source_bash").stdout


def test_exit_codes_are_distinct(tmp_path):
    usage = _perfq("compare", "--no-such-option")
    assert usage.returncode == EXIT_USAGE and "No such option" in usage.stderr
    error = _perfq("compare", "x", "--history", str(tmp_path / "missing.duckdb"), "--repo", str(tmp_path))
    assert error.returncode == EXIT_ERROR and error.stderr.startswith("error: ") and error.stderr.count("\n") == 1
    assert len({EXIT_OK, EXIT_USAGE, EXIT_ERROR, 3, 130, 1}) == 6
