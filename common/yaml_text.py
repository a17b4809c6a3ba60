"""YAML reading for every perfq module: the safe subset, through libyaml's C parser when PyYAML
was built with it (native_functions.yaml: 0.22 s instead of 1.8 s; same documents, same
``yaml.YAMLError`` with a ``problem_mark`` on malformed input)."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """The document of ``text`` (``yaml.safe_load`` semantics); raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


YAMLError = yaml.YAMLError
