"""perfq bisect / bisect-step: noise-robust performance bisection.

Pure: ``search`` (the algorithm), ``metric`` (reading a number), ``hints`` (diff patterns),
``report`` (the document and renderers). Side effects: ``git`` (range, checkout, stash),
``measure`` (build and benchmark runs), ``session`` (the stored session and the driver),
``step`` (``git bisect run`` steps). ``cli`` holds the commands.
"""
