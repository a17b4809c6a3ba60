"""With a compile_commands.json, files are parsed with their real flags and clang's own
resolution picks the callee: overloads are told apart, which names alone cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from common.errors import PerfqError
from indexer.build import build_index
from indexer.compile_db import load_compile_db
from tests.aten_fixture import NATIVE_FUNCTIONS

SOURCES = {
    "lib/include/scale.h": "#pragma once\nnamespace lib {\nint scale(int x);\ndouble scale(double x);\n}\n",
    "lib/src/scale.cpp": (
        '#include "scale.h"\nnamespace lib {\nint scale(int x) {\n  return x * 2;\n}\n'
        "double scale(double x) {\n  return x * 3.0;\n}\n}\n"
    ),
    "lib/src/user.cpp": ('#include "scale.h"\nnamespace lib {\ndouble use_double() {\n  return scale(2.5);\n}\n}\n'),
}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel, text in {**SOURCES, "aten/src/ATen/native/native_functions.yaml": NATIVE_FUNCTIONS}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    entries = [
        {
            "directory": str(repo / "lib"),
            "file": f"src/{name}",
            "command": f"c++ -Iinclude -std=c++17 -c src/{name} -o x.o",
        }
        for name in ("scale.cpp", "user.cpp")
    ]
    (repo / "compile_commands.json").write_text(json.dumps(entries))
    return repo


def _edges(db: Path) -> set[tuple[str, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return set(
            con.execute(
                "SELECT b.qualname, b.start_line FROM call_edges e JOIN functions a ON a.id = e.caller_id"
                " JOIN functions b ON b.id = e.callee_id WHERE a.name = 'use_double'"
            ).fetchall()
        )
    finally:
        con.close()


def test_exact_resolution_tells_overloads_apart(tmp_path: Path):
    repo = _repo(tmp_path)
    by_name = tmp_path / "names.duckdb"
    build_index(repo, Config(source_roots=("lib",), python_roots=()), by_name, jobs=1, quiet=True)
    assert _edges(by_name) == {("lib::scale", 3), ("lib::scale", 6)}  # both overloads, by name
    exact = tmp_path / "exact.duckdb"
    cfg = Config(source_roots=("lib",), python_roots=(), compile_commands="compile_commands.json")
    build_index(repo, cfg, exact, jobs=1, quiet=True)
    assert _edges(exact) == {("lib::scale", 6)}  # clang picked scale(double)


def test_compile_db_errors_and_paths(tmp_path: Path):
    repo = _repo(tmp_path)
    db = load_compile_db(repo, "compile_commands.json")
    assert set(db) == {"lib/src/scale.cpp", "lib/src/user.cpp"}
    assert db["lib/src/user.cpp"][0] == f"-working-directory={repo / 'lib'}"
    assert "-o" not in db["lib/src/user.cpp"] and "src/user.cpp" not in db["lib/src/user.cpp"]
    (repo / "bad.json").write_text("{not json")
    with pytest.raises(PerfqError, match="malformed JSON"):
        load_compile_db(repo, "bad.json")
