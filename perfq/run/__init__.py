"""perfq run / compare / history / import: run benchmarks on two sides, compare them with statistics.

Pure: ``compare`` (statistics), ``report`` (document and renderers), ``opbench`` and
``script_bench`` (command building and output parsing), ``jobs`` (what to run), ``trend``
(history series and their steps), ``render`` (terminal views), ``run_report`` (run/import documents).
Side effects: ``execute`` (benchmark processes), ``results`` (result files), ``machine`` (what a run
ran on), ``progress`` (feedback while running), ``compare_labels`` (load and compare stored runs).
``api`` is what other features may use; ``cli`` holds the commands.
"""
