"""A changed header function the index lacks (a header outside the indexed roots, as an
out-of-tree backend's helpers often are) is reached through the files that include its header,
never through every function anywhere that calls something of the same name (issue 40 item 6:
a top-k header's change fanned out through a common name to 63 benchmarks)."""

from __future__ import annotations

import json

from tests.aten_fixture import commit_all, make_repo
from tests.conftest import run_perfq

HEADER = "aten/src/extra/LoopHelpers.h"
BODY = "#pragma once\nnamespace extra {\ninline int inner_loop(int n) {\n  return n * {k};\n}\n}  // namespace extra\n"


def test_a_header_function_outside_the_index_does_not_match_callers_by_name(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / HEADER).parent.mkdir(parents=True)
    (repo / HEADER).write_text(BODY.replace("{k}", "2"))
    base = commit_all(repo, "a helper header nothing indexed includes")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    (repo / HEADER).write_text(BODY.replace("{k}", "3"))
    head = commit_all(repo, "change the helper")

    proc = run_perfq(repo, "affected", f"{base}..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # the softmax kernel calls a template of the same name (inner_loop<scalar_t>) in its own file
    assert doc["benchmarks"] == [] and doc["canary"] == []
    assert [u["reason"] for u in doc["unmapped_changes"]] == [
        f"modified function not in the index and nothing that includes {HEADER} calls inner_loop"]
