"""Native truth, the pure part: parse ``perf script`` text into sampled stacks and map their
demangled frames to the index's functions (indexer/native.py runs perf and stores the result).

A frame names the functions it mentions: the function itself (``at::native::foo(...)``) and,
since the torch wheel is built without frame pointers and the kernels are inlined into the loop
templates, those named inside its template arguments and lambda scopes
(``callback_fn<VectorizedLoop2d<AVX2::neg_kernel(TensorIteratorBase&)::{lambda()#1}...>>``). Names
are compared without ISA namespaces, ``(anonymous namespace)``, clone suffixes, lambdas,
template arguments and parameter lists: by qualified name, then by their last two parts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

ISA_NAMESPACES = ("CPU_CAPABILITY", "DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "NEON")
_ISA = re.compile(r"\b(?:" + "|".join(ISA_NAMESPACES) + r")::")
_ANON = "(anonymous namespace)::"
_CLONE = re.compile(r"\.(?:constprop|isra|part|cold|lto_priv|localalias)(?:\.\d+)*")
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")
_FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*)\s+\(([^()]*)\)\s*$")
# an identifier chain called with arguments: the functions a frame mentions, anywhere in it
_CALLED = re.compile(r"(?<![\w:~])((?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*)(?:<[^<>()]*>)?\(")
_NOT_FUNCTIONS = frozenset({"lambda", "operator", "decltype", "sizeof", "alignof", "noexcept", "void"})


@dataclass(frozen=True)
class Frame:
    """One frame of a sampled stack: the demangled symbol (no offset) and the object it is in."""

    symbol: str
    dso: str

    def to_json(self) -> dict:
        return {"symbol": self.symbol, "dso": self.dso}


@dataclass(frozen=True)
class Sample:
    """One sample: its frames, leaf first."""

    frames: tuple[Frame, ...]

    def to_json(self) -> dict:
        return {"frames": [f.to_json() for f in self.frames]}


@dataclass(frozen=True)
class MatchRate:
    """How much of what ran in the library maps to index functions."""

    samples: int  # samples with a frame in the library
    samples_mapped: int  # ... of which a frame maps to an index function
    frames: int  # distinct symbols of the library on the stacks
    frames_mapped: int  # ... that map

    def to_json(self) -> dict:
        return {"samples": self.samples, "samples_mapped": self.samples_mapped,
                "frames": self.frames, "frames_mapped": self.frames_mapped}

    def __add__(self, other: MatchRate) -> MatchRate:
        return MatchRate(self.samples + other.samples, self.samples_mapped + other.samples_mapped,
                         self.frames + other.frames, self.frames_mapped + other.frames_mapped)


@dataclass(frozen=True)
class TestProfile:
    """What one test's samples say: per index function, the share of its samples whose stack
    holds it, and the match rate of its library frames."""

    total: int
    shares: tuple[tuple[int, float], ...]  # (function id, share), largest first
    rate: MatchRate
    symbols: frozenset[str] = frozenset()  # distinct library symbols seen (for a rate over tests)
    mapped_symbols: frozenset[str] = frozenset()

    def to_json(self) -> dict:
        return {"total": self.total, "shares": [list(s) for s in self.shares], "rate": self.rate.to_json()}


def parse_perf_script(lines: Iterable[str]) -> list[Sample]:
    """The samples of ``perf script`` output (default fields, or ``-F ip,sym,dso``): a sample is
    its frame lines (``addr symbol+0xoff (dso)``) up to a blank line."""
    samples: list[Sample] = []
    frames: list[Frame] = []
    for line in lines:
        found = _FRAME.match(line)
        if found:
            frames.append(Frame(_OFFSET.sub("", found.group(2)), found.group(3)))
        elif not line.strip() and frames:
            samples.append(Sample(tuple(frames)))
            frames = []
    if frames:
        samples.append(Sample(tuple(frames)))
    return samples


def mangled_symbols(samples: Iterable[Sample]) -> list[str]:
    """The distinct symbols perf left mangled (``_Z...``: its demangler gives up on very long ones)."""
    return sorted({f.symbol for s in samples for f in s.frames if f.symbol.startswith("_Z")})


def renamed(samples: list[Sample], names: dict[str, str]) -> list[Sample]:
    """``samples`` with their symbols replaced by ``names`` (a demangler's output) where it has them."""
    if not names:
        return samples
    return [Sample(tuple(Frame(names.get(f.symbol, f.symbol), f.dso) for f in s.frames)) for s in samples]


def _strip_balanced(text: str, opening: str, closing: str) -> str:
    """``text`` without its outermost ``opening ... closing`` groups (nested ones inside them)."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == opening:
            depth += 1
        elif ch == closing and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def normalize_name(name: str) -> str:
    """A qualified name as compared: no ISA namespace, anonymous namespace, clone suffix,
    template arguments or lambda scopes."""
    name = _CLONE.sub("", name).replace(_ANON, "")
    name = _ISA.sub("", name)
    name = _strip_balanced(name, "<", ">")
    return "::".join(p for p in name.split("::") if p and not p.startswith("{"))


def frame_names(symbol: str) -> tuple[str, ...]:
    """The normalized functions a demangled ``symbol`` mentions: itself (the name before its
    parameter list) first, then those called inside its template arguments and lambda scopes."""
    text = _CLONE.sub("", symbol).replace(_ANON, "").replace("operator()", "operator_call")
    text = re.sub(r"\{lambda\([^{}]*?\)#\d+\}", "{lambda}", text)
    own = _strip_balanced(text, "<", ">").split("(", 1)[0].strip()
    names = [normalize_name(own)] if own else []
    for called in _CALLED.findall(text):
        if called.split("::")[-1] not in _NOT_FUNCTIONS:
            names.append(normalize_name(called))
    seen: dict[str, None] = {}
    for n in names:
        if n and n.split("::")[-1] not in _NOT_FUNCTIONS and n != "operator_call":
            seen.setdefault(n, None)
    return tuple(seen)


def last_two(name: str) -> str:
    return "::".join(name.split("::")[-2:])


class FunctionMatcher:
    """Index functions by normalized qualified name and by its last two parts."""

    def __init__(self, functions: Iterable[tuple[int, str]]) -> None:
        """``functions``: (id, qualname) of the index's C++ functions."""
        self.by_name: dict[str, list[int]] = {}
        self.by_tail: dict[str, list[int]] = {}
        for fid, qualname in functions:
            name = normalize_name(qualname)
            self.by_name.setdefault(name, []).append(fid)
            if "::" in name:
                self.by_tail.setdefault(last_two(name), []).append(fid)

    def match(self, name: str) -> tuple[int, ...]:
        """The functions ``name`` (normalized) is: by qualified name, else by its last two parts
        (a single-part name only by the first: ``memcpy`` is not ``at::memcpy``)."""
        exact = self.by_name.get(name)
        if exact:
            return tuple(exact)
        return tuple(self.by_tail.get(last_two(name), ())) if "::" in name else ()

    def frame(self, symbol: str) -> tuple[int, ...]:
        """The functions a frame's symbol mentions."""
        out: dict[int, None] = {}
        for name in frame_names(symbol):
            out.update(dict.fromkeys(self.match(name)))
        return tuple(out)


def in_library(frame: Frame, library: str) -> bool:
    return frame.dso.rsplit("/", 1)[-1] == library


def profile(samples: list[Sample], matcher: FunctionMatcher, library: str = "libtorch_cpu.so",
            min_share: float = 0.0) -> TestProfile:
    """Per function, the share of ``samples`` whose stack holds one of the library's frames that
    mentions it (counted once per sample), those of at least ``min_share``; and the match rate."""
    counts: Counter[int] = Counter()
    cache: dict[str, tuple[int, ...]] = {}
    in_lib = mapped = 0
    for sample in samples:
        ids: set[int] = set()
        lib = [f.symbol for f in sample.frames if in_library(f, library)]
        for symbol in lib:
            if symbol not in cache:
                cache[symbol] = matcher.frame(symbol)
            ids.update(cache[symbol])
        in_lib += bool(lib)
        mapped += bool(ids)
        counts.update(ids)
    total = len(samples)
    shares = tuple(sorted(((fid, n / total) for fid, n in counts.items() if total and n / total >= min_share),
                          key=lambda s: (-s[1], s[0])))
    symbols = frozenset(cache)
    hit = frozenset(s for s, ids in cache.items() if ids)
    return TestProfile(total, shares, MatchRate(in_lib, mapped, len(symbols), len(hit)), symbols, hit)
