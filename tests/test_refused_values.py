"""Values perfq used to accept and misread are refused in one line (issue 33, medium and low items):
NaN or out-of-range numbers, roots outside the repository, config files that are not UTF-8 or nest
too deeply, and a `bisect --resume` with nothing to resume creates nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfq.options import EXIT_ERROR, EXIT_USAGE
from tests.aten_fixture import make_repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("values") / "repo")


def _refused(proc: subprocess.CompletedProcess, code: int, needle: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (("run", "--timeout", "nan"), "not a finite number"),
    (("run", "--timeout", "0"), "not positive"),
    (("run", "--timeout", "-5"), "not positive"),
    (("run", "--warmup-iterations", "-1"), "--warmup-iterations"),
    (("run", "--mkl-num-threads", "-2"), "--mkl-num-threads"),
    (("index", "--jobs", "-3"), "--jobs"),
    (("bisect", "HEAD", "HEAD", "--timeout", "nan"), "not a finite number"),
    (("bisect", "HEAD", "HEAD", "--min-change", "-1"), "is negative"),
    (("bisect", "HEAD", "HEAD", "--threshold", "nan"), "not a finite number"),
    (("bisect", "HEAD", "HEAD", "--margin", "nan"), "not a finite number"),
    (("bisect-step", "--good-value", "nan", "--bad-value", "2", "--", "true"), "not a finite number"),
    (("bisect-step", "--good-value", "1", "--bad-value", "inf", "--", "true"), "not a finite number"),
])
def test_nan_and_out_of_range_numbers_are_usage_errors(repo: Path, cli, args: tuple[str, ...], needle: str):
    _refused(cli(repo, *args), EXIT_USAGE, needle)


@pytest.mark.parametrize("root", ["../outside", "/etc", "aten/../../x"])
def test_a_root_outside_the_repository_is_refused(repo: Path, cli, root: str):
    _refused(cli(repo, "index", "-q", "--no-trace", "--source-root", root), EXIT_ERROR, "not inside the repository")


@pytest.mark.parametrize(("name", "data", "needle"), [
    ("perfq.toml", b"max_depth = 3\n\xff\xfe = 1\n", "not UTF-8"),
    ("pyproject.toml", b"[tool.perfq]\nmax_depth = 3\n# \xff\n", "not UTF-8"),
    ("perfq.toml", b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    ("pyproject.toml", b"[tool.perfq]\na = " + b"{b = " * 5000 + b"1" + b"}" * 5000 + b"\n", "nested too deeply"),
    ("perfq.toml", b"# " + b"x" * (1 << 21) + b"\n", "not a config file"),
], ids=["bad-utf8", "bad-utf8-pyproject", "deep-arrays", "deep-tables", "huge"])
def test_a_config_that_is_not_utf8_or_nests_too_deep_is_one_line(tmp_path: Path, cli, name: str, data: bytes,
                                                                 needle: str):
    repo = make_repo(tmp_path / "repo")
    (repo / name).write_bytes(data)
    proc = cli(repo, "index", "-q", "--no-trace")
    _refused(proc, EXIT_ERROR, needle)
    assert proc.stderr.count("\n") == 1


def test_bisect_resume_without_a_session_creates_no_history(tmp_path: Path, cli):
    repo = make_repo(tmp_path / "repo")
    _refused(cli(repo, "bisect", "--resume"), EXIT_ERROR, "no interrupted bisect session")
    assert not (repo / ".git/perfq/history.duckdb").exists()


BOMB = """\
- func: bomb(Tensor self) -> Tensor
  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
  {key}: *h
"""


@pytest.mark.parametrize(("extra", "needle"), [
    ("- func: foo(Tensor self) -> Tensor\n  dispatch: [CPU]\n", "'dispatch' must be a mapping"),
    ("- func: foo(Tensor self) -> Tensor\n  dispatch: {CPU: [a, b]}\n", "'dispatch' must be a mapping"),
    (BOMB.format(key="tags"), "'tags' must be a string or a list of strings"),
    (BOMB.format(key="dispatch"), "'dispatch' must be a mapping"),
    (BOMB.format(key="autogen"), "'autogen' must be a string"),
], ids=["dispatch-list", "dispatch-nested", "bomb-tags", "bomb-dispatch", "bomb-autogen"])
def test_a_malformed_native_functions_entry_is_one_line(tmp_path: Path, cli, extra: str, needle: str):
    repo = make_repo(tmp_path / "repo")
    yaml_file = repo / "aten/src/ATen/native/native_functions.yaml"
    yaml_file.write_text(yaml_file.read_text() + extra)
    proc = cli(repo, "index", "-q", "--no-trace")
    _refused(proc, EXIT_ERROR, needle)
    assert proc.stderr.count("\n") == 1


@pytest.mark.parametrize("doc", ["[" * 100_000 + "]" * 100_000, '{"format":' + "[" * 100_000 + "]" * 100_000 + "}"],
                         ids=["array", "in-header"])
def test_a_result_file_nested_100k_deep_is_one_line(tmp_path: Path, cli, doc: str):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "deep.json").write_text(doc + "\n")
    proc = cli(repo, "import", str(tmp_path / "deep.json"))
    _refused(proc, EXIT_ERROR, "nested too deeply")
    assert not (repo / ".git/perfq/history.duckdb").exists()


@pytest.mark.parametrize("ddl", ["DROP TABLE reach_edges", "ALTER TABLE functions DROP COLUMN end_line",
                                 "DROP TABLE benchmarks"], ids=["table", "column", "benchmarks"])
def test_an_index_missing_a_table_or_column_is_one_line_then_rebuilt(tmp_path: Path, cli, ddl: str):
    from schema.engine import duckdb
    from tests.aten_fixture import commit_all, replace_in

    repo = make_repo(tmp_path / "repo")
    assert cli(repo, "index", "-q", "--no-trace").returncode == 0
    db = repo / ".git/perfq/index.duckdb"
    con = duckdb.connect(str(db))
    con.execute(ddl)
    con.close()
    for args in (("stats",), ("coverage",)):
        proc = cli(repo, *args)
        assert proc.returncode in (0, EXIT_ERROR) and "Traceback" not in proc.stderr, proc.stderr
        if proc.returncode:
            _refused(proc, EXIT_ERROR, "rebuild it with `perfq index --full`")
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    assert cli(repo, "index", "-q", "--no-trace").returncode == 0  # a patch cannot: re-linked whole
    assert cli(repo, "stats").returncode == 0
    assert cli(repo, "affected", "HEAD~", "--format", "json").returncode == 0


def test_a_bad_metric_regex_is_a_usage_error_before_anything_runs(repo: Path, cli):
    for args in (("bisect", "HEAD", "HEAD", "--metric", "("), ("bisect-step", "--good-value", "1", "--bad-value",
                                                               "2", "--metric", "(", "--", "true")):
        _refused(cli(repo, *args), EXIT_USAGE, "is not a regular expression")


def test_prune_with_another_repositorys_index_is_refused(tmp_path: Path, cli):
    from tests.aten_fixture import commit_all, replace_in

    other = make_repo(tmp_path / "other")
    replace_in(other, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 5")
    commit_all(other, "another history")
    assert cli(other, "index", "-q", "--no-trace").returncode == 0
    repo = make_repo(tmp_path / "repo")
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    proc = cli(repo, "bisect", "HEAD~", "HEAD", "--prune", "--benchmark", "softmax", "--yes",
               "--db", str(other / ".git/perfq/index.duckdb"))
    _refused(proc, EXIT_ERROR, "built from another repository")
