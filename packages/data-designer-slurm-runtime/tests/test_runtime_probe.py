"""The profile probe against the fake Slurm: every check's ok, failed and not-run paths.

The fake accepts jobs but runs nothing, so :class:`ComputeNode` wraps it and runs each accepted
batch script with bash right away, as a compute node sharing this filesystem would (optionally
seeing another directory at the workspace path, i.e. a workspace that is not shared). Time is the
fake's virtual clock, so timeouts and backoff cost nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import (
    PROBE_CHECK_NAMES,
    ClusterProfile,
    ProbeFailedError,
    ProbeReport,
    UnavailableError,
    __version__,
)
from data_designer.slurm.runtime.probe import gpus_in_gres, probe_cluster
from data_designer.slurm.runtime.probe._job import probe_script
from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner
from data_designer.slurm.runtime.testing import FakeSlurm, OutageRunner

PROBE_ID = "20260101T000000Z-test"


class ComputeNode:
    """A runner over the fake that also runs every accepted batch script with bash (synchronously)."""

    def __init__(
        self,
        fake: FakeSlurm,
        *,
        directive: str = "",
        sees: tuple[str, str] | None = None,
        replace_output: dict[str, str] | None = None,
    ) -> None:
        self.fake = fake
        self.directive = directive
        self.sees = sees
        self.replace_output = replace_output or {}
        self.scripts: list[str] = []

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv and argv[0] == "sbatch" and stdin is not None and self.directive:
            stdin = stdin.replace("\n", f"\n# fake-slurm: {self.directive}\n", 1)
        result = self.fake.run(argv, timeout_s=timeout_s, stdin=stdin)
        name = argv[0] if argv else ""
        if name in self.replace_output and result.ok:
            return CommandResult(result.argv, 0, self.replace_output[name], "", result.duration_s)
        if name == "sbatch" and result.ok and stdin is not None:
            script = stdin if self.sees is None else stdin.replace(*self.sees)
            self.scripts.append(script)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": result.stdout.strip()}
            subprocess.run(["bash", "-s"], input=script, text=True, env=env, check=True, timeout=120)
        return result


def cluster_of(workspace: Path, **overrides: Any) -> ClusterProfile:
    data: dict[str, Any] = {
        "workspace_root": str(workspace),
        "account": "ddtest",
        "partitions": {"gpu": "gpu", "cpu": "cpu"},
        "compute_python": {"interpreter": sys.executable},
    }
    data.update(overrides)
    return ClusterProfile.model_validate(data)


def probe(fake: FakeSlurm, cluster: ClusterProfile, runner: CommandRunner | None = None, **kwargs: Any) -> ProbeReport:
    return probe_cluster(
        "local",
        cluster,
        runner=runner if runner is not None else ComputeNode(fake),
        clock=fake.clock,
        sleep=fake.sleep,
        probe_id=PROBE_ID,
        user="root",
        **kwargs,
    )


def statuses(report: ProbeReport) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}


def sbatch_argv(fake: FakeSlurm) -> tuple[str, ...]:
    calls = [argv for argv in fake.calls if argv[0] == "sbatch" and "--version" not in argv]
    assert len(calls) == 1, calls
    return calls[0]


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm(cluster_name="ddslurm")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# -- the passing probe ------------------------------------------------------------------------------


def test_a_matching_profile_passes_every_check_and_resolves_auto(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace))

    assert [c.name for c in report.checks] == list(PROBE_CHECK_NAMES)
    assert report.passed, report.not_ok()
    assert report.gpus_per_node_resolved == 2
    assert report.check("gpus_per_node").detail == "2 GPUs per node in partition 'gpu' (resolved 'auto')"
    assert (report.slurm_cluster, report.slurm_version) == ("ddslurm", "22.05.8")
    assert report.job_id == "1000"
    assert report.expected_runtime_version == __version__
    assert (
        report.check("compute_runtime").detail == f"{sys.executable} imports data_designer.slurm.runtime {__version__}"
    )
    assert "job 1000 on node1" in report.check("shared_workspace").detail
    assert report.started_at == "2026-01-01T00:00:00.000000Z"
    assert report.duration_s > 0
    assert not (workspace / ".probe" / PROBE_ID).exists(), "a passing probe removes its directory"


def test_the_probe_job_runs_on_the_cpu_partition_with_the_profile_account_and_options(
    fake: FakeSlurm, workspace: Path
) -> None:
    report = probe(fake, cluster_of(workspace, sbatch_options=["--qos=debug"]))

    assert report.passed, report.not_ok()
    argv = sbatch_argv(fake)
    assert "--partition=cpu" in argv
    assert "--account=ddtest" in argv
    assert "--time=2" in argv
    assert "--qos=debug" in argv
    assert f"--job-name=ddslurm-probe-{PROBE_ID}" in argv
    assert "--array=0" in argv


def test_without_an_account_the_job_uses_the_default_and_sacctmgr_is_not_asked(
    fake: FakeSlurm, workspace: Path
) -> None:
    report = probe(fake, cluster_of(workspace, account=None))

    assert report.passed, report.not_ok()
    assert "default account" in report.check("account").detail
    assert not any(a.startswith("--account") for a in sbatch_argv(fake))
    assert fake.count_calls("sacctmgr") == 0


def test_a_number_of_gpus_equal_to_gres_passes(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, gpus_per_node=2))

    assert report.passed, report.not_ok()
    assert report.gpus_per_node_resolved == 2
    assert "matches the profile" in report.check("gpus_per_node").detail


def test_observation_outages_while_polling_are_waited_out(fake: FakeSlurm, workspace: Path) -> None:
    runner = ComputeNode(fake)
    original = runner.run

    def flaky(
        argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv and argv[0] == "sbatch" and "--version" not in argv:
            fake.fail("squeue", times=2)
            fake.fail("sacct", times=2)
        return original(argv, timeout_s=timeout_s, stdin=stdin)

    runner.run = flaky  # type: ignore[method-assign]  # the wrapper is local to this test
    report = probe(fake, cluster_of(workspace), runner)

    assert report.passed, report.not_ok()


# -- failing and not-run checks ---------------------------------------------------------------------


def test_a_gpu_count_that_differs_from_gres_fails_and_names_both(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, gpus_per_node=4))

    check = report.check("gpus_per_node")
    assert check.status == "failed"
    assert check.detail == "the profile says 4 GPUs per node, GRES of partition 'gpu' says 2"
    assert check.key_path == ("clusters", "local", "gpus_per_node")
    assert report.gpus_per_node_resolved is None
    assert [c.name for c in report.not_ok()] == ["gpus_per_node"]


def test_an_unknown_gpu_partition_fails_and_gpus_are_not_read(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, partitions={"gpu": "gpux", "cpu": "cpu"}))

    assert statuses(report)["gpu_partition"] == "failed"
    assert "partition 'gpux' does not exist (partitions: cpu, gpu)" in report.check("gpu_partition").detail
    assert report.check("gpu_partition").key_path == ("clusters", "local", "partitions", "gpu")
    assert report.check("gpus_per_node").status == "not_run"
    assert "gpu_partition check failed" in report.check("gpus_per_node").detail
    assert report.check("probe_job").status == "ok", "the CPU job does not need the GPU partition"


def test_an_unknown_cpu_partition_fails_and_no_job_is_submitted(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, partitions={"gpu": "gpu", "cpu": "nope"}))

    assert statuses(report) == {
        **dict.fromkeys(PROBE_CHECK_NAMES, "ok"),
        "cpu_partition": "failed",
        "probe_job": "not_run",
        "shared_workspace": "not_run",
        "compute_runtime": "not_run",
    }
    assert report.check("probe_job").detail == "the cpu_partition check failed: no job was submitted"
    assert fake.count_calls("sbatch") == 1, "only 'sbatch --version'"
    assert not (workspace / ".probe" / PROBE_ID).exists(), "no job ran: nothing to keep"


def test_an_unknown_account_fails_naming_it_and_the_users_accounts(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, account="ddother"))

    check = report.check("account")
    assert check.status == "failed"
    assert "may not use account 'ddother' on cluster 'ddslurm'" in check.detail
    assert "(the user's accounts: ddtest)" in check.detail
    assert check.key_path == ("clusters", "local", "account")
    assert report.check("probe_job").status == "not_run"


def test_an_association_limited_to_other_partitions_fails(fake: FakeSlurm, workspace: Path) -> None:
    runner = ComputeNode(fake, replace_output={"sacctmgr": "ddslurm|ddtest|root|cpu\n"})
    report = probe(fake, cluster_of(workspace), runner)

    check = report.check("account")
    assert check.status == "failed"
    assert "is not valid on partition(s) gpu (only on: cpu)" in check.detail


def test_an_unanswering_sacctmgr_fails_the_account_check(fake: FakeSlurm, workspace: Path) -> None:
    fake.fail("sacctmgr")
    report = probe(fake, cluster_of(workspace))

    assert report.check("account").status == "failed"
    assert "cannot read the associations of user 'root'" in report.check("account").detail


@pytest.mark.parametrize(
    ("sinfo", "expected"),
    [
        ("cpu*|up|infinite|4|idle|node[1-4]|4|4000|(null)\ngpu|up|infinite|2|idle|node[1-2]|4|4000|gpu:2\n"
         "gpu|up|infinite|2|idle|node[3-4]|4|4000|gpu:a100:4(S:0-1)\n",
         "differ in GPUs per node: 2 on node[1-2], 4 on node[3-4]"),
        ("cpu*|up|infinite|4|idle|node[1-4]|4|4000|(null)\ngpu|up|infinite|4|idle|node[1-4]|4|4000|(null)\n",
         "the nodes of partition 'gpu' have no GPU GRES"),
    ],
)  # fmt: skip
def test_gpus_that_cannot_be_resolved_fail(fake: FakeSlurm, workspace: Path, sinfo: str, expected: str) -> None:
    report = probe(fake, cluster_of(workspace), ComputeNode(fake, replace_output={"sinfo": sinfo}))

    assert report.check("gpus_per_node").status == "failed"
    assert expected in report.check("gpus_per_node").detail
    assert report.gpus_per_node_resolved is None


def test_a_partition_that_is_down_fails(fake: FakeSlurm, workspace: Path) -> None:
    sinfo = "cpu*|down|infinite|4|down|node[1-4]|4|4000|gpu:2\ngpu|up|infinite|4|idle|node[1-4]|4|4000|gpu:2\n"
    report = probe(fake, cluster_of(workspace), ComputeNode(fake, replace_output={"sinfo": sinfo}))

    assert report.check("cpu_partition").status == "failed"
    assert report.check("cpu_partition").detail == "partition 'cpu' is down, not up"
    assert report.check("probe_job").status == "not_run"


@pytest.mark.parametrize("kind", ["regular_file", "missing", "unwritable"])
def test_an_unusable_workspace_fails_and_no_job_runs(fake: FakeSlurm, tmp_path: Path, kind: str) -> None:
    if kind == "regular_file":
        root = tmp_path / "file"
        root.write_text("not a directory", encoding="utf-8")
        expected = "is not a directory"
    elif kind == "missing":
        root = tmp_path / "missing"
        expected = "does not exist"
    else:
        root = Path("/proc")  # a directory in which nobody, root included, can create one
        expected = "cannot create '/proc/.probe/"
    report = probe(fake, cluster_of(root))

    check = report.check("workspace")
    assert check.status == "failed"
    assert expected in check.detail
    assert check.key_path == ("clusters", "local", "workspace_root")
    assert report.check("probe_job").detail == "the workspace check failed: no job was submitted"
    assert report.check("shared_workspace").status == "not_run"


def test_a_workspace_the_compute_node_does_not_see_fails_shared_workspace(
    fake: FakeSlurm, workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "node-local"
    elsewhere.mkdir()
    report = probe(fake, cluster_of(workspace), ComputeNode(fake, sees=(str(workspace), str(elsewhere))))

    assert report.check("probe_job").status == "ok"
    check = report.check("shared_workspace")
    assert check.status == "failed"
    assert f"job 1000 ran on node1 but its token '{workspace}/.probe/{PROBE_ID}/token' is missing" in check.detail
    assert report.check("compute_runtime").status == "not_run"
    assert (workspace / ".probe" / PROBE_ID).is_dir(), "a failed job probe keeps its directory as evidence"


def test_a_compute_python_with_another_version_fails(fake: FakeSlurm, workspace: Path, tmp_path: Path) -> None:
    python = tmp_path / "old-python"
    python.write_text("#!/bin/sh\necho 0.9.0\n", encoding="utf-8")
    python.chmod(0o755)
    report = probe(fake, cluster_of(workspace, compute_python={"interpreter": str(python)}))

    check = report.check("compute_runtime")
    assert check.status == "failed"
    assert check.detail == f"{python} imports data-designer-slurm-runtime 0.9.0, expected {__version__}"
    assert check.key_path == ("clusters", "local", "compute_python", "interpreter")
    assert check.hint == f"install data-designer-slurm=={__version__} into the environment of {python}"


def test_a_compute_python_without_the_runtime_fails_with_its_error(
    fake: FakeSlurm, workspace: Path, tmp_path: Path
) -> None:
    python = tmp_path / "bare-python"
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'data_designer'\" >&2\nexit 1\n")
    python.chmod(0o755)
    report = probe(fake, cluster_of(workspace, compute_python={"interpreter": str(python)}))

    check = report.check("compute_runtime")
    assert check.status == "failed"
    assert (
        check.detail == f"{python} exited 1 on the compute node: ModuleNotFoundError: No module named 'data_designer'"
    )


def test_a_missing_compute_python_fails(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, compute_python={"interpreter": "/nonexistent/bin/python"}))

    check = report.check("compute_runtime")
    assert check.status == "failed"
    assert "/nonexistent/bin/python was not found or is not executable on the compute node" in check.detail


def test_a_compute_image_is_not_run(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, compute_python={"image": "dd-client"}))

    assert report.check("shared_workspace").status == "ok"
    check = report.check("compute_runtime")
    assert check.status == "not_run"
    assert "compute_python is the image 'dd-client'" in check.detail
    assert "python" not in probe_script("/ws", "x", None)


def test_a_job_that_never_starts_times_out_and_is_cancelled(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace), ComputeNode(fake, directive="pending=100000"), timeout_s=30)

    check = report.check("probe_job")
    assert check.status == "failed"
    assert check.detail == "job 1000 did not finish within 30s (still pending); it was cancelled"
    assert fake.jobs[1000].tasks[0].state == "CANCELLED by 0"
    assert report.check("shared_workspace").detail == "the probe_job check failed: no token to read back"
    assert 30 <= report.duration_s < 40
    polls = fake.count_calls("squeue")
    assert 5 <= polls <= 20, f"backoff keeps polling bounded: {polls} squeue calls in 30 s"


def test_an_interrupted_probe_cancels_its_job(fake: FakeSlurm, workspace: Path) -> None:
    def interrupt(seconds: float) -> None:
        if fake.jobs:
            raise KeyboardInterrupt
        fake.sleep(seconds)

    runner = ComputeNode(fake, directive="pending=100000")
    with pytest.raises(KeyboardInterrupt):
        probe_cluster("local", cluster_of(workspace), runner=runner, clock=fake.clock, sleep=interrupt, user="root")

    assert fake.jobs[1000].tasks[0].state == "CANCELLED by 0"


def test_a_job_that_fails_fails_probe_job(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace), ComputeNode(fake, directive="exit=3"))

    check = report.check("probe_job")
    assert check.status == "failed"
    assert check.detail.startswith("job 1000 ended failed (exit code 3) on node1")


def test_a_rejected_submission_fails_probe_job(fake: FakeSlurm, workspace: Path) -> None:
    fake.fail("sbatch")  # '--version' still starts: the command is there, the controller refuses
    report = probe(fake, cluster_of(workspace))

    assert report.check("slurm_commands").status == "ok"
    check = report.check("probe_job")
    assert check.status == "failed"
    assert check.detail.startswith("the probe job was not submitted: cannot submit")
    assert report.job_id is None


def test_missing_commands_fail_slurm_commands_and_block_the_job(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace), OutageRunner(ComputeNode(fake), down=["sbatch", "scancel"]))

    check = report.check("slurm_commands")
    assert check.status == "failed"
    assert check.detail == "not found on PATH: sbatch, scancel"
    assert report.check("probe_job").detail == "the slurm_commands check failed: no job was submitted"


def test_a_failing_scontrol_fails_controller_but_the_rest_runs(fake: FakeSlurm, workspace: Path) -> None:
    fake.fail("scontrol")
    report = probe(fake, cluster_of(workspace))

    assert [c.name for c in report.not_ok()] == ["controller"]
    assert report.slurm_cluster is None


def test_a_failing_sinfo_fails_both_partitions(fake: FakeSlurm, workspace: Path) -> None:
    fake.fail("sinfo")
    report = probe(fake, cluster_of(workspace))

    assert report.check("gpu_partition").status == "failed"
    assert report.check("gpu_partition").detail.startswith("sinfo failed: ")
    assert report.check("gpus_per_node").status == "not_run"
    assert report.check("probe_job").status == "not_run"


@pytest.mark.parametrize("mode", ["error", "timeout", "not_found"])
def test_slurm_that_cannot_be_reached_raises_unavailable(fake: FakeSlurm, workspace: Path, mode: Any) -> None:
    fake.fail("scontrol", mode)
    fake.fail("sinfo", mode)
    with pytest.raises(UnavailableError) as caught:
        probe(fake, cluster_of(workspace))

    assert caught.value.exit_code == 5
    assert caught.value.info.code == "slurm_unreachable"
    assert not (workspace / ".probe").exists()
    if mode == "timeout":
        assert fake.count_calls("sinfo") == 1, "after scontrol timed out only 'sinfo --version' ran"


def test_the_failed_report_becomes_one_problem_per_check_not_ok(fake: FakeSlurm, workspace: Path) -> None:
    report = probe(fake, cluster_of(workspace, account="nope"))
    error = ProbeFailedError(report, file="/p.yaml")

    assert error.exit_code == 6
    assert error.report is report
    assert error.info.code == "probe_failed"
    assert [p.code for p in error.problems] == [
        "probe_account_failed",
        "probe_probe_job_not_run",
        "probe_shared_workspace_not_run",
        "probe_compute_runtime_not_run",
    ]
    assert error.problems[0].key_path == ("clusters", "local", "account")
    assert error.problems[0].message.startswith("probe check 'account' failed: user 'root' may not use account 'nope'")
    assert ProbeReport.model_validate_json(report.model_dump_json()) == report


# -- GRES -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        (None, 0),
        ("(null)", 0),
        ("gpu:2", 2),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:a100:2(S:0,1),gpu:v100:2(S:1)", 4),
        ("shard:8,gpu:tesla:8", 8),
        ("gpu", 1),
        ("gpu:nvidia-h100", 1),
        ("mps:400", 0),
    ],
)
def test_gpus_in_gres(gres: str | None, gpus: int) -> None:
    assert gpus_in_gres(gres) == gpus


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["gpu", "shard", "mps"]), st.sampled_from(["", ":a100", ":h100-80g"]), st.integers(0, 64)
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_gpus_in_gres_sums_the_gpu_items(items: list[tuple[str, str, int]], sockets: bool) -> None:
    text = ",".join(f"{name}{kind}:{count}" + ("(S:0-1)" if sockets else "") for name, kind, count in items)
    assert gpus_in_gres(text) == sum(count for name, _, count in items if name == "gpu")


@given(st.text(max_size=60))
def test_gpus_in_gres_reads_or_rejects_any_text(text: str) -> None:
    with contextlib.suppress(ValueError):  # the only way to refuse: the probe turns it into a failed check
        assert gpus_in_gres(text) >= 0
