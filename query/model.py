"""The query layer's data model: the typed steps of an explained chain (changed function ->
callers -> operator -> benchmark). A step knows what it names and how it was reached; its
``text`` is the string the JSON documents have always held, and renderers read the fields."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class StepKind(StrEnum):
    """What a chain step names."""

    FUNCTION = "function"  # a C++ function (``file``:``name``) or a Python one (``name``, its qualname)
    FILE = "file"  # a file's lines outside any function (``detail``: file level, included by)
    OP = "op"
    STUB = "stub"
    BENCHMARK = "benchmark"
    BENCHMARK_FILE = "benchmark_file"  # a benchmark file that changed (``detail``: the changed module it imports)
    CANARY = "canary"  # a canary set (``detail``: what triggered it)
    NOTE = "note"  # a sentence (``name``): how a native sample or a missing observation bears on it


@dataclass(frozen=True)
class ChainStep:
    """One step of a chain: ``kind`` and ``name`` say what it is, ``via`` how the step before
    led to it (an edge kind of the index, or a sentence such as ``traced: 2 test(s) execute
    add``; '' for the first step)."""

    JSON_AS_TEXT: ClassVar[bool] = True  # a document holds its ``text``

    kind: StepKind
    name: str
    file: str = ""  # a C++ function's file
    detail: str = ""  # see StepKind
    via: str = ""

    @property
    def label(self) -> str:
        """The step without how it was reached: ``aten/src/ATen/native/SoftMax.cpp:at::native::softmax``."""
        kind, name = self.kind, self.name
        if kind == StepKind.FUNCTION:
            return f"{self.file}:{name}" if self.file else name
        if kind == StepKind.FILE:
            return f"{name} ({self.detail})"
        if kind == StepKind.BENCHMARK_FILE:
            return f"benchmark file {name} " + (f"imports {self.detail}, which changed" if self.detail else "changed")
        if kind == StepKind.CANARY:
            return f"canary set {name}: {self.detail}"
        if kind == StepKind.NOTE:
            return name
        return f"{kind} {name}"

    @property
    def text(self) -> str:
        """The step as the JSON documents write it: its label, then ``[via]``."""
        return f"{self.label} [{self.via}]" if self.via else self.label

    def __str__(self) -> str:
        return self.text


Chain = tuple[ChainStep, ...]
