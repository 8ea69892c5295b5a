"""``execute_run`` against the fake Slurm: run directory, snapshot, records, idempotent (re)submission, errors."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    ConflictError,
    ErrorInfo,
    ExecuteResult,
    ExecutionPlan,
    InvalidInputError,
    KeyPath,
    NotFoundError,
    UnavailableError,
    format_key_path,
)
from data_designer.slurm.contracts.records import (
    INPUTS_SCHEMA,
    RUN_SCHEMA,
    SUBMISSION_SCHEMA,
    InputsManifest,
    RunRecord,
    SubmissionRecord,
)
from data_designer.slurm.planner import canonical_json, plan_digest
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import RecordOk, RunIdFactory, RunLayout, read_record, run_id_factory
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run, run_status

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
RUN_ID = "reviews-20260301T120000Z-abc123"

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
  fixed:
    workspace_root: {workspace}
    partitions: {{gpu: nogpu, cpu: cpu}}
    gpus_per_node: 4
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
  missing:
    workspace_root: {workspace}
    partitions: {{gpu: nogpu, cpu: cpu}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

CONFIG = """\
model_configs:
  - {{alias: writer, model: test-model, provider: local}}
seed_config:
  source: {{seed_type: local, path: {seed}}}
  sampling_strategy: shuffle
columns:
  - {{name: topic, column_type: sampler, sampler_type: category, params: {{values: [a, b]}}}}
  - {{name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{{{ topic }}}}."}}
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


class Env:
    """A tmp workspace with a profile, a run file, its config and a seed file; a fake Slurm; a fixed clock."""

    def __init__(self, root: Path, fake: FakeSlurm) -> None:
        self.root = root
        self.fake = fake
        self.workspace = root / "workspace"
        self.seed = write(root / "in" / "seed.csv", "topic\na\nb\n")
        self.config = write(root / "in" / "config.yaml", CONFIG.format(seed=self.seed))
        self.run_file = write(root / "in" / "run.yaml", RUN.format(config=self.config, python=sys.executable))
        self.profile = write(root / "profile.yaml", PROFILE.format(workspace=self.workspace, python=sys.executable))

    def execute(self, **kwargs: Any) -> ExecuteResult:
        kwargs.setdefault("id_factory", fixed_ids())
        return execute_run(
            self.run_file, profile=self.profile, runner=self.fake, clock=lambda: CREATED, environ={}, **kwargs
        )

    def resume(self, run_id: str = RUN_ID) -> ExecuteResult:
        return execute_run(
            self.run_file, profile=self.profile, runner=self.fake, clock=lambda: CREATED, environ={}, run_id=run_id
        )

    @property
    def layout(self) -> RunLayout:
        return RunLayout.of(self.workspace, RUN_ID)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def fixed_ids() -> RunIdFactory:
    return run_id_factory(lambda: CREATED, lambda: "abc123")


def ok(result: object) -> Any:
    assert isinstance(result, RecordOk), result
    return result.payload


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path, FakeSlurm(max_array_size=11))


def test_execute_snapshots_persists_and_submits_every_chunk(env: Env) -> None:
    result = env.execute()
    layout = env.layout
    assert (result.run_id, result.run_dir, result.name, result.cluster) == (
        RUN_ID,
        str(layout.run_dir),
        "reviews",
        "local",
    )
    assert (result.records, result.shards, result.submitted, result.recovered, result.resumed) == (40, 4, 1, 0, False)
    (job,) = result.jobs
    assert (job.chunk, job.job_name, job.job_id, job.array_spec, job.recovered) == (
        0,
        f"dd-{RUN_ID}-c0",
        "1000",
        "0-3",
        False,
    )
    fake_job = env.fake.jobs[1000]
    assert fake_job.name == f"dd-{RUN_ID}-c0"
    assert list(fake_job.tasks) == [0, 1, 2, 3]

    # The snapshot: byte-for-byte copies with their digests; the manifest says how to read the seed from it.
    manifest: InputsManifest = ok(read_record(layout.inputs_manifest, INPUTS_SCHEMA))
    assert [(f.role, f.source, f.path) for f in manifest.files] == [
        ("run", str(env.run_file), "inputs/run/run.yaml"),
        ("config", str(env.config), "inputs/config/config.yaml"),
        ("seed", str(env.seed), "inputs/seed/seed.csv"),
    ]
    for item in manifest.files:
        copy = (layout.run_dir / item.path).read_bytes()
        assert copy == Path(item.source).read_bytes()
        assert (item.sha256, item.size) == (hashlib.sha256(copy).hexdigest(), len(copy))
    assert manifest.seed is not None
    assert (manifest.seed.key_path, manifest.seed.original, manifest.seed.snapshot) == (
        "seed_config.source.path",
        str(env.seed),
        "inputs/seed/seed.csv",
    )

    # The plan: canonical JSON, its digest intact; compiled with the facts Slurm gave (GRES gpu:2, MaxArraySize 11).
    data = layout.plan_record.read_bytes()
    plan = ExecutionPlan.model_validate_json(data)
    assert data == canonical_json(plan.model_dump(mode="json"))
    assert plan.digest == plan_digest(plan) == result.plan_digest
    assert plan.allocation.gpus_per_node == 2

    record: RunRecord = ok(read_record(layout.run_record, RUN_SCHEMA))
    assert (record.run_id, record.created_at, record.plan_digest, record.shards) == (RUN_ID, CREATED, plan.digest, 4)
    assert (record.facts.gpus_per_node, record.facts.max_array_size) == (2, 11)
    assert record.binding.run_dir == str(layout.run_dir)
    assert f"--chdir={layout.run_dir}" in record.unit.sbatch_args

    submission: SubmissionRecord = ok(read_record(layout.submission_record(1), SUBMISSION_SCHEMA))
    assert submission.jobs == result.jobs
    assert (submission.submitted, submission.recovered, submission.sbatch_calls) == (1, 0, 1)
    assert result.submission_record == str(layout.submission_record(1))


def test_records_are_byte_for_byte_deterministic(env: Env) -> None:
    env.execute()
    workspace = env.root / "workspace2"
    profile = write(env.root / "profile2.yaml", PROFILE.format(workspace=workspace, python=sys.executable))
    other = execute_run(
        env.run_file, profile=profile, runner=FakeSlurm(), clock=lambda: CREATED, environ={}, id_factory=fixed_ids()
    )
    theirs = Path(other.run_dir)
    for name in ("plan.json", "inputs/manifest.json", "inputs/run/run.yaml", "inputs/seed/seed.csv"):
        assert (env.layout.run_dir / name).read_bytes() == (theirs / name).read_bytes()
    mine = json.loads((env.layout.run_dir / "run.json").read_text(encoding="utf-8"))["payload"]
    text = (theirs / "run.json").read_text(encoding="utf-8").replace(str(workspace), str(env.workspace))
    assert json.loads(text)["payload"] == {**mine, "profile_file": str(profile)}


def test_the_snapshot_does_not_follow_later_edits(env: Env) -> None:
    env.execute()
    env.seed.write_text("topic\nchanged\n", encoding="utf-8")
    env.run_file.write_text("edited", encoding="utf-8")
    assert (env.layout.run_dir / "inputs/seed/seed.csv").read_text(encoding="utf-8") == "topic\na\nb\n"
    again = env.resume()  # a resubmission reads the run directory only, never the edited files
    assert (again.resumed, again.submitted, again.recovered) == (True, 0, 1)


def test_a_resubmission_never_duplicates_jobs(tmp_path: Path) -> None:
    fake = FakeSlurm(max_array_size=3)  # 4 shards: indices 0-2 and 0, so two chunks
    env = Env(tmp_path, fake)
    fake.lose_sbatch_replies(1)  # chunk 0 is accepted, its reply lost
    with pytest.raises(UnavailableError) as caught:
        env.execute()
    assert caught.value.exit_code == 5
    assert RUN_ID in caught.value.info.message
    assert caught.value.info.hint is not None
    assert caught.value.info.hint.endswith(f"'data-designer slurm execute RUN --run-id {RUN_ID}'")
    layout = env.layout
    assert layout.run_record.is_file()
    assert layout.plan_record.is_file()
    assert layout.inputs_manifest.is_file()
    assert not layout.submissions_dir.exists()
    assert len(fake.jobs) == 1

    resumed = env.resume()
    assert (resumed.resumed, resumed.submitted, resumed.recovered) == (True, 1, 1)
    assert [(j.chunk, j.job_id, j.recovered) for j in resumed.jobs] == [(0, "1000", True), (1, "1001", False)]
    assert [j.array_spec for j in resumed.jobs] == ["0-2", "0-0"]
    again = env.resume()
    assert (again.submitted, again.recovered) == (0, 2)
    assert again.submission_record == str(layout.submission_record(2))
    assert len(fake.jobs) == 2
    assert fake.count_calls("sbatch") == 2


def test_sbatch_failing_leaves_the_records_and_a_resume_submits(env: Env) -> None:
    env.fake.fail("sbatch")
    with pytest.raises(UnavailableError) as caught:
        env.execute()
    assert caught.value.info.code == "scheduler_unreachable"
    assert env.layout.run_record.is_file()
    assert env.fake.jobs == {}
    env.fake.heal()
    resumed = env.resume()
    assert (resumed.submitted, resumed.recovered, len(env.fake.jobs)) == (1, 0, 1)


def test_slurm_unreachable_before_planning_writes_nothing(env: Env) -> None:
    env.fake.fail("scontrol")
    with pytest.raises(UnavailableError) as caught:
        env.execute()
    assert caught.value.exit_code == 5
    assert not env.workspace.exists()


def test_gpus_per_node_auto_that_slurm_cannot_resolve_is_refused(env: Env) -> None:
    with pytest.raises(InvalidInputError) as caught:
        env.execute(cluster="missing")
    assert caught.value.exit_code == 2
    assert (caught.value.info.code, caught.value.info.key_path) == ("unresolved", ("gpus_per_node",))
    assert "partition 'nogpu' is not in sinfo" in caught.value.info.message
    assert not env.workspace.exists()


def test_an_unresolved_image_is_refused_naming_it(env: Env) -> None:
    text = env.run_file.read_text(encoding="utf-8").replace("    gpus_per_replica: 1\n", "    image: dd-server\n")
    env.run_file.write_text(text, encoding="utf-8")
    profile = env.profile.read_text(encoding="utf-8").replace(
        "    gpus_per_node: 4\n", "    gpus_per_node: 4\n    container_runtime: pyxis\n"
    )
    env.profile.write_text(profile, encoding="utf-8")
    with pytest.raises(InvalidInputError) as caught:
        env.execute(cluster="fixed")
    assert caught.value.exit_code == 2
    (problem,) = caught.value.problems
    assert problem.code == "unresolved"
    assert problem.message.startswith("image is unresolved: ")
    assert format_key_path(problem.key_path or ()) == "deployments.writer.image"  # plan text: one key
    assert not env.workspace.exists()


def test_a_second_run_with_the_same_id_conflicts(env: Env) -> None:
    env.execute()
    with pytest.raises(ConflictError) as caught:
        env.execute()
    assert (caught.value.exit_code, caught.value.info.code) == (4, "run_exists")
    assert len(env.fake.jobs) == 1


def test_resume_errors(env: Env) -> None:
    with pytest.raises(InvalidInputError):
        env.resume("not a run id")
    with pytest.raises(NotFoundError) as missing:
        env.resume()
    assert (missing.value.exit_code, missing.value.info.code) == (3, "run_not_found")
    env.execute()
    plan = json.loads(env.layout.plan_record.read_text(encoding="utf-8"))
    plan["run"]["records"] = 41
    env.layout.plan_record.chmod(0o644)
    env.layout.plan_record.write_bytes(canonical_json(plan))
    with pytest.raises(ConflictError) as tampered:
        env.resume()
    assert tampered.value.info.code == "plan_mismatch"
    assert len(env.fake.jobs) == 1


@pytest.mark.parametrize(
    ("seed_type", "pattern", "copies", "snapshot"),
    [
        ("directory", "", ["inputs/seed/seeds/a.csv", "inputs/seed/seeds/sub/b.csv"], "inputs/seed/seeds"),
        ("local", "/*.csv", ["inputs/seed/seeds/a.csv"], "inputs/seed/seeds/*.csv"),
    ],
)
def test_a_seed_directory_and_a_seed_glob_are_snapshotted(
    env: Env, seed_type: str, pattern: str, copies: list[str], snapshot: str
) -> None:
    seeds = env.root / "seeds"
    write(seeds / "a.csv", "topic\na\n")
    write(seeds / "sub" / "b.csv", "topic\nb\n")
    write(seeds / ".hidden", "x")  # hidden names are never snapshotted
    config = CONFIG.format(seed=f"{seeds}{pattern}").replace("seed_type: local", f"seed_type: {seed_type}")
    env.config.write_text(config, encoding="utf-8")
    result = env.execute()
    manifest: InputsManifest = ok(read_record(Path(result.run_dir) / "inputs" / "manifest.json", INPUTS_SCHEMA))
    assert [f.path for f in manifest.files if f.role == "seed"] == copies
    assert manifest.seed is not None
    assert (manifest.seed.original, manifest.seed.snapshot) == (f"{seeds}{pattern}", snapshot)
    for item in manifest.files:
        assert (Path(result.run_dir) / item.path).read_bytes() == Path(item.source).read_bytes()


def test_a_seed_path_naming_nothing_is_not_found(env: Env) -> None:
    env.config.write_text(CONFIG.format(seed=env.root / "nope.csv"), encoding="utf-8")
    with pytest.raises(NotFoundError) as caught:
        env.execute()
    assert caught.value.info.key_path == ("seed_config", "source", "path")
    assert not env.workspace.exists()


# -- the CLI's submitting branch -----------------------------------------------------------------


def invoke(env: Env, *args: str) -> Any:
    empty = env.root / "empty-path"
    empty.mkdir(exist_ok=True)
    runner = CliRunner(
        env={
            "HOME": str(env.root),
            "PATH": str(empty),  # no Slurm commands: submitting must say Slurm is unavailable
            "SLURM_CONF": None,
            "XDG_CONFIG_HOME": None,
            "DATA_DESIGNER_SLURM_PROFILE": None,
        }
    )
    return runner.invoke(app, ["execute", str(env.run_file), "--profile", str(env.profile), *args])


def test_cli_without_slurm_exits_5_and_writes_nothing(env: Env) -> None:
    result = invoke(env, "--json")
    assert result.exit_code == 5, result.output
    info = ErrorInfo.model_validate_json(result.stderr)
    assert (info.code, info.operation) == ("scheduler_unavailable", "partitions")
    assert result.stdout == ""
    assert not env.workspace.exists()


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--out", "plan"], ("--out",)),
        (["--force"], ("--force",)),
        (["--max-array-size", "5"], ("--max-array-size",)),
        (["--dry-run", "--run-id", RUN_ID], ("--run-id",)),
    ],
)
def test_cli_options_of_the_other_mode_exit_2(env: Env, args: list[str], key: KeyPath) -> None:
    result = invoke(env, *args, "--json")
    assert result.exit_code == 2, result.output
    assert ErrorInfo.model_validate_json(result.stderr).key_path == key


SECRET = "hf_ThisIsASecretValue0123456789abcdef"


def with_named_variables(env: Env) -> None:
    """The profile names HF_TOKEN; the run file gives the writer deployment EXTRA_TOKEN."""
    text = env.profile.read_text(encoding="utf-8").replace(
        '    default_time_limit: "00:30:00"\n  fixed:',
        '    default_time_limit: "00:30:00"\n    environment: [HF_TOKEN]\n  fixed:',
    )
    env.profile.write_text(text, encoding="utf-8")
    run = env.run_file.read_text(encoding="utf-8").replace(
        "    gpus_per_replica: 1\n", "    gpus_per_replica: 1\n    environment: [EXTRA_TOKEN]\n"
    )
    env.run_file.write_text(run, encoding="utf-8")


def test_named_variables_reach_sbatch_by_environment_only(env: Env) -> None:
    with_named_variables(env)
    environ = {"HF_TOKEN": SECRET, "EXTRA_TOKEN": SECRET + "-extra", "UNRELATED": "x"}
    execute_run(
        env.run_file,
        profile=env.profile,
        runner=env.fake,
        clock=lambda: CREATED,
        environ=environ,
        id_factory=fixed_ids(),
    )
    sbatch = [i for i, argv in enumerate(env.fake.calls) if argv[0] == "sbatch"]
    assert [env.fake.environments[i] for i in sbatch] == [("EXTRA_TOKEN", "HF_TOKEN")], "exactly the named ones"
    (argv,) = [env.fake.calls[i] for i in sbatch]
    assert "--export=ALL,HF_TOKEN,EXTRA_TOKEN" in argv
    assert not any(SECRET in word for call in env.fake.calls for word in call)
    plan = ExecutionPlan.model_validate_json(env.layout.plan_record.read_bytes())
    assert plan.submission.environment == ("HF_TOKEN", "EXTRA_TOKEN")
    assert plan.allocation.replicas[0].pass_environment == ("HF_TOKEN", "EXTRA_TOKEN")
    assert plan.allocation.client.pass_environment == ("HF_TOKEN",), "the deployment's token is not the client's"
    holding = [p for p in env.workspace.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert holding == []


@pytest.mark.parametrize(
    ("unset", "file_attr", "key"),
    [("HF_TOKEN", "profile", ("environment",)), ("EXTRA_TOKEN", "run_file", ("deployments", "writer", "environment"))],
)
def test_a_named_variable_unset_at_submission_is_exit_2_before_anything_is_written(
    env: Env, unset: str, file_attr: str, key: KeyPath
) -> None:
    with_named_variables(env)
    environ = {"HF_TOKEN": SECRET, "EXTRA_TOKEN": SECRET}
    del environ[unset]
    with pytest.raises(InvalidInputError) as caught:
        execute_run(
            env.run_file,
            profile=env.profile,
            runner=env.fake,
            clock=lambda: CREATED,
            environ=environ,
            id_factory=fixed_ids(),
        )
    info = caught.value.info
    assert (info.code, info.exit_code, info.key_path, info.file) == (
        "environment_unset",
        2,
        key,
        str(getattr(env, file_attr)),
    )
    assert unset in info.message
    assert "export" in (info.hint or "")
    assert not (env.workspace / "runs").exists(), "nothing written"
    assert not any(argv[0] == "sbatch" for argv in env.fake.calls)


def test_a_first_chunk_refused_records_not_submitted_and_names_the_fix_that_works(env: Env) -> None:
    env.fake.fail("sbatch", "rejected")
    with pytest.raises(InvalidInputError) as caught:
        env.execute()
    info = caught.value.info
    assert (info.code, info.exit_code) == ("sbatch_rejected", 2)
    assert "CPU count per node can not be satisfied" in info.message
    assert "--run-id" not in (info.hint or ""), "resubmitting the frozen plan would be refused the same way"
    assert f"execute {env.run_file}" in (info.hint or "")
    (submission,) = [ok(read_record(path, SUBMISSION_SCHEMA)) for path in sorted(env.layout.submissions_dir.iterdir())]
    assert (submission.jobs, submission.submitted, submission.sbatch_calls) == ((), 0, 1)
    assert "CPU count per node" in (submission.error or "")
    status = run_status(RUN_ID, profile=env.profile, runner=env.fake, clock=lambda: CREATED, environ={})
    assert {shard.state for shard in status.shards} == {"not_submitted"}
    assert status.submission_error == submission.error


class RejectingSecond:
    """Delegates to the fake; its second sbatch call is refused (a later chunk rejected after an earlier one)."""

    def __init__(self, fake: FakeSlurm) -> None:
        self.fake, self.sbatch_calls = fake, 0

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv[0] == "sbatch":
            self.sbatch_calls += 1
            if self.sbatch_calls == 2:
                self.fake.fail("sbatch", "rejected", times=1)
        return self.fake.run(argv, timeout_s=timeout_s, stdin=stdin)


def test_a_later_chunk_refused_keeps_the_accepted_jobs_and_the_resume_path(env: Env) -> None:
    env.run_file.write_text(env.run_file.read_text().replace("shards: 4", "shards: 30"), encoding="utf-8")
    runner = RejectingSecond(env.fake)
    with pytest.raises(InvalidInputError) as caught:
        execute_run(
            env.run_file, profile=env.profile, runner=runner, clock=lambda: CREATED, environ={}, id_factory=fixed_ids()
        )
    assert f"--run-id {RUN_ID}" in (caught.value.info.hint or "")
    (submission,) = [ok(read_record(path, SUBMISSION_SCHEMA)) for path in sorted(env.layout.submissions_dir.iterdir())]
    assert [(job.chunk, job.job_id) for job in submission.jobs] == [(0, "1000")]
    assert (submission.submitted, submission.sbatch_calls) == (1, 2)
    status = run_status(RUN_ID, profile=env.profile, runner=env.fake, clock=lambda: CREATED, environ={})
    states = [shard.state for shard in status.shards]
    assert set(states[:11]) == {"pending"}, "chunk 0's jobs are observed"
    assert set(states[11:]) == {"not_submitted"}
    resumed = env.resume()
    assert (resumed.submitted, resumed.recovered) == (2, 1)
    status = run_status(RUN_ID, profile=env.profile, runner=env.fake, clock=lambda: CREATED, environ={})
    assert status.submission_error is None
    assert {shard.state for shard in status.shards} == {"pending"}
