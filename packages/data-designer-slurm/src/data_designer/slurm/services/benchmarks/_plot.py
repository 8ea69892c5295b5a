"""``benchmark analyze --plot FILE.png``: throughput per GPU against GPU-hours per 1,000 records, one marker per case.

matplotlib comes with the ``plot`` extra (``pip install "data-designer-slurm[plot]"``) and is imported only here,
only when a plot is asked for, with the Agg backend (no display). Ranked cases are filled circles with error bars
of one standard deviation over repeats on both axes, the Pareto set is joined by a line and the best case ringed;
cases that are not complete are drawn as crosses at what their measured repeats give (or listed in the legend when
none was measured); infeasible cases (over the error-rate or p95 latency target) are grey circles, never ringed nor on
the Pareto line. The PNG carries no timestamp or version: the same analysis gives the same bytes. It is drawn in
memory and written with the one writer of outputs (``planner.write_output``): never through a symbolic link, over an
existing file only with ``--force``, never into a directory that does not exist, private (0600) outside a
group-shared workspace.
"""

from __future__ import annotations

import importlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import BenchmarkAnalysis, CaseAnalysis, InvalidInputError
from data_designer.slurm.planner import check_output_location, write_output

INSTALL_HINT = 'install the plot extra: pip install "data-designer-slurm[plot]"'
_DPI = 100
_SIZE = (8.0, 5.5)
_OPERATION = "benchmark.analyze"
_KEY = ("--plot",)


@dataclass
class Drawn:
    """What :func:`draw` put on the axes: each case's marker artist, the cases without a point, the Pareto line."""

    markers: dict[int, Any] = field(default_factory=dict)
    unplotted: list[int] = field(default_factory=list)
    pareto_line: Any = None


def check_plot(path: Path, *, force: bool = False) -> None:
    """Fail early for a path that is not a .png, when matplotlib is missing (InvalidInputError, exit 2), or for a
    target :func:`write_plot` would refuse (a symbolic link, a missing directory: exit 2; an existing file without
    ``force``: exit 4)."""
    if path.suffix.lower() != ".png":
        raise InvalidInputError(
            f"--plot {str(path)!r} is not a .png file",
            code="plot_not_png",
            key_path=_KEY,
            hint="name a file ending in .png",
        )
    _pyplot()
    check_output_location(path, force=force, operation=_OPERATION, key_path=_KEY)


def write_plot(analysis: BenchmarkAnalysis, path: Path, *, force: bool = False) -> Path:
    """Draw the analysis into ``path`` (a .png) through ``planner.write_output``; the errors of :func:`check_plot`."""
    check_plot(path, force=force)
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=_SIZE, dpi=_DPI)
    buffer = io.BytesIO()
    try:
        draw(axes, analysis)
        figure.tight_layout()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    finally:
        plt.close(figure)
    write_output(path, buffer.getvalue(), force=force, operation=_OPERATION, key_path=_KEY)
    return path


def _pyplot() -> Any:
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as exc:
        raise InvalidInputError(
            "--plot needs matplotlib, which is not installed",
            code="plot_extra_missing",
            key_path=("--plot",),
            hint=INSTALL_HINT,
        ) from exc
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "data-designer-slurm"  # no random ids in any vector output either
    return importlib.import_module("matplotlib.pyplot")


def _point(case: CaseAnalysis) -> tuple[float, float] | None:
    x, y = case.gpu_hours_per_1k.mean, case.records_per_s_per_gpu.mean
    return None if x is None or y is None else (x, y)


def draw(axes: Any, analysis: BenchmarkAnalysis) -> Drawn:
    """Draw ``analysis`` on matplotlib ``axes``; returns the artists drawn per case (tests inspect them)."""
    drawn = Drawn()
    unplotted: list[str] = []
    for case in analysis.cases:
        label = f"{case.case_index}: " + " ".join(f"{k}={v}" for k, v in case.case)
        point = _point(case)
        if point is None:
            unplotted.append(label + " (no measured repeat)")
            drawn.unplotted.append(case.case_index)
            continue
        if case.complete and not case.feasible:  # measured, but over the error-rate or latency target: grey
            bars = axes.errorbar(
                point[0],
                point[1],
                xerr=case.gpu_hours_per_1k.std or 0.0,
                yerr=case.records_per_s_per_gpu.std or 0.0,
                fmt="o",
                capsize=3,
                color="lightgrey",
                markeredgecolor="grey",
                label=label + " (infeasible)",
            )
            drawn.markers[case.case_index] = bars.lines[0]
        elif case.complete:
            bars = axes.errorbar(
                point[0],
                point[1],
                xerr=case.gpu_hours_per_1k.std or 0.0,
                yerr=case.records_per_s_per_gpu.std or 0.0,
                fmt="o",
                capsize=3,
                label=label,
            )
            drawn.markers[case.case_index] = bars.lines[0]
            if case.best:
                axes.plot(point[0], point[1], "o", markersize=14, markerfacecolor="none", color="black")
        else:
            (cross,) = axes.plot(point[0], point[1], "x", color="grey", markersize=9, label=label + " (incomplete)")
            drawn.markers[case.case_index] = cross
        axes.annotate(str(case.case_index), point, textcoords="offset points", xytext=(6, 6))
    front = [analysis.cases[i] for i in analysis.pareto]
    points = sorted(p for p in (_point(c) for c in front) if p is not None)
    if len(points) > 1:
        (drawn.pareto_line,) = axes.plot(
            [p[0] for p in points], [p[1] for p in points], "--", color="black", linewidth=1, label="Pareto set"
        )
    for label in unplotted:
        axes.plot([], [], " ", label=label)
    axes.set_xlabel("GPU-hours per 1,000 records (lower is cheaper)")
    axes.set_ylabel("records/s per GPU (higher is faster)")
    axes.set_title(f"benchmark {analysis.benchmark_id}")
    axes.grid(True, linewidth=0.3)
    axes.legend(fontsize="small", loc="best")
    return drawn
