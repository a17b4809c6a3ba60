"""DuckDB for every perfq module, loaded here once: its compiled engine alone when the package
ships one.

``import duckdb`` (2.x) loads the engine (``_duckdb``, ~10 ms on our 2-core machine) and then
the package's Python relational API on top of it (~55 ms more). perfq only runs SQL on
connections (connect, execute, executemany, fetch*, register) and catches the engine's
exceptions: all of them the engine's own objects, which the package re-exports unchanged. So
a query process such as ``perfq affected`` pays for the engine alone. A package without a
top-level engine module (1.x) is imported whole.
"""

from __future__ import annotations

try:
    import _duckdb as duckdb
except ImportError:  # duckdb 1.x: the engine lives inside the package
    import duckdb

__all__ = ["duckdb"]
