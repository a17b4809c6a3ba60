"""CLI for `perfq index`."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
