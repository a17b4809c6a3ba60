"""Small affected documents for tests of the features that consume them (run, bisect)."""

from __future__ import annotations

from query.document import AffectedDoc, CanaryBenchmark, CanaryHit, Confidence, SelectedBenchmark, Source


def selected(name: str, file: str = "", tests: tuple[str, ...] = (), modules: tuple[str, ...] = (),
             ops: tuple[str, ...] = (), modes: tuple[str, ...] = ("eager",)) -> SelectedBenchmark:
    """A selected benchmark (static, high confidence, on the CPU, without reasons)."""
    return SelectedBenchmark(name, file or f"pt/{name}.py", tests, modules, ops, modes, ("cpu",), Confidence.high,
                             Source.static, ())


def canary(name: str, *members: str, trigger: str = "a changed path") -> CanaryHit:
    """A triggered canary set of the benchmarks ``members``."""
    return CanaryHit(name, trigger, "", tuple(CanaryBenchmark(m, f"pt/{m}.py") for m in members))


def affected_doc(benchmarks: tuple[SelectedBenchmark, ...] = (), canaries: tuple[CanaryHit, ...] = (),
                 ops: tuple[str, ...] = (), compile_mode: bool = False) -> AffectedDoc:
    """An affected document selecting ``benchmarks``, with the canary sets ``canaries`` triggered."""
    return AffectedDoc("a" * 40, "b" * 40, compile_mode, False, {}, (), (), benchmarks, canaries, ops, (), (), (), ())
