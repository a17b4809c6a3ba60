"""perfq coverage: operators without benchmarks ranked by churn, and benchmark scaffolds.

Pure: ``report`` (grouping, ranking, summary), ``render``, ``scaffold``. Side effects:
``facts`` (index reads through the schema store), ``history`` (git log), ``churn``.
``cli`` holds the command.
"""
