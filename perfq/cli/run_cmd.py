"""CLI for `perfq run` (to be filled in by its feature)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
