"""A run as a Python object: what ``SlurmDataDesigner.create`` returns and ``.run(RUN)`` finds again.

Each method is one service call (``run_status``, ``wait_run``, ``cancel_run``, ``retry_run``, ``run_logs``,
``merge_run``, ``load_dataset``) with the client's profile, cluster and seams; the handle keeps nothing but the run
id and directory, so any process holding the id (or the name) gets the same handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from data_designer.slurm.contracts import (
    CancelResult,
    ExecuteResult,
    ExecutionPlan,
    MergeResult,
    RetryResult,
    RunLogs,
    RunStatus,
    WaitResult,
)
from data_designer.slurm.contracts.records import RunRecord
from data_designer.slurm.runtime.store import RunLayout, load_plan, read_run_record
from data_designer.slurm.services.client._dataset_profile import dataset_profile
from data_designer.slurm.services.client._progress import Progress, ProgressMode
from data_designer.slurm.services.client._session import Session
from data_designer.slurm.services.collect import load_dataset, merge_run
from data_designer.slurm.services.context import (
    RUN_COLUMNS,
    html_table,
    run_rows,
    run_summary,
    text_table,
)
from data_designer.slurm.services.runs import (
    cancel_run,
    locate_run,
    retry_run,
    run_logs,
    run_status,
    wait_run,
)

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in the workspace: DataFrame is Any

DEFAULT_WAIT_TIMEOUT_S = 24 * 3600.0
DEFAULT_WAIT_INTERVAL_S = 15.0


class RunHandle:
    """One run of a workspace, by its id. ``submitted`` is what ``create`` returned (None for a run found again)."""

    def __init__(self, run_id: str, session: Session, *, submitted: ExecuteResult | None = None) -> None:
        self.run_id = run_id
        self.submitted = submitted
        self._session = session

    # -- what the run is ---------------------------------------------------------------------------------------

    @property
    def layout(self) -> RunLayout:
        return locate_run(self.run_id, **self._session.located())

    @property
    def run_dir(self) -> Path:
        return self.layout.run_dir

    @property
    def record(self) -> RunRecord:
        """The run record ``execute`` wrote (name, run file, plan digest, shards...)."""
        return read_run_record(self.layout, operation="run.record")

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def run_file(self) -> str:
        """The run file the run was made from (for a client run: the one the client wrote)."""
        return self.record.run_file

    @property
    def plan_digest(self) -> str:
        return self.record.plan_digest

    def plan(self) -> ExecutionPlan:
        """The run's plan, checked against the run record's digest."""
        layout = self.layout
        return load_plan(layout, expected_digest=read_run_record(layout, operation="run.plan").plan_digest)

    # -- the services ------------------------------------------------------------------------------------------

    def status(self, *, refresh: bool = True, verify: bool = False) -> RunStatus:
        """``status RUN``: one ``squeue`` and one ``sacct`` (``refresh=False``: the last recorded observation)."""
        return run_status(self.run_id, refresh=refresh, verify=verify, **self._session.observed())

    def wait(
        self,
        timeout: float = DEFAULT_WAIT_TIMEOUT_S,
        *,
        interval: float = DEFAULT_WAIT_INTERVAL_S,
        progress: ProgressMode | None = None,
    ) -> WaitResult:
        """``wait RUN``: poll until the run succeeded or ended, or ``timeout`` seconds passed (``outcome`` says
        which); a bar in Jupyter and on a terminal, plain lines elsewhere (``progress="off"``: nothing)."""
        shown = Progress(progress or self._session.progress, monotonic=self._session.monotonic)
        try:
            return wait_run(
                self.run_id,
                timeout_s=timeout,
                interval_s=interval,
                sleep=self._session.sleep,
                monotonic=self._session.monotonic,
                on_poll=shown.show,
                **self._session.observed(),
            )
        finally:
            shown.close()

    def cancel(self, shards: Sequence[int] | None = None) -> CancelResult:
        """``cancel RUN [--shard K ...]``."""
        return cancel_run(self.run_id, shards=shards, sleep=self._session.sleep, **self._session.observed())

    def retry(self, shards: Sequence[int] | None = None, *, dry_run: bool = False, force: bool = False) -> RetryResult:
        """``retry RUN [--shard K ...] [--dry-run] [--force]``."""
        return retry_run(
            self.run_id, shards=shards, dry_run=dry_run, force=force, sleep=self._session.sleep,
            **self._session.observed(),
        )  # fmt: skip

    def logs(
        self, *, shard: int | None = None, attempt: int | None = None, step: Any = None, tail: int | None = None
    ) -> RunLogs:
        """``logs RUN [--shard K] [--attempt N] [--step STEP] [--tail N]``."""
        return run_logs(
            self.run_id, shard=shard, attempt=attempt, step=step, tail=tail, clock=self._session.clock,
            **self._session.located(),
        )  # fmt: skip

    def merge(self, **options: Any) -> MergeResult:
        """``merge RUN``: ``merge_run``'s options (``output``, ``allow_partial``, ``max_rows_per_file``,
        ``drop_provenance``, ``as_job``...)."""
        return merge_run(self.run_id, **options, **self._session.observed())

    def load_dataset(
        self, *, columns: Sequence[str] | None = None, provenance: bool = False, allow_partial: bool = False
    ) -> pd.DataFrame:
        """The records as a DataFrame, as the host's ``results.load_dataset()``: the data columns (``provenance``:
        with ``_dd_index`` and the attempt columns); the newest merge, else the run's validated parts."""
        return load_dataset(
            self.run_id, columns=columns, provenance=provenance, allow_partial=allow_partial,
            **self._session.located(),
        )  # fmt: skip

    def load_analysis(self, *, allow_partial: bool = False) -> Any:
        """The host's ``DatasetProfilerResults`` of the merged records (as ``results.load_analysis()``): the run is
        merged first (a merge of the same evidence is reused), the profile computed once and kept beside it."""
        merged = self.merge(allow_partial=allow_partial)
        plan = self.plan()
        return dataset_profile(merged, plan, lambda: self.load_dataset(allow_partial=allow_partial))

    # -- notebooks ---------------------------------------------------------------------------------------------

    def _last_status(self) -> RunStatus | None:
        try:
            return self.status(refresh=False)
        except Exception:
            return None

    def __repr__(self) -> str:
        status = self._last_status()
        if status is None:
            return f"RunHandle({self.run_id!r})"
        return f"RunHandle({self.run_id!r})\n{run_summary(status)}\n{text_table(RUN_COLUMNS, run_rows(status))}"

    def _repr_html_(self) -> str:
        status = self._last_status()
        if status is None:
            return html_table(f"run {self.run_id}", RUN_COLUMNS, [])
        return html_table(run_summary(status), RUN_COLUMNS, run_rows(status))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.run_id == self.run_id

    def __hash__(self) -> int:
        return hash(self.run_id)
