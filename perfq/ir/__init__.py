"""perfq ir: Triton IR collected per ref, normalized, diffed.

Pure: ``normalize``, ``diff``, ``report``, ``manifest`` (parsing). Side effects: ``compile``,
``collect``, ``capture`` (+ ``capture_hook``, loaded into benchmark processes), ``harvest``,
``store``. ``api`` is what other features may call; ``cli`` holds the commands.
"""
