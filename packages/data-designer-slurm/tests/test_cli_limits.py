"""Bounded inputs through the CLI and services: hostile files and counts exit 2 at once, naming what and the cap.

A profile or run file that is ``/dev/zero`` behind a symbolic link, a FIFO, a directory or 50 MB of YAML;
counts far above their caps (``shards``, ``replicas``, ``repeats``, a sweep's children); a seed file above its
cap (refused before the run directory is made). Each CLI call runs in a thread joined with a timeout, so a
read that blocks or never ends fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import MAX_BENCHMARK_CHILDREN, MAX_REPEATS, MAX_SHARDS, InvalidInputError
from data_designer.slurm.runtime.store import run_id_factory
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run
from data_designer.slurm.services.plans import _seeds
from data_designer.slurm.services.runs import _execute

GUARD_S = 20.0

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "01:00:00"
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{{alias: writer, model: m, provider: local}}]
    columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
records: {records}
sharding: {{shards: {shards}}}
deployments:
  writer: {{engine: vllm, model: /models/llama, replicas: {replicas}}}
"""

BENCH = """\
schema_version: 1
name: sweep
base: {{run: {run}}}
axes:
  - {{axis: concurrency, alias: writer, values: [{values}]}}
  - {{axis: engine_arg, alias: writer, arg: max-num-seqs, values: [{values}]}}
repeats: {repeats}
records: {{policy: fixed, records: 10}}
"""


def _run_text(records: int = 100, shards: int = 4, replicas: int = 1) -> str:
    return RUN.format(records=records, shards=shards, replicas=replicas)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "profile.yaml").write_text(
        PROFILE.format(workspace=tmp_path / "ws", python=sys.executable), encoding="utf-8"
    )
    (tmp_path / "run.yaml").write_text(_run_text(), encoding="utf-8")
    return tmp_path


def _invoke(workdir: Path, *args: str) -> Result:
    runner = CliRunner(
        env={"HOME": str(workdir / "home"), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None}
    )
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(runner.invoke(app, list(args))), daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"{args} did not finish within {GUARD_S} s"
    return results[0]


def _dry_run(workdir: Path, run: Path, profile: Path) -> Result:
    return _invoke(workdir, "execute", str(run), "--profile", str(profile), "--dry-run")


def _refused(result: Result, *words: str) -> str:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: "), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _fifty_megabytes(path: Path) -> None:
    with path.open("wb") as stream:
        stream.write(b"# padding\n" * (5 * 2**20))


def _directory(path: Path) -> None:
    path.mkdir()


HOSTILE_FILES = {
    "dev_zero": (_dev_zero, "character device"),
    "fifo": (_fifo, "FIFO"),
    "fifty_megabytes": (_fifty_megabytes, "above the limit of 4 MiB"),
    "directory": (_directory, "directory"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_a_hostile_profile_is_refused_with_exit_2(workdir: Path, kind: str) -> None:
    make, words = HOSTILE_FILES[kind]
    profile = workdir / "hostile.yaml"
    make(profile)
    _refused(_dry_run(workdir, workdir / "run.yaml", profile), str(profile), words)


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_a_hostile_run_file_is_refused_with_exit_2(workdir: Path, kind: str) -> None:
    make, words = HOSTILE_FILES[kind]
    run = workdir / "hostile-run.yaml"
    make(run)
    stderr = _refused(_dry_run(workdir, run, workdir / "profile.yaml"), str(run), words)
    assert "run file" in stderr


def test_hostile_shards_and_replicas_are_refused_naming_the_keys_and_caps(workdir: Path) -> None:
    run = workdir / "big.yaml"
    run.write_text(_run_text(records=10**12, shards=10**7, replicas=10**9), encoding="utf-8")
    stderr = _refused(_dry_run(workdir, run, workdir / "profile.yaml"))
    lines = stderr.splitlines()
    assert any(f"{run}:8: sharding.shards: shards 10000000 is above the limit of {MAX_SHARDS:,}" in x for x in lines)
    assert any(
        f"{run}:10: deployments.writer.replicas: replicas 1000000000 is above the limit of 1,024" in x for x in lines
    )


def test_a_sweep_with_too_many_children_is_refused_before_expanding(workdir: Path) -> None:
    values = ", ".join(str(n) for n in range(1, 1001))
    bench = workdir / "bench.yaml"
    bench.write_text(BENCH.format(run=workdir / "run.yaml", values=values, repeats=10**9), encoding="utf-8")
    result = _invoke(workdir, "benchmark", "run", str(bench), "--profile", str(workdir / "profile.yaml"), "--dry-run")
    stderr = _refused(result, str(bench))
    assert f"repeats: repeats 1000000000 is above the limit of {MAX_REPEATS:,}" in stderr
    assert f"above the limit of {MAX_BENCHMARK_CHILDREN:,}" in stderr


def test_a_seed_file_above_its_cap_is_refused_before_the_run_directory_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = tmp_path / "seed.csv"
    seed.write_text("topic\na\nb\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        "model_configs: [{alias: writer, model: m, provider: local}]\n"
        f"seed_config: {{source: {{seed_type: local, path: {seed}}}, sampling_strategy: shuffle}}\n"
        'columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]\n',
        encoding="utf-8",
    )
    run = tmp_path / "run.yaml"
    run.write_text(
        f"schema_version: 1\nname: reviews\ndata_designer: {{config: {config}}}\nrecords: 10\nsharding: {{shards: 1}}\n"
        "deployments: {writer: {engine: vllm, model: /models/llama}}\n",
        encoding="utf-8",
    )
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=tmp_path / "ws", python=sys.executable), encoding="utf-8")
    monkeypatch.setattr(_seeds, "MAX_SEED_FILE_BYTES", 8)  # checked before the run directory is made
    monkeypatch.setattr(_execute, "MAX_SEED_FILE_BYTES", 8)  # and the bound of the copy
    created = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    with pytest.raises(InvalidInputError) as caught:
        execute_run(
            run,
            profile=profile,
            runner=FakeSlurm(max_array_size=11),
            clock=lambda: created,
            environ={},
            id_factory=run_id_factory(lambda: created, lambda: "abc123"),
        )
    assert caught.value.info.code == "file_too_large"
    assert caught.value.info.key_path == ("seed_config", "source", "path")
    assert str(seed) in caught.value.info.message
    assert "above the limit of 8 bytes" in caught.value.info.message
    assert not (tmp_path / "ws").exists()
