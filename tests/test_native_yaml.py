"""native_functions.yaml: torchgen's reading and the plain fallback agree; bad yaml is one error."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import PerfqError
from indexer import native_yaml
from tests.aten_fixture import NATIVE_FUNCTIONS


def _facts(ops):
    return {o.name: (o.base, o.overload, o.structured, o.structured_delegate, sorted(o.kernels)) for o in ops}


def test_plain_reader_semantics(tmp_path: Path):
    path = tmp_path / "native_functions.yaml"
    path.write_text(NATIVE_FUNCTIONS)
    ops = _facts(native_yaml._plain(path))
    assert ops["softmax_op"] == ("softmax_op", "", False, "softmax_op.out", [])
    assert ops["softmax_op.out"][4] == [("CPU", "softmax_op_cpu_out"), ("CUDA", "softmax_op_cuda_out")]
    assert ops["lonely"][4] == [("CPU", "lonely_kernel"), ("CUDA", "lonely_kernel")]  # "CPU, CUDA:" line
    assert ops["composite_thing"][4] == [("CompositeImplicitAutograd", "composite_thing")]  # default kernel


def test_torchgen_and_plain_agree(tmp_path: Path):
    pytest.importorskip("torchgen.gen")
    path = tmp_path / "native_functions.yaml"
    path.write_text(NATIVE_FUNCTIONS)
    plain = _facts(native_yaml._plain(path))
    gen = _facts(native_yaml._with_torchgen(path, None))
    for name, facts in plain.items():
        base, overload, structured, delegate, kernels = gen[name]
        assert (base, overload, structured, delegate) == facts[:4]
        assert set(facts[4]) <= set(kernels)


def test_malformed_yaml_is_one_line_error(tmp_path: Path):
    path = tmp_path / "native_functions.yaml"
    path.write_text("- func: foo(\n  dispatch: [unclosed\n")
    with pytest.raises(PerfqError, match="malformed YAML"):
        native_yaml.load_native_functions(tmp_path, path)


def test_missing_yaml(tmp_path: Path):
    with pytest.raises(PerfqError, match="not found"):
        native_yaml.load_native_functions(tmp_path, tmp_path / "nope.yaml")
