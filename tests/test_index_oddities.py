"""Smaller index faults: operators pasted by the preprocessor (`#op "." #overload` in a #define) are not
registrations, and a file too large to parse is reported by `perfq index`, `perfq stats` and as the reason
when a change touches it."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from indexer.extract import MAX_BYTES
from indexer.facts import FileFacts
from indexer.registrations import extract_registrations
from tests.aten_fixture import commit_all, make_repo

MACROS = r"""
TORCH_LIBRARY_IMPL(aten, FuncTorchVmapMode, m) {
  #define RANDOM_POINTWISE(op) \
    m.impl(#op, RANDOM_RULE(ATEN_FN(op)));
  #define RANDOM_POINTWISE2(op, overload) \
    m.impl(#op"."#overload, RANDOM_RULE(ATEN_FN2(op, overload)));
  #define DECOMPOSE2(op, overload)  m.impl(#op "." #overload, native::op);
#define REGISTER_TWICE(stub, fn) \
  REGISTER_DISPATCH(stub, fn);  \
  REGISTER_DISPATCH(stub##_2, fn)

  RANDOM_POINTWISE2(normal, Tensor_Tensor);
  m.impl("binomial", RANDOM_RULE(at::functorch::binomial_wrapper));
  m.impl("aten::add.Tensor", TORCH_FN(add_batched));
  m.impl("", TORCH_FN(nameless));
}
REGISTER_DISPATCH(real_stub, &real_kernel);
"""


def test_preprocessor_pasted_names_are_not_operators():
    facts = FileFacts("aten/src/ATen/functorch/BatchRulesX.cpp", "cpp", "", 0)
    extract_registrations(facts.path, MACROS, facts)
    assert [(i.op, i.kernel_name) for i in facts.library_impls] == [
        ("binomial", "at::functorch::binomial_wrapper"),
        ("add.Tensor", "add_batched"),
    ]
    assert [(s.stub, s.impl_name) for s in facts.stub_impls] == [("real_stub", "real_kernel")]


def _big_file(repo: Path) -> str:
    path = "aten/src/ATen/native/cpu/Generated.cpp"
    body = "int filler_{i}(int x) {{ return x + {i}; }}\n"
    text, i = [], 0
    size = 0
    while size <= MAX_BYTES:
        line = body.format(i=i)
        text.append(line)
        size += len(line)
        i += 1
    (repo / path).write_text("namespace at::native {\n" + "".join(text) + "}\n")
    return path


def test_a_file_over_the_size_limit_is_reported_everywhere(tmp_path: Path, cli):
    repo = make_repo(tmp_path / "repo")
    big = _big_file(repo)
    commit_all(repo, "generated file")
    proc = cli(repo, "index", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    assert f"not indexed: {big}: larger than {MAX_BYTES} bytes" in proc.stderr
    proc = cli(repo, "index", "--no-trace", "--format", "json")
    assert json.loads(proc.stdout)["mode"] == "patched"  # read back from the patched index
    assert json.loads(proc.stdout)["skipped"] == [{"file": big, "reason": f"larger than {MAX_BYTES} bytes"}]
    proc = cli(repo, "index", "--no-trace", "--full", "--format", "json")
    assert json.loads(proc.stdout)["skipped"] == [{"file": big, "reason": f"larger than {MAX_BYTES} bytes"}]
    stats = cli(repo, "stats", "--format", "json")
    assert json.loads(stats.stdout)["skipped_files"] == [{"file": big, "reason": f"larger than {MAX_BYTES} bytes"}]
    assert f"{big}: larger than {MAX_BYTES} bytes" in cli(repo, "stats").stdout
    con = duckdb.connect(str(repo / ".git/perfq/index.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM functions WHERE name LIKE 'filler_%'").fetchone()[0] == 0
    con.close()

    text = (repo / big).read_text()
    (repo / big).write_text(text.replace("return x + 7;", "return x + 8;"))
    commit_all(repo, "edit the big file")
    doc = json.loads(cli(repo, "affected", "HEAD~1..HEAD", "--format", "json").stdout)
    assert doc["changed_functions"] == []
    [unmapped] = doc["unmapped_changes"]
    assert unmapped["file"] == big and unmapped["reason"].startswith(f"file not indexed: larger than {MAX_BYTES}")
    assert "outside any function" not in unmapped["reason"]
    assert f"{big}: not indexed (larger than {MAX_BYTES} bytes)" in doc["warnings"]
