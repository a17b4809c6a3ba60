"""Shared test helpers and fixtures: the perfq CLI in a subprocess, git, the PyTorch corpus."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

# PERFQ_CORPUS is the parent directory holding pytorch-2.6.0 (as scripts/fetch-pytorch-source.sh uses it)
CORPUS = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
# Output is asserted as a plain pipe shows it: a CI runner that forces colour (FORCE_COLOR, as some set)
# must not turn width and text checks into checks of escape codes.
for _colour in ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS", "TTY_COMPATIBLE"):
    os.environ.pop(_colour, None)

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@l", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@l"}


def run_perfq(cwd: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real perfq CLI in a subprocess (real exit codes, stderr, signals). Ctrl-C
    (SIGINT) reaches it as it reaches a terminal's foreground command, even when the suite runs
    as a background job, whose shell has it ignored (an ignored SIGINT is inherited)."""
    return subprocess.run([sys.executable, "-m", "perfq", *args], cwd=cwd, capture_output=True, text=True,
                          input=stdin, env={**os.environ, **(env or {})}, timeout=timeout,
                          preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def db_rows(db: Path, sql: str) -> list[tuple]:
    """The rows of ``sql`` on the DuckDB file ``db``, opened read-only and closed again."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def git(repo: Path, *args: str, date: str | None = None) -> str:
    """``git args`` in ``repo`` with a fixed identity (and author/committer ``date``); stdout."""
    env = {**os.environ, **GIT_IDENTITY}
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def perfq():
    """``perfq(cwd, *args, stdin=None, env=None)``: the CLI in a subprocess."""
    return run_perfq


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(cwd, *args)``: the real entry point (``perfq.cli.main``) run in this process, with
    its exit status, stdout and stderr as a CompletedProcess (for commands a subprocess adds nothing to)."""
    from perfq.cli import main

    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["perfq", *args], code, out, err)

    return run


@pytest.fixture
def corpus() -> Path:
    """The PyTorch 2.6.0 source tree ($PERFQ_CORPUS/pytorch-2.6.0); skips the test when absent."""
    if not (CORPUS / "aten").is_dir():
        pytest.skip("PyTorch 2.6.0 corpus not fetched (scripts/fetch-pytorch-source.sh)")
    return CORPUS


@pytest.fixture(scope="session")
def corpus_scratch(tmp_path_factory: pytest.TempPathFactory):
    """A shared clone of the corpus (the corpus is never written) with its perfq index built
    once per session, traces included: every corpus test that needs the full index uses it."""
    from tests.affected_cases import make_scratch

    if not (CORPUS / "aten").is_dir():
        pytest.skip("PyTorch 2.6.0 corpus not fetched (scripts/fetch-pytorch-source.sh)")
    return make_scratch(CORPUS, tmp_path_factory.mktemp("corpus-scratch") / "pytorch-2.6.0")


@pytest.fixture(scope="session", autouse=True)
def _release_libclang():
    """The libclang index that in-process parses cache is freed before the interpreter tears clang down
    (else its destructor prints an ignored exception at exit)."""
    yield
    from indexer import cpp

    cpp._index.cache_clear()
    gc.collect()
