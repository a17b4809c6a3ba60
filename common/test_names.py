"""Benchmark test names as perfq keeps them: the same in every process.

PyTorch's operator_benchmark names a test from its config's values (``str(value)``, spaces
removed). A config value that is a function (``cat_test``'s sizes ``lambda: random.randint(...)``)
is written with its memory address, ``cat_sizes[<function<lambda>at0x7f1e0088ae80>,111,65]_N5_dim0_cpu``,
which differs in every process: the base and head sides of a run, its rounds, the tracer and the
history would each know another test. Wherever perfq reads a test name from the harness (the run's
output parser, the tracer's results, a stored history), the address is masked:
``cat_sizes[<function<lambda>>,111,65]_N5_dim0_cpu``. The runner's own ``--test-name`` compares
its raw names, so a name holding an object (``<``) is selected by perfq's wrapper instead, which
masks both sides of the comparison.
"""

from __future__ import annotations

import re

_AT = " ?at ?0x[0-9a-fA-F]+"
ADDRESS = _AT + ">"  # CPython's default repr ends "<... at 0x7f...>"; a regex of Python and DuckDB (RE2)
MASKED = ">"
_ADDRESS = re.compile(ADDRESS)


def stable_test_name(name: str) -> str:
    """``name`` with every object address masked: ``<function<lambda>at0x7f...>`` -> ``<function<lambda>>``."""
    return _ADDRESS.sub(MASKED, name)


def has_address(name: str) -> bool:
    """Whether ``name`` holds an object's address (as perfq stored names before masking them)."""
    return _ADDRESS.search(name) is not None


def names_an_object(name: str) -> bool:
    """Whether ``name`` holds an object's repr (``<...>``): the runner's exact ``--test-name`` may not match it
    in another process."""
    return "<" in name


def any_process_pattern(name: str) -> str:
    """A regex of ``name`` as any process prints it: each ``>`` of its stable form with or without an address
    before it (``<function<lambda>>`` matches ``<function<lambda>at0x7f...>``)."""
    return re.escape(stable_test_name(name)).replace(MASKED, f"(?:{_AT})?{MASKED}")
