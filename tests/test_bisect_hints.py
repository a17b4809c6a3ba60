"""Root-cause hints from a commit's diff."""

from __future__ import annotations

from perfq.bisect.hints import scan_diff

DIFF = """\
diff --git a/kernels/matmul.py b/kernels/matmul.py
--- a/kernels/matmul.py
+++ b/kernels/matmul.py
@@ -20,5 +20,8 @@ def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_K: tl.constexpr):
     acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
-    for k in range(0, K, BLOCK_K):
+    for k in range(0, K, BLOCK_K // 2):
         a = tl.load(a_ptr + k)
+        scale = tl.load(s_ptr + k)
+        b = tl.load(b_ptr + k, mask=offs_k < K)
+        tl.debug_barrier()
-        acc += tl.dot(a, b)
+        acc += tl.dot(a, b).to(tl.float16)
-    configs = [triton.Config({"BLOCK_M": 128}, num_stages=4, num_warps=8)]
+    configs = [triton.Config({"BLOCK_M": 64}, num_stages=2, num_warps=4)]
diff --git a/aten/src/ATen/native/cuda/Reduce.cu b/aten/src/ATen/native/cuda/Reduce.cu
--- a/aten/src/ATen/native/cuda/Reduce.cu
+++ b/aten/src/ATen/native/cuda/Reduce.cu
@@ -100,4 +100,3 @@ __global__ void reduce_kernel(const float* in, float* out, int n) {
-#define TILE_SIZE 32
+#define TILE_SIZE 16
-  __pipeline_commit();
-  prefetch_next_tile(in, idx);
   auto x = in.contiguous();
+  auto y = x.to(at::kHalf).permute({1, 0});
"""


def test_each_pattern_is_found_with_its_location():
    hints = scan_diff(DIFF)
    kinds = {(h.kind, h.file) for h in hints}
    py, cu = "kernels/matmul.py", "aten/src/ATen/native/cuda/Reduce.cu"
    for kind in ("loop-bounds", "load-in-loop", "masking", "sync", "dtype", "launch-params"):
        assert (kind, py) in kinds, kind
    for kind in ("tile-size", "prefetch-removed", "layout"):
        assert (kind, cu) in kinds, kind
    loop = next(h for h in hints if h.kind == "loop-bounds")
    assert loop.line == 21 and "BLOCK_K // 2" in loop.text
    load = next(h for h in hints if h.kind == "load-in-loop")
    assert "s_ptr" in load.text


def test_quiet_diff_gives_no_hints():
    diff = """\
--- a/README.md
+++ b/README.md
@@ -1,2 +1,2 @@
 # Project
-Some words.
+Some better words.
"""
    assert scan_diff(diff) == []


def test_load_outside_any_loop_is_not_flagged():
    diff = """\
--- a/k.py
+++ b/k.py
@@ -1,2 +1,3 @@
 def kernel(p):
     x = 1
+    y = tl.load(p)
"""
    assert [h.kind for h in scan_diff(diff)] == []


def test_editing_an_existing_masked_load_is_not_new_masking():
    diff = """\
--- a/k.py
+++ b/k.py
@@ -1,3 +1,3 @@
 for i in range(n):
-    x = tl.load(p + i, mask=m)
+    x = tl.load(p + i * 2, mask=m)
     tl.debug_barrier()
"""
    assert scan_diff(diff) == []
