"""The target build's preprocessor macros: what decides which ``#if`` branches it compiles.

From the least to the most specific: the machine (``__x86_64__`` defined, ``__aarch64__`` not,
Linux not Windows), the installed torch's generated headers (``ATen/Config.h``:
``AT_MKLDNN_ENABLED() 1``; ``cmake_macros.h``), its build settings as ``torch.__config__.show()``
prints them (the ``-D`` flags of ``CXX_FLAGS``, ``USE_ROCM=OFF``, the compiler; recorded once per
torch install by a ``perfq index`` that may trace (indexer.torch_record), in the user's cache or
else beside the index,
because importing torch takes seconds), the
defines every entry of ``compile_commands.json`` shares, and ``[tool.perfq.build]``:

    [tool.perfq.build]
    defines = { USE_ROCM = 1, "AT_MKLDNN_ENABLED()" = 0 }   # known values
    undefined = ["USE_FBGEMM"]                               # known not to be defined
    torch = false                                            # do not read the installed torch

A macro none of them names is unknown: its branches are build-conditional, never dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import files
from common.config import Config
from common.errors import PerfqError
from common.paths import write_atomically

RECORD_NAME = "torch-build.json"
COMPILE_RECORD_NAME = "compile-defines.json"
COMPILE_COMMANDS = ("compile_commands.json", "build/compile_commands.json")  # where present, without a config
HEADER_MAX_BYTES = 1 << 20
COMPILE_COMMANDS_MAX_BYTES = 1 << 28
Macro = tuple[bool, int] | None  # (defined, value); None: unknown

_NOT_X86 = ("__aarch64__", "__arm__", "__ARM_NEON__", "__ARM_NEON", "__ARM_FEATURE_SVE", "__ARM_FEATURE_BF16",
            "_M_ARM", "_M_ARM64", "_M_ARM64EC", "HAVE_SVE_CPU_DEFINITION", "HAVE_SVE256_CPU_DEFINITION",
            "CPU_CAPABILITY_SVE", "CPU_CAPABILITY_SVE256", "CPU_CAPABILITY_NEON")
_NOT_ARM = ("__x86_64__", "__amd64__", "__i386__", "_M_X64", "_M_IX86", "CPU_CAPABILITY_AVX2",
            "CPU_CAPABILITY_AVX512", "HAVE_AVX2_CPU_DEFINITION", "HAVE_AVX512_CPU_DEFINITION")
_OTHER_ARCHES = ("__powerpc__", "__powerpc64__", "__PPC64__", "__s390x__", "__riscv", "__riscv_v_intrinsic",
                 "__loongarch64", "__wasm__", "__EMSCRIPTEN__", "HAVE_VSX_CPU_DEFINITION",
                 "HAVE_ZVECTOR_CPU_DEFINITION", "CPU_CAPABILITY_VSX", "CPU_CAPABILITY_ZVECTOR")
_NOT_LINUX = ("_WIN32", "_WIN64", "_MSC_VER", "__MINGW32__", "__APPLE__", "__MACH__", "__ANDROID__", "__FreeBSD__",
              "C10_MOBILE", "C10_IOS", "C10_ANDROID", "FBCODE_CAFFE2", "COMPILING_FOR_MIN_SIZE")
_ARCH = {  # machine -> (defined, undefined, compiled once per CPU capability)
    "x86_64": ({"__x86_64__": 1, "__amd64__": 1, "HAVE_AVX2_CPU_DEFINITION": 1, "HAVE_AVX512_CPU_DEFINITION": 1,
                "CPUINFO_ARCH_X86_64": 1, "CPUINFO_ARCH_X86": 0, "CPUINFO_ARCH_ARM": 0, "CPUINFO_ARCH_ARM64": 0},
               _NOT_X86 + _OTHER_ARCHES,
               ("CPU_CAPABILITY_DEFAULT", "CPU_CAPABILITY_AVX2", "CPU_CAPABILITY_AVX512", "CPU_CAPABILITY",
                "__AVX__", "__AVX2__", "__AVX512F__", "__FMA__", "__F16C__")),
    "aarch64": ({"__aarch64__": 1, "__ARM_NEON": 1, "__ARM_NEON__": 1, "CPUINFO_ARCH_ARM64": 1,
                 "CPUINFO_ARCH_ARM": 0, "CPUINFO_ARCH_X86": 0, "CPUINFO_ARCH_X86_64": 0},
                _NOT_ARM + _OTHER_ARCHES,
                ("CPU_CAPABILITY_DEFAULT", "CPU_CAPABILITY_SVE256", "CPU_CAPABILITY", "__ARM_FEATURE_SVE")),
}
_LINUX = {"__linux__": 1, "__linux": 1, "__unix__": 1, "__ELF__": 1, "__LP64__": 1,
          "__ORDER_LITTLE_ENDIAN__": 1234, "__ORDER_BIG_ENDIAN__": 4321, "__BYTE_ORDER__": 1234}
_DEVICE = ("__CUDACC__", "__NVCC__", "__HIPCC__", "__CUDA_ARCH__", "__HIP_DEVICE_COMPILE__", "__HIP_PLATFORM_AMD__",
           "__SYCL_DEVICE_ONLY__")
_KIND = {  # the compiler's own macros by kind of file: (defined, undefined); the rest of _DEVICE vary
    "cpp": ({}, _DEVICE),
    "cuda": ({"__CUDACC__": 1, "__NVCC__": 1}, ("__HIPCC__", "__HIP_DEVICE_COMPILE__", "__HIP_PLATFORM_AMD__",
                                                "__SYCL_DEVICE_ONLY__")),
    "header": ({}, ()),  # included by host and device compiles alike
}
_DEFINE = re.compile(rb"^\s*#\s*define\s+([A-Za-z_]\w*)(\(\s*\))?[ \t]*([^\n]*?)\s*$", re.MULTILINE)
_UNDEF = re.compile(rb"^\s*/\*\s*#\s*undef\s+([A-Za-z_]\w*)\s*\*/", re.MULTILINE)


@dataclass(frozen=True)
class BuildMacros:
    """What the target build defines (``NAME`` or ``NAME()`` -> value), leaves undefined, and
    compiles with several values (once per CPU capability: undecided); ``sources`` says where
    the values came from."""

    defined: Mapping[str, int] = field(default_factory=dict)
    undefined: frozenset[str] = frozenset()
    variants: frozenset[str] = frozenset()
    sources: tuple[str, ...] = ()

    def merged(self, defined: Mapping[str, int], undefined: tuple[str, ...] | frozenset[str] = (),
               source: str = "") -> BuildMacros:
        """A copy where ``defined`` and ``undefined`` override what was known."""
        undefined = frozenset(undefined)
        return BuildMacros({**{k: v for k, v in self.defined.items() if k not in undefined}, **defined},
                           (self.undefined - defined.keys()) | undefined, self.variants - defined.keys() - undefined,
                           self.sources + ((source,) if source else ()))

    def digest(self) -> str:
        """What decides the branches (not where it came from): an index linked for other macros is re-linked."""
        known = [sorted(self.defined.items()), sorted(self.undefined), sorted(self.variants)]
        return hashlib.sha256(json.dumps(known).encode()).hexdigest()[:16]

    def for_kind(self, kind: str) -> Callable[[str], Macro]:
        """The lookup ``line_states`` uses for a file of ``kind`` (cpp, cuda, header)."""
        own_defined, own_undefined = _KIND.get(kind, _KIND["header"])

        def lookup(name: str) -> Macro:
            if name in own_defined:
                return True, own_defined[name]
            if name in own_undefined:
                return False, 0
            if name in _DEVICE or name in self.variants:
                return None
            if name in self.defined:
                return True, self.defined[name]
            return (False, 0) if name in self.undefined else None

        return lookup


def file_kind(path: str) -> str:
    """cpp, cuda or header: which compiler's own macros apply to ``path``."""
    if path.endswith((".cu", ".cuh")):
        return "cuda"
    return "cpp" if path.endswith((".cpp", ".cc", ".cxx", ".c", ".mm")) else "header"


def target_build(repo: Path, cfg: Config, record_dir: Path | None) -> BuildMacros:
    """The macros of the build ``repo``'s benchmarks run against (see the module docstring)."""
    settings = _settings(cfg)
    macros = machine_macros()
    if settings.get("torch", True):
        torch_dir = torch_package_dir()
        if torch_dir is not None:
            macros = macros.merged(header_defines(torch_dir), _header_undefs(torch_dir), "torch headers")
            record = read_record(record_dir, torch_dir)
            if record is not None:
                macros = macros.merged(record["defined"], tuple(record["undefined"]), "torch build settings")
    commands = cfg.compile_commands or next((c for c in COMPILE_COMMANDS if (repo / c).is_file()), "")
    if commands:
        macros = macros.merged(_recorded_compile_defines(repo, commands, record_dir), (), commands)
    if settings.get("defines") or settings.get("undefined"):
        defined = {k: int(v) for k, v in settings.get("defines", {}).items()}
        macros = macros.merged(defined, tuple(settings.get("undefined", ())), "[tool.perfq.build]")
    return macros


def reads_torch(cfg: Config) -> bool:
    """Whether the installed torch's configuration is part of the target build (``torch = true``)."""
    return bool(_settings(cfg).get("torch", True))


def _settings(cfg: Config) -> dict[str, Any]:
    """``[tool.perfq.build]``, checked."""
    section = cfg.extra.get("build") or {}
    if not isinstance(section, dict):
        raise PerfqError("[tool.perfq.build] must be a table")
    unknown = sorted(set(section) - {"defines", "undefined", "torch"})
    if unknown:
        raise PerfqError(f"[tool.perfq.build]: unknown key {unknown[0]!r} (defines, undefined, torch)")
    defines = section.get("defines", {})
    if not isinstance(defines, dict) or not all(isinstance(v, bool | int) for v in defines.values()):
        raise PerfqError("[tool.perfq.build] defines must be a table of macro = integer (or true/false)")
    undefined = section.get("undefined", [])
    if not isinstance(undefined, list) or not all(isinstance(v, str) for v in undefined):
        raise PerfqError("[tool.perfq.build] undefined must be a list of macro names")
    if not isinstance(section.get("torch", True), bool):
        raise PerfqError("[tool.perfq.build] torch must be true or false")
    return section


def machine_macros(machine: str | None = None, system: str | None = None) -> BuildMacros:
    """What this machine's compiler defines and leaves out (x86-64 or aarch64 Linux; elsewhere
    only the operating system is known)."""
    machine = (machine or platform.machine()).lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = system or sys.platform
    defined, undefined, variants = _ARCH.get(machine, ({}, (), ()))
    if system.startswith("linux"):
        defined, undefined = {**_LINUX, **defined}, undefined + _NOT_LINUX
    return BuildMacros(dict(defined), frozenset(undefined), frozenset(variants), (f"{machine} {system}",))


def torch_package_dir() -> Path | None:
    """The installed torch package's directory, found without importing it. A ``torch/`` without
    ``version.py`` (a PyTorch source tree, first on the path under ``python -m perfq`` run inside
    the checkout) is no build: the search goes on past it."""
    for entry in sys.path:
        spec = importlib.machinery.PathFinder.find_spec("torch", [entry or os.getcwd()])
        if spec is None or not spec.submodule_search_locations:
            continue
        torch_dir = Path(next(iter(spec.submodule_search_locations)))
        if (torch_dir / "version.py").is_file():
            return torch_dir
    return None


_HEADERS = ("include/ATen/Config.h", "include/torch/headeronly/macros/cmake_macros.h",
            "include/c10/macros/cmake_macros.h")


def _header_texts(torch_dir: Path) -> list[bytes]:
    out = []
    for rel in _HEADERS:
        try:
            out.append(files.read_limited(str(torch_dir), rel, HEADER_MAX_BYTES))
        except (OSError, ValueError):
            continue
    return out


def header_defines(torch_dir: Path) -> dict[str, int]:
    """``#define`` values of the installed torch's generated configuration headers."""
    return defines_in(b"\n".join(_header_texts(torch_dir)))


def defines_in(text: bytes) -> dict[str, int]:
    """Integer (or empty) ``#define``s of a header's text; function-like ones as ``NAME()``."""
    out: dict[str, int] = {}
    for m in _DEFINE.finditer(text):
        name = m.group(1).decode() + ("()" if m.group(2) else "")
        body = m.group(3).decode("ascii", "replace")
        if not body:
            out[name] = 1
        elif re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", body):
            out[name] = int(body, 0)
    return {k: v for k, v in out.items() if not k.endswith(("_H_", "_H"))}  # include guards name nothing


def _header_undefs(torch_dir: Path) -> tuple[str, ...]:
    return tuple(m.group(1).decode() for text in _header_texts(torch_dir) for m in _UNDEF.finditer(text))


def compile_commands_defines(repo: Path, rel: str) -> dict[str, int]:
    """The ``-D`` defines every entry of ``compile_commands.json`` shares (per-file ones, such as a
    CPU capability's, differ between entries and stay unknown)."""
    try:
        entries = json.loads(files.read_limited(str(repo), rel, COMPILE_COMMANDS_MAX_BYTES))
    except (OSError, ValueError) as exc:
        raise PerfqError(f"{rel}: cannot read compile commands: {exc}") from None
    if not isinstance(entries, list):
        raise PerfqError(f"{rel}: not a compile_commands.json (a list of entries)")
    common: dict[str, int] | None = None
    for entry in entries:
        words = entry.get("arguments") or str(entry.get("command", "")).split() if isinstance(entry, dict) else []
        mine = dict(_flag_define(w[2:]) for w in words if isinstance(w, str) and w.startswith("-D") and len(w) > 2)
        common = mine if common is None else {k: v for k, v in common.items() if mine.get(k) == v}
    return common or {}


def _recorded_compile_defines(repo: Path, rel: str, record_dir: Path | None) -> dict[str, int]:
    """``compile_commands_defines``, kept beside the index while the file stays the same (a
    PyTorch build's is tens of megabytes: parsing it costs a query more than its budget)."""
    try:
        stat = (repo / rel).stat()
    except OSError as exc:
        raise PerfqError(f"{rel}: cannot read compile commands: {exc.strerror}") from None
    key = f"{(repo / rel).resolve()}:{stat.st_mtime_ns}:{stat.st_size}"
    if record_dir is not None:
        try:
            doc = json.loads(files.read_limited(str(record_dir), COMPILE_RECORD_NAME, HEADER_MAX_BYTES))
            if isinstance(doc, dict) and doc.get("key") == key and isinstance(doc.get("defined"), dict):
                return doc["defined"]
        except (OSError, ValueError):
            pass
    defined = compile_commands_defines(repo, rel)
    if record_dir is not None and record_dir.is_dir():
        with contextlib.suppress(OSError):  # a read-only index folder: parsed again next time
            write_atomically(record_dir / COMPILE_RECORD_NAME, [json.dumps({"key": key, "defined": defined})])
    return defined


def _flag_define(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    value = value.strip("'\"")
    return name, int(value, 0) if re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", value) else 1


# ----------------------------------------------------------------------- torch's build settings

def record_key(torch_dir: Path) -> str:
    """What the recorded settings belong to: the torch install (its path and version file)."""
    try:
        stat = (torch_dir / "version.py").stat()
    except OSError:
        return str(torch_dir)
    return f"{torch_dir}:{stat.st_mtime_ns}:{stat.st_size}"


def user_cache_dir() -> Path:
    """perfq's cache for what belongs to the machine rather than to a repository."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perfq"


def record_places(record_dir: Path | None, torch_dir: Path) -> list[tuple[Path, str]]:
    """Where a torch install's settings are recorded: the user's cache (shared by every index
    on the machine), else beside the index."""
    shared = (user_cache_dir(), f"torch-build-{hashlib.sha256(str(torch_dir).encode()).hexdigest()[:12]}.json")
    return [shared] + ([(record_dir, RECORD_NAME)] if record_dir is not None else [])


def read_record(record_dir: Path | None, torch_dir: Path) -> dict[str, Any] | None:
    """The recorded build settings of the torch at ``torch_dir``, None when absent or stale."""
    for folder, name in record_places(record_dir, torch_dir):
        try:
            doc = json.loads(files.read_limited(str(folder), name, HEADER_MAX_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("key") == record_key(torch_dir):
            return doc
    return None


def settings_macros(shown: str) -> tuple[dict[str, int], list[str]]:
    """Macros ``torch.__config__.show()`` settles: the ``-D`` flags of CXX_FLAGS, the options it
    builds without (``USE_ROCM=OFF``: ``USE_ROCM`` undefined), the compiler and C++ version."""
    defined: dict[str, int] = {}
    undefined: list[str] = []
    flags = re.search(r"CXX_FLAGS=([^,]*)", shown)
    for word in (flags.group(1).split() if flags else []):
        if word.startswith("-D") and len(word) > 2:
            name, value = _flag_define(word[2:])
            defined[name] = value
        elif word.startswith("-U") and len(word) > 2:
            undefined.append(word[2:])
    for name in re.findall(r"\b(USE_\w+)=(?:OFF|0)\b", shown):
        if name not in defined:
            undefined.append(name)
    if m := re.search(r"^\s*-\s*GCC (\d+)\.(\d+)", shown, re.MULTILINE):
        defined |= {"__GNUC__": int(m.group(1)), "__GNUC_MINOR__": int(m.group(2))}
        undefined.append("__clang__")
    if m := re.search(r"C\+\+ Version:\s*(\d+)", shown):
        defined["__cplusplus"] = int(m.group(1))
    if re.search(r"\bUSE_CUDA=(OFF|0)\b", shown) and not re.search(r"\bUSE_ROCM=ON\b", shown):
        undefined.append("USE_ROCM")
    return defined, sorted(set(undefined))
