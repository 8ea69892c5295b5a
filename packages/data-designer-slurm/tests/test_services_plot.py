"""``benchmark analyze --plot``: the PNG (valid, one marker per case, incomplete cases marked apart, the Pareto set
joined, the same bytes for the same analysis), its errors (not a .png, no matplotlib: exit 2 with the install hint,
before anything is read), and the import cost of ``benchmark analyze`` without ``--plot`` (no matplotlib, pandas
or numpy).

The drawing tests build the analysis from the contracts' models directly; the CLI tests use a benchmark submitted
to the fake Slurm (its children are pending, so nothing is ranked: what matters there is the plumbing).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    AnalysisTargets,
    AnalyzeResult,
    BenchmarkAnalysis,
    CaseAnalysis,
    ErrorInfo,
    InvalidInputError,
    Stat,
)
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import analyze_benchmark, run_benchmark
from data_designer.slurm.services.benchmarks._plot import INSTALL_HINT, draw, write_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EMPTY = Stat(mean=None, std=None, n=0)


def stat(mean: float | None, std: float | None = None, n: int = 2) -> Stat:
    return EMPTY if mean is None else Stat(mean=mean, std=std, n=n)


def case(
    index: int,
    per_1k: float | None,
    per_gpu: float | None,
    *,
    complete: bool = True,
    pareto: bool = False,
    best: bool = False,
    std: float | None = 0.05,
) -> CaseAnalysis:
    return CaseAnalysis(
        case_index=index,
        case=(("replicas", index + 1), ("concurrency", 4)),
        children=(2 * index, 2 * index + 1),
        complete=complete,
        reason=None if complete else f"child {2 * index + 1} (failed): shard 0: server_died",
        gpus=index + 1,
        records_per_s=stat(None if per_gpu is None else per_gpu * (index + 1), std),
        output_tokens_per_s=EMPTY,
        requests_per_s=EMPTY,
        records_per_s_per_gpu=stat(per_gpu, std),
        boot_s=stat(20.0, 1.0),
        generation_s=stat(100.0, 2.0),
        wall_s=stat(130.0, 3.0),
        gpu_hours_per_1k=stat(per_1k, None if std is None else std / 10),
        time_to_target_s=None if per_gpu is None or not complete else 1000 / (per_gpu * (index + 1)),
        pareto=pareto,
        best=best,
    )


def analysis() -> BenchmarkAnalysis:
    """0 and 1 on the front (0 the best), 2 dominated, 3 incomplete with one measured repeat, 4 with none."""
    cases = (
        case(0, 0.45, 2.25, pareto=True, best=True),
        case(1, 0.5, 2.0, pareto=True, std=None),
        case(2, 1.0, 1.5),
        case(3, 0.6, 1.8, complete=False, std=None),
        case(4, None, None, complete=False),
    )
    return BenchmarkAnalysis(
        benchmark_id="sweep-dddddddddddd",
        name="sweep",
        digest="d" * 64,
        axes=("replicas", "concurrency"),
        targets=AnalysisTargets(),
        evidence_digest="e" * 64,
        complete=False,
        children=(),
        cases=cases,
        pareto=(0, 1),
        best=0,
    )


# -- the drawing ----------------------------------------------------------------------------------------------------


def test_the_png_is_a_valid_image_of_the_figure_size_without_software_or_time(tmp_path: Path) -> None:
    from matplotlib import image

    (tmp_path / "sub").mkdir()  # an output's directory is never made for it (test_outputs_hardening.py)
    path = write_plot(analysis(), tmp_path / "sub" / "plot.png")
    assert path == tmp_path / "sub" / "plot.png"
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    pixels = image.imread(path)
    assert pixels.shape[:2] == (550, 800)  # 8 x 5.5 inches at 100 dpi
    assert pixels.std() > 0  # something was drawn
    assert b"Software" not in data
    assert b"tIME" not in data


def test_two_plots_of_the_same_analysis_are_byte_identical(tmp_path: Path) -> None:
    first = write_plot(analysis(), tmp_path / "a.png").read_bytes()
    second = write_plot(analysis(), tmp_path / "b.png").read_bytes()
    assert first == second
    other = write_plot(analysis().model_copy(update={"benchmark_id": "other-eeeeeeeeeeee"}), tmp_path / "c.png")
    assert other.read_bytes() != first


def axes_of_a_new_figure() -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(8.0, 5.5), dpi=100).subplots()


def test_one_marker_per_case_ranked_and_incomplete_drawn_differently() -> None:
    axes = axes_of_a_new_figure()
    drawn = draw(axes, analysis())
    assert sorted(drawn.markers) == [0, 1, 2, 3]
    assert drawn.unplotted == [4]
    for index, (x, y) in {0: (0.45, 2.25), 1: (0.5, 2.0), 2: (1.0, 1.5), 3: (0.6, 1.8)}.items():
        marker = drawn.markers[index]
        assert list(marker.get_xdata()) == [x]
        assert list(marker.get_ydata()) == [y]
    assert {drawn.markers[i].get_marker() for i in (0, 1, 2)} == {"o"}
    assert drawn.markers[3].get_marker() == "x"
    assert drawn.markers[3].get_color() == "grey"
    # every case is named in the legend; the incomplete ones say so
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "0: replicas=1 concurrency=4" in labels
    assert "3: replicas=4 concurrency=4 (incomplete)" in labels
    assert "4: replicas=5 concurrency=4 (no measured repeat)" in labels
    assert "Pareto set" in labels
    # each plotted case is annotated with its index
    assert sorted(text.get_text() for text in axes.texts) == ["0", "1", "2", "3"]


def test_an_infeasible_case_is_a_grey_circle_named_infeasible() -> None:
    base = analysis()
    cases = list(base.cases)
    cases[2] = cases[2].model_copy(
        update={"feasible": False, "infeasible_reason": "error rate 0.1 (2 of 20 requests failed) exceeds 0"}
    )
    axes = axes_of_a_new_figure()
    drawn = draw(axes, base.model_copy(update={"cases": tuple(cases)}))
    marker = drawn.markers[2]
    assert marker.get_marker() == "o"
    assert (marker.get_color(), marker.get_markeredgecolor()) == ("lightgrey", "grey")
    assert drawn.markers[0].get_color() != "lightgrey"
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "2: replicas=3 concurrency=4 (infeasible)" in labels


def test_the_pareto_set_is_joined_in_order_of_cost() -> None:
    drawn = draw(axes_of_a_new_figure(), analysis())
    line = drawn.pareto_line
    assert line is not None
    assert list(line.get_xdata()) == [0.45, 0.5]
    assert list(line.get_ydata()) == [2.25, 2.0]
    assert line.get_linestyle() == "--"
    single = analysis().model_copy(update={"pareto": (0,)})
    assert draw(axes_of_a_new_figure(), single).pareto_line is None  # one point: nothing to join


def test_error_bars_span_one_std_over_repeats() -> None:
    axes = axes_of_a_new_figure()
    draw(axes, analysis())
    containers = axes.containers
    assert len(containers) == 3  # one errorbar per ranked case
    first = containers[0]
    (x_bars, y_bars) = first.lines[2]
    assert x_bars.get_segments()[0].tolist() == [[0.45 - 0.005, 2.25], [0.45 + 0.005, 2.25]]
    assert y_bars.get_segments()[0].tolist() == [[0.45, 2.2], [0.45, 2.3]]


def test_a_file_that_is_not_png_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        write_plot(analysis(), tmp_path / "plot.txt")
    assert caught.value.info.code == "plot_not_png"
    assert caught.value.info.exit_code == 2
    assert not (tmp_path / "plot.txt").exists()


# -- through the service and the CLI --------------------------------------------------------------------------------

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

BENCH = """\
schema_version: 1
name: sweep
base:
  inline:
    schema_version: 1
    name: base
    data_designer:
      inline:
        model_configs: [{{alias: writer, model: test-model, provider: local}}]
        columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
    records: 20
    sharding: {{shards: 1}}
    deployments:
      writer:
        engine: command
        argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
               --model, "{{model}}", --replica-id, r]
        model: test-model
        gpus_per_replica: 1
    client: {{cpus: 1, memory_gb: 1}}
axes:
  - {{axis: concurrency, alias: writer, values: [4, 8]}}
records: {{policy: fixed, records: 20}}
"""


class Bench:
    """A submitted two-child benchmark in a tmp workspace (children pending in the fake Slurm)."""

    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm()
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=root / "workspace", python=sys.executable), encoding="utf-8")
        bench_file = root / "bench.yaml"
        bench_file.write_text(BENCH.format(python=sys.executable), encoding="utf-8")
        self.fake.advance(1)
        submitted = run_benchmark(bench_file, profile=self.profile, runner=self.fake, clock=self.fake.clock, environ={})
        self.benchmark_id = submitted.benchmark_id

    def analyze(self, **kwargs: Any) -> AnalyzeResult:
        return analyze_benchmark(
            self.benchmark_id, profile=self.profile, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs
        )


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path)


def test_the_service_writes_the_plot_and_names_it(bench: Bench, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    result = bench.analyze(plot=tmp_path / "out" / "plot.png")
    assert result.plot == str(tmp_path / "out" / "plot.png")
    assert (tmp_path / "out" / "plot.png").read_bytes().startswith(PNG_MAGIC)
    assert bench.analyze().plot is None


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["benchmark", "analyze", *args])


def test_cli_plot_not_png_exits_2_before_reading_anything(tmp_path: Path) -> None:
    missing_profile = tmp_path / "no-profile.yaml"  # would be exit 3 if it were read first
    result = cli("sweep", "--plot", str(tmp_path / "x.txt"), "--profile", str(missing_profile), "--format", "json")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    info = ErrorInfo.model_validate_json(result.stderr)
    assert (info.code, info.key_path, info.hint) == ("plot_not_png", ("--plot",), "name a file ending in .png")
    assert not (tmp_path / "x.txt").exists()


def _fresh_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )


def test_without_matplotlib_plot_fails_with_the_one_line_install_hint(bench: Bench, tmp_path: Path) -> None:
    script = f"""
        import json, sys
        sys.modules["matplotlib"] = None  # as if the plot extra were not installed
        from typer.testing import CliRunner
        from data_designer.slurm.cli._app import app
        args = ["benchmark", "analyze", {bench.benchmark_id!r}, "--no-refresh", "--profile", {str(bench.profile)!r}]
        result = CliRunner().invoke(app, [*args, "--plot", {str(tmp_path / "plot.png")!r}])
        sys.stdout.write(json.dumps([result.exit_code, result.stdout, result.stderr]))
    """
    done = _fresh_python(script, tmp_path)
    assert done.returncode == 0, done.stderr
    exit_code, stdout, stderr = json.loads(done.stdout)
    assert exit_code == 2
    assert stdout == ""
    assert stderr.splitlines() == [
        f"error: --plot: --plot needs matplotlib, which is not installed (fix: {INSTALL_HINT})"
    ]
    assert not (tmp_path / "plot.png").exists()


def test_analyze_without_plot_imports_no_matplotlib_pandas_or_numpy(bench: Bench, tmp_path: Path) -> None:
    assert {c.state for c in bench.analyze().analysis.children} == {"pending"}  # records an observation per child
    script = f"""
        import json, sys
        from typer.testing import CliRunner
        from data_designer.slurm.cli._app import app
        args = ["benchmark", "analyze", {bench.benchmark_id!r}, "--no-refresh", "--profile", {str(bench.profile)!r}]
        codes = [CliRunner().invoke(app, [*args, "--format", f]).exit_code for f in ("table", "json", "csv")]
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "pandas", "numpy", "pyarrow"))
        sys.stdout.write(json.dumps({{"codes": codes, "heavy": heavy, "ran": "data_designer.slurm.runtime.analysis" in sys.modules}}))
    """
    done = _fresh_python(script, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["codes"] == [0, 0, 0]
    assert report["ran"] is True
    assert report["heavy"] == []
