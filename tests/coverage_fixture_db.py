"""A small perfq index (built from schema/index.sql) and a git repo with history, for coverage tests.

Graph (dst -> src: src is affected when dst changes)::

    helper_common(2) -> add_impl(1) -> add.Tensor -> add.Scalar
    helper_common(2) -> lerp_kernel(5) -> lerp.Scalar
    lerp_tensor_kernel(6) -> lerp.Tensor
    softmax_cpu(3), softmax_cuda(4) -> softmax.int -> bench softmax_test
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import duckdb

from schema.version import SCHEMA_VERSION
from tests.conftest import git

FILES = [
    (1, "aten/src/ATen/native/BinaryOps.cpp", "cpp", 60),
    (2, "aten/src/ATen/native/cpu/SoftmaxKernel.cpp", "cpp", 70),
    (3, "aten/src/ATen/native/cuda/SoftMax.cu", "cuda", 110),
    (4, "aten/src/ATen/native/Lerp.cpp", "cpp", 40),
    (5, "benchmarks/operator_benchmark/pt/softmax_test.py", "python", 30),
]
# id, file_id, name, start, end
FUNCTIONS = [
    (1, 1, "add_impl", 10, 30),
    (2, 1, "helper_common", 40, 50),
    (3, 2, "softmax_cpu", 5, 60),
    (4, 3, "softmax_cuda", 1, 100),
    (5, 4, "lerp_kernel", 1, 20),
    (6, 4, "lerp_tensor_kernel", 25, 35),
]
# name, base, overload, schema, composite
OPS = [
    (
        "add.Tensor",
        "add",
        "Tensor",
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        None,
    ),
    (
        "add.Scalar",
        "add",
        "Scalar",
        "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
        "CompositeExplicitAutograd",
    ),
    (
        "softmax.int",
        "softmax",
        "int",
        "softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
        None,
    ),
    ("lerp.Scalar", "lerp", "Scalar", "lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", None),
    ("lerp.Tensor", "lerp", "Tensor", "lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", None),
    ("relu", "relu", "", "relu(Tensor self) -> Tensor", "CompositeImplicitAutograd"),
    (
        "addcmul",
        "addcmul",
        "",
        "addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
        None,
    ),
]
# op, dispatch key, kernel name, function id
KERNELS = [
    ("add.Tensor", "CPU", "add_impl", 1),
    ("add.Tensor", "CUDA", "add_impl", 1),
    ("softmax.int", "CPU", "softmax_cpu", 3),
    ("softmax.int", "CUDA", "softmax_cuda", 4),
    ("lerp.Scalar", "CPU", "lerp_kernel", 5),
    ("lerp.Scalar", "CUDA", "lerp_kernel", 5),
    ("lerp.Tensor", "CPU", "lerp_tensor_kernel", 6),
    ("relu", "CompositeImplicitAutograd", "relu", None),
]
BENCHMARKS = [
    ("softmax_test", "benchmarks/operator_benchmark/pt/softmax_test.py"),
    ("add_test", "benchmarks/operator_benchmark/pt/add_test.py"),
    ("old_test", "benchmarks/operator_benchmark/pt/old_test.py"),
    ("module_test", "benchmarks/operator_benchmark/pt/module_test.py"),  # linked to nothing
]
BENCH_OPS = [
    ("softmax_test", "softmax.int", "static"),
    ("add_test", "add.Tensor", "traced"),
    ("old_test", "gone_op.default", "static"),
]


def schema_sql() -> str:
    return resources.files("schema").joinpath("index.sql").read_text()


def _insert(con: duckdb.DuckDBPyConnection, table: str, **values: object) -> None:
    """Insert one row by column name; NOT NULL columns the fixture does not set get a neutral value.

    Keeps the fixture valid when the index schema gains columns the coverage query does not read.
    """
    info = con.execute(f"PRAGMA table_info('{table}')").fetchall()  # cid, name, type, notnull, default, pk
    row = {}
    for _, name, ctype, notnull, _, _ in info:
        if name in values:
            row[name] = values[name]
        elif notnull:
            row[name] = False if ctype == "BOOLEAN" else 0 if "INT" in ctype else ""
    unknown = set(values) - set(row)
    if unknown:
        raise KeyError(f"{table} has no column {sorted(unknown)}")
    cols = ", ".join(row)
    con.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def build_index(path: Path) -> Path:
    """Write the fixture index at ``path``."""
    con = duckdb.connect(str(path))
    con.execute(schema_sql())
    _insert(con, "meta", key="schema_version", value=str(SCHEMA_VERSION))
    for fid, p, lang, n in FILES:
        _insert(con, "files", id=fid, path=p, sha256="x", lang=lang, n_lines=n, status="ok")
    for fid, file_id, name, start, end in FUNCTIONS:
        _insert(
            con,
            "functions",
            id=fid,
            file_id=file_id,
            qualname=f"at::native::{name}",
            name=name,
            kind="function",
            start_line=start,
            end_line=end,
            internal=False,
        )
    for name, base, overload, schema, composite in OPS:
        _insert(
            con,
            "ops",
            name=name,
            base=base,
            overload=overload,
            namespace="aten",
            schema=schema,
            structured=False,
            variants="function",
            tags="",
            composite=composite,
        )
    for op, key, kernel, fid in KERNELS:
        _insert(con, "kernels", op=op, dispatch_key=key, kernel_name=kernel, function_id=fid)
    for name, file in BENCHMARKS:
        _insert(con, "benchmarks", name=name, file=file, framework="operator_benchmark", tests="[]", devices="[]")
    for bench, op, source in BENCH_OPS:
        _insert(con, "bench_ops", bench=bench, op=op, source=source, test="", device="cpu", via="torch.x")
    # the trace saw add_test run aten::add (its traced link is "traced", not "inferred")
    _insert(con, "trace_ops", bench="add_test", test="add_M8_cpu", namespace="aten", base="add", layout="dense",
            inferred="", in_kernel=False)
    # nodes: function node id == function id, ops from 100, benchmarks from 200
    for fid, _, name, _, _ in FUNCTIONS:
        _insert(con, "nodes", id=fid, kind="function", key=str(fid), label=name)
    op_node = {}
    for i, (name, *_rest) in enumerate(OPS):
        op_node[name] = 100 + i
        _insert(con, "nodes", id=100 + i, kind="op", key=name, label=name)
    _insert(con, "nodes", id=200, kind="benchmark", key="softmax_test", label="softmax_test")
    edges = [
        (2, 1, "call"),
        (1, op_node["add.Tensor"], "kernel"),
        (op_node["add.Tensor"], op_node["add.Scalar"], "op_call"),
        (2, 5, "call"),
        (5, op_node["lerp.Scalar"], "kernel"),
        (6, op_node["lerp.Tensor"], "kernel"),
        (3, op_node["softmax.int"], "kernel"),
        (4, op_node["softmax.int"], "kernel"),
        (op_node["softmax.int"], 200, "bench_op"),
    ]
    for dst, src, kind in edges:
        _insert(con, "reach_edges", dst=dst, src=src, kind=kind, detail="")
    con.close()
    return path


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    return git(repo, *args, date=date).strip()


def _write_lines(path: Path, n: int, changed: dict[int, str] | None = None) -> None:
    lines = [f"// line {i}" for i in range(1, n + 1)]
    for line, text in (changed or {}).items():
        lines[line - 1] = text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def build_repo(repo: Path, old_date: str = "2000-01-01T00:00:00") -> dict[str, str]:
    """A git repo holding the fixture files; returns commit ids.

    c0 (root, dated ``old_date``) imports everything; c_old (year 2000) edits add_impl; then,
    dated now: c1 edits helper_common, c2 lerp_tensor_kernel, c3 lerp_kernel.
    """
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", "main")
    for _, p, _, n in FILES:
        _write_lines(repo / p, n)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "import", date=old_date)
    commits = {"c0": _git(repo, "rev-parse", "HEAD")}
    _write_lines(repo / FILES[0][1], 60, {15: "// old change in add_impl"})
    _git(repo, "commit", "-q", "-am", "old add change", date="2000-06-01T00:00:00")
    commits["c_old"] = _git(repo, "rev-parse", "HEAD")
    steps = [
        ("c1", 0, 60, {15: "// old change in add_impl", 45: "// helper changed"}),
        ("c2", 3, 40, {28: "// lerp tensor changed"}),
        ("c3", 3, 40, {28: "// lerp tensor changed", 5: "// lerp scalar changed"}),
    ]
    for key, file_index, n, changed in steps:
        _write_lines(repo / FILES[file_index][1], n, changed)
        _git(repo, "commit", "-q", "-am", key)
        commits[key] = _git(repo, "rev-parse", "HEAD")
    return commits
