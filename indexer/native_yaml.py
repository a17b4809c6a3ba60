"""Operators from native_functions.yaml, read with torchgen's own parser so that
multi-key dispatch lines, default composite kernels, structured_delegate and autogen
mean what they mean to PyTorch. Falls back to a plain YAML reader with the same rules
when torchgen cannot be imported from the indexed tree or an installed torch."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from common import files
from common.errors import PerfqError
from common.yaml_text import YAMLError, load_yaml


@dataclass
class OpFacts:
    name: str
    base: str
    overload: str
    schema: str
    structured: bool
    structured_delegate: str | None
    variants: str
    tags: str
    composite: str | None
    kernels: list[tuple[str, str]] = field(default_factory=list)  # (dispatch key, kernel name)
    autogen: list[str] = field(default_factory=list)


def _torchgen_importable(repo: Path) -> bool:
    if (repo / "torchgen" / "gen.py").is_file():
        if str(repo) not in sys.path:
            sys.path.insert(0, str(repo))
        return True
    try:
        import torchgen.gen  # noqa: F401  (from an installed torch)
    except Exception:
        return False
    return True


def _with_torchgen(yaml_path: Path, tags_path: Path | None) -> list[OpFacts]:
    from torchgen.gen import parse_native_yaml
    from torchgen.model import DispatchKey

    if tags_path is None or not tags_path.is_file():
        import torchgen

        tags_path = Path(torchgen.__file__).parent / "packaged/ATen/native/tags.yaml"
    parsed = parse_native_yaml(str(yaml_path), str(tags_path), skip_native_fns_gen=True)
    out: list[OpFacts] = []
    for f in parsed.native_functions:
        name = str(f.func.name)
        kernels = []
        for key, index in parsed.backend_indices.items():
            meta = index.get_kernel(f)
            if meta is not None:
                kernels.append((str(key), meta.kernel))
        composite = None
        if f.has_composite_implicit_autograd_kernel:
            composite = "CompositeImplicitAutograd"
        elif f.has_composite_explicit_autograd_kernel:
            composite = "CompositeExplicitAutograd"
        elif f.has_composite_explicit_autograd_non_functional_kernel:
            composite = "CompositeExplicitAutogradNonFunctional"
        _ = DispatchKey
        out.append(
            OpFacts(
                name=name,
                base=str(f.func.name.name),
                overload=f.func.name.overload_name,
                schema=str(f.func),
                structured=bool(f.structured),
                structured_delegate=str(f.structured_delegate) if f.structured_delegate else None,
                variants=", ".join(sorted(v.name for v in f.variants)),
                tags=", ".join(sorted(f.tags)),
                composite=composite,
                kernels=kernels,
                autogen=[str(a) for a in f.autogen],
            )
        )
    return out


def _plain(yaml_path: Path) -> list[OpFacts]:
    """The same facts from a plain YAML reading (no torchgen)."""
    entries = load_yaml(files.input_text(yaml_path, files.InputKind.yaml))
    if not isinstance(entries, list):
        raise PerfqError(f"{yaml_path}: not a list of native functions")
    out: list[OpFacts] = []
    for e in entries:
        if not isinstance(e, dict) or "func" not in e:
            continue
        _check_entry(yaml_path, e)
        schema = str(e["func"])
        name = schema.split("(", 1)[0].strip()
        base, _, overload = name.partition(".")
        dispatch = e.get("dispatch") or {}
        kernels: list[tuple[str, str]] = []
        for keys, kernel in dispatch.items():
            for key in str(keys).split(","):
                kernels.append((key.strip(), str(kernel)))
        delegate = e.get("structured_delegate")
        if not dispatch and not delegate:
            kernels.append(("CompositeImplicitAutograd", base))
        keys = {k for k, _ in kernels}
        composite = next(
            (
                k
                for k in (
                    "CompositeImplicitAutograd",
                    "CompositeExplicitAutograd",
                    "CompositeExplicitAutogradNonFunctional",
                )
                if k in keys
            ),
            None,
        )
        autogen = [a.strip() for a in str(e.get("autogen", "")).split(",") if a.strip()]
        tags = e.get("tags") or []
        out.append(
            OpFacts(
                name=name,
                base=base,
                overload=overload,
                schema=schema,
                structured=bool(e.get("structured")),
                structured_delegate=str(delegate) if delegate else None,
                variants=", ".join(sorted(v.strip() for v in str(e.get("variants", "function")).split(","))),
                tags=", ".join(sorted([tags] if isinstance(tags, str) else tags)),
                composite=composite,
                kernels=kernels,
                autogen=autogen,
            )
        )
    return out


_SCALARS = (str, int, float, bool)


def _check_entry(yaml_path: Path, entry: dict) -> None:
    """A PerfqError naming the entry and key when a key the reader uses has the wrong shape
    (``dispatch: [CPU]``, a list of lists where strings belong: an alias bomb is never expanded)."""
    func = entry["func"]
    name = func.split("(", 1)[0].strip() if isinstance(func, str) else "?"

    def bad(key: str, want: str) -> PerfqError:
        return PerfqError(f"{yaml_path}: {name}: {key!r} must be {want}, not {type(entry[key]).__name__}")

    if not isinstance(func, str):
        raise bad("func", "a string")
    dispatch = entry.get("dispatch")
    if dispatch and not (isinstance(dispatch, dict)
                         and all(isinstance(k, _SCALARS) and isinstance(v, _SCALARS) for k, v in dispatch.items())):
        raise bad("dispatch", "a mapping of dispatch keys to kernel names")
    for key in ("structured_delegate", "autogen", "variants", "structured"):
        if entry.get(key) is not None and not isinstance(entry[key], _SCALARS):
            raise bad(key, "a string")
    tags = entry.get("tags")
    if tags is not None and not (isinstance(tags, str) or (isinstance(tags, list)
                                                           and all(isinstance(t, str) for t in tags))):
        raise bad("tags", "a string or a list of strings")


def load_native_functions(repo: Path, yaml_path: Path) -> tuple[list[OpFacts], str]:
    """Operators of ``yaml_path`` and which reader produced them ('torchgen' or 'plain')."""
    if not os.path.lexists(yaml_path):
        raise PerfqError(f"native_functions.yaml not found at {yaml_path}")
    try:  # checked (a regular file, bounded) and parsed here before torchgen reads it by its path
        load_yaml(files.input_text(yaml_path, files.InputKind.yaml))
    except OSError as exc:
        raise PerfqError(f"{yaml_path}: cannot read: {exc.strerror}") from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise PerfqError(f"{yaml_path}: malformed YAML{where}") from None
    except UnicodeDecodeError:
        raise PerfqError(f"{yaml_path}: not UTF-8 text") from None
    tags = yaml_path.parent / "tags.yaml"
    if _torchgen_importable(repo):
        try:
            return _with_torchgen(yaml_path, tags if tags.is_file() else None), "torchgen"
        except Exception:  # an incompatible torchgen: the plain reader has the same rules
            pass
    return _plain(yaml_path), "plain"


def merge_ops(layers: list[tuple[str, list[OpFacts]]]) -> tuple[list[OpFacts], list[str]]:
    """One operator list from several yamls (``(source, ops)``, upstream first): a later yaml
    adds its dispatch entries and kernels to operators already defined and defines new ones.
    A key mapped to another kernel, or the same op name with another schema, is a warning
    (the later kernel wins; the first schema stays)."""
    merged: dict[str, OpFacts] = {}
    warnings: list[str] = []
    for source, ops in layers:
        seen_here: set[str] = set()
        for op in ops:
            if op.name in seen_here:
                warnings.append(f"{source}: {op.name} is defined twice; the first entry is used")
                continue
            seen_here.add(op.name)
            old = merged.get(op.name)
            if old is None:
                merged[op.name] = replace(op, kernels=list(op.kernels), autogen=list(op.autogen))
                continue
            if op.schema != old.schema:
                warnings.append(f"{source}: {op.name} has another schema than before ({op.schema}); merged by name")
            kernels = dict(old.kernels)
            for key, kernel in op.kernels:
                if key in kernels and kernels[key] != kernel and not key.startswith("Composite"):
                    warnings.append(f"{source}: {op.name} {key} kernel {kernel} replaces {kernels[key]}")
                if not key.startswith("Composite") or key not in kernels:
                    kernels[key] = kernel
            merged[op.name] = replace(
                old,
                kernels=list(kernels.items()),
                structured=old.structured or op.structured,
                structured_delegate=old.structured_delegate or op.structured_delegate,
                autogen=list(dict.fromkeys(old.autogen + op.autogen)),
            )
    return list(merged.values()), warnings
