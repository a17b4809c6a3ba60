"""The shipped example CI workflow wires affected -> matrix runs -> import + compare."""

from __future__ import annotations

from importlib import resources

import yaml


def test_example_workflow_stages():
    text = resources.files("perfq.data").joinpath("ci/perfq-benchmarks.yml").read_text(encoding="utf-8")
    flow = yaml.safe_load(text)
    jobs = flow["jobs"]
    assert "--format gha-matrix" in " ".join(s.get("run", "") for s in jobs["select"]["steps"])
    bench = jobs["bench"]
    assert bench["strategy"]["matrix"] == "${{ fromJSON(needs.select.outputs.matrix) }}"
    runs = " ".join(s.get("run", "") for s in bench["steps"])
    assert "perfq run" in runs and "--ab" in runs and "--out" in runs
    report = " ".join(s.get("run", "") for s in jobs["report"]["steps"])
    assert "perfq import" in report and "--format markdown" in report and "gh pr comment" in report
    assert jobs["report"]["needs"] == "bench"
