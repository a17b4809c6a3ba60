"""`perfq ir capture`: run a benchmark command with the capture hook, then compile every
specialization it compiled or launched for the requested targets.

The hook (``capture_hook.py``) is loaded through a generated ``sitecustomize.py`` put
first on PYTHONPATH, so every Python process the command starts records its Triton
specializations. A kernel defined in the script itself (module ``__main__``) is re-imported
from its file for compiling, so its top-level code runs once more unless guarded by
``if __name__ == "__main__"``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import proc
from common.errors import PerfqError
from perfq.ir.collect import CollectResult, no_interpreter, relative_source, require_triton, triton_cache
from perfq.ir.compile import IRCompileError, Specialization, compile_spec, kernel_source_info
from perfq.ir.manifest import import_kernel
from perfq.ir.store import IRRecord

HOOK = Path(__file__).with_name("capture_hook.py")
SITECUSTOMIZE = """\
import importlib.util as _u
import os as _os
import sys as _sys

_s = _u.spec_from_file_location("_perfq_ir_capture_hook", {hook!r})
_m = _u.module_from_spec(_s)
_s.loader.exec_module(_m)
_m.install()
# chain to the sitecustomize this one shadows, if any
_here = _os.path.dirname(_os.path.abspath(__file__))
for _p in _sys.path:
    _f = _os.path.join(_p or ".", "sitecustomize.py")
    if _os.path.abspath(_p or ".") != _here and _os.path.isfile(_f):
        _c = _u.spec_from_file_location("_perfq_chained_sitecustomize", _f)
        _c.loader.exec_module(_u.module_from_spec(_c))
        break
"""


@dataclass
class CapturedSpec:
    """One specialization recorded by the hook."""

    module: str
    function: str
    file: str
    spec: Specialization
    via: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def kernel(self) -> str:
        module = Path(self.file).stem if self.module in ("", "__main__") else self.module
        return f"{module}:{self.function}"


def run_with_hook(command: list[str], cwd: Path, out_dir: Path) -> int:
    """Run ``command`` with the hook active; returns its exit status."""
    if not command:
        raise PerfqError("no command to capture: perfq ir capture --label L -- python bench.py ...")
    site = out_dir / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(hook=str(HOOK)), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH", "")])])
    env["PERFQ_IR_CAPTURE_OUT"] = str(out_dir)
    try:
        res = proc.run(command, cwd=cwd, env=env, capture=False)
    except KeyboardInterrupt:
        raise PerfqError("interrupted; nothing stored", exit_code=130) from None
    if res.returncode is None:
        raise PerfqError(f"command not found: {command[0]}")
    return res.returncode


def _decode_const(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"dtype"}:
        import triton.language as tl

        return getattr(tl, value["dtype"], value["dtype"])
    return value


def read_captured(out_dir: Path) -> tuple[list[CapturedSpec], list[str]]:
    """The distinct specializations (and hook errors) recorded under ``out_dir``."""
    specs: dict[tuple[str, str], CapturedSpec] = {}
    errors: list[str] = []
    for path in sorted(out_dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                errors.append(f"{path.name}: unreadable capture record")
                continue
            if "error" in rec:
                errors.append(f"capture: {rec['error']}")
                continue
            spec = Specialization(
                signature=dict(rec.get("signature", {})),
                constexprs={k: _decode_const(v) for k, v in rec.get("constexprs", {}).items()},
                divisible=tuple(rec.get("divisible", [])),
                options=dict(rec.get("options", {})),
            )
            cap = CapturedSpec(rec.get("module", ""), rec.get("function", ""), rec.get("file", ""), spec,
                               rec.get("via", ""), rec)
            specs.setdefault((cap.kernel, spec.key()), cap)
    return list(specs.values()), errors


def _load_captured_kernel(cap: CapturedSpec, cwd: Path) -> Any:
    if cap.module and cap.module != "__main__":
        paths = tuple(p for p in {Path(cap.file).resolve().parent, cwd.resolve()} if p.is_dir())
        try:
            return import_kernel(f"{cap.module}:{cap.function}", paths if cap.file else (cwd,))
        except PerfqError:
            if not cap.file:
                raise
    if not cap.file or not Path(cap.file).is_file():
        raise PerfqError(f"cannot find the source of {cap.kernel}")
    name = f"_perfq_capture_{Path(cap.file).stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, cap.file)
        if spec is None or spec.loader is None:
            raise PerfqError(f"cannot import {cap.file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(Path(cap.file).parent))
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # user code: SystemExit, errors...
            del sys.modules[name]
            raise PerfqError(f"cannot import {cap.file}: {type(exc).__name__}: {exc}") from None
        finally:
            sys.path.pop(0)
    fn = getattr(module, cap.function, None)
    if fn is None:
        raise PerfqError(f"{cap.file} has no {cap.function}")
    return fn


def compile_captured(
    specs: list[CapturedSpec], targets: tuple[str, ...], stages: tuple[str, ...], cwd: Path,
    repo: Path | None, fresh_cache: bool = True,
) -> CollectResult:
    """Compile every captured specialization for every target."""
    result = CollectResult(triton_version=require_triton())
    start = time.perf_counter()
    with triton_cache(fresh_cache), no_interpreter():
        for cap in specs:
            try:
                fn = _load_captured_kernel(cap, cwd)
            except PerfqError as exc:
                result.errors.append(f"{cap.kernel}: {exc}")
                continue
            info = kernel_source_info(fn)
            cap.spec = cap.spec.ordered(list(getattr(fn, "arg_names", [])))
            for target in targets:
                result.compiles += 1
                try:
                    out = compile_spec(fn, cap.spec, target, stages)
                except IRCompileError as exc:
                    result.errors.append(f"{cap.kernel} [{target}]: {exc}")
                    continue
                for stage, text in out["ir"].items():
                    result.records.append(IRRecord(
                        kernel=cap.kernel, specialization=cap.spec.key(), target=target, stage=stage,
                        raw=text,
                        source_file=relative_source(info["source_file"], repo), function=info["function"],
                        source_hash=info["source_hash"], triton_version=out["triton_version"],
                        spec={**cap.spec.as_dict(), "captured_via": cap.via},
                    ))
    result.seconds = time.perf_counter() - start
    return result


def capture(
    command: list[str], targets: tuple[str, ...], stages: tuple[str, ...], cwd: Path, repo: Path | None,
    fresh_cache: bool = True,
) -> tuple[int, CollectResult, int]:
    """Run ``command`` capturing specializations, then compile them.

    Returns (command exit status, compile result, number of distinct specializations).
    """
    with tempfile.TemporaryDirectory(prefix="perfq-ir-capture-") as tmp:
        status = run_with_hook(command, cwd, Path(tmp))
        specs, errors = read_captured(Path(tmp))
    result = compile_captured(specs, targets, stages, cwd, repo, fresh_cache)
    result.errors[:0] = errors
    return status, result, len(specs)
