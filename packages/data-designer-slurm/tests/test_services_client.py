"""``SlurmDataDesigner``: ``create`` is ``execute`` of the equivalent run file, handles are the services, reattach.

Against the fake Slurm: the same plan digest, inputs layout and sbatch submission as ``execute`` of the run file a
user would write; validation errors of the run file's; every handle method equal to its service; ``load_analysis``
the host's profiler over the merged records, computed once and kept beside the merge; a fresh process reattaching
to a run and a benchmark by id and by name; progress and notebook display.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ConflictError, InvalidInputError, NotFoundError, RunStatus
from data_designer.slurm.contracts.records import INPUTS_SCHEMA
from data_designer.slurm.runtime.store import (
    RecordOk,
    RunLayout,
    dataset_profile_file,
    read_record,
    read_submissions,
    run_id_factory,
)
from data_designer.slurm.runtime.testing import FakeSlurm, write_run_directory, write_shard_outcomes
from data_designer.slurm.services import (
    BenchmarkHandle,
    RunHandle,
    SlurmDataDesigner,
    benchmark_status,
    execute_run,
    list_runs,
    load_dataset,
    plan_run,
    run_status,
)
from data_designer.slurm.services.client import _dataset_profile
from data_designer.slurm.services.client._progress import Progress

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

RUN = """\
schema_version: 1
name: reviews
data_designer: {{config: {config}}}
records: 40
sharding: {{shards: 4}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
           --model, "{{model}}", --replica-id, r]
    model: test-model
    gpus_per_replica: 1
client: {{cpus: 1, memory_gb: 1}}
"""


def builder() -> Any:
    import data_designer.config as dd

    b = dd.DataDesignerConfigBuilder(model_configs=[dd.ModelConfig(alias="writer", model="test-model", provider="p")])
    b.add_column(
        dd.SamplerColumnConfig(
            name="topic", sampler_type="category", params=dd.CategorySamplerParams(values=["a", "b"])
        )
    )
    b.add_column(dd.LLMTextColumnConfig(name="text", model_alias="writer", prompt="Write about {{ topic }}."))
    return b


def deployments() -> dict[str, Any]:
    return {
        "writer": {
            "engine": "command",
            "argv": [
                sys.executable,
                "-m",
                "data_designer.slurm.runtime.testing.test_server",
                "--host",
                "{host}",
                "--port",
                "{port}",
                "--model",
                "{model}",
                "--replica-id",
                "r",
            ],
            "model": "test-model",
            "gpus_per_replica": 1,
        }
    }


class Env:
    """A tmp workspace and profile, the builder's config written as a user would, its run file, a fake Slurm."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = FakeSlurm()
        self.workspace = root / "workspace"
        self.profile = write(root / "profile.yaml", PROFILE.format(workspace=self.workspace, python=sys.executable))
        self.config = root / "in" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        builder().write_config(self.config)
        self.run_file = write(root / "in" / "run.yaml", RUN.format(config=self.config, python=sys.executable))
        self.files = root / "client-files"

    def client(self, suffix: str = "c11111", **kwargs: Any) -> SlurmDataDesigner:
        kwargs.setdefault("id_factory", run_id_factory(lambda: CREATED, lambda: suffix))
        return SlurmDataDesigner(
            self.profile,
            runner=self.fake,
            clock=self.fake.clock,
            environ={},
            files_dir=self.files,
            progress="off",
            **kwargs,
        )

    def create(self, dd: SlurmDataDesigner | None = None, **kwargs: Any) -> RunHandle:
        settings: dict[str, Any] = {
            "num_records": 40,
            "shards": 4,
            "deployments": deployments(),
            "client": {"cpus": 1, "memory_gb": 1},
            "name": "reviews",
        }
        settings.update(kwargs)
        return (dd or self.client()).create(builder(), **settings)

    def execute(self) -> Any:
        ids = run_id_factory(lambda: CREATED, lambda: "e22222")
        return execute_run(
            self.run_file, profile=self.profile, runner=self.fake, clock=self.fake.clock, environ={}, id_factory=ids
        )

    def finish(self, handle: RunHandle) -> None:
        """Every shard of the run succeeded: its files written, its tasks completed in the fake."""
        layout = handle.layout
        write_shard_outcomes(layout)
        for job in handle.submitted.jobs if handle.submitted else ():
            for index in range(len(self.fake.jobs[int(job.job_id)].tasks)):
                self.fake.set_state(job.job_id, index, "COMPLETED")
        self.fake.advance(30)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def inputs_layout(layout: RunLayout) -> list[tuple[str, str, str | None]]:
    """(role, path under the run directory, sha256 unless it is the run file, which names its config's path)."""
    found = read_record(layout.inputs_manifest, INPUTS_SCHEMA)
    assert isinstance(found, RecordOk)
    return [(f.role, f.path, None if f.role == "run" else f.sha256) for f in found.payload.files]


def submitted_layout(layout: RunLayout) -> list[tuple[int, int, str]]:
    submissions = read_submissions(layout)
    assert submissions
    return [(j.chunk, j.index_offset, j.array_spec) for s in submissions for j in s.jobs]


# -- create is execute of the equivalent run file ---------------------------------------------------------------


def test_create_and_execute_of_the_equivalent_run_file_give_the_same_plan_records_and_submission(
    tmp_path: Path,
) -> None:
    env = Env(tmp_path)
    executed = env.execute()
    sbatch_after_execute = env.fake.count_calls("sbatch")
    handle = env.create()

    assert handle.submitted is not None
    assert handle.submitted.plan_digest == executed.plan_digest
    assert handle.plan_digest == executed.plan_digest
    mine, theirs = handle.layout, RunLayout(env.workspace, executed.run_id)
    assert mine.plan_record.read_bytes() == theirs.plan_record.read_bytes()
    assert inputs_layout(mine) == inputs_layout(theirs)
    assert [role for role, _, _ in inputs_layout(mine)] == ["run", "config"]
    assert submitted_layout(mine) == submitted_layout(theirs)
    assert env.fake.count_calls("sbatch") == 2 * sbatch_after_execute
    # the client's run file is a run file: execute of it is the same plan again
    assert Path(handle.run_file).parent.parent.parent == env.files
    again = execute_run(
        handle.run_file, profile=env.profile, runner=env.fake, clock=env.fake.clock, environ={},
        id_factory=run_id_factory(lambda: CREATED, lambda: "f33333"),
    )  # fmt: skip
    assert again.plan_digest == executed.plan_digest


def test_the_same_inputs_give_the_same_files_and_a_config_path_is_used_as_it_is(tmp_path: Path) -> None:
    env = Env(tmp_path)
    client = env.client()
    kwargs: dict[str, Any] = {"num_records": 40, "shards": 4, "deployments": deployments(), "name": "reviews"}
    first = client.run_file(builder(), **kwargs)
    assert client.run_file(builder(), **kwargs) == first
    assert client.run_file(builder().build(), **kwargs) == first  # a built config writes the same file
    by_path = client.run_file(env.config, **kwargs)
    assert f"config: {env.config}" in by_path.read_text(encoding="utf-8")
    assert client.run_file(builder(), **{**kwargs, "num_records": 41}) != first


def test_preview_is_the_dry_run_of_the_equivalent_run_file_and_submits_nothing(tmp_path: Path) -> None:
    env = Env(tmp_path)
    preview = env.client().preview(
        builder(), num_records=40, shards=4, deployments=deployments(), client={"cpus": 1, "memory_gb": 1},
        name="reviews",
    )  # fmt: skip
    dry = plan_run(env.run_file, profile=env.profile, environ={})
    assert preview.plan.digest == dry.plan.digest
    assert preview.plan.shards == 4
    assert env.fake.count_calls("sbatch") == 0
    assert not (env.workspace / "runs").exists()


def test_settings_are_validated_as_the_run_file_is(tmp_path: Path) -> None:
    env = Env(tmp_path)
    with pytest.raises(InvalidInputError) as both:
        env.create(records_per_shard=10)  # shards=4 too
    assert both.value.info.exit_code == 2
    assert both.value.info.key_path == ("sharding",)
    assert both.value.info.file is not None
    assert both.value.info.file.endswith("run.yaml")
    assert both.value.info.line is not None
    with pytest.raises(InvalidInputError) as engine:
        env.create(deployments={"writer": {"engine": "bogus", "model": "m"}})
    assert engine.value.info.key_path is not None
    assert engine.value.info.key_path[:2] == ("deployments", "writer")
    assert env.fake.count_calls("sbatch") == 0


def test_contract_models_are_accepted_as_settings(tmp_path: Path) -> None:
    from data_designer.slurm.contracts import ClientSettings, CommandDeployment, SubmissionSettings

    env = Env(tmp_path)
    executed = env.execute()
    handle = env.create(
        deployments={"writer": CommandDeployment.model_validate(deployments()["writer"])},
        client=ClientSettings(cpus=1, memory_gb=1),
        submission=SubmissionSettings(),
    )
    assert handle.plan_digest == executed.plan_digest


def test_a_config_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        Env(tmp_path).client().create(object(), num_records=1, shards=1)
    assert refused.value.info.code == "invalid_config_source"


# -- the handle's methods are the services ------------------------------------------------------------------------


def test_status_wait_cancel_and_logs_are_the_services(tmp_path: Path) -> None:
    env = Env(tmp_path)
    handle = env.create()
    mine = handle.status(refresh=False)
    theirs = run_status(handle.run_id, profile=env.profile, refresh=False, environ={}, clock=env.fake.clock)
    assert mine == theirs
    assert handle.status().state == "pending"
    waited = handle.wait(timeout=0, interval=1)
    assert waited.outcome == "timeout"
    env.finish(handle)
    done = handle.wait(timeout=60, interval=1)
    assert done.outcome == "succeeded"
    assert done.status.records_done == 40
    assert handle.logs(shard=0).selection is not None
    cancelled = handle.cancel()
    assert cancelled.run_id == handle.run_id


def test_retry_refusal_is_the_cli_s_error(tmp_path: Path) -> None:
    env = Env(tmp_path)
    handle = env.create()
    with pytest.raises(ConflictError) as refused:
        handle.retry(shards=[0])  # pending: not retryable
    assert refused.value.info.code == "shard_not_retryable"
    assert refused.value.info.exit_code == 4


def test_reprs_show_the_status_table(tmp_path: Path) -> None:
    env = Env(tmp_path)
    handle = env.create()
    handle.status()
    text, page = repr(handle), handle._repr_html_()
    assert handle.run_id in text
    assert "SHARD" in text
    assert "pending" in text
    assert "<table>" in page
    assert "<td>pending</td>" in page
    assert "SlurmDataDesigner" in repr(env.client())


def test_run_finds_a_run_by_id_directory_and_name_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    env = Env(tmp_path)
    older = env.create()
    newer = env.create(env.client("d44444"), num_records=41)
    client = env.client()
    assert client.run(older.run_id) == older
    assert client.run(older.run_dir) == older
    assert client.run("reviews") in (older, newer)
    assert client.run("reviews") == client.runs()[0]
    assert {h.run_id for h in client.runs()} == {older.run_id, newer.run_id}
    with pytest.raises(NotFoundError) as unknown:
        client.run("nothing-here")
    assert unknown.value.info.code == "run_not_found"
    with pytest.raises(NotFoundError):
        client.run("reviews-20260301T120000Z-zzzzzz")


# -- load_dataset and load_analysis -------------------------------------------------------------------------------


def quiet_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network here: tiktoken fails at once instead of retrying a download (the host then reports '--')."""
    import tiktoken.load

    def offline(blobpath: str) -> bytes:
        raise OSError(f"offline: {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", offline)


def merged_run(tmp_path: Path) -> tuple[SlurmDataDesigner, RunLayout]:
    root = tmp_path / "ws"
    root.mkdir()
    layout = write_run_directory(root, shards=2, records_per_shard=5, parquet_parts=True)
    profile = write(tmp_path / "p.yaml", PROFILE.format(workspace=root, python=sys.executable))
    return SlurmDataDesigner(profile, runner=FakeSlurm(), environ={}, progress="off"), layout


def test_load_dataset_is_the_service_without_provenance_by_default(tmp_path: Path) -> None:
    client, layout = merged_run(tmp_path)
    handle = client.run(str(layout.run_id))
    frame = handle.load_dataset()
    assert list(frame.columns) == ["a"]
    expected = load_dataset(str(layout.run_id), profile=client.session.profile, environ={}, provenance=False)
    assert frame.equals(expected)
    assert "_dd_index" in handle.load_dataset(provenance=True).columns


def test_load_analysis_is_the_hosts_profile_computed_once_and_kept_beside_the_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data_designer.config.analysis.dataset_profiler import DatasetProfilerResults

    quiet_tokens(monkeypatch)
    client, layout = merged_run(tmp_path)
    handle = client.run(str(layout.run_id))
    analysis = handle.load_analysis()
    assert isinstance(analysis, DatasetProfilerResults)
    assert analysis.num_records == 10
    assert analysis.target_num_records == 10
    assert [s.column_name for s in analysis.column_statistics] == ["a"]
    merge_dir = Path(handle.merge().merge_dir or "")
    kept = json.loads(dataset_profile_file(merge_dir).read_bytes())
    assert kept["run_id"] == str(layout.run_id)

    def never(*_: Any) -> Any:
        raise AssertionError("profiled again")

    monkeypatch.setattr(_dataset_profile, "profile_frame", never)
    again = SlurmDataDesigner(client.session.profile, environ={}, progress="off").run(str(layout.run_id))
    assert again.load_analysis() == analysis  # read back, from a new client


# -- benchmarks ---------------------------------------------------------------------------------------------------


def benchmark_of(handle: RunHandle) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "sweep",
        "base": handle,
        "axes": [{"axis": "concurrency", "alias": "writer", "values": [1, 2]}],
        "records": {"policy": "fixed", "records": 10},
        "max_concurrent_children": 2,
    }


def test_a_benchmark_runs_from_a_mapping_with_a_run_as_base_and_is_the_services(tmp_path: Path) -> None:
    env = Env(tmp_path)
    client = env.client()
    bench = client.benchmark(benchmark_of(env.create(client)))
    assert isinstance(bench, BenchmarkHandle)
    assert bench.submitted is not None
    assert len(bench.submitted.children) == 2
    status = bench.status(refresh=False)
    assert status == benchmark_status(
        bench.benchmark_id, profile=env.profile, refresh=False, environ={}, clock=env.fake.clock
    )
    assert "BenchmarkHandle" in repr(bench)
    assert "<table>" in bench._repr_html_()
    assert client.benchmark(benchmark_of(client.run("reviews"))) == bench  # the same benchmark: nothing new


def test_a_finished_benchmark_waits_analyzes_to_pandas_and_plots(tmp_path: Path) -> None:
    env = Env(tmp_path)
    client = env.client()
    bench = client.benchmark(benchmark_of(env.create(client)))
    assert bench.wait(timeout=0, interval=1).complete is False
    for child in bench.status(refresh=False).children:
        assert child.run_id is not None
        run = RunHandle(child.run_id, client.session)
        write_shard_outcomes(run.layout)
        for submission in read_submissions(run.layout):
            for job in submission.jobs:
                env.fake.set_state(job.job_id, 0, "COMPLETED")
    env.fake.advance(30)
    assert bench.wait(timeout=60, interval=1).complete
    report = bench.analyze()
    frame = report.to_pandas()
    assert len(frame) == 2
    assert list(frame["case"]) == ["concurrency.writer=1", "concurrency.writer=2"]
    assert report.benchmark_id == bench.benchmark_id  # the analysis's fields through the report
    assert "case" in repr(report)
    assert "<table>" in report._repr_html_()
    png = bench.plot(tmp_path / "sweep.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- a fresh process reattaches -------------------------------------------------------------------------------------

REATTACH = """\
import json, sys
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import SlurmDataDesigner

client = SlurmDataDesigner(sys.argv[1], runner=FakeSlurm(), environ={{}}, progress="off")
by_id, by_name = client.run(sys.argv[2]), client.run("reviews")
bench_id, bench_name = client.benchmark_by_id(sys.argv[3]), client.benchmark_by_id("sweep")
print(json.dumps({{
    "run": [by_id.run_id, by_name.run_id, by_id.status(refresh=False).state, by_id.plan_digest],
    "benchmark": [bench_id.benchmark_id, bench_name.benchmark_id, len(bench_name.status(refresh=False).children)],
}}))
"""


def test_a_fresh_process_reattaches_to_a_run_and_a_benchmark_by_id_and_by_name(tmp_path: Path) -> None:
    env = Env(tmp_path)
    client = env.client()
    handle = env.create(client)
    bench = client.benchmark(benchmark_of(handle))
    script = write(tmp_path / "reattach.py", REATTACH.format())
    done = subprocess.run(
        [sys.executable, str(script), str(env.profile), handle.run_id, bench.benchmark_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    here = run_status(handle.run_id, profile=env.profile, refresh=False, environ={})  # the system clock, as there
    assert found["run"] == [handle.run_id, handle.run_id, here.state, handle.plan_digest]
    assert found["benchmark"] == [bench.benchmark_id, bench.benchmark_id, 2]
    assert list_runs(profile=env.profile, environ={}).total == 3  # the run and the two children: none made


# -- progress -----------------------------------------------------------------------------------------------------


def status(done: int, state: str = "running") -> RunStatus:
    return RunStatus.model_validate(
        {
            "run_id": "r-1", "run_dir": "/ws/runs/r-1", "name": "r", "cluster": "c", "state": state,
            "records_total": 200, "records_done": done, "shards_total": 2, "counts": {"running": 2},
            "shards": (), "checked_at": "2026-12-02T00:00:00Z", "evidence": "live", "scheduler_calls": 1,
        }
    )  # fmt: skip


def test_progress_off_a_terminal_is_a_line_when_something_changed_and_once_a_minute() -> None:
    lines: list[str] = []
    now = [0.0]
    shown = Progress("lines", echo=lines.append, monotonic=lambda: now[0])
    shown.show(status(0))
    shown.show(status(0))
    now[0] = 61.0
    shown.show(status(0))
    shown.show(status(50))
    shown.close()
    assert len(lines) == 3
    assert lines[-1].startswith("r-1: running; records 50/200 (25%)")


def test_progress_in_jupyter_is_one_html_bar_updated_in_place() -> None:
    shown_bodies: list[str] = []

    class Handle:
        def update(self, body: str) -> None:
            shown_bodies.append(body)

    def display(body: str) -> Handle:
        shown_bodies.append(body)
        return Handle()

    shown = Progress("jupyter", display=display)
    shown.show(status(0))
    shown.show(status(200, "succeeded"))
    shown.close()
    assert len(shown_bodies) == 2
    assert '<progress value="200" max="200"' in shown_bodies[-1]
    assert "records 200/200" in shown_bodies[-1]


def test_progress_off_shows_nothing() -> None:
    lines: list[str] = []
    shown = Progress("off", echo=lines.append)
    shown.show(status(1))
    assert lines == []


def test_progress_on_a_terminal_is_a_bar_drawn_to_the_final_state() -> None:
    """``auto`` on a real terminal (stderr a pty) draws Rich's bar, ending at the final records."""
    import pty
    import subprocess

    code = (
        "from data_designer.slurm.contracts import RunStatus\n"
        "from data_designer.slurm.services.client._progress import Progress\n"
        "def status(done, state):\n"
        "    return RunStatus.model_validate({'run_id': 'r-1', 'run_dir': '/ws/runs/r-1', 'name': 'r', 'cluster': 'c',\n"
        "        'state': state, 'records_total': 200, 'records_done': done, 'shards_total': 2,\n"
        "        'counts': {'running': 2}, 'shards': (), 'checked_at': '2026-12-02T00:00:00Z', 'evidence': 'live',\n"
        "        'scheduler_calls': 1})\n"
        "shown = Progress('auto')\n"
        "print(shown.mode, flush=True)\n"
        "shown.show(status(0, 'running'))\n"
        "shown.show(status(200, 'succeeded'))\n"
        "shown.close()\n"
    )
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
            timeout=60,
            check=True,
        )
        os.close(secondary)
        secondary = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the pty's other end is closed: everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if secondary >= 0:
            os.close(secondary)
        os.close(primary)
    assert done.stdout.decode().strip() == "bar"
    text = drawn.decode("utf-8", "replace")
    assert "200/200" in text
    assert "━" in text  # Rich's bar
