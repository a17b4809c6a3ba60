"""DuckDB schemas: the rebuildable index (``index.sql``) and the results history
(``migrations/NNNN_*.sql``, applied in order and never dropped by a re-index)."""
