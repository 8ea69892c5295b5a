"""Real-cluster-only checks of the scheduler adapter: fake GPUs, real outages, cluster facts, rejections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ExitCode, InvalidInputError, UnavailableError
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.testing import ClusterHarness, CountingRunner
from data_designer.slurm.runtime.testing.conformance import all_in, batch_script, unit_of, wait_for

pytestmark = pytest.mark.cluster


def _since() -> datetime:
    return datetime.now(UTC) - timedelta(minutes=5)


def test_gpu_task_sees_its_assigned_devices(
    cluster_harness: ClusterHarness, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "gpu-%a.out"
    script = batch_script('echo "CVD=$CUDA_VISIBLE_DEVICES JOB_GPUS=$SLURM_JOB_GPUS"')
    args = (f"--partition={local_slurm['DDSLURM_GPU_PARTITION']}", "--gres=gpu:2", f"--output={out}")
    unit = unit_of([cluster_harness.unique_name("gpu")], script, array="0-1", extra_args=args, harness=cluster_harness)
    scheduler = cluster_harness.scheduler()
    job = scheduler.submit(unit, since=_since()).chunks[0].job_id
    wait_for(cluster_harness, scheduler, [job], lambda o: all_in(o, {"completed"}, 2), timeout_s=60)
    for index in (0, 1):
        text = (tmp_path / f"gpu-{index}.out").read_text(encoding="utf-8").strip()
        assert text == "CVD=0,1 JOB_GPUS=0,1", text


@pytest.mark.parametrize("broken", ["path", "slurm_conf"])
def test_unreachable_scheduler_is_exit_5_and_submits_nothing(
    cluster_harness: ClusterHarness, local_slurm: dict[str, str], tmp_path: Path, broken: str
) -> None:
    overrides = {"SLURM_CONF": local_slurm["SLURM_CONF"]}
    if broken == "path":
        overrides["PATH"] = str(tmp_path)  # no Slurm command on PATH
    else:
        overrides["SLURM_CONF"] = str(tmp_path / "missing.conf")  # the tools retry for 60 s: the timeout ends it
    runner = CountingRunner(SubprocessRunner(overrides=overrides))
    scheduler = SlurmScheduler(runner, timeout_s=2)
    name = cluster_harness.unique_name(f"down-{broken}")
    unit = unit_of([name], batch_script("true"), harness=cluster_harness)
    with pytest.raises(UnavailableError) as observed:
        scheduler.observe(["1"])
    assert observed.value.exit_code == ExitCode.UNAVAILABLE
    with pytest.raises(UnavailableError) as submitted:
        scheduler.submit(unit, since=_since())
    assert submitted.value.exit_code == ExitCode.UNAVAILABLE
    assert runner.count("sbatch") == 0
    assert cluster_harness.scheduler().find_submitted([name], since=_since()) == {}


def test_rejected_account_is_invalid_input(cluster_harness: ClusterHarness, local_slurm: dict[str, str]) -> None:
    args = (f"--account={local_slurm['DDSLURM_OTHER_ACCOUNT']}",)
    unit = unit_of(
        [cluster_harness.unique_name("acct")], batch_script("true"), extra_args=args, harness=cluster_harness
    )
    with pytest.raises(InvalidInputError) as caught:
        cluster_harness.scheduler().submit(unit, since=_since())
    assert caught.value.info.code == "sbatch_rejected"
    assert "account" in str(caught.value).lower()


def test_cluster_facts(cluster_harness: ClusterHarness, local_slurm: dict[str, str]) -> None:
    scheduler = cluster_harness.scheduler()
    config = scheduler.cluster_config()
    assert config["MaxArraySize"] == local_slurm["DDSLURM_MAX_ARRAY_SIZE"]
    assert config["ClusterName"] == local_slurm["DDSLURM_CLUSTER"]
    partitions = {p.name: p for p in scheduler.partitions()}
    assert partitions[local_slurm["DDSLURM_CPU_PARTITION"]].default
    assert partitions[local_slurm["DDSLURM_GPU_PARTITION"]].gres == "gpu:2"
    accounts = {a.account for a in scheduler.associations("root")}
    assert local_slurm["DDSLURM_ACCOUNT"] in accounts
    assert local_slurm["DDSLURM_OTHER_ACCOUNT"] not in accounts
