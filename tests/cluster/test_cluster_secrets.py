"""Secrets reach the job by environment-variable name only, on the real local cluster.

One run whose profile names ``HF_TOKEN`` (the deployed test server refuses to start without it, like a gated
model) and whose external alias takes its key from ``EXTERNAL_KEY`` (a key-checking test server on the login
node). The deployed server also checks the per-attempt key on loopback. The shard must succeed, and neither value
may appear in any file under the workspace (records, snapshots, Slurm's and our logs) or on any process's command
line while the run goes on; without ``HF_TOKEN`` in the submitting shell, ``execute`` is exit 2 before anything is
written or submitted.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.contracts.records import RUN_SCHEMA, STATUS_SCHEMA
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import TEST_SERVER, closed_port, run_logs

pytestmark = [pytest.mark.cluster]

HF_TOKEN = "hf_" + secrets.token_hex(16)
EXTERNAL_KEY = "nvapi-" + secrets.token_hex(16)


@pytest.fixture
def external_server(tmp_path: Path) -> Iterator[str]:
    """A test server on the login node that answers only ``Bearer $EXTERNAL_KEY``; yields its base URL."""
    port = closed_port()
    argv = [*TEST_SERVER, "--host", "127.0.0.1", "--port", str(port), "--model", "e2e-critic"]
    argv += ["--replica-id", "external", "--api-key-env", "EXTERNAL_KEY"]
    log = (tmp_path / "external.log").open("wb")
    process = subprocess.Popen(argv, env={**os.environ, "EXTERNAL_KEY": EXTERNAL_KEY}, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    break
            except OSError:
                assert process.poll() is None, "the external server exited"
                assert time.monotonic() < deadline, "the external server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def run_document(e2e: ModuleType, endpoint: str) -> dict[str, Any]:
    flags = ("--api-key-env", "{api_key_env}", "--require-env", "HF_TOKEN")
    writer = e2e.server("writer", replicas=1, gpus=1, flags=flags)
    return {
        "schema_version": 1,
        "name": "secrets",
        "data_designer": {"inline": e2e.CONFIG},
        "records": 6,
        "sharding": {"shards": 1},
        "deployments": {"writer": writer},
        "external": {"critic": {"endpoint": endpoint, "api_key_env": "EXTERNAL_KEY", "model": "e2e-critic"}},
        "client": {"batch_size": 6, "cpus": 1, "memory_gb": 1},
        "submission": {"time_limit": "00:15:00", "warning_lead_s": 60, "drain_grace_s": 30},
    }


def prepare(directory: Path, e2e: ModuleType, local_slurm: Mapping[str, str], endpoint: str) -> list[str]:
    profile = e2e.write_profile(directory, local_slurm, sys.executable)
    text = profile.read_text(encoding="utf-8")
    assert "    environment: []\n" in text
    profile.write_text(text.replace("    environment: []\n", "    environment: [HF_TOKEN]\n"), encoding="utf-8")
    run_file = directory / "run.json"
    run_file.write_text(json.dumps(run_document(e2e, endpoint)), encoding="utf-8")
    (directory / "home").mkdir(exist_ok=True)
    return [str(e2e.DATA_DESIGNER), "slurm", "execute", str(run_file), "--profile", str(profile), "--json"]


def shell(directory: Path, local_slurm: Mapping[str, str], e2e: ModuleType, **named: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env = {k: v for k, v in env.items() if k not in ("HF_TOKEN", "EXTERNAL_KEY")}
    return {**env, **e2e.slurm_env(local_slurm), "HOME": str(directory / "home"), **named}


class CommandLineWatch:
    """Reads every process's command line until stopped, collecting those holding a secret."""

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = tuple(v.encode() for v in values)
        self.found: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> CommandLineWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if any(value in cmdline for value in self.values):
                    self.found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            self.scans += 1
            self._stop.wait(0.05)


def test_named_secrets_reach_the_job_by_name_only_and_an_unset_one_is_refused(
    tmp_path: Path, e2e: ModuleType, local_slurm: dict[str, str], external_server: str
) -> None:
    command = prepare(tmp_path, e2e, local_slurm, external_server)
    workspace = tmp_path / "ws"

    refused = subprocess.run(
        command, env=shell(tmp_path, local_slurm, e2e, EXTERNAL_KEY=EXTERNAL_KEY), capture_output=True, text=True
    )
    assert refused.returncode == 2, refused.stderr
    error = json.loads(refused.stderr)
    assert (error["code"], error["key_path"]) == ("environment_unset", ["environment"])
    assert "HF_TOKEN" in error["message"]
    assert not (workspace / "runs").exists(), "nothing written before the refusal"

    env = shell(tmp_path, local_slurm, e2e, HF_TOKEN=HF_TOKEN, EXTERNAL_KEY=EXTERNAL_KEY)
    with CommandLineWatch((HF_TOKEN, EXTERNAL_KEY)) as watch:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        layout = RunLayout.of(workspace, result["run_id"])
        deadline = time.monotonic() + 180
        while not isinstance(found := read_record(layout.status(0, 1), STATUS_SCHEMA), RecordOk):
            assert time.monotonic() < deadline, run_logs(layout, tail_chars=1500)
            time.sleep(0.5)
    assert found.payload.status == "succeeded", run_logs(layout, tail_chars=1500)
    assert watch.scans > 10
    assert watch.found == [], "a secret on a command line"

    files = [path for path in tmp_path.rglob("*") if path.is_file() and path.name != "external.log"]
    assert any(path.name.startswith("slurm-") for path in files), "Slurm's own logs are searched too"
    holding = [str(p) for p in files if HF_TOKEN.encode() in p.read_bytes() or EXTERNAL_KEY.encode() in p.read_bytes()]
    assert holding == []
    plan = json.loads(layout.plan_record.read_text())
    assert plan["submission"]["environment"] == ["HF_TOKEN", "EXTERNAL_KEY"]
    record = read_record(layout.run_record, RUN_SCHEMA)
    assert isinstance(record, RecordOk)
    assert "--export=ALL,HF_TOKEN,EXTERNAL_KEY" in record.payload.unit.sbatch_args
