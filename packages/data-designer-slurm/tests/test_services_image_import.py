"""``image add docker://...`` against the fake Slurm: the import job's submission, its state from evidence, and the
finish step that records the completion.

The fake accepts the job but runs nothing: a test plays the job's part (writing its log, or running the finish
step on a real SquashFS built with ``mksquashfs`` where the enroot import would have left it) and moves the job
through Slurm states with ``set_state``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from data_designer.slurm.contracts import (
    ConflictError,
    ImageInfo,
    InvalidInputError,
    NotFoundError,
    SlurmExtensionError,
)
from data_designer.slurm.contracts.records import IMAGE_SCHEMA, ImageEntry
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.images import IMAGE_TOOLS, ImportPaths, finish_import, import_paths
from data_designer.slurm.runtime.scheduler import CommandResult, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, read_record
from data_designer.slurm.runtime.testing import FakeSlurm, build_squashfs, squashfs_tools_missing, write_root_fs
from data_designer.slurm.services.images._import import import_state, submit_import
from data_designer.slurm.services.images._workspace import Workspace, open_workspace

REFERENCE = "docker://nvcr.io#nvidia/pytorch:24.05-py3"
GRACE_S = 60.0


class Site:
    """A workspace with a profile (CPU partition ``cpu``, account ``ddtest``) and the fake Slurm."""

    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        self.root = root / "ws"
        self.root.mkdir()
        template = ProfileTemplate(
            cluster="local",
            workspace_root=str(self.root),
            account="ddtest",
            cpu_partition="cpu",
            python=sys.executable,
            default_time_limit="01:30:00",
        )
        self.profile = self.root / "profile.yaml"
        self.profile.write_text(render_profile(template), encoding="utf-8")
        _, self.workspace = open_workspace(self.profile, None, {})

    def submit(self, name: str = "torch", *, replace: bool = False, workspace: Workspace | None = None) -> ImageEntry:
        added = submit_import(
            REFERENCE,
            name=name,
            role="serving",
            replace=replace,
            workspace=workspace or self.workspace,
            environ={"USER": "alice"},
            clock=self.fake.clock,
            runner=self.fake,
        )
        assert added.outcome == "import_submitted"
        assert not added.hashed
        return added.entry

    def state(self, entry: ImageEntry) -> ImageInfo:
        return import_state(
            entry,
            generations=entry.generation,
            workspace=self.workspace,
            environ={},
            runner=self.fake,
            clock=self.fake.clock,
            grace_s=GRACE_S,
        )

    def paths(self, entry: ImageEntry) -> ImportPaths:
        """The import's files, named with its job name's token."""
        assert entry.import_job is not None
        return import_paths(self.workspace.registry, entry.name, entry.generation, entry.import_job.job_name[-8:])

    def job(self, entry: ImageEntry) -> str:
        assert entry.import_job is not None
        return entry.import_job.job_id

    def sbatch_calls(self) -> list[tuple[str, ...]]:
        return [argv for argv in self.fake.calls if argv[0] == "sbatch"]


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


@pytest.fixture
def squashfs_tools() -> None:
    missing = squashfs_tools_missing()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"squashfs-tools are required under CI=true (.ci/run installs them): {missing}")
        pytest.skip(missing)


def test_add_submits_one_cpu_task_records_the_entry_and_returns_at_once(site: Site) -> None:
    entry = site.submit()

    paths = site.paths(entry)
    job = entry.import_job
    assert job is not None
    assert paths.target.name == f"0001-{job.job_name[-8:]}.sqsh"
    assert (entry.generation, entry.source, entry.source_kind, entry.format) == (1, REFERENCE, "registry", "squashfs")
    assert (entry.sha256, entry.inspection, entry.identity) == (None, None, None)
    assert entry.path == str(paths.target)
    assert entry.added_by.user == "alice"
    assert (job.job_id, job.script, job.log) == ("1000", str(paths.script), str(paths.log))
    assert job.job_name.startswith("dd-image-torch-1-")
    [argv] = site.sbatch_calls()
    for expected in (
        "--partition=cpu",
        "--account=ddtest",
        "--time=01:30:00",
        "--nodes=1",
        "--ntasks=1",
        f"--chdir={paths.directory}",
        f"--output={paths.log}",
        f"--error={paths.log}",
        f"--job-name={job.job_name}",
    ):
        assert expected in argv
    script = site.fake.jobs[1000].script
    assert paths.script.read_text(encoding="utf-8") == script
    assert 'enroot import -o "$partial" -- "$reference"' in script
    assert f"reference='{REFERENCE}'" in script
    assert script.splitlines()[-1] == (
        f"exec {sys.executable} -m data_designer.slurm.runtime.images.finish --workspace-root {site.root} "
        "--name torch --generation 1"
    )
    record = read_record(site.workspace.registry.generation_file("torch", 1), IMAGE_SCHEMA)
    assert isinstance(record, RecordOk)
    assert record.payload == entry
    assert not paths.target.exists(), "nothing was imported on the login node"


@pytest.mark.parametrize(
    "source",
    ["docker://busybox;id", "docker://busybox:latest $(id)", "docker://Busybox", "docker://busybox@sha256:abc"],
)
def test_a_bad_reference_is_refused_before_anything_is_submitted_or_written(site: Site, source: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        submit_import(
            source,
            name="x",
            role="serving",
            replace=False,
            workspace=site.workspace,
            environ={},
            clock=site.fake.clock,
            runner=site.fake,
        )
    assert caught.value.exit_code == 2
    assert caught.value.info.code == "invalid_image_reference"
    assert site.fake.calls == []
    assert site.workspace.registry.names() == ()


def test_a_current_name_needs_replace_and_replace_imports_as_the_next_generation(site: Site) -> None:
    first = site.submit()
    with pytest.raises(ConflictError) as caught:
        site.submit()
    assert caught.value.exit_code == 4
    assert len(site.sbatch_calls()) == 1
    second = site.submit(replace=True)
    assert second.generation == first.generation + 1
    assert site.job(second) != site.job(first)


def test_losing_the_generation_to_a_concurrent_add_cancels_the_job(site: Site) -> None:
    registry = site.workspace.registry
    rival = ImageEntry.model_validate(
        {
            "name": "torch",
            "generation": 1,
            "source": "/elsewhere.sqsh",
            "added_by": {"user": "bob", "host": "h", "pid": 1, "time": site.fake.clock()},
        }
    )

    class RacingRunner:
        """sbatch accepts the job, and meanwhile another 'image add' of the name writes generation 1."""

        def run(
            self,
            argv: Sequence[str],
            *,
            timeout_s: float,
            stdin: str | None = None,
            environment: Mapping[str, str] | None = None,
        ) -> CommandResult:
            result = site.fake.run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)
            if argv[0] == "sbatch":
                assert registry.write_generation(rival, site.workspace.modes)
            return result

    with pytest.raises(ConflictError) as caught:
        submit_import(
            REFERENCE,
            name="torch",
            role="serving",
            replace=False,
            workspace=site.workspace,
            environ={},
            clock=site.fake.clock,
            runner=RacingRunner(),
        )
    assert caught.value.info.code == "image_contended"
    assert "job 1000 was cancelled" in caught.value.info.message
    assert site.fake.count_calls("scancel") == 1
    assert site.fake.jobs[1000].tasks[0].state.startswith("CANCELLED")
    assert registry.current("torch") == rival


def test_the_state_follows_the_job_from_pending_to_running_to_failed_with_its_exit_and_log(site: Site) -> None:
    entry = site.submit()
    job = site.job(entry)

    pending = site.state(entry)
    assert pending.state == "importing"
    assert pending.detail is not None
    assert "pending" in pending.detail
    assert pending.scheduler_calls == 2

    site.fake.set_state(job, 0, "RUNNING")
    running = site.state(entry)
    assert running.state == "importing"
    assert running.detail is not None
    assert "running on" in running.detail

    assert entry.import_job is not None
    Path(entry.import_job.log).write_text(
        "enroot is not installed on node n1 (not on PATH): cannot import docker://nvcr.io#nvidia/pytorch:24.05-py3\n",
        encoding="utf-8",
    )
    site.fake.set_state(job, 0, "FAILED", exit_code=127)
    site.fake.advance(3)  # past the fake's accounting lag: sacct has the exit code
    failed = site.state(entry)
    assert failed.state == "import_failed"
    assert failed.detail is not None
    assert f"job {job}: Slurm says FAILED (exit 127) and no completion was recorded" in failed.detail
    assert "enroot is not installed on node n1" in failed.detail
    assert failed.integrity is None


def test_a_cancelled_import_is_import_cancelled(site: Site) -> None:
    entry = site.submit()
    site.fake.set_state(site.job(entry), 0, "CANCELLED")
    cancelled = site.state(entry)
    assert cancelled.state == "import_cancelled"
    assert cancelled.detail is not None
    assert "the log" in cancelled.detail


def test_a_completed_job_without_a_completion_is_importing_within_the_grace_then_failed(site: Site) -> None:
    entry = site.submit()
    site.fake.set_state(site.job(entry), 0, "COMPLETED")
    waiting = site.state(entry)
    assert waiting.state == "importing"
    assert waiting.detail is not None
    assert "waiting for its completion record" in waiting.detail
    site.fake.advance(GRACE_S + 1)
    failed = site.state(entry)
    assert failed.state == "import_failed"
    assert failed.detail is not None
    assert "COMPLETED (exit 0) and no completion was recorded" in failed.detail


def test_a_job_slurm_no_longer_knows_is_failed_after_the_grace_never_importing_forever(site: Site) -> None:
    entry = site.submit()
    del site.fake.jobs[int(site.job(entry))]
    early = site.state(entry)
    assert early.state == "importing"
    assert early.detail is not None
    assert "not yet in accounting" in early.detail
    site.fake.advance(GRACE_S + 1)
    gone = site.state(entry)
    assert gone.state == "import_failed"
    assert gone.detail is not None
    assert "neither squeue nor sacct knows job 1000" in gone.detail


def test_an_unreachable_slurm_is_unknown_not_importing(site: Site) -> None:
    entry = site.submit()
    site.fake.fail("squeue")
    site.fake.fail("sacct")
    unknown = site.state(entry)
    assert unknown.state == "unknown"
    assert unknown.detail is not None
    assert "Slurm could not be asked about job 1000" in unknown.detail


def _enroot_output(site: Site, entry: ImageEntry, tmp_path: Path) -> Path:
    """What a successful ``enroot import -o PARTIAL`` leaves: a real SquashFS with site-packages metadata."""
    paths = site.paths(entry)
    root = write_root_fs(tmp_path / "rootfs", versions={"vllm": "0.8.5"})
    return build_squashfs(root, paths.partial)


@pytest.mark.usefixtures("squashfs_tools")
def test_the_finish_step_records_the_completion_and_the_state_is_ready(site: Site, tmp_path: Path) -> None:
    entry = site.submit()
    job = site.job(entry)
    _enroot_output(site, entry, tmp_path)
    site.fake.set_state(job, 0, "RUNNING")
    environ = {"SLURM_ARRAY_JOB_ID": job, "SLURM_JOB_ID": "1001"}
    completion = finish_import(
        site.workspace.registry, "torch", 1, runner=SubprocessRunner(programs=IMAGE_TOOLS), environ=environ
    )
    paths = site.paths(entry)
    assert not paths.partial.exists()
    assert completion.generation == 2
    assert completion.path == str(paths.target)
    assert completion.import_job == entry.import_job
    assert completion.size == paths.target.stat().st_size
    assert completion.inspection is not None
    assert completion.inspection.python == "3.11"
    versions = {d.distribution: d.version for d in completion.inspection.distributions}
    assert versions["vllm"] == "0.8.5"
    assert versions["data-designer"] is None  # absent: undetermined, never guessed
    assert site.workspace.registry.current("torch") == completion

    site.fake.set_state(job, 0, "COMPLETED")
    ready = site.state(entry)  # asked about the import entry; the completion read after Slurm answered
    assert ready.state == "ready"
    assert ready.entry == completion
    assert ready.integrity == "identity_unchanged"
    assert ready.scheduler_calls == 2


@pytest.mark.usefixtures("squashfs_tools")
def test_a_finish_step_that_lost_its_generation_writes_nothing_and_deletes_its_file(site: Site, tmp_path: Path) -> None:
    entry = site.submit()
    _enroot_output(site, entry, tmp_path)
    removal = entry.model_copy(update={"generation": 2, "removed": True, "import_job": None})
    assert site.workspace.registry.write_generation(removal, site.workspace.modes)
    with pytest.raises(ConflictError) as caught:
        finish_import(
            site.workspace.registry,
            "torch",
            1,
            runner=SubprocessRunner(programs=IMAGE_TOOLS),
            environ={"SLURM_ARRAY_JOB_ID": site.job(entry)},
        )
    assert caught.value.info.code == "import_superseded"
    assert not site.paths(entry).target.exists()
    assert site.workspace.registry.current("torch") is None


def test_a_finish_step_of_another_job_or_without_output_records_nothing(site: Site) -> None:
    entry = site.submit()
    registry = site.workspace.registry
    runner = SubprocessRunner(programs=IMAGE_TOOLS)
    with pytest.raises(NotFoundError) as other:
        finish_import(registry, "torch", 1, runner=runner, environ={"SLURM_JOB_ID": "999"})
    assert other.value.info.code == "import_entry_missing"
    with pytest.raises(NotFoundError) as no_output:
        finish_import(registry, "torch", 1, runner=runner, environ={"SLURM_ARRAY_JOB_ID": site.job(entry)})
    assert no_output.value.info.code == "import_output_missing"
    ticks = iter(range(100))
    with pytest.raises(NotFoundError) as missing:
        finish_import(
            registry,
            "torch",
            7,
            runner=runner,
            environ={},
            clock=lambda: site.fake.clock() + timedelta(seconds=next(ticks)),
            sleep=lambda _: None,
            wait_s=3.0,
        )
    assert "generation 7 does not exist" in missing.value.info.message
    assert registry.history("torch").highest == 1


def test_an_unseen_job_while_sacct_does_not_answer_is_unknown_not_failed(site: Site) -> None:
    entry = site.submit()
    del site.fake.jobs[int(site.job(entry))]
    site.fake.advance(GRACE_S + 1)
    site.fake.fail("sacct")
    unknown = site.state(entry)
    assert unknown.state == "unknown"
    assert unknown.detail == "no scheduler evidence for job 1000 (sacct failed)"


def test_a_refused_sbatch_records_nothing_and_leaves_no_script(site: Site) -> None:
    site.fake.fail("sbatch")
    site.fake.fail("squeue")
    site.fake.fail("sacct")
    with pytest.raises(SlurmExtensionError):
        site.submit()
    assert site.workspace.registry.history("torch").highest == 0
    imports = site.workspace.registry.name_dir("torch") / "imports"
    assert list(imports.iterdir()) == []
    site.fake.heal()
    entry = site.submit()  # a later try gets its own files
    assert entry.generation == 1
    assert site.paths(entry).script.is_file()
