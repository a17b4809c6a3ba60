"""perfq configuration: PyTorch defaults, overridden by the indexed repo's
``[tool.perfq]`` (pyproject.toml) or ``perfq.toml``, then by command-line flags."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from perfq.errors import PerfqError


@dataclass(frozen=True)
class Config:
    """Everything that says what to index and how to select."""

    source_roots: tuple[str, ...] = ("aten/src/ATen", "c10", "torch/csrc")
    native_functions: tuple[str, ...] = ("aten/src/ATen/native/native_functions.yaml",)
    derivatives: tuple[str, ...] = ("tools/autograd/derivatives.yaml",)
    python_roots: tuple[str, ...] = ("torch",)
    benchmark_roots: tuple[str, ...] = ("benchmarks/operator_benchmark/pt",)
    script_benchmark_roots: tuple[str, ...] = ()
    upstream: str = ""  # an out-of-tree backend's PyTorch: "torch" (the installed package) or a source tree
    canaries: str = ""  # path in the repo; empty: perfq's own data/canaries.yaml
    compile_commands: str = ""  # optional compile_commands.json for exact resolution
    exclude: tuple[str, ...] = ("**/test/**", "**/tests/**", "**/third_party/**")
    reach_bound: int = 100  # more ops reached than this: shared infrastructure (canary); see README
    hub_fanout: int = 25  # an op called from more C++ functions than this is a hub; see README
    max_depth: int = 24
    extra: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, values: dict[str, Any]) -> Config:
        """A copy with ``values`` (config-file keys, dashes or underscores) applied."""
        known = {f.name for f in fields(self)}
        changes: dict[str, Any] = {}
        extra = dict(self.extra)
        for raw_key, value in values.items():
            key = raw_key.replace("-", "_")
            if key not in known or key == "extra":
                extra[key] = value
                continue
            current = getattr(self, key)
            if isinstance(current, tuple):
                if isinstance(value, str):
                    value = (value,)
                if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                    raise PerfqError(f"config key {raw_key!r} must be a list of strings")
                value = tuple(value)
            elif isinstance(current, int) and not isinstance(value, int):
                raise PerfqError(f"config key {raw_key!r} must be an integer")
            elif isinstance(current, str) and not isinstance(value, str):
                raise PerfqError(f"config key {raw_key!r} must be a string")
            changes[key] = value
        return replace(self, extra=extra, **changes)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise PerfqError(f"{path}: malformed TOML: {exc}") from None
    except OSError as exc:
        raise PerfqError(f"{path}: cannot read: {exc.strerror}") from None


def load_config(repo: Path, overrides: dict[str, Any] | None = None) -> Config:
    """The configuration for ``repo``: defaults, then its config file, then ``overrides``."""
    cfg = Config()
    perfq_toml = repo / "perfq.toml"
    pyproject = repo / "pyproject.toml"
    if perfq_toml.is_file():
        data = _read_toml(perfq_toml)
        cfg = cfg.with_overrides(data.get("tool", {}).get("perfq", data))
    elif pyproject.is_file():
        section = _read_toml(pyproject).get("tool", {}).get("perfq")
        if isinstance(section, dict):
            cfg = cfg.with_overrides(section)
    if overrides:
        cfg = cfg.with_overrides({k: v for k, v in overrides.items() if v not in (None, (), [])})
    return cfg
