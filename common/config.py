"""perfq configuration: PyTorch defaults, overridden by the indexed repo's
``[tool.perfq]`` (pyproject.toml) or ``perfq.toml``, then by command-line flags.

The config files are read from the repository, or, with ``PERFQ_CONFIG_DIR=DIR`` in the
environment, from DIR: perfq's CI workflows write the pull request's base's committed config there
(``perfq ci base-config``), so a PR's own ``perfq.toml`` (an ``exclude`` of the kernel it changes)
cannot open the gate. Paths in the config stay relative to the repository."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from common import files
from common.errors import PerfqError


@dataclass(frozen=True)
class Config:
    """Everything that says what to index and how to select."""

    source_roots: tuple[str, ...] = ("aten/src/ATen", "c10", "torch/csrc")
    native_functions: tuple[str, ...] = ("aten/src/ATen/native/native_functions.yaml",)
    derivatives: tuple[str, ...] = ("tools/autograd/derivatives.yaml",)
    # the code generators' templates and the generators' C++ strings: the operator wrappers they emit
    generated_templates: tuple[str, ...] = (
        "tools/autograd/templates/*.cpp", "tools/autograd/templates/*.h", "tools/autograd/gen_*.py",
        "torchgen/dest/*.py", "torchgen/gen.py",
    )
    python_roots: tuple[str, ...] = ("torch",)
    benchmark_roots: tuple[str, ...] = ("benchmarks/operator_benchmark/pt",)
    script_benchmark_roots: tuple[str, ...] = ()
    upstream: str = ""  # an out-of-tree backend's PyTorch: "torch" (the installed package) or a source tree
    canaries: str = ""  # path in the repo; empty: perfq's own data/canaries.yaml
    compile_commands: str = ""  # optional compile_commands.json for exact resolution
    exclude: tuple[str, ...] = ("**/test/**", "**/tests/**", "**/third_party/**")
    reach_bound: int = 100  # more ops reached than this: shared infrastructure (canary); see README
    hub_fanout: int = 25  # an op called from more C++ functions than this is a hub; see README
    shared_fraction: float = 0.5  # own ops executed by this share of traced benchmarks: shared infrastructure
    max_depth: int = 24
    trace: str = "auto"  # trace benchmarks (runs the checkout's code, contained): auto (torch importable) | on | off
    extra: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, values: dict[str, Any], source: str = "config") -> Config:
        """A copy with ``values`` (config-file keys, dashes or underscores) applied. A key that
        is a near miss of a known one (``source_root``) is an error naming it; other unknown keys
        are kept in ``extra`` (sections of features, newer perfq versions)."""
        changes: dict[str, Any] = {}
        extra = dict(self.extra)
        for raw_key, value in values.items():
            key = raw_key.replace("-", "_")
            if key not in SETTINGS:
                _reject_misspelling(raw_key, source)
                extra[key] = value
                continue
            changes[key] = _checked(key, raw_key, value, getattr(self, key), source)
        return replace(self, extra=extra, **changes)

    def unknown_keys(self) -> list[str]:
        """Keys in ``extra`` that neither perfq nor any of its features reads."""
        return sorted(k for k in self.extra if k not in EXTENSION_KEYS)


SETTINGS = tuple(f.name for f in fields(Config) if f.name != "extra")
# sections and keys the features read from Config.extra ([tool.perfq.ir], [tool.perfq.compare]...)
EXTENSION_KEYS = ("ir", "compare", "benchmarks", "coverage_infra_ops", "build")
POSITIVE = ("reach_bound", "hub_fanout", "max_depth")
CHOICES = {"trace": ("auto", "on", "off")}


def _reject_misspelling(raw_key: str, source: str) -> None:
    key = raw_key.replace("-", "_")
    if key in EXTENSION_KEYS:
        return
    close = difflib.get_close_matches(key, SETTINGS + EXTENSION_KEYS, n=1, cutoff=0.75)
    if close:
        raise PerfqError(f"{source}: unknown key {raw_key!r}; did you mean {close[0]!r}?")


def _checked(key: str, raw_key: str, value: Any, current: Any, source: str) -> Any:
    """``value`` for setting ``key`` if it has the type (and range) of the default ``current``."""
    if isinstance(current, tuple):
        if isinstance(value, str):
            value = (value,)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise PerfqError(f"{source}: {raw_key!r} must be a list of strings")
        return tuple(value)
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise PerfqError(f"{source}: {raw_key!r} must be a fraction in (0, 1], not {value!r}")
        return float(value)
    if isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise PerfqError(f"{source}: {raw_key!r} must be an integer, not {value!r}")
        if key in POSITIVE and value < 1:
            raise PerfqError(f"{source}: {raw_key!r} must be a positive integer, not {value}")
        return value
    if isinstance(current, str) and not isinstance(value, str):
        raise PerfqError(f"{source}: {raw_key!r} must be a string, not {value!r}")
    if key in CHOICES and value not in CHOICES[key]:
        raise PerfqError(f"{source}: {raw_key!r} must be one of {', '.join(CHOICES[key])}, not {value!r}")
    return value


CONFIG_FILES = ("perfq.toml", "pyproject.toml")
CONFIG_DIR_ENV = "PERFQ_CONFIG_DIR"  # read the config files from this directory (CI: the PR's base's, written there)


def config_dir(repo: Path) -> Path:
    """Where the config files of ``repo`` are read: ``$PERFQ_CONFIG_DIR`` when set, else ``repo``."""
    return Path(os.environ.get(CONFIG_DIR_ENV) or repo)


def config_files(where: Path) -> dict[str, tuple[str, bytes]]:
    """The config files in the directory ``where`` that exist, by name: (path, their bytes); each
    a regular file inside ``where``, at most 1 MB (files.InputKind.config), or a PerfqError."""
    found: dict[str, tuple[str, bytes]] = {}
    for name in CONFIG_FILES:
        path = where / name
        if not os.path.lexists(path):
            continue
        try:
            found[name] = (str(path), files.read_input(path, files.InputKind.config, (where,)))
        except OSError as exc:
            raise PerfqError(files.input_error(exc)) from None
    return found


def _parse_toml(path: Path | str, data: bytes) -> dict[str, Any]:
    """The TOML document ``data`` read from ``path``."""
    import tomllib  # here: only a config that names perfq is parsed (the import alone costs a query ~5 ms)

    try:
        return tomllib.loads(data.decode())
    except UnicodeDecodeError as exc:
        raise PerfqError(f"{path}: not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise PerfqError(f"{path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise PerfqError(f"{path}: malformed TOML: nested too deeply") from None


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """``data[key]`` when it is a table; None when absent; an error when it is anything else."""
    value = data.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise PerfqError(f"{where}: {key!r} must be a table ([{key}]), not {type(value).__name__} {value!r}")


def load_config(repo: Path, overrides: dict[str, Any] | None = None, where: Path | None = None) -> Config:
    """The configuration for ``repo``: defaults, then its config file (in ``where``, default
    :func:`config_dir`), then ``overrides``."""
    cfg = Config()
    found = config_files(where if where is not None else config_dir(repo))
    if "perfq.toml" in found:
        where, raw = found["perfq.toml"]
        data = _parse_toml(where, raw)
        tool = _table(data, "tool", where)
        section = _table(tool, "perfq", f"{where} [tool]") if tool is not None else None
        if tool is not None and section is None:
            raise PerfqError(f"{where}: has a [tool] table without [tool.perfq]; put the keys at the top level "
                             "or under [tool.perfq]")
        cfg = cfg.with_overrides(section if section is not None else data, "perfq.toml")
    elif "pyproject.toml" in found and b"perfq" in (text := found["pyproject.toml"][1]):
        # a project's own pyproject.toml that never mentions perfq is neither parsed nor judged
        where = found["pyproject.toml"][0]
        tool = _table(_parse_toml(where, text), "tool", where)
        section = _table(tool, "perfq", f"{where} [tool]") if tool is not None else None
        if section is not None:
            cfg = cfg.with_overrides(section, "pyproject.toml [tool.perfq]")
    if overrides:
        cfg = cfg.with_overrides({k: v for k, v in overrides.items() if v not in (None, (), [])}, "options")
    return cfg
