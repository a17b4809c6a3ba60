"""Loaded (by file path, standard library only) at start-up of every Python process that
`perfq ir capture` runs: records each Triton specialization compiled or launched.

- ``triton.compile`` (what the JIT calls on a GPU machine, and what AOT scripts call):
  the ASTSource's signature, constexprs, divisibility attributes and options;
- ``TRITON_INTERPRET=1`` launches (CPU): the specialization inferred from the arguments
  (tensor dtypes and 16-byte alignment, int/float scalars, constexpr values, num_warps...).

Records go, one JSON object per line, to ``$PERFQ_IR_CAPTURE_OUT/<pid>.jsonl``. Nothing is
compiled here: perfq compiles the recorded specializations for the requested targets.
"""

from __future__ import annotations

import inspect
import json
import os

DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}
# launch/compile options that define a specialization (others, like arch, belong to the target)
SPEC_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "waves_per_eu",
                "matrix_instr_nonkdim", "kpack")
_seen: set[str] = set()


def _out_file() -> str | None:
    out = os.environ.get("PERFQ_IR_CAPTURE_OUT")
    return os.path.join(out, f"{os.getpid()}.jsonl") if out else None


def encode_const(value):
    """A JSON form of a constexpr value; triton dtypes become {"dtype": name}."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    inner = getattr(value, "value", value)  # tl.constexpr wrapper
    if inner is not value and (inner is None or isinstance(inner, bool | int | float | str)):
        return inner
    name = getattr(value, "name", None)
    if name and type(value).__name__ in ("dtype", "pointer_type"):
        return {"dtype": str(name)}
    raise TypeError(f"cannot record constexpr value {value!r}")


def _fn_info(fn) -> dict:
    py = getattr(fn, "fn", fn)
    code = getattr(py, "__code__", None)
    return {
        "module": getattr(py, "__module__", ""),
        "function": getattr(py, "__name__", ""),
        "file": getattr(code, "co_filename", ""),
    }


def _write(record: dict) -> None:
    path = _out_file()
    if not path:
        return
    line = json.dumps(record, sort_keys=True)
    if line in _seen:
        return
    _seen.add(line)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def record_ast_source(src, options) -> None:
    """Record what triton.compile was asked to build (ASTSource only)."""
    fn = getattr(src, "fn", None)
    names = list(getattr(fn, "arg_names", []) or [])
    if not names or not isinstance(getattr(src, "signature", None), dict):
        return
    constants = {}
    for key, value in (getattr(src, "constants", {}) or {}).items():
        index = key[0] if isinstance(key, tuple) and len(key) == 1 else None
        if isinstance(index, int) and index < len(names):
            constants[names[index]] = encode_const(value)
    signature = {n: t for n, t in src.signature.items() if t != "constexpr" and n not in constants}
    divisible = []
    for key, attrs in (getattr(src, "attrs", {}) or {}).items():
        index = key[0] if isinstance(key, tuple) and len(key) == 1 else None
        pairs = [list(a) for a in attrs]
        if isinstance(index, int) and index < len(names) and ["tt.divisibility", 16] in pairs:
            divisible.append(names[index])
    opts = {k: v for k, v in dict(options or {}).items()
            if k in SPEC_OPTIONS and isinstance(v, bool | int | float | str)}
    _write({**_fn_info(fn), "signature": signature, "constexprs": constants,
            "divisible": sorted(divisible), "options": opts, "via": "compile"})


def _scalar_type(value) -> str | None:
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "data_ptr"):
        name = str(dtype).rsplit(".", 1)[-1]
        return "*" + DTYPES.get(name, name)
    return None


def spec_from_args(arg_names, constexpr_names, args, kwargs) -> dict:
    """The specialization a launch with these arguments compiles (interpreter launches)."""
    bound = dict(zip(arg_names, args, strict=False))
    bound.update({k: v for k, v in kwargs.items() if k in arg_names})
    signature, constants, divisible = {}, {}, []
    for name in arg_names:
        if name not in bound:
            continue  # default value: the compile uses the kernel's own default
        value = bound[name]
        if name in constexpr_names or value is None:
            constants[name] = encode_const(value)
            continue
        ty = _scalar_type(value)
        if ty is None:
            raise TypeError(f"cannot infer a Triton type for argument {name}={value!r}")
        signature[name] = ty
        if ty.startswith("*"):
            if value.data_ptr() % 16 == 0:
                divisible.append(name)
        elif ty in ("i32", "i64") and value % 16 == 0:
            divisible.append(name)
    options = {k: v for k, v in kwargs.items() if k in SPEC_OPTIONS}
    return {"signature": signature, "constexprs": constants, "divisible": divisible, "options": options}


def _patch_compile(triton) -> None:
    import triton.compiler as compiler_pkg
    import triton.compiler.compiler as compiler_mod

    original = compiler_mod.compile
    if getattr(original, "_perfq_capture", False):
        return

    def compile(src, target=None, options=None, *args, **kwargs):  # noqa: A001 - same name as triton's
        try:
            record_ast_source(src, options)
        except Exception as exc:  # never break the benchmark
            _write({"error": f"{type(exc).__name__}: {exc}"})
        return original(src, target, options, *args, **kwargs)

    compile._perfq_capture = True  # type: ignore[attr-defined]
    for holder in (compiler_mod, compiler_pkg, triton):
        if getattr(holder, "compile", None) is original:
            holder.compile = compile


def _patch_interpreter() -> None:
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    original = InterpretedFunction.run
    if getattr(original, "_perfq_capture", False):
        return

    def run(self, *args, **kwargs):
        try:
            names = list(getattr(self, "arg_names", []) or [])
            constexpr_names = set()
            for name, ann in inspect.get_annotations(self.fn).items():
                text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
                if "constexpr" in text:
                    constexpr_names.add(name)
            launch = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
            spec = spec_from_args(names, constexpr_names, args, launch)
            _write({**_fn_info(self), **spec, "via": "interpreter"})
        except Exception as exc:  # never break the benchmark
            _write({"error": f"{type(exc).__name__}: {exc}"})
        return original(self, *args, **kwargs)

    run._perfq_capture = True  # type: ignore[attr-defined]
    InterpretedFunction.run = run


def install() -> None:
    """Patch triton (if importable) in this process; silent when it is not installed."""
    if not _out_file():
        return
    try:
        import triton
    except Exception:
        return
    _patch_compile(triton)
    _patch_interpreter()
