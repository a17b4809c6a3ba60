"""Build configuration (issue 40 item 1): changed lines in ``#if`` branches the target build does
not compile select nothing; a condition on a macro the build does not know keeps the selection
with a build-conditional note. The macros come from the machine, the installed torch's generated
headers and recorded settings, compile_commands.json and ``[tool.perfq.build]``."""

from __future__ import annotations

import difflib
import hashlib
import json
import sys
from pathlib import Path

import pytest

from common.config import Config
from common.diff import parse_diff
from common.errors import PerfqError
from indexer.build_config import (
    BuildMacros,
    compile_commands_defines,
    defines_in,
    machine_macros,
    read_record,
    record_key,
    settings_macros,
    target_build,
    torch_package_dir,
)
from indexer.preprocessor import Compiled, line_states
from indexer.torch_record import record_torch_build
from query.changes import changed_functions

X86 = machine_macros("x86_64", "linux").merged({"AT_MKLDNN_ENABLED()": 1, "USE_FBGEMM": 1}, ("USE_ROCM",), "test")

CPP = """\
#include <ATen/Config.h>

namespace at::native {

void gemm_kernel(float* c, const float* a, int n) {
#if defined(__aarch64__) && !defined(C10_MOBILE)
  c[0] = a[0] * 2.0f;
#elif AT_MKLDNN_ENABLED()
  c[0] = a[0] * 3.0f;
#else
  c[0] = a[0] * 4.0f;
#endif
}

void quantize(float* c, int n) {
#ifdef USE_FBGEMM
  c[0] = 1.0f;
#else
#if defined(__ARM_NEON__)
  c[0] = 2.0f;
#endif
#endif
}

void vec_kernel(float* c) {
#ifdef CPU_CAPABILITY_AVX512
  c[0] = 5.0f;
#endif
#if SOME_VENDOR_FLAG
  c[1] = 6.0f;
#endif
}

}  // namespace at::native
"""


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize("needle, state", [
    ("* 2.0f", Compiled.no),  # another architecture's branch
    ("* 3.0f", Compiled.yes),  # #elif AT_MKLDNN_ENABLED(): a oneDNN build
    ("* 4.0f", Compiled.no),  # its #else
    ("c[0] = 1.0f", Compiled.yes),
    ("c[0] = 2.0f", Compiled.no),  # nested in the #else of #ifdef USE_FBGEMM
    ("c[0] = 5.0f", Compiled.unknown),  # compiled once per CPU capability
    ("c[1] = 6.0f", Compiled.unknown),  # a macro nothing names
    ("void gemm_kernel", Compiled.yes),
])
def test_branch_states(needle: str, state: Compiled):
    assert line_states(CPP, X86, "cpp").at(_line(CPP, needle)).compiled is state


def test_the_same_file_on_aarch64_compiles_the_other_branches():
    arm = machine_macros("aarch64", "linux").merged({"AT_MKLDNN_ENABLED()": 1}, ("USE_FBGEMM",))
    states = line_states(CPP, arm, "cpp")
    assert states.at(_line(CPP, "* 2.0f")).compiled is Compiled.yes
    assert states.at(_line(CPP, "* 3.0f")).compiled is Compiled.no
    assert states.at(_line(CPP, "c[0] = 2.0f")).compiled is Compiled.yes


def test_unknown_region_names_its_macros_and_a_dropped_one_its_deciding_branch():
    states = line_states(CPP, X86, "cpp")
    assert states.at(_line(CPP, "c[1] = 6.0f")).unknown == ("SOME_VENDOR_FLAG",)
    assert states.at(_line(CPP, "c[0] = 2.0f")).condition == "#else (of #ifdef USE_FBGEMM)"


@pytest.mark.parametrize("expr, value", [
    ("#if (A + 1) * 2 == 4 && !defined(B)", Compiled.yes),
    ("#if A ? 0 : 1", Compiled.no),
    ("#if defined UNKNOWN_X || A", Compiled.yes),  # true whatever UNKNOWN_X is
    ("#if defined UNKNOWN_X && A", Compiled.unknown),
    ("#if defined UNKNOWN_X && B", Compiled.no),  # B is known undefined: 0
    ("#if __GNUC__ == 11 && defined(__ARM_FEATURE_SVE)", Compiled.no),
    ("#if 0x10 >= 16L", Compiled.yes),
    ("#if A &&", Compiled.unknown),  # malformed: never dropped
    ("#if defined(AT_MKLDNN_ENABLED) && defined(F)", Compiled.yes),  # function-like macros, by name
    ("#if defined(E) && E", Compiled.unknown),  # defined, to an expression
])
def test_expressions_in_three_values(expr: str, value: Compiled):
    macros = machine_macros("x86_64", "linux").merged({"A": 1, "AT_MKLDNN_ENABLED()": 1}, ("B",))
    text = f"#define E (A + B)\n#define F(x) x\n{expr}\nx = 1;\n#endif\n"
    assert line_states(text, macros, "cpp").at(4).compiled is value


def test_file_defines_include_guards_and_device_passes():
    text = ("#ifndef MY_HEADER_H\n#define MY_HEADER_H\n#define LOCAL_ON 1\n#if LOCAL_ON\nyes();\n#endif\n"
            "#undef LOCAL_ON\n#if LOCAL_ON\nno();\n#endif\n#ifdef __CUDACC__\ndevice();\n#endif\n#endif\n")
    states = line_states(text, X86, "cpp")
    assert states.at(5).compiled is Compiled.yes and states.at(9).compiled is Compiled.no
    assert states.at(12).compiled is Compiled.no  # a .cpp is no nvcc pass
    assert line_states(text, X86, "cuda").at(12).compiled is Compiled.yes
    assert line_states(text, X86, "header").at(12).compiled is Compiled.unknown


def _changes(old: str, new: str, build: BuildMacros | None = X86, path: str = "aten/src/ATen/native/cpu/K.cpp"):
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    files = parse_diff(f"diff --git a/{path} b/{path}\n{diff}")
    cfg = Config(source_roots=("aten",))
    return changed_functions(files, lambda _p: old.encode(), lambda _p: new.encode(), cfg, build=build)


def test_a_change_in_a_branch_the_build_leaves_out_selects_nothing():
    cs = _changes(CPP, CPP.replace("* 2.0f", "* 2.5f"))
    assert cs.functions == [] and cs.file_level == []
    assert cs.not_compiled and cs.not_compiled[0][2].startswith("#if defined(__aarch64__)")
    assert any("not compiled by the target build" in note for note in cs.notes)


def test_compiled_and_unknown_branches_keep_their_function():
    compiled = _changes(CPP, CPP.replace("* 3.0f", "* 3.5f"))
    assert [f.qualname for f in compiled.functions] == ["at::native::gemm_kernel"]
    unknown = _changes(CPP, CPP.replace("c[1] = 6.0f", "c[1] = 7.0f"))
    assert [f.qualname for f in unknown.functions] == ["at::native::vec_kernel"]
    assert any("build-conditional on SOME_VENDOR_FLAG" in note for note in unknown.notes)
    unconfigured = _changes(CPP, CPP.replace("* 2.0f", "* 2.5f"), build=None)
    assert [f.qualname for f in unconfigured.functions] == ["at::native::gemm_kernel"]


def test_defines_of_generated_headers_and_torch_settings():
    header = b"#define AT_MKLDNN_ENABLED() 1\n#define AT_MKL_ENABLED() 0\n#define C10_BUILD_SHARED_LIBS\n" \
             b"#define X_H_\n#define AT_NAME \"str\"\n"
    assert defines_in(header) == {"AT_MKLDNN_ENABLED()": 1, "AT_MKL_ENABLED()": 0, "C10_BUILD_SHARED_LIBS": 1}
    shown = ("  - GCC 13.3\n  - C++ Version: 202002\n  - Build settings: CXX_FLAGS= -DUSE_FBGEMM -DNDEBUG -O2"
             " -DX=3, USE_CUDA=0, USE_ROCM=OFF, USE_MKLDNN=ON, ")
    defined, undefined = settings_macros(shown)
    assert defined == {"USE_FBGEMM": 1, "NDEBUG": 1, "X": 3, "__GNUC__": 13, "__GNUC_MINOR__": 3, "__cplusplus": 202002}
    assert undefined == ["USE_CUDA", "USE_ROCM", "__clang__"]


def test_compile_commands_keep_only_the_defines_every_entry_shares(tmp_path: Path):
    entries = [{"file": "a.cpp", "command": "c++ -DUSE_FBGEMM -DCPU_CAPABILITY_AVX2 -DLEVEL=2 -c a.cpp"},
               {"file": "b.cpp", "arguments": ["c++", "-DUSE_FBGEMM", "-DLEVEL=2", "-c", "b.cpp"]}]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    assert compile_commands_defines(tmp_path, "compile_commands.json") == {"USE_FBGEMM": 1, "LEVEL": 2}


def test_config_override_wins_and_bad_sections_are_errors(tmp_path: Path):
    cfg = Config().with_overrides({"build": {"defines": {"USE_ROCM": 1, "AT_MKLDNN_ENABLED()": False},
                                             "undefined": ["USE_FBGEMM"], "torch": False}})
    macros = target_build(tmp_path, cfg, None)
    lookup = macros.for_kind("cpp")
    assert lookup("USE_ROCM") == (True, 1) and lookup("AT_MKLDNN_ENABLED()") == (True, 0)
    assert lookup("USE_FBGEMM") == (False, 0) and "[tool.perfq.build]" in macros.sources
    for bad in ({"defines": ["X"]}, {"undefined": "X"}, {"torch": "yes"}, {"defnes": {}}):
        with pytest.raises(PerfqError, match=r"\[tool.perfq.build\]"):
            target_build(tmp_path, Config().with_overrides({"build": bad}), None)


def test_compile_commands_where_present_are_read_once_and_kept_beside_the_index(tmp_path: Path):
    repo, record = tmp_path / "repo", tmp_path / "perfq"
    (repo / "build").mkdir(parents=True)
    record.mkdir()
    commands = repo / "build/compile_commands.json"
    commands.write_text(json.dumps([{"file": "a.cpp", "command": "c++ -DUSE_ROCM -c a.cpp"}]))
    cfg = Config().with_overrides({"build": {"torch": False}})
    assert target_build(repo, cfg, record).for_kind("cpp")("USE_ROCM") == (True, 1)
    assert json.loads((record / "compile-defines.json").read_text())["defined"] == {"USE_ROCM": 1}
    commands.write_text(json.dumps([{"file": "a.cpp", "command": "c++ -DUSE_ROCM=0 -c a.cpp"}]))  # rebuilt
    assert target_build(repo, cfg, record).for_kind("cpp")("USE_ROCM") == (True, 0)


def test_recorded_torch_settings_are_read_from_the_user_cache_once_per_install(tmp_path: Path, monkeypatch):
    torch_dir = torch_package_dir()
    if torch_dir is None:
        pytest.skip("torch is not installed")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    assert read_record(index_dir, torch_dir) is None
    record = {"key": record_key(torch_dir), "version": "x", "defined": {"USE_FBGEMM": 1}, "undefined": ["USE_ROCM"]}
    (tmp_path / "cache/perfq").mkdir(parents=True)
    (tmp_path / f"cache/perfq/torch-build-{hashlib.sha256(str(torch_dir).encode()).hexdigest()[:12]}.json").write_text(
        json.dumps(record))
    assert record_torch_build(index_dir) is None  # current: torch is not imported again
    lookup = target_build(tmp_path, Config(), index_dir).for_kind("cpp")
    assert lookup("USE_FBGEMM") == (True, 1) and lookup("USE_ROCM") == (False, 0)
    record["key"] = "another install"
    (index_dir / "torch-build.json").write_text(json.dumps(record))  # a stale one beside the index is not read
    assert read_record(index_dir, torch_dir)["key"] == record_key(torch_dir)


def test_a_source_tree_s_torch_first_on_the_path_is_not_the_installed_build(tmp_path: Path, monkeypatch):
    """`python -m perfq index` inside a PyTorch checkout puts the checkout first on sys.path: its
    `torch/` (no version.py, no generated headers) must not stand for the build's configuration."""
    installed = torch_package_dir()
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch/__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    found = torch_package_dir()
    assert found != tmp_path / "torch"
    assert found == installed
