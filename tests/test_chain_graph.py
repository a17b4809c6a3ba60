"""`perfq affected --graph FILE`: the explained chains as one networkx graph (GraphML, GEXF, GML)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

from perfq.options import EXIT_ERROR
from query.chain_graph import StepKind, split_step
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


@pytest.fixture(scope="module")
def changed_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = make_repo(tmp_path_factory.mktemp("graph"))
    assert perfq(root, "index", "-q").returncode == 0
    git(root, "checkout", "-q", "-b", "work")
    replace_in(root, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(root)
    yield root


def test_split_step_reads_kind_name_and_edge_tag():
    assert split_step("op _softmax [structured_delegate]") == (StepKind.op, "op _softmax", "structured_delegate")
    assert split_step("benchmark softmax_test [traced: 2 test(s) execute _softmax]")[0] is StepKind.benchmark
    assert split_step("aten/src/x.cpp:at::native::f")[0:2] == (StepKind.function, "aten/src/x.cpp:at::native::f")
    assert split_step("benchmark file pt/a.py imports b.py, which changed")[0] is StepKind.benchmark_file


@pytest.mark.parametrize("suffix", [".graphml", ".gexf", ".gml"])
def test_graph_file_holds_every_chain_from_the_change_to_its_benchmarks(changed_repo: Path, tmp_path: Path,
                                                                         suffix: str):
    out = tmp_path / f"why{suffix}"
    proc = perfq(changed_repo, "affected", "main", "--format", "json", "--graph", str(out))
    assert proc.returncode == 0, proc.stderr
    read = {".graphml": nx.read_graphml, ".gexf": nx.read_gexf, ".gml": nx.read_gml}[suffix]
    graph = read(out)
    changed = [n for n, d in graph.nodes(data=True) if d["changed"] in (True, "True", 1)]
    selected = {d["benchmark"] for _, d in graph.nodes(data=True) if d.get("benchmark")}
    assert changed and all(graph.nodes[n]["kind"] == "function" for n in changed)
    doc = json.loads(proc.stdout)
    assert selected == {b["name"] for b in doc["benchmarks"] if b["reasons"]} and "softmax_op_test" in selected
    # every selected benchmark is reachable from a changed function, through an operator
    for node, data in graph.nodes(data=True):
        if data.get("benchmark"):
            ancestors = nx.ancestors(graph, node)
            assert any(a in changed for a in ancestors)
            assert any(graph.nodes[a]["kind"] == "op" for a in ancestors)


def test_unknown_graph_format_is_one_line_error(changed_repo: Path, tmp_path: Path):
    proc = perfq(changed_repo, "affected", "main", "--graph", str(tmp_path / "why.png"))
    assert proc.returncode == EXIT_ERROR
    assert proc.stderr.strip().startswith("error: --graph") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "why.png").exists()
