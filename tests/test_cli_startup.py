"""The command path stays light: `perfq --help` loads no database, statistics, compiler or parser."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq

HEAVY = ("duckdb", "scipy", "numpy", "clang", "torch", "triton")

PROBE = """
import sys
from pathlib import Path
from perfq.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(" ".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def test_help_imports_nothing_heavy():
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Usage" in proc.stdout
    assert proc.stderr.strip() == ""  # none of the heavy modules


def test_each_command_is_built_from_the_module_that_registers_it():
    """`perfq X` builds X's module only, so the registry must name every command's module."""
    import importlib

    import typer

    from perfq.cli import COMMAND_MODULES, build_app

    for module in set(COMMAND_MODULES.values()):
        app = typer.Typer()
        importlib.import_module(module).register(app)
        names = {c.name or c.callback.__name__ for c in app.registered_commands}
        names |= {g.name for g in app.registered_groups}
        assert {n for n, m in COMMAND_MODULES.items() if m == module} == names, module
    whole = build_app()
    listed = {c.name or c.callback.__name__ for c in whole.registered_commands} | {
        g.name for g in whole.registered_groups}
    assert listed == {*COMMAND_MODULES, "version"}
    one = build_app("affected")
    assert {c.name or c.callback.__name__ for c in one.registered_commands} == {"affected", "backtest", "version"}


PROBE_ONE = """
import sys
from pathlib import Path
from perfq.cli import main
try:
    main(["version"])
except SystemExit:
    pass
print(" ".join(m for m in ("perfq.run.cli", "perfq.bisect.cli", "perfq.ir.cli", "perfq.ci.cli") if m in sys.modules),
      file=sys.stderr)
"""


def test_one_command_imports_no_other_feature_cli():
    proc = subprocess.run([sys.executable, "-c", PROBE_ONE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "perfq 0.1.0"
    assert proc.stderr.strip() == ""


def _query_probe(tmp_path: Path, probe: str) -> subprocess.CompletedProcess:
    """``probe`` (Python code) run in a fixture repo, indexed, whose branch changes one kernel's line."""
    repo = make_repo(tmp_path / "repo")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    git(repo, "checkout", "-q", "-b", "work")
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    return subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, timeout=120)


PROBE_AFFECTED = """
import sys
from pathlib import Path
from perfq.cli import main
try:
    main(["affected", "main", "--format", "json"])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(m for m in ("duckdb", "_duckdb", "numpy", "multiprocessing", "yaml", "clang", "perfq.run.plan",
                           "common.proc", "ctypes", "schema.model")
               if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.skipif(importlib.util.find_spec("_duckdb") is None, reason="a duckdb without a top-level engine (1.x)")
def test_a_one_file_query_loads_duckdb_s_engine_alone(tmp_path):
    """`perfq affected` on a small change runs SQL on DuckDB's compiled engine without the
    package's Python API (55 ms), and loads no numpy, process pool, yaml, libclang, the
    run's planner (`--budget` only), the child-process machinery (common.proc and ctypes: the
    index build records torch's settings, a query reads the record) or the writer's row types
    (schema.model: 32 frozen dataclasses; a query names the vocabularies of schema.kinds)."""
    proc = _query_probe(tmp_path, PROBE_AFFECTED)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["benchmarks"]
    assert proc.stderr.strip() == "_duckdb"


PROBE_PATCH = """
import sys
from pathlib import Path
from perfq.cli import main
try:
    main(["index", "--no-trace", "--format", "json"])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(m for m in ("indexer.relink", "indexer.link", "multiprocessing", "yaml", "numpy",
                                  "importlib.metadata")
               if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "edit",
    [("out[i] * 2", "out[i] * 3"), ("}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")],
    ids=["body-only", "new-function"],
)
def test_a_patch_loads_none_of_the_relink_machinery(tmp_path, edit):
    """`perfq index` after a body-only edit, or one that adds a function (whose packed graph is
    patched, not packed again), patches the index without loading the re-link path: no
    process pool, linker, yaml reader, numpy or package metadata."""
    repo = make_repo(tmp_path / "repo")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", *edit)
    proc = subprocess.run([sys.executable, "-c", PROBE_PATCH], cwd=repo, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mode"] == "patched"
    assert proc.stderr.strip() == ""


PROBE_COLLECTIONS = """
import atexit, gc, sys
from perfq.cli import run
runs = []

def in_command():  # the command's function (perfq/cli/affected_cmd.py: affected) is running
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_name, frame.f_code.co_filename.rpartition("/")[2]) != (
            "affected", "affected_cmd.py"):
        frame = frame.f_back
    return frame is not None

gc.callbacks.append(lambda phase, info: runs.append(in_command()) if phase == "start" else None)
atexit.register(lambda: print(sum(runs), gc.isenabled(), file=sys.stderr))
sys.argv = ["perfq", "affected", "main", "--format", "json"]
run()  # as the console script: the process ends here
"""


def test_the_query_runs_without_garbage_collection(tmp_path):
    """The query's stages (its imports, the index reads, the walk, the output) allocate many
    objects and little cyclic garbage: the collector is paused while they run (hundreds of
    gen-0 passes, 10-15% of a 500-file diff's CPU), and on again after."""
    proc = _query_probe(tmp_path, PROBE_COLLECTIONS)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["benchmarks"]
    assert proc.stderr.split() == ["0", "True"]


def test_the_query_command_s_signature_is_read_without_evaluating_strings():
    """Typer reads `affected`'s signature about a dozen times while it builds the command: its
    annotations are objects made once when the module loads, not strings that each read
    compiles and evaluates again (~3 ms of every `perfq affected`)."""
    import inspect

    from perfq.cli import affected_cmd

    for command in (affected_cmd.affected, affected_cmd.backtest):
        annotations = inspect.get_annotations(command)
        assert annotations and not [name for name, tp in annotations.items() if isinstance(tp, str)]
