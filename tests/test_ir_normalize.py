# ruff: noqa: E501  (IR fixture lines are as long as Triton prints them)
"""Pure tests of the IR normalizer (no triton needed): inline MLIR / LLVM IR / PTX texts."""

from __future__ import annotations

import pytest

from perfq.ir.normalize import normalize_ir, stage_kind

# The same TTGIR as Triton 3.9 prints it (named SSA values, locations of one checkout) ...
TTGIR_A = """\
#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#loc = loc("/home/alice/src/kernels/k.py":3:1)
#loc12 = loc("x_ptr"(#loc))
module attributes {"ttg.num-warps" = 4 : i32, ttg.target = "cuda:90"} {
  tt.func public @add_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %pid = tt.get_program_id x : i32 loc(#loc17)
    %offs = arith.muli %pid, %c1024_i32 : i32 loc(#loc18)
    %total = scf.for %start = %c0 to %n step %c1024_i32 iter_args(%acc = %offs) -> (i32)  : i32 {
      %s = arith.addi %acc, %start : i32 loc(#loc5)
      scf.yield %s : i32 loc(#loc9)
    } loc(#loc33)
    %r = "tt.reduce"(%total) <{axis = 0 : i32}> ({
    ^bb0(%arg5: f32 loc(callsite(#loc1 at #loc18)), %arg6: f32 loc(callsite(#loc1 at #loc18))):
      %2 = arith.addf %arg5, %arg6 : f32 loc(#loc42)
      tt.reduce.return %2 : f32 loc(#loc40)
    }) : (tensor<256xf32, #blocked>) -> f32 loc(#loc40)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
#loc5 = loc("/home/alice/src/kernels/k.py":6:9)
#loc17 = loc("pid"(#loc5))
"""

# ... and as another install prints it: other paths, line numbers, #loc numbering, SSA names.
TTGIR_B = """\
#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#loc = loc("/tmp/ci/worktree-2/kernels/k.py":30:1)
module attributes {"ttg.num-warps" = 4 : i32, ttg.target = "cuda:90"} {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %arg1: i32 loc("n"(#loc))) attributes {noinline = false} {
    %c1024 = arith.constant 1024 : i32 loc(#loc3)
    %0 = tt.get_program_id x : i32 loc(#loc7)
    %1 = arith.muli %0, %c1024 : i32 loc(#loc8)
    %2 = scf.for %arg2 = %cst to %arg1 step %c1024 iter_args(%arg3 = %1) -> (i32)  : i32 {
      %5 = arith.addi %arg3, %arg2 : i32 loc(#loc2)
      scf.yield %5 : i32 loc(#loc2)
    } loc(#loc2)
    %3 = "tt.reduce"(%2) <{axis = 0 : i32}> ({
    ^bb3(%arg7: f32 loc(#loc2), %arg8: f32 loc(fused[#loc2, #loc3])):
      %4 = arith.addf %arg7, %arg8 : f32 loc(#loc4)
      tt.reduce.return %4 : f32 loc(#loc4)
    }) : (tensor<256xf32, #blocked>) -> f32 loc(#loc4)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc2 = loc("/tmp/ci/worktree-2/kernels/k.py":31:9)
#loc3 = loc(unknown)
"""

LLIR = """\
; ModuleID = 'LLVMDialectModule'
source_filename = "LLVMDialectModule"
target triple = "nvptx64-nvidia-cuda"

; Function Attrs: nounwind
define ptx_kernel void @k(ptr addrspace(1) %0, i32 %1) local_unnamed_addr #0 !dbg !4 {
  %3 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !12
  %4 = icmp slt i32 %3, %1, !dbg !13
  br i1 %4, label %.lr.ph, label %9, !dbg !14

.lr.ph:                                           ; preds = %2
  %6 = tail call i32 asm sideeffect "mov.u32 %r0, 0x0; ld.global.b32 { $0 }, [ $1 + 0 ];", "=r,l"(ptr addrspace(1) %0) #1, !dbg !15
  br label %9

9:                                                ; preds = %.lr.ph, %2
  ret void, !dbg !16
}

attributes #0 = { nounwind }
attributes #1 = { nounwind }

!llvm.module.flags = !{!0, !1}
!llvm.dbg.cu = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
!2 = distinct !DICompileUnit(language: DW_LANG_C, file: !3, producer: "triton")
!3 = !DIFile(filename: "k.py", directory: "/home/alice/src")
!4 = distinct !DISubprogram(name: "k", scope: !3, file: !3, line: 5, type: !5, unit: !2)
!5 = !DISubroutineType(cc: DW_CC_normal, types: !6)
!6 = !{null}
!12 = !DILocation(line: 6, column: 11, scope: !4)
!13 = !DILocation(line: 7, column: 11, scope: !4)
!14 = !DILocation(line: 8, column: 11, scope: !4)
!15 = !DILocation(line: 9, column: 11, scope: !4)
!16 = !DILocation(line: 10, column: 11, scope: !4)
"""


def test_same_kernel_from_two_checkouts_normalizes_identically():
    assert TTGIR_A != TTGIR_B
    assert normalize_ir(TTGIR_A, "ttgir") == normalize_ir(TTGIR_B, "ttgir")


def test_mlir_locations_paths_and_names_are_gone_but_meaning_stays():
    out = normalize_ir(TTGIR_A, "ttgir")
    assert "loc(" not in out and "#loc" not in out and "alice" not in out
    assert "%pid" not in out and "%arg5" not in out and "%c1024_i32" not in out
    # ops, types, attributes, layouts, constants and the function name are kept
    for kept in ("#blocked = #ttg.blocked<{sizePerThread = [4]", "tt.divisibility = 16", "@add_kernel",
                 "arith.constant 1024 : i32", "scf.for", "iter_args(", "\"tt.reduce\"", "^bb0(",
                 "ttg.target = \"cuda:90\"", "tensor<256xf32, #blocked>"):
        assert kept in out, kept
    # names follow first appearance: function arguments first
    assert "@add_kernel(%v0: !tt.ptr<f32>" in out and ", %v1: i32)" in out


def test_mlir_real_changes_survive_normalization():
    edited = TTGIR_B.replace("arith.addf %arg7, %arg8", "arith.mulf %arg7, %arg8")
    assert normalize_ir(edited, "ttgir") != normalize_ir(TTGIR_A, "ttgir")
    wider = TTGIR_B.replace("arith.constant 1024", "arith.constant 2048")
    assert normalize_ir(wider, "ttgir") != normalize_ir(TTGIR_A, "ttgir")
    rewired = TTGIR_B.replace("%5 = arith.addi %arg3, %arg2", "%5 = arith.addi %arg2, %arg3")
    assert normalize_ir(rewired, "ttgir") != normalize_ir(TTGIR_A, "ttgir")


def test_ssa_names_restart_in_each_function():
    two = "module {\n  tt.func @f(%a: i32) {\n    %x = arith.addi %a, %a : i32\n  }\n" \
          "  tt.func @g(%b: i32) {\n    %y = arith.addi %b, %b : i32\n  }\n}\n"
    out = normalize_ir(two, "ttir")
    assert "@f(%v0: i32)" in out and "@g(%v0: i32)" in out
    assert "%v1 = arith.addi %v0, %v0" in out


def test_llvm_debug_info_comments_and_names():
    out = normalize_ir(LLIR, "llir")
    for gone in ("!dbg", "DILocation", "DIFile", "DISubprogram", "ModuleID", "source_filename", "preds",
                 "alice", "llvm.dbg.cu", "!{null}"):
        assert gone not in out, gone
    assert "define ptx_kernel void @k(ptr addrspace(1) %v0, i32 %v1) local_unnamed_addr #0 {" in out
    assert "br i1 %v3, label %bb0, label %bb1" in out
    assert "\nbb0:\n" in out and "\nbb1:\n" in out
    # inline asm strings are kept verbatim (the %r0 inside is a PTX register, not an SSA value)
    assert 'asm sideeffect "mov.u32 %r0, 0x0;' in out
    # module flags are kept and metadata renumbered densely
    assert '!llvm.module.flags = !{!0, !1}' in out and '!1 = !{i32 4, !"nvvm-reflect-ftz", i32 1}' in out


def test_llvm_renamed_values_and_relabelled_blocks_compare_equal():
    other = (LLIR.replace("%.lr.ph", "%5").replace(".lr.ph:", "5:").replace("%9", "%10").replace("9:", "10:")
             .replace("!dbg !1", "!dbg !2"))
    assert normalize_ir(other, "llir") == normalize_ir(LLIR, "llir")
    changed = LLIR.replace("icmp slt", "icmp sle")
    assert normalize_ir(changed, "llir") != normalize_ir(LLIR, "llir")


def test_ptx_and_amdgcn_debug_lines_dropped():
    ptx = '.version 8.4\n.target sm_90\n.file 1 "/home/alice/k.py"\n.visible .entry k(\n)\n{\n' \
          '\t.loc 1 5 0\n\tld.global.b32 %r1, [%rd1]; // load x\n\tret;\n}\n' \
          '\t.section\t.debug_abbrev\n\t{\n.b8 1\n.b8 17\n\t}\n'
    out = normalize_ir(ptx, "ptx")
    assert ".loc" not in out and ".file" not in out and "alice" not in out and ".b8" not in out
    assert "ld.global.b32 %r1, [%rd1];" in out and "// load" not in out
    gcn = "\t.text\nk:\n\t.loc 1 5 0 ; k.py:5:0\n\tv_add_f32 v0, v1, v2 ; comment\n" \
          "\t.section\t.debug_info,\"\",@progbits\n\t.long 1\n\t.text\n\ts_endpgm\n"
    out = normalize_ir(gcn, "amdgcn")
    assert "v_add_f32 v0, v1, v2" in out and "comment" not in out and ".long" not in out
    assert "s_endpgm" in out


def test_absolute_paths_in_strings_keep_only_the_basename():
    text = 'module {\n  tt.func @f() {\n    %0 = tt.call @g() {lib = "/opt/site-packages/triton/lib/libdevice.10.bc"} : () -> i32\n  }\n}\n'
    out = normalize_ir(text, "ttir")
    assert '"<path>/libdevice.10.bc"' in out and "/opt/" not in out


@pytest.mark.parametrize("text,stage", [(TTGIR_A, "ttgir"), (TTGIR_B, "ttir"), (LLIR, "llir")])
def test_normalizing_twice_changes_nothing(text, stage):
    once = normalize_ir(text, stage)
    assert normalize_ir(once, stage) == once


def test_stage_kind_guesses_from_text():
    assert stage_kind("ttgir") == "mlir" and stage_kind("llir") == "llvm" and stage_kind("ptx") == "asm"
    assert stage_kind("whatever", "define void @f() {\n}\n") == "llvm"
    assert stage_kind("whatever", "module {\n}\n") == "mlir"
