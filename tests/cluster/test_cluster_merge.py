"""``data-designer slurm merge`` on the real local Slurm cluster, each call a fresh process of the installed CLI.

One 3-shard run (4 records a shard, one record per request) is steered by a marker file read when each server
starts (as in ``test_cluster_retry.py``): shard 1's server answers slowly, and shard 1 is cancelled with
``cancel --shard 1`` once it published a record. Then:

- ``merge`` is refused (exit 6, shard 1 cancelled), and ``merge --allow-partial`` records exactly the missing
  ranges ``status`` shows;
- the marker removed, ``retry`` finishes shard 1 in a second attempt over the indices the first left: shard 1 is
  two attempts with disjoint ranges. ``merge`` then yields the run's record count, ``_dd_index`` 0..N-1 once, and
  the values of the parts (read here with pyarrow); ``load_dataset`` gives the same rows;
- a flipped byte in the retry's part makes a merge into a new ``--output`` exit 6 naming the shard and the file,
  with nothing under that name.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from data_designer.slurm.contracts import ErrorInfo, MergeResult, RunStatus
from data_designer.slurm.contracts.records import (
    ATTEMPT_COLUMN,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    MERGE_MANIFEST_SCHEMA,
    PROGRESS_SCHEMA,
    STATUS_SCHEMA,
    IndexRange,
    MergeManifest,
    OutputManifest,
)
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, attempt_numbers, read_record
from data_designer.slurm.runtime.testing import run_logs, writer_run
from data_designer.slurm.services import load_dataset

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

pq: Any = importlib.import_module("pyarrow.parquet")  # pyarrow.parquet has no type hints
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 3
SHARD_RECORDS = 4
RECORDS = SHARDS * SHARD_RECORDS
SLOW_LATENCY_S = 2.0
WAIT_S = 180
CLI_TIMEOUT_S = 120
FLIPPED = "shards/00001/attempts/0002/output/part-00000.parquet"

SERVER_WRAPPER = """#!/bin/bash
# The test server; slow-<task> in {markers} makes it answer every request after {latency} s.
task="${{SLURM_ARRAY_TASK_ID:-}}"
if [ -e "{markers}/slow-$task" ]; then exec "$@" --latency-s {latency}; fi
exec "$@"
"""


@dataclass
class Call:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"{' '.join(self.argv)}: exit {self.code}\n{self.stdout}\n{self.stderr}"

    def merged(self) -> MergeResult:
        assert self.code == 0, self.describe()
        return MergeResult.model_validate_json(self.stdout)

    def error(self) -> ErrorInfo:
        return ErrorInfo.model_validate_json(self.stderr)


@dataclass
class Story:
    layout: RunLayout
    refused: Call
    partial_status: RunStatus
    partial: Call
    retried: Call
    merged: Call
    expected: dict[int, dict[str, Any]]
    frame: Any
    flipped: Call
    flipped_output: Path


def merge_run_document(wrapper: Path) -> dict[str, Any]:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": 1, "concurrency": {"writer": 1}}
    submission = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10}
    run = writer_run(
        "merged",
        records=RECORDS,
        shards=SHARDS,
        replicas=1,
        gpus_per_replica=0,
        client=client,
        submission=submission,
    )
    deployment = run["deployments"]["writer"]
    deployment["argv"] = [str(wrapper), *deployment["argv"]]
    return run


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> Iterator[Story]:
    root = tmp_path_factory.mktemp("merge")
    markers = root / "markers"
    markers.mkdir()
    wrapper = root / "server-wrapper"
    wrapper.write_text(SERVER_WRAPPER.format(markers=markers, latency=SLOW_LATENCY_S), encoding="utf-8")
    wrapper.chmod(0o755)
    (markers / "slow-1").touch()
    directory = root / "run"
    layout, result = e2e.execute(directory, local_slurm, merge_run_document(wrapper), sys.executable)
    slurm_env: dict[str, str] = e2e.slurm_env(local_slurm)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**slurm_env, "HOME": str(directory / "home"), "COLUMNS": "200"})

    def cli(verb: str, *flags: str) -> Call:
        profile = str(directory / "profile.yaml")
        argv = (str(DATA_DESIGNER), "slurm", verb, result.run_id, "--profile", profile, *flags)
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S + WAIT_S, check=False
        )
        return Call(argv, done.returncode, done.stdout, done.stderr)

    def wait_for(what: str, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not predicate():
            assert time.monotonic() < deadline, f"{what} not within {WAIT_S}s\n{run_logs(layout, tail_chars=1500)}"
            time.sleep(0.5)

    def generating() -> bool:
        ended = read_record(layout.status(1, 1), STATUS_SCHEMA)
        assert not isinstance(ended, RecordOk), f"shard 1 ended before it was cancelled: {ended.payload}"
        progress = read_record(layout.progress(1, 1), PROGRESS_SCHEMA)
        return isinstance(progress, RecordOk) and progress.payload.records_done >= 1

    def ended(call: Call, code: int) -> None:
        assert call.code == code, f"{call.describe()}\n{run_logs(layout, tail_chars=1500)}"

    try:
        wait_for("shard 1's first record", generating)
        ended(cli("cancel", "--shard", "1", "--json"), 0)
        ended(cli("wait", "--timeout", str(WAIT_S), "--interval", "1", "--json"), 6)
        refused = cli("merge", "--json")
        status_call = cli("status", "--json")
        ended(status_call, 0)
        partial = cli("merge", "--allow-partial", "--json")

        (markers / "slow-1").unlink()
        retried = cli("retry", "--json")
        ended(retried, 0)
        ended(cli("wait", "--timeout", str(WAIT_S), "--interval", "1", "--json"), 0)
        merged = cli("merge", "--json")
        expected = expected_rows(layout)
        frame = load_dataset(layout.run_dir, environ=env)

        part = layout.run_dir / FLIPPED
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 0x01
        part.write_bytes(bytes(data))
        flipped_output = root / "flipped"
        flipped = cli("merge", "--output", str(flipped_output), "--json")
        yield Story(
            layout=layout,
            refused=refused,
            partial_status=RunStatus.model_validate_json(status_call.stdout),
            partial=partial,
            retried=retried,
            merged=merged,
            expected=expected,
            frame=frame,
            flipped=flipped,
            flipped_output=flipped_output,
        )
    finally:
        job_ids = sorted({job.job_id for job in result.jobs})
        SlurmScheduler(SubprocessRunner(overrides=slurm_env)).cancel(job_ids, confirm_timeout_s=60)


def path_of(value: str | None) -> Path:
    assert value is not None, "a merge run here names its directory and manifest"
    return Path(value)


def merge_manifest(result: MergeResult) -> MergeManifest:
    found = read_record(path_of(result.manifest), MERGE_MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk), found
    return found.payload


def valid_manifests(layout: RunLayout, shard: int) -> dict[int, OutputManifest]:
    manifests = {}
    for attempt in attempt_numbers(layout.attempts_dir(shard)):
        found = read_record(layout.output_manifest(shard, attempt), MANIFEST_SCHEMA)
        if isinstance(found, RecordOk):
            manifests[attempt] = found.payload
    return manifests


def expected_rows(layout: RunLayout) -> dict[int, dict[str, Any]]:
    """Every record of the run by global index, read from the parts of every valid manifest (before the flip)."""
    rows: dict[int, dict[str, Any]] = {}
    for shard in range(SHARDS):
        for manifest in valid_manifests(layout, shard).values():
            output = layout.output_dir(shard, manifest.attempt)
            for part in manifest.parts:
                for row in pq.read_table(output / part.path).to_pylist():
                    assert row[INDEX_COLUMN] not in rows, f"index {row[INDEX_COLUMN]} published twice"
                    rows[row[INDEX_COLUMN]] = row
    return rows


def test_a_partial_run_is_refused_and_allow_partial_records_the_ranges_status_shows(story: Story) -> None:
    assert story.refused.code == 6, story.refused.describe()
    refusal = story.refused.error()
    assert refusal.code == "run_incomplete"
    assert "1 (cancelled" in refusal.message, refusal

    missing = {shard.shard: shard.missing for shard in story.partial_status.shards if shard.missing}
    assert list(missing) == [1], story.partial_status.model_dump_json(indent=1)
    result = story.partial.merged()
    assert not result.complete
    assert result.missing == missing[1]
    assert result.missing_shards == (1,)
    manifest = merge_manifest(result)
    assert (manifest.missing, manifest.missing_shards, manifest.complete) == (missing[1], (1,), False)
    assert result.records == RECORDS - sum(r.records for r in missing[1])
    assert path_of(result.merge_dir) == story.layout.merge_dir / "0001"


def test_a_retried_run_merges_every_record_once_with_the_parts_values(story: Story) -> None:
    layout = story.layout
    manifests = valid_manifests(layout, 1)
    assert sorted(manifests) == [1, 2], "shard 1: the cancelled attempt and the retry's"
    first, second = manifests[1].ranges, manifests[2].ranges
    assert first, "the cancelled attempt published records"
    assert second, "the retry published the rest"
    covered = [i for r in (*first, *second) for i in range(*r)]
    assert sorted(covered) == list(range(SHARD_RECORDS, 2 * SHARD_RECORDS)), "disjoint, and the whole shard"

    result = story.merged.merged()
    assert (result.outcome, result.complete, result.records, result.records_total) == ("merged", True, RECORDS, RECORDS)
    assert path_of(result.merge_dir) == layout.merge_dir / "0002", "new evidence: a new merge"
    manifest = merge_manifest(result)
    assert manifest.ranges == (IndexRange(0, RECORDS),)
    assert sorted({s.attempt for s in manifest.sources if s.shard == 1}) == [1, 2], "shard 1 from both attempts"
    merge_dir = path_of(result.merge_dir)
    table = pa.concat_tables([pq.read_table(merge_dir / f.path) for f in manifest.files])
    assert table.num_rows == RECORDS
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(RECORDS))
    assert table.to_pylist() == [story.expected[i] for i in range(RECORDS)]
    assert set(table.column(ATTEMPT_COLUMN).to_pylist()[SHARD_RECORDS : 2 * SHARD_RECORDS]) == {1, 2}

    assert story.frame[INDEX_COLUMN].tolist() == list(range(RECORDS))
    assert story.frame.to_dict("records") == table.to_pandas().to_dict("records")


def test_a_flipped_byte_fails_the_merge_naming_shard_and_file_and_nothing_is_published(story: Story) -> None:
    assert story.flipped.code == 6, story.flipped.describe()
    error = story.flipped.error()
    assert error.code == "part_invalid"
    assert "shard 1 attempt 2" in error.message
    assert error.file == FLIPPED
    assert FLIPPED in error.message
    assert not story.flipped_output.exists()
    assert not [p for p in story.flipped_output.parent.iterdir() if p.name.startswith(".merge-")]
