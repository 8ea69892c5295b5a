"""Finding a run from what a user types: a run id (under the profile cluster's workspace) or a run directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from data_designer.slurm.contracts import InvalidInputError, SlurmExtensionError
from data_designer.slurm.runtime.store import RunLayout, RunSnapshot
from data_designer.slurm.services.context import ServiceContext


def locate_run(
    run: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunLayout:
    """The layout of ``run``: a run directory path (``<workspace>/runs/<run id>``), or a run id resolved against
    the workspace of the selected profile cluster. The run need not be complete; readers check its records."""
    return layout_of(run, ServiceContext.of(profile=profile, cluster=cluster, environ=environ))


def layout_of(run: str | Path, ctx: ServiceContext) -> RunLayout:
    """``locate_run`` in a call's context: the profile is read only for a run id."""
    text = str(run)
    candidate = Path(text).expanduser()
    if "/" in text or candidate.is_dir():
        try:
            return RunLayout.of_run_dir(candidate.absolute())
        except SlurmExtensionError as exc:
            raise InvalidInputError(
                exc.info.message,
                code="invalid_run",
                key_path=("RUN",),
                hint="pass the run id that 'execute' printed, or the run directory it created",
            ) from exc
    return RunLayout.of(Path(ctx.selected.profile.workspace_root), text)


def named_shards(snapshot: RunSnapshot, shards: Sequence[int], *, operation: str) -> list[int]:
    """``shards`` (``--shard``) sorted and unique; InvalidInputError ``unknown_shard`` (exit 2) naming any the run
    does not have."""
    known = {shard.plan.shard for shard in snapshot.shards}
    if unknown := sorted(set(shards) - known):
        raise InvalidInputError(
            f"run {snapshot.run.run_id} has no shard {', '.join(map(str, unknown))} (it has shards 0-{len(known) - 1})",
            code="unknown_shard",
            operation=operation,
            key_path=("--shard",),
            hint=f"name shards from 0 to {len(known) - 1}; 'data-designer slurm status RUN --shards' lists them",
        )
    return sorted(set(shards))
