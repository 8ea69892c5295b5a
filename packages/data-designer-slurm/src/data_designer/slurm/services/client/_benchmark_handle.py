"""A benchmark as a Python object: what ``SlurmDataDesigner.benchmark`` returns and ``.benchmark_by_id`` finds again.

Each method is one service call (``benchmark_status``, ``analyze_benchmark``) by the benchmark's id; ``wait`` polls
``benchmark_status`` (``runtime.polling.poll``, the loop ``wait_run`` uses) until no child is pending, running or
unknown. ``analyze()`` returns :class:`BenchmarkReport`: the analysis and its per-case table as a DataFrame.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from data_designer.slurm.contracts import AnalyzeResult, BenchmarkAnalysis, BenchmarkRunResult, BenchmarkStatus
from data_designer.slurm.runtime.analysis import CSV_HEADER, STAT_METRICS
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.services.benchmarks import analyze_benchmark, benchmark_status
from data_designer.slurm.services.client._progress import Progress, ProgressMode
from data_designer.slurm.services.client._session import Session
from data_designer.slurm.services.context import (
    BENCHMARK_COLUMNS,
    benchmark_rows,
    benchmark_summary,
    html_table,
    text_table,
)

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in the workspace: DataFrame is Any

ACTIVE_CHILD_STATES = frozenset({"pending", "running", "unknown"})
"""A child in one of these may still change without anyone acting: ``wait`` goes on."""
DEFAULT_WAIT_TIMEOUT_S = 24 * 3600.0
DEFAULT_WAIT_INTERVAL_S = 15.0


class BenchmarkReport:
    """``analyze()``'s answer: ``result`` (the service's ``AnalyzeResult``), ``analysis`` (its
    ``BenchmarkAnalysis``; its fields are read through this object too) and :meth:`to_pandas`."""

    def __init__(self, result: AnalyzeResult) -> None:
        self.result = result
        self.analysis: BenchmarkAnalysis = result.analysis

    def __getattr__(self, name: str) -> Any:
        return getattr(self.analysis, name)

    def rows(self) -> list[dict[str, Any]]:
        """One mapping per case under ``benchmark analyze --format csv``'s columns, values typed (not text)."""
        rows = []
        for case in self.analysis.cases:
            projection = case.projection
            row: dict[str, Any] = {
                "case_index": case.case_index,
                "case": ";".join(f"{label}={value}" for label, value in case.case),
                "children": ";".join(str(i) for i in case.children),
                "complete": case.complete,
                "reason": case.reason,
                "gpus": case.gpus,
            }
            for metric in STAT_METRICS:
                stat = getattr(case, metric)
                row.update({f"{metric}_mean": stat.mean, f"{metric}_std": stat.std, f"{metric}_n": stat.n})
            row.update(
                {
                    "time_to_target_s": case.time_to_target_s,
                    "projected_jobs": None if projection is None else projection.jobs,
                    "projected_gpu_hours": None if projection is None else projection.gpu_hours,
                    "projected_wall_s": None if projection is None else projection.wall_s,
                    "within_budget": None if projection is None else projection.within_budget,
                    "pareto": case.pareto,
                    "best": case.best,
                }
            )
            rows.append(row)
        return rows

    def to_pandas(self) -> pd.DataFrame:
        """The per-case table (the CSV's columns, :data:`runtime.analysis.CSV_HEADER`), one row per case."""
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(CSV_HEADER))

    def _summary(self) -> str:
        a = self.analysis
        best = "none" if a.best is None else str(a.best)
        return f"benchmark {a.benchmark_id}: {len(a.cases)} cases, complete={a.complete}, best case {best}"

    def _table(self) -> tuple[list[str], list[list[str]]]:
        columns = ["case", "values", "complete", "records/s", "records/s/GPU", "GPU-h per 1k", "best"]
        rows = [
            [
                str(r["case_index"]),
                r["case"],
                str(r["complete"]),
                _number(r["records_per_s_mean"]),
                _number(r["records_per_s_per_gpu_mean"]),
                _number(r["gpu_hours_per_1k_mean"]),
                "*" if r["best"] else "",
            ]
            for r in self.rows()
        ]
        return columns, rows

    def __repr__(self) -> str:
        return f"{self._summary()}\n{text_table(*self._table())}"

    def _repr_html_(self) -> str:
        return html_table(self._summary(), *self._table())


class BenchmarkHandle:
    """One benchmark of a workspace, by its id. ``submitted`` is what ``benchmark`` returned (None when found again)."""

    def __init__(self, benchmark_id: str, session: Session, *, submitted: BenchmarkRunResult | None = None) -> None:
        self.benchmark_id = benchmark_id
        self.submitted = submitted
        self._session = session

    def status(self, *, refresh: bool = True) -> BenchmarkStatus:
        """``benchmark status BENCH``: every child's run from one ``squeue`` and one ``sacct``."""
        return benchmark_status(self.benchmark_id, refresh=refresh, **self._session.observed())

    def wait(
        self,
        timeout: float = DEFAULT_WAIT_TIMEOUT_S,
        *,
        interval: float = DEFAULT_WAIT_INTERVAL_S,
        progress: ProgressMode | None = None,
    ) -> BenchmarkStatus:
        """Poll ``status()`` until no child is pending, running or unknown, or ``timeout`` seconds passed; the last
        status (``complete``: every child succeeded). Shown as ``RunHandle.wait`` shows a run (children done)."""
        shown = Progress(
            progress or self._session.progress,
            summary=lambda done: benchmark_summary(done.status),
            key=lambda done: tuple(sorted(done.counts.items())),
            monotonic=self._session.monotonic,
        )
        status = None
        try:
            for _ in poll(timeout, interval, clock=self._session.monotonic, sleep=self._session.sleep):
                status = self.status()
                shown.show(_ChildrenDone(status))
                if not any(n for state, n in status.counts.items() if state in ACTIVE_CHILD_STATES):
                    break
        finally:
            shown.close()
        assert status is not None  # poll yields at least once
        return status

    def analyze(self, *, refresh: bool = True) -> BenchmarkReport:
        """``benchmark analyze BENCH``: the analysis of what the children recorded (persisted under ``analyses/``)."""
        return BenchmarkReport(analyze_benchmark(self.benchmark_id, refresh=refresh, **self._session.observed()))

    def plot(self, path: str | Path, *, refresh: bool = True, force: bool = True) -> Path:
        """``benchmark analyze BENCH --plot PATH`` (a ``.png``; needs the ``plot`` extra); the path written."""
        result = analyze_benchmark(
            self.benchmark_id, refresh=refresh, plot=path, force=force, **self._session.observed()
        )
        assert result.plot is not None
        return Path(result.plot)

    def _last_status(self) -> BenchmarkStatus | None:
        try:
            return self.status(refresh=False)
        except Exception:
            return None

    def __repr__(self) -> str:
        status = self._last_status()
        if status is None:
            return f"BenchmarkHandle({self.benchmark_id!r})"
        rows = benchmark_rows(status)
        return f"BenchmarkHandle({self.benchmark_id!r})\n{benchmark_summary(status)}\n" + text_table(
            BENCHMARK_COLUMNS, rows
        )

    def _repr_html_(self) -> str:
        status = self._last_status()
        if status is None:
            return html_table(f"benchmark {self.benchmark_id}", BENCHMARK_COLUMNS, [])
        return html_table(benchmark_summary(status), BENCHMARK_COLUMNS, benchmark_rows(status))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BenchmarkHandle) and other.benchmark_id == self.benchmark_id

    def __hash__(self) -> int:
        return hash(self.benchmark_id)


class _ChildrenDone:
    """A benchmark status as the progress display reads a run's: children finished of all, counts by state."""

    def __init__(self, status: BenchmarkStatus) -> None:
        self.status = status
        self.run_id = status.benchmark_id
        self.records_total = len(status.children)
        self.records_done = sum(n for state, n in status.counts.items() if state not in ACTIVE_CHILD_STATES)
        self.counts = status.counts
        self.state = "complete" if status.complete else "running"


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4g}"
