"""The ``data-designer slurm`` command tree, discovered by the host through the ``data_designer.cli`` entry point.

Importing this package imports Typer and nothing of the runtime: every command imports what it
needs when it runs, so ``data-designer slurm ... --help`` stays fast.
"""

from __future__ import annotations

from typing import Any

__all__ = ["command"]


def command() -> Any:
    """Entry point: the ``slurm`` command group as a Click command object (built with Typer's public API)."""
    import typer

    from data_designer.slurm.cli._app import app

    return typer.main.get_command(app)
