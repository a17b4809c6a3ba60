"""Compile one Triton kernel specialization for one target and return its IR texts.

Side effects only (imports triton, compiles); no perfq database or CLI here. Works on a
CPU-only machine: ``triton.compile`` with an explicit ``GPUTarget`` needs no driver.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STAGES = ("ttir", "ttgir", "llir")
KNOWN_STAGES = ("ttir", "ttgir", "llir", "ptx", "amdgcn")
SCALAR_TYPES = {"i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
                "fp8e4nv", "fp8e5", "fp16", "bf16", "fp32", "fp64"}


class IRCompileError(Exception):
    """A kernel or specialization that cannot be compiled (message is one line)."""


@dataclass(frozen=True)
class Specialization:
    """What a compile of ``kernel`` depends on besides its source: the argument types,
    the constexpr values, which arguments are 16-divisible, and the launch options."""

    signature: dict[str, str]
    constexprs: dict[str, Any] = field(default_factory=dict)
    divisible: tuple[str, ...] | None = None  # None: every pointer argument
    options: dict[str, Any] = field(default_factory=dict)  # num_warps, num_stages, ...

    def divisible_args(self) -> tuple[str, ...]:
        if self.divisible is not None:
            return tuple(self.divisible)
        return tuple(name for name, ty in self.signature.items() if ty.startswith("*"))

    def key(self) -> str:
        """A stable, readable key: the same specialization gives the same key on any ref."""
        div = set(self.divisible_args())
        args = [f"{n}={t}{'/16' if n in div else ''}" for n, t in self.signature.items()]
        consts = [f"{n}={_const_text(v)}" for n, v in self.constexprs.items()]
        opts = [f"{n}={self.options[n]}" for n in sorted(self.options)]
        return ",".join(args + consts) + ";" + ",".join(opts)

    def ordered(self, arg_names: list[str]) -> Specialization:
        """A copy listing arguments in the kernel's parameter order (so keys are canonical)."""
        pos = {n: i for i, n in enumerate(arg_names)}

        def order(names):
            return sorted(names, key=lambda n: (pos.get(n, len(pos)), n))

        return Specialization(
            signature={n: self.signature[n] for n in order(self.signature)},
            constexprs={n: self.constexprs[n] for n in order(self.constexprs)},
            divisible=None if self.divisible is None else tuple(order(self.divisible)),
            options=dict(self.options),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "signature": dict(self.signature),
            "constexprs": {k: _const_json(v) for k, v in self.constexprs.items()},
            "divisible": list(self.divisible_args()),
            "options": dict(self.options),
        }


def _const_text(value: Any) -> str:
    return str(_const_json(value))


def _const_json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def parse_target(text: str):
    """``cuda:90`` / ``hip:gfx942`` -> a triton ``GPUTarget`` (warp size 32 for cuda,
    64 for gfx9, 32 for newer AMD)."""
    from triton.backends.compiler import GPUTarget

    backend, sep, arch = text.partition(":")
    if not sep or not arch:
        raise IRCompileError(f"bad target {text!r}: expected backend:arch, e.g. cuda:90 or hip:gfx942")
    if backend == "cuda":
        if not arch.isdigit():
            raise IRCompileError(f"bad target {text!r}: cuda arch is a number, e.g. cuda:90")
        return GPUTarget("cuda", int(arch), 32)
    if backend == "hip":
        if not arch.startswith("gfx"):
            raise IRCompileError(f"bad target {text!r}: hip arch looks like gfx942")
        return GPUTarget("hip", arch, 64 if arch.startswith("gfx9") else 32)
    raise IRCompileError(f"bad target {text!r}: backend must be cuda or hip")


def kernel_source_info(fn: Any) -> dict[str, str]:
    """Source file, function name, module and a hash of the kernel's source text."""
    py = getattr(fn, "fn", fn)
    src = getattr(fn, "src", None)
    if not src:
        try:
            src = inspect.getsource(py)
        except (OSError, TypeError):
            src = ""
    return {
        "module": getattr(py, "__module__", "") or "",
        "function": getattr(py, "__name__", "") or "",
        "source_file": getattr(getattr(py, "__code__", None), "co_filename", "") or "",
        "source_hash": hashlib.sha256(src.encode()).hexdigest()[:16],
    }


def _check_spec(fn: Any, spec: Specialization) -> dict[str, str]:
    names = list(getattr(fn, "arg_names", []))
    if not names:
        raise IRCompileError(f"{fn!r} is not a @triton.jit function")
    unknown = [n for n in (*spec.signature, *spec.constexprs) if n not in names]
    if unknown:
        raise IRCompileError(f"unknown argument(s) {', '.join(unknown)}; kernel takes {', '.join(names)}")
    missing = [n for n in names if n not in spec.signature and n not in spec.constexprs]
    if missing:
        raise IRCompileError(f"no type or constexpr value for argument(s) {', '.join(missing)}")
    signature: dict[str, str] = {}
    for name in names:
        if name in spec.constexprs:
            signature[name] = "constexpr"
            continue
        ty = spec.signature[name]
        if not (ty.startswith("*") and ty[1:].lstrip("k") in SCALAR_TYPES) and ty not in SCALAR_TYPES:
            raise IRCompileError(f"argument {name}: unknown type {ty!r} (e.g. *fp32, i32, fp16)")
        signature[name] = ty
    return signature


def compile_spec(fn: Any, spec: Specialization, target: str, stages: tuple[str, ...]) -> dict[str, Any]:
    """Compile ``fn`` with ``spec`` for ``target``; returns ``{"ir": {stage: text}, ...}``
    with the Triton version and the compile time. Raises IRCompileError with one line."""
    import triton
    from triton.compiler import ASTSource

    signature = _check_spec(fn, spec)
    names = list(fn.arg_names)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in spec.divisible_args() if n in names}
    gpu_target = parse_target(target)
    source = ASTSource(fn=fn, signature=signature, constexprs=dict(spec.constexprs), attrs=attrs)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = triton.compile(source, target=gpu_target, options=dict(spec.options))
    except Exception as exc:  # triton raises many types (CompilationError, RuntimeError, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise IRCompileError(f"triton.compile failed for {target}: {type(exc).__name__}: {first}") from None
    elapsed = time.perf_counter() - start
    asm = compiled.asm
    ir = {stage: asm[stage] for stage in stages if isinstance(asm.get(stage), str)}
    return {
        "ir": ir,
        "triton_version": triton.__version__,
        "triton_path": str(Path(triton.__file__).parent),
        "compile_seconds": round(elapsed, 4),
        "pid": os.getpid(),
    }
