"""The shape of every command module (issue 39): a CLI function turns arguments into a request and
calls the feature's pipeline, so none is longer than ``MAX_BODY_LINES``; and options are declared in
one Typer style, ``name: Annotated[T, typer.Option(...)] = default``, never ``= typer.Option(...)``."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import NamedTuple

import pytest

from perfq.cli import COMMAND_MODULES

MAX_BODY_LINES = 40
_TYPER_PARAMETERS = {"Option", "Argument"}


class Finding(NamedTuple):
    line: int
    function: str
    problem: str


def _module_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin)


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of ``fn``'s statements, its signature and docstring left out (a command's options are
    declarations, one or two lines each)."""
    body = fn.body[1:] if ast.get_docstring(fn) is not None and len(fn.body) > 1 else fn.body
    return body[-1].end_lineno - body[0].lineno + 1


def _old_style_default(default: ast.expr) -> bool:
    """``= typer.Option(...)`` or ``= typer.Argument(...)``."""
    if isinstance(default, ast.Call) and isinstance(default.func, ast.Attribute):
        return default.func.attr in _TYPER_PARAMETERS and isinstance(default.func.value, ast.Name) \
            and default.func.value.id == "typer"
    return False


def findings(source: str) -> list[Finding]:
    """Every function of ``source`` longer than MAX_BODY_LINES, and every old-style Typer parameter."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if (lines := _body_lines(node)) > MAX_BODY_LINES:
            out.append(Finding(node.lineno, node.name, f"{lines} lines (at most {MAX_BODY_LINES})"))
        defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        out += [Finding(d.lineno, node.name, "a `= typer.Option(...)` default: use Annotated[...]")
                for d in defaults if _old_style_default(d)]
    return sorted(out)


@pytest.mark.parametrize("module", sorted(set(COMMAND_MODULES.values())))
def test_cli_module_shape(module):
    found = findings(_module_file(module).read_text())
    assert not found, "\n".join(f"{module}:{f.line} {f.function}: {f.problem}" for f in found)


def test_findings_catch_long_functions_and_old_style_options():
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    source = (
        "import typer\n"
        f"def long():\n    '''Doc.'''\n{long_body}\n"
        "def old(repo=typer.Argument(None), n: int = typer.Option(1, '--n')):\n    pass\n"
        "def new(n: Annotated[int, typer.Option('--n')] = 1):\n    pass\n"
    )
    assert [(f.function, f.problem.split()[0]) for f in findings(source)] == [
        ("long", str(MAX_BODY_LINES + 1)), ("old", "a"), ("old", "a")]


def test_a_function_of_exactly_the_bound_passes():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES))
    assert findings(f"def f(a, b=typer.Exit):\n    '''Doc.'''\n{body}\n") == []
