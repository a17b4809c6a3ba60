"""`perfq run`'s defaults, in one place: the run, its budgeted plan and `perfq affected --budget` use them.

Runner settings for short invocations (bench/run_defaults.py: an A/A of 5 operator_benchmark files
on 2 cores): sequential sampling then adds rounds where they are needed; the runner's own
time-based iteration count did not finish in 800 s.
"""

from __future__ import annotations

ITERATIONS = 10
NUM_RUNS = 10
WARMUP = 10  # the 2.6.0 runner's own is 100 iterations: most of an invocation's time on large tests
REPEAT = 5  # rounds of a plain run
ADAPTIVE_REPEAT = 3  # first rounds of sequential sampling (--ab, the default there); it adds the rest
OMP_THREADS = 1
TIMED_ITERATIONS = WARMUP + ITERATIONS * NUM_RUNS  # per test and invocation, warm-up included
# glibc's allocator with a fixed mmap threshold: a 3 MiB tensor comes from the heap in every benchmark process
# (the dynamic threshold put it there in some processes and mmapped it anew on every call in others: the N4
# softmax tests were 1.2 or 2.3 ms by process; docs/run.md "Contention"). Set unless perfq's environment or
# the side's sets them; other allocators ignore them.
ALLOCATOR_ENV = (("MALLOC_MMAP_THRESHOLD_", "33554432"), ("MALLOC_TRIM_THRESHOLD_", "67108864"))
