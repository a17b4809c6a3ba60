"""The IR manifest: which Triton kernels to compile, with which specializations.

``perfq-ir.yaml`` (or ``--manifest FILE``, or ``[tool.perfq.ir]`` in pyproject.toml /
perfq.toml) looks like::

    paths: ["bench"]                 # put on sys.path (relative to the manifest's directory)
    targets: ["cuda:90", "hip:gfx942"]
    stages: ["ttir", "ttgir", "llir"]
    kernels:
      - kernel: ir_kernels:add_kernel          # module:function (a @triton.jit function)
        specializations:
          - signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}
            constexprs: {BLOCK: 1024}
            divisible: [x_ptr, y_ptr, out_ptr]  # optional; default: every pointer argument
            num_warps: 4
            num_stages: 3
            options: {}                         # other triton.compile options
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import files
from common.config import load_config
from common.errors import PerfqError
from common.yaml_text import YAMLError, load_yaml
from perfq.ir.compile import DEFAULT_STAGES, KNOWN_STAGES, Specialization

MANIFEST_FILE = "perfq-ir.yaml"
SPEC_KEYS = {"signature", "constexprs", "divisible", "num_warps", "num_stages", "options", "name"}


@dataclass(frozen=True)
class KernelEntry:
    """One ``module:function`` of the manifest and its specializations."""

    kernel: str
    specializations: tuple[Specialization, ...]


@dataclass(frozen=True)
class Manifest:
    """A parsed manifest (paths absolute)."""

    kernels: tuple[KernelEntry, ...]
    paths: tuple[Path, ...] = ()
    targets: tuple[str, ...] = ()
    stages: tuple[str, ...] = DEFAULT_STAGES
    origin: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _str_list(value: Any, what: str, origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PerfqError(f"{origin}: {what} must be a list of strings")
    return tuple(value)


def _spec(raw: Any, where: str) -> Specialization:
    if not isinstance(raw, dict):
        raise PerfqError(f"{where}: a specialization must be a mapping")
    unknown = set(raw) - SPEC_KEYS
    if unknown:
        raise PerfqError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    signature = raw.get("signature") or {}
    constexprs = raw.get("constexprs") or {}
    options = dict(raw.get("options") or {})
    if not isinstance(signature, dict) or not all(isinstance(v, str) for v in signature.values()):
        raise PerfqError(f"{where}: signature must map argument names to types like *fp32 or i32")
    if not isinstance(constexprs, dict) or not isinstance(options, dict):
        raise PerfqError(f"{where}: constexprs and options must be mappings")
    for key in ("num_warps", "num_stages"):
        if key in raw:
            if not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 1:
                raise PerfqError(f"{where}: {key} must be a positive integer")
            options[key] = raw[key]
    divisible = raw.get("divisible")
    if divisible is not None:
        divisible = _str_list(divisible, "divisible", where)
    return Specialization(
        signature={str(k): v for k, v in signature.items()},
        constexprs={str(k): v for k, v in constexprs.items()},
        divisible=divisible,
        options=options,
    )


def parse_manifest(data: Any, base: Path, origin: str) -> Manifest:
    """Validate a manifest mapping; relative ``paths`` are resolved against ``base``."""
    if not isinstance(data, dict):
        raise PerfqError(f"{origin}: the IR manifest must be a mapping with a 'kernels' list")
    kernels_raw = data.get("kernels")
    if not isinstance(kernels_raw, list) or not kernels_raw:
        raise PerfqError(f"{origin}: 'kernels' must be a non-empty list")
    kernels: list[KernelEntry] = []
    for i, entry in enumerate(kernels_raw):
        where = f"{origin}: kernels[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("kernel"), str):
            raise PerfqError(f"{where}: needs 'kernel: module:function'")
        ref = entry["kernel"]
        if ref.count(":") != 1 or not all(ref.split(":")):
            raise PerfqError(f"{where}: kernel {ref!r} is not module:function")
        specs_raw = entry.get("specializations")
        if not isinstance(specs_raw, list) or not specs_raw:
            raise PerfqError(f"{where}: 'specializations' must be a non-empty list")
        specs = tuple(_spec(s, f"{where}.specializations[{j}]") for j, s in enumerate(specs_raw))
        kernels.append(KernelEntry(ref, specs))
    paths = tuple((base / p).resolve() for p in _str_list(data.get("paths", []), "paths", origin))
    stages = _str_list(data.get("stages", list(DEFAULT_STAGES)), "stages", origin)
    bad = [s for s in stages if s not in KNOWN_STAGES]
    if bad:
        raise PerfqError(f"{origin}: unknown stage(s) {', '.join(bad)}; known: {', '.join(KNOWN_STAGES)}")
    targets = _str_list(data.get("targets", []), "targets", origin)
    return Manifest(tuple(kernels), paths, targets, stages, origin)


def load_manifest(repo: Path, manifest: Path | None = None) -> Manifest:
    """``manifest`` if given, else ``<repo>/perfq-ir.yaml``, else ``[tool.perfq.ir]``."""
    path = manifest if manifest is not None else repo / MANIFEST_FILE
    if manifest is not None or os.path.lexists(path):
        try:
            data = load_yaml(files.input_text(path, files.InputKind.manifest))
        except OSError as exc:
            raise PerfqError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise PerfqError(f"{path}: not UTF-8 text") from None
        except YAMLError as exc:
            raise PerfqError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from None
        return parse_manifest(data, path.resolve().parent, str(path))
    section = load_config(repo).extra.get("ir")
    if section is None:
        raise PerfqError(
            f"no IR manifest: create {MANIFEST_FILE} in {repo}, add [tool.perfq.ir], or pass --manifest"
        )
    return parse_manifest(section, repo.resolve(), "[tool.perfq.ir]")


def import_kernel(ref: str, paths: tuple[Path, ...], reload: bool = False) -> Any:
    """The object named by ``module:function``, importing ``module`` from ``paths`` first
    (a module of the same name imported from elsewhere, or any when ``reload``, is re-imported)."""
    module_name, _, attr = ref.partition(":")
    saved = list(sys.path)
    sys.path[:0] = [str(p) for p in paths]
    try:
        existing = sys.modules.get(module_name)
        where = getattr(existing, "__file__", None)
        if existing is not None and (reload or (paths and not (
            where and any(Path(where).resolve().is_relative_to(p) for p in paths)
        ))):
            for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
                del sys.modules[name]
        importlib.invalidate_caches()
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of user code
        raise PerfqError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path[:] = saved
    fn = getattr(module, attr, None)
    if fn is None:
        raise PerfqError(f"{module_name} has no attribute {attr!r}")
    return fn
