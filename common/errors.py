"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class PerfqError(Exception):
    """A user-facing failure: bad input, missing index, unknown ref, locked database...

    The message is printed as ``error: <message>`` on one line; ``exit_code`` is the
    process exit status (None: ``perfq.options.EXIT_ERROR``).
    """

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
