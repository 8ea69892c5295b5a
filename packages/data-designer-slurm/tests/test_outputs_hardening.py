"""Outputs at user-named paths (issue 28): ``benchmark analyze --plot``, ``merge --output``, names over the file
system's limit in any command, and ``image add`` of a file name with a control character.

The rule: one writer (``planner.write_output``) refuses a symbolic link at the target (dangling too), an existing
file without ``--force`` and a missing parent directory (never made), writes 0600 (the workspace's modes in a
group-shared one) through a temporary file and a rename or link. ``merge --output`` publishes a directory and checks
its target with the same rule (``check_output_location``); merges racing to one new ``--output`` leave exactly one
merge there and the others reuse it (same evidence) or exit 4. ``ENAMETOOLONG`` is exit 2 ``name_too_long``.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import ConflictError, ErrorInfo, InvalidInputError, MergeResult
from data_designer.slurm.runtime.store import RunLayout
from data_designer.slurm.runtime.testing import FakeSlurm, outcome_cycle, register_run_jobs, write_run_directory
from data_designer.slurm.services import add_image, analyze_benchmark, merge_run, run_benchmark

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LONG = "x" * 300  # over every common NAME_MAX (255 bytes)

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    container_runtime: pyxis
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


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def error_of(result: Result) -> ErrorInfo:
    return ErrorInfo.model_validate_json(result.stderr)


def write_profile(root: Path) -> Path:
    profile = root / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=root / "workspace", python=sys.executable), encoding="utf-8")
    return profile


# -- benchmark analyze --plot ------------------------------------------------------------------------------------------


def plot_cli(tmp_path: Path, plot: Path, *extra: str) -> Result:
    """``benchmark analyze --plot`` with a profile that does not exist: a refused target fails before any read."""
    missing_profile = tmp_path / "no-profile.yaml"  # exit 3 if it were read first
    return invoke("benchmark", "analyze", "sweep", "--plot", str(plot), "--profile", str(missing_profile), *extra)


def test_plot_through_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim.png"
    victim.write_bytes(b"precious")
    link = tmp_path / "plot.png"
    link.symlink_to(victim)
    for extra in ((), ("--force",)):
        result = plot_cli(tmp_path, link, "--format", "json", *extra)
        assert result.exit_code == 2, result.output
        info = error_of(result)
        assert (info.code, info.key_path, info.file) == ("output_symlink", ("--plot",), str(link))
    assert victim.read_bytes() == b"precious"


def test_plot_at_a_dangling_link_creates_nothing_where_it_points(tmp_path: Path) -> None:
    link = tmp_path / "plot.png"
    link.symlink_to(tmp_path / "planted.png")
    result = plot_cli(tmp_path, link, "--format", "json")
    assert result.exit_code == 2, result.output
    assert error_of(result).code == "output_symlink"
    assert not (tmp_path / "planted.png").exists()


def test_plot_over_an_existing_file_needs_force(tmp_path: Path) -> None:
    existing = tmp_path / "plot.png"
    existing.write_bytes(b"earlier plot")
    result = plot_cli(tmp_path, existing, "--format", "json")
    assert result.exit_code == 4, result.output
    assert (error_of(result).code, error_of(result).key_path) == ("file_exists", ("--plot",))
    assert existing.read_bytes() == b"earlier plot"


def test_plot_in_a_missing_directory_is_refused_and_the_directory_never_made(tmp_path: Path) -> None:
    result = plot_cli(tmp_path, tmp_path / "new" / "dir" / "plot.png", "--format", "json")
    assert result.exit_code == 2, result.output
    info = error_of(result)
    assert info.code == "output_parent_missing"
    assert str(tmp_path / "new" / "dir") in info.message
    assert not (tmp_path / "new").exists()


class Bench:
    """A submitted two-child benchmark (children pending in the fake Slurm)."""

    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm()
        self.profile = write_profile(root)
        bench_file = root / "bench.yaml"
        bench_file.write_text(BENCH.format(python=sys.executable), encoding="utf-8")
        self.fake.advance(1)
        submitted = run_benchmark(bench_file, profile=self.profile, runner=self.fake, clock=self.fake.clock, environ={})
        self.benchmark_id = submitted.benchmark_id

    def analyze(self, **kwargs: Any) -> Any:
        return analyze_benchmark(
            self.benchmark_id, profile=self.profile, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs
        )


def test_plot_is_private_and_replaced_only_with_force(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    plot = tmp_path / "plot.png"
    old = os.umask(0o022)
    try:
        bench.analyze(plot=plot)
    finally:
        os.umask(old)
    assert plot.read_bytes().startswith(PNG_MAGIC)
    assert stat.S_IMODE(plot.stat().st_mode) == 0o600
    plot.write_bytes(b"stale")
    with pytest.raises(ConflictError):
        bench.analyze(plot=plot)
    assert plot.read_bytes() == b"stale"
    assert bench.analyze(plot=plot, force=True).plot == str(plot)
    assert plot.read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


# -- merge --output ----------------------------------------------------------------------------------------------------


class Run:
    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        (root / "ws").mkdir()
        pick = outcome_cycle(("succeeded",))
        self.layout: RunLayout = write_run_directory(
            root / "ws", shards=3, outcome=pick, clock=self.fake.clock, parquet_parts=True
        )
        register_run_jobs(self.fake, self.layout, outcome=pick)
        self.ref = str(self.layout.run_dir)

    def merge(self, **kwargs: Any) -> MergeResult:
        return merge_run(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

    def cli(self, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
        import data_designer.slurm.services as services

        def patched(ref: str, **kwargs: Any) -> MergeResult:
            kwargs.pop("profile"), kwargs.pop("cluster")
            return merge_run(ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

        monkeypatch.setattr(services, "merge_run", patched)
        return invoke("merge", self.ref, "--json", *args)


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_merge_output_at_a_symbolic_link_is_exit_2_naming_file_key_and_fix(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (empty, tmp_path / "nowhere"):
        link = tmp_path / f"link-to-{target.name}"
        link.symlink_to(target)
        result = run.cli(monkeypatch, "--output", str(link))
        assert result.exit_code == 2, result.output
        info = error_of(result)
        assert (info.code, info.key_path, info.file) == ("output_symlink", ("--output",), str(link))
        assert info.hint
        assert link.is_symlink()
    assert os.listdir(empty) == []
    assert not (tmp_path / "nowhere").exists()


def test_merge_output_below_a_file_or_a_missing_directory_is_exit_2(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("x")
    for output, shown in ((tmp_path / "file" / "out", tmp_path / "file"), (tmp_path / "a" / "out", tmp_path / "a")):
        result = run.cli(monkeypatch, "--output", str(output))
        assert result.exit_code == 2, result.output
        info = error_of(result)
        assert (info.code, info.key_path, info.file) == ("output_parent_missing", ("--output",), str(output))
        assert str(shown) in info.message
        assert info.hint
    assert not (tmp_path / "a").exists()
    assert (tmp_path / "file").read_text() == "x"


def test_merge_output_in_an_unwritable_directory_is_exit_2(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    real_mkdir = os.mkdir

    def refused(path: Any, mode: int = 0o777, **kwargs: Any) -> None:
        if Path(path).parent == locked:  # what a directory without write permission answers (root too, here)
            raise PermissionError(13, "Permission denied", str(path))
        real_mkdir(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", refused)
    result = run.cli(monkeypatch, "--output", str(locked / "out"))
    assert result.exit_code == 2, result.output
    info = error_of(result)
    assert (info.code, info.key_path, info.file) == ("permission_denied", ("--output",), str(locked / "out"))
    assert os.listdir(locked) == []


def race(run: Run, output: Path, options: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Merge with each of ``options`` at once to one new ``output``, every merge held at its publish until all got
    there (each has checked that ``output`` is absent and written its files): the race made certain."""
    from data_designer.slurm.runtime.store import MergeStage

    barrier = threading.Barrier(len(options), timeout=60)
    publish = MergeStage.publish

    def held(self: MergeStage, *args: Any, **kwargs: Any) -> Path:
        barrier.wait()
        return publish(self, *args, **kwargs)

    monkeypatch.setattr(MergeStage, "publish", held)
    outcomes: list[Any] = [None] * len(options)

    def one(index: int) -> None:
        try:
            outcomes[index] = run.merge(output=output, **options[index])
        except Exception as exc:  # the outcome under test
            outcomes[index] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(options))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def test_merges_racing_to_one_new_output_leave_one_merge_that_the_others_reuse(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "dataset"
    outcomes = race(run, output, [{}, {}, {}], monkeypatch)
    assert all(isinstance(o, MergeResult) for o in outcomes), outcomes
    assert sorted(o.outcome for o in outcomes) == ["merged", "reused", "reused"]
    assert {o.merge_dir for o in outcomes} == {str(output)}
    assert json.loads((output / "manifest.json").read_text())["payload"]["records"] == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "ws"]  # no staging directory left


def test_a_merge_losing_the_race_with_other_evidence_is_a_conflict(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "dataset"
    outcomes = race(run, output, [{"max_rows_per_file": 5}, {"max_rows_per_file": 7}], monkeypatch)
    merged = [o for o in outcomes if isinstance(o, MergeResult)]
    refused = [o for o in outcomes if not isinstance(o, MergeResult)]
    assert [m.outcome for m in merged] == ["merged"], outcomes
    assert [type(r) for r in refused] == [ConflictError], outcomes
    assert (refused[0].info.exit_code, refused[0].info.code) == (4, "output_exists")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "ws"]


# -- names over the file system's limit ------------------------------------------------------------------------------


def test_long_names_are_exit_2_name_too_long_in_every_command(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = write_profile(tmp_path)
    long_profile = str(tmp_path / f"{LONG}.yaml")
    probes = {
        "profile validate": invoke("profile", "validate", "--profile", long_profile, "--json"),
        "profile init": invoke("profile", "init", "--profile", long_profile, "--json"),
        "status": invoke("status", f"reviews-20260301T120000Z-{LONG}", "--profile", str(profile), "--json"),
        "plot": plot_cli(tmp_path, tmp_path / f"{LONG}.png", "--format", "json"),
        "merge --output": run.cli(monkeypatch, "--output", str(tmp_path / LONG / "out")),
    }
    for what, result in probes.items():
        assert result.exit_code == 2, (what, result.output)
        info = error_of(result)
        assert info.code == "name_too_long", (what, info)
        assert "255 bytes" in info.message or "bytes per path" in info.message, (what, info.message)
    # a run id's name part is capped by its format before any path is made of it (exit 2 already)
    resumed = invoke(
        "execute", str(tmp_path / "run.yaml"), "--run-id", f"{LONG}-20260301T120000Z-abc123",
        "--profile", str(profile), "--json",
    )  # fmt: skip
    assert (resumed.exit_code, error_of(resumed).code) == (2, "invalid_run_id")
    assert not (tmp_path / "workspace").exists()


# -- image add of a name with a control character ----------------------------------------------------------------------


@pytest.mark.parametrize("char", ["\n", "\t", "\r", "\x1b", "\x85"])
def test_image_add_refuses_a_control_character_before_hashing(tmp_path: Path, char: str) -> None:
    profile = write_profile(tmp_path)
    source = tmp_path / f"serving{char}image.sqsh"
    source.write_bytes(b"hsqs" + b"\0" * 4096)  # the SquashFS magic: today it would be hashed
    with pytest.raises(InvalidInputError) as refused:
        add_image(str(source), name="vllm", profile=profile, environ={"USER": "tester"})
    info = refused.value.info
    assert (info.exit_code, info.code, info.key_path) == (2, "control_character", ("SOURCE",))
    assert not (tmp_path / "workspace").exists()  # nothing hashed, nothing cached, nothing registered


def test_cli_image_add_of_a_name_with_a_newline_exits_2(tmp_path: Path) -> None:
    profile = write_profile(tmp_path)
    source = tmp_path / "bad\nname.sqsh"
    source.write_bytes(b"hsqs" + b"\0" * 4096)
    result = CliRunner().invoke(
        app, ["image", "add", str(source), "--name", "vllm", "--profile", str(profile), "--json"], env={"USER": "t"}
    )
    assert result.exit_code == 2, result.output
    assert error_of(result).code == "control_character"
    assert not (tmp_path / "workspace").exists()
