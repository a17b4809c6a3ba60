"""Operators a DispatchStub's name points at, for stubs whose callers are upstream (an
out-of-tree backend registers ``REGISTER_XPU_DISPATCH(div_floor_stub, ...)`` for a stub its
upstream PyTorch declares and calls): the name is all there is to link the stub to operators."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

_STUB_SUFFIXES = ("_stub", "_kernel", "_impl", "_fn")
_PREFIX_MIN = 3  # a stub's word may abbreviate an operator's (div -> divide) from this many letters
_DECOMPOSED = "CompositeImplicitAutograd"


def _words(stub: str) -> list[str]:
    """``LayerNormKernel`` -> [layer, norm]; ``div_floor_stub`` -> [div, floor]."""
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", stub).lower()
    for suffix in _STUB_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return name.split("_")


def _abbreviates(word: str, op_word: str) -> bool:
    return word == op_word or (len(word) >= _PREFIX_MIN and op_word.startswith(word))


class StubNames:
    """Matches stub names to operators (``ops``: (name, base, composite kind) of every overload).

    In order: the stub's words as a base name (or its in-place, ``_`` or ``native_`` form):
    ``add_stub`` -> add, ``LayerNormKernel`` -> layer_norm and native_layer_norm,
    ``cdist_backward_stub`` -> _cdist_backward; then the same words in another order, each
    word the whole or the start of the operator's (``div_floor_stub`` -> floor_divide), of an
    operator with a kernel of its own (every overload CompositeImplicitAutograd, like
    ``true_divide``, decomposes into other operators and calls no stub); then trailing words
    dropped until a base name is an operator (``random_from_to_stub`` -> random). A stub a
    qualifier word sets apart (``div_floor``) is thus not linked to every overload of the
    shorter name (``div``, which runs ``div_true_stub``) when an operator names all its words."""

    def __init__(self, ops: Iterable[tuple[str, str, str | None]]) -> None:
        self.by_base: dict[str, list[str]] = defaultdict(list)
        decomposed: dict[str, bool] = {}
        for name, base, composite in ops:
            self.by_base[base].append(name)
            decomposed[base] = decomposed.get(base, True) and composite == _DECOMPOSED
        # bases with a kernel of their own, by word count and their words' first letters (sorted)
        self.by_shape: dict[tuple[str, ...], list[tuple[str, list[str]]]] = defaultdict(list)
        for base, only_composite in decomposed.items():
            words = base.strip("_").split("_")
            if not only_composite and len(words) > 1 and all(words):
                self.by_shape[tuple(sorted(w[:_PREFIX_MIN] for w in words))].append((base, words))

    def ops_named_like(self, stub: str) -> list[str]:
        """The operators (overload names) ``stub``'s name points at ([] for none)."""
        words = _words(stub)
        found = self._named(words) or self._reordered(words)
        while not found and len(words) > 1:
            words = words[:-1]
            found = self._named(words)
        return found

    def _named(self, words: list[str]) -> list[str]:
        base = "_".join(words)
        return [op for b in (base, f"{base}_", f"_{base}", f"native_{base}") for op in self.by_base.get(b, [])]

    def _reordered(self, words: list[str]) -> list[str]:
        """Operators whose base names the same words in another order (``floor_divide``)."""
        if len(words) < 2 or not all(words):
            return []
        shape = tuple(sorted(w[:_PREFIX_MIN] for w in words))
        found = []
        for base, op_words in self.by_shape.get(shape, []):
            if op_words != words and _pairs_up(words, op_words):
                found += self.by_base[base]
        return found


def _pairs_up(words: list[str], op_words: list[str]) -> bool:
    """Whether each of ``words`` abbreviates a different one of ``op_words`` (same count)."""
    left = list(op_words)
    for word in sorted(words, key=len, reverse=True):
        match = next((w for w in left if _abbreviates(word, w)), None)
        if match is None:
            return False
        left.remove(match)
    return not left
