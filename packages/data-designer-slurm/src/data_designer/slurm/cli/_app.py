"""The Typer application: the command groups and their commands (no heavy imports at module level)."""

from __future__ import annotations

import typer

from data_designer.slurm.cli._benchmark_commands import benchmark_app
from data_designer.slurm.cli._boundary import SlurmGroup
from data_designer.slurm.cli._execute_commands import execute
from data_designer.slurm.cli._image_commands import image_app
from data_designer.slurm.cli._logs_commands import logs
from data_designer.slurm.cli._merge_commands import merge
from data_designer.slurm.cli._profile_commands import profile_app
from data_designer.slurm.cli._retry_commands import cancel, retry
from data_designer.slurm.cli._runs_commands import runs_app
from data_designer.slurm.cli._status_commands import status, wait

app = typer.Typer(
    name="slurm",
    cls=SlurmGroup,  # prints every error that escapes a command once, --json-aware (see _boundary)
    help="Run Data Designer jobs on Slurm GPU clusters: profiles, runs (execute, status, wait, logs, retry, "
    "cancel, merge, runs ls/rm), container images and benchmark plans.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(profile_app, name="profile")
app.command("execute")(execute)
app.command("status")(status)
app.command("wait")(wait)
app.command("logs")(logs)
app.command("retry")(retry)
app.command("cancel")(cancel)
app.command("merge")(merge)
app.add_typer(benchmark_app, name="benchmark")
app.add_typer(runs_app, name="runs")
app.add_typer(image_app, name="image")
