"""Device families and tensor layouts of dispatch keys and source paths (shared by the
indexer and the queries)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable

_UNBUILT_BACKENDS = ("VULKAN", "METAL")
# vmap's keys (Batched, FuncTorchBatched, FuncTorchBatchedDecomposition, VmapMode, BatchedNestedTensor,
# FuncTorchVmapMode, FuncTorchDynamicLayerFrontMode): their kernels run for BatchedTensors only
_BATCHED_KEY_ENDS = ("Batched", "BatchedDecomposition", "VmapMode", "BatchedNestedTensor")


@functools.lru_cache(maxsize=8192)  # a walk asks for the same few hundred keys a hundred thousand times
def device_of_key(key: str) -> str:
    """The device family of a dispatch key or stub arch ('' for device-neutral keys)."""
    k = key.upper()
    if "CUDA" in k or "HIP" in k:
        return "cuda"
    if "MPS" in k:
        return "mps"
    for backend in _UNBUILT_BACKENDS:  # mobile GPU backends: kernels of their own family
        if backend in k:
            return backend.lower()
    if "XPU" in k:
        return "xpu"
    if k.endswith("CPU") or k in ("DEFAULT", "AVX2", "AVX512", "VSX", "ZVECTOR", "SVE256", "ALL_CPU"):
        return "cpu"
    return ""


def layout_of_key(key: str) -> str:
    """The tensors a dispatch key's kernel runs on: any (composite), dense, quantized, sparse,
    batched (functorch's vmap keys: BatchedTensors only)..."""
    if not key or key.startswith("Composite") or key == "CatchAll":
        return "any"
    if key.endswith(_BATCHED_KEY_ENDS) or key.startswith("FuncTorch"):
        return "batched"
    for word, layout in (("Quantized", "quantized"), ("Sparse", "sparse"), ("Nested", "nested"), ("Mkldnn", "mkldnn")):
        if word in key:
            return layout
    return "dense"


def ops_of_stubs(
    named: Iterable[tuple[str, str, str]], called: Iterable[tuple[str, str, str]]
) -> dict[str, set[tuple[str, str]]]:
    """DispatchStub -> (operator, layout) it serves: ``named`` (stub, operator, layout hint),
    for a stub an upstream declares, the operators named like it; ``called`` (stub, operator,
    dispatch key), the operators whose kernel calls it (a composite kernel's stub serves dense
    tensors)."""
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for stub, op, hint in named:
        out[stub].add((op, layout_of_key(hint)))
    for stub, op, key in called:
        out[stub].add((op, layout_of_key(key).replace("any", "dense")))
    return out


def device_of_path(path: str) -> str:
    """The device family a source file belongs to ('' when it serves every device)."""
    if path.endswith((".cu", ".cuh")) or any(p in path for p in ("/cuda/", "/cudnn/", "/hip/", "/miopen/")):
        return "cuda"
    if path.endswith(".mm") or "/mps/" in path:
        return "mps"
    if "/xpu/" in path:
        return "xpu"
    if any(p in path for p in ("/cpu/", "/mkldnn/", "/mkl/")):
        return "cpu"
    return ""
