"""The upstream PyTorch an out-of-tree backend builds against: the installed ``torch``
package or a PyTorch source tree. Its Python (how benchmarks reach operators), its
native_functions.yaml and derivatives.yaml, and, for a source tree, its ATen C++ are
indexed next to the backend's own sources."""

from __future__ import annotations

import fnmatch
import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

from common.errors import PerfqError

# what benchmarks reach operators through; the rest of torch/ is compilers, tooling, tests
PACKAGE_PYTHON_EXCLUDE = (
    "torch/_inductor/*",
    "torch/_dynamo/*",
    "torch/testing/*",
    "torch/distributed/*",
    "torch/onnx/*",
    "torch/_export/*",
    "torch/export/*",
    "torch/fx/*",
    "torch/_vendor/*",
    "torch/utils/*",
    "torch/include/*",
    "torch/share/*",
    "torch/_higher_order_ops/*",
    "torch/package/*",
    "torch/_numpy/*",
    "torch/jit/*",
    "torch/cuda/*",
    "torch/_functorch/*",
    "torch/_export/*",
    "torch/_library/*",
    "torch/_logging/*",
    "torch/_lazy/*",
    "torch/mtia/*",
    "torch/_strobelight/*",
    "*/__pycache__/*",
)
TREE_CPP_ROOTS = ("aten/src/ATen/native",)
TREE_CPP_EXCLUDE = ("*/test/*", "*/cuda/*", "*/hip/*", "*/mps/*", "*/miopen/*", "*/cudnn/*", "*/quantized/cuda/*")
CPP_SUFFIXES = (".cpp", ".cc", ".h", ".hpp")


@dataclass(frozen=True)
class Upstream:
    """Where the upstream's sources are, relative to ``root`` (paths keep the ``torch/``
    prefix so module names follow from them)."""

    spec: str  # as configured: 'torch' or a directory
    root: Path
    version: str  # torch version, or the tree's commit
    python: tuple[str, ...]
    cpp: tuple[str, ...]
    native_yaml: Path
    derivatives: Path | None

    def key(self) -> str:
        return f"{self.spec}@{self.version}:{self.root}"


def _walk(root: Path, base: str, suffixes: tuple[str, ...], exclude: tuple[str, ...]) -> list[str]:
    out = []
    start = root / base
    if start.is_file():
        return [base]
    for path in start.rglob("*"):
        if path.suffix in suffixes and path.is_file():
            rel = path.relative_to(root).as_posix()
            if not any(fnmatch.fnmatch(rel, p) for p in exclude):
                out.append(rel)
    return sorted(out)


def _package() -> Upstream:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise PerfqError("upstream = 'torch' needs torch installed in this Python (pip install torch)")
    torch_dir = Path(next(iter(spec.submodule_search_locations)))
    root = torch_dir.parent
    yaml_path = root / "torchgen/packaged/ATen/native/native_functions.yaml"
    if not yaml_path.is_file():
        raise PerfqError(f"the installed torch has no {yaml_path.relative_to(root)} (torchgen/packaged)")
    derivatives = root / "torchgen/packaged/autograd/derivatives.yaml"
    from importlib import metadata  # here: 20 ms, which a patch of a PyTorch index never needs

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return Upstream(
        "torch",
        root,
        version,
        tuple(_walk(root, "torch", (".py",), PACKAGE_PYTHON_EXCLUDE)),
        (),
        yaml_path,
        derivatives if derivatives.is_file() else None,
    )


def _tree(spec: str, repo: Path) -> Upstream:
    root = (repo / spec).resolve() if not Path(spec).is_absolute() else Path(spec)
    yaml_path = root / "aten/src/ATen/native/native_functions.yaml"
    if not yaml_path.is_file():
        raise PerfqError(f"upstream {spec}: not a PyTorch source tree (no aten/src/ATen/native/native_functions.yaml)")
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    version = proc.stdout.strip() if proc.returncode == 0 else str(int(yaml_path.stat().st_mtime))
    cpp = [p for r in TREE_CPP_ROOTS for p in _walk(root, r, CPP_SUFFIXES, TREE_CPP_EXCLUDE)]
    derivatives = root / "tools/autograd/derivatives.yaml"
    return Upstream(
        spec,
        root,
        version,
        tuple(_walk(root, "torch", (".py",), PACKAGE_PYTHON_EXCLUDE)),
        tuple(cpp),
        yaml_path,
        derivatives if derivatives.is_file() else None,
    )


def resolve_upstream(spec: str, repo: Path) -> Upstream | None:
    """The upstream ``spec`` names ('' none, 'torch' the installed package, else a tree)."""
    if not spec:
        return None
    return _package() if spec == "torch" else _tree(spec, repo)
