"""Native samples (``perfq index --native``, indexer/native.py): per sampled test, the index
functions on its perf stacks and their share. No step of the link: the build's native pass
samples processes and writes these rows after it."""

from __future__ import annotations

from indexer.rules.base import Rule
from schema.model import FunctionRow, NativeSampleRow, NativeTestRow

RULE = Rule("native samples", writes=(NativeSampleRow, NativeTestRow), reads=(FunctionRow,), link={}, place=120)
