"""Manifest parsing and specialization keys (pure: no triton import needed)."""

from __future__ import annotations

import pytest

from common.errors import PerfqError
from perfq.ir.compile import Specialization
from perfq.ir.manifest import load_manifest, parse_manifest

GOOD = {
    "paths": ["bench"],
    "targets": ["cuda:90"],
    "kernels": [{"kernel": "m:k", "specializations": [
        {"signature": {"n": "i32", "x": "*fp32"}, "constexprs": {"B": 64}, "num_warps": 8}]}],
}


def test_parse_manifest_resolves_paths_and_options(tmp_path):
    m = parse_manifest(GOOD, tmp_path, "t")
    assert m.paths == ((tmp_path / "bench").resolve(),) and m.targets == ("cuda:90",)
    assert m.stages == ("ttir", "ttgir", "llir")
    (spec,) = m.kernels[0].specializations
    assert spec.options == {"num_warps": 8} and spec.divisible_args() == ("x",)


def test_specialization_key_is_canonical_in_parameter_order():
    a = Specialization({"n": "i32", "x": "*fp32"}, {"B": 64}, None, {"num_warps": 8})
    b = Specialization({"x": "*fp32", "n": "i32"}, {"B": 64}, None, {"num_warps": 8})
    names = ["x", "n", "B"]
    assert a.ordered(names).key() == b.ordered(names).key() == "x=*fp32/16,n=i32,B=64;num_warps=8"
    no_hint = Specialization({"x": "*fp32", "n": "i32"}, {"B": 64}, (), {"num_warps": 8})
    assert no_hint.key() == "x=*fp32,n=i32,B=64;num_warps=8"


@pytest.mark.parametrize("bad,message", [
    ({}, "'kernels' must be a non-empty list"),
    ({"kernels": [{"kernel": "nocolon", "specializations": [{}]}]}, "is not module:function"),
    ({"kernels": [{"kernel": "m:k"}]}, "'specializations' must be a non-empty list"),
    ({"kernels": [{"kernel": "m:k", "specializations": [{"warps": 4}]}]}, "unknown key(s) warps"),
    ({"kernels": [{"kernel": "m:k", "specializations": [{"num_warps": 0}]}]}, "positive integer"),
    ({**GOOD, "stages": ["sass"]}, "unknown stage(s) sass"),
])
def test_bad_manifests_are_one_line_errors(tmp_path, bad, message):
    with pytest.raises(PerfqError) as info:
        parse_manifest(bad, tmp_path, "perfq-ir.yaml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_load_manifest_sources(tmp_path):
    with pytest.raises(PerfqError, match="no IR manifest"):
        load_manifest(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfq.ir]\ntargets = ["hip:gfx942"]\n[[tool.perfq.ir.kernels]]\nkernel = "m:k"\n'
        '[[tool.perfq.ir.kernels.specializations]]\nsignature = {x = "*fp16"}\n'
    )
    assert load_manifest(tmp_path).targets == ("hip:gfx942",)
    (tmp_path / "perfq-ir.yaml").write_text("kernels: [unclosed\n")
    with pytest.raises(PerfqError, match="malformed YAML"):
        load_manifest(tmp_path)
    with pytest.raises(PerfqError, match="cannot read"):
        load_manifest(tmp_path, tmp_path / "missing.yaml")
