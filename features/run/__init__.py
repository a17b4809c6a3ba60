"""perfq run / compare / history / import: run benchmarks on two sides, compare them with statistics.

Pure: ``compare`` (statistics), ``report`` (document and renderers), ``opbench`` and
``script_bench`` (command building and output parsing), ``jobs`` (what to run).
Side effects: ``execute`` (benchmark processes), ``results`` (result files). ``cli`` holds the commands.
"""
