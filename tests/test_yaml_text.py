"""``common.yaml_text``: perfq's one YAML reader (libyaml's C parser when PyYAML has it) reads
what ``yaml.safe_load`` reads, and fails the same way."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from common import yaml_text
from common.yaml_text import YAMLError, load_yaml

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_DOCS)
def test_reads_what_safe_load_reads(doc):
    text = yaml.safe_dump(doc, allow_unicode=True)
    assert load_yaml(text) == yaml.safe_load(text)  # (PyYAML's dump does not round-trip every text)


def test_uses_the_c_parser_when_pyyaml_has_it():
    assert yaml_text._LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)


def test_malformed_text_raises_yamlerror_with_its_line():
    with pytest.raises(YAMLError) as err:
        load_yaml("- func: add(Tensor self) -> Tensor\n  dispatch: {CPU: add\n- func: [\n")
    assert err.value.problem_mark is not None and err.value.problem_mark.line >= 1


def test_python_objects_are_refused():
    with pytest.raises(YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']")
