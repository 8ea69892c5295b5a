"""Errors through the real host CLI (subprocess): one JSON object or one ``error:`` line, never a Rich box or traceback.

Usage errors are raised by Click inside the host's own command tree, an internal error is injected into the
service the command calls, and a real SIGINT interrupts a command blocked on a Slurm command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_designer.slurm.contracts import PROFILE_ENV_VAR, ErrorCategory, ErrorInfo

pytestmark = pytest.mark.host

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: {root}
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: 4
    compute_python: {{interpreter: /opt/dd/bin/python}}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{alias: writer, model: m, provider: local}]
    columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
records: 10
sharding: {shards: 2}
deployments:
  writer: {engine: vllm, model: /models/llama}
"""

INJECT = """\
import sys
import data_designer.slurm.services as services
from data_designer.cli.main import main

def broken(*args, **kwargs):
    raise MemoryError("injected")

services.plan_run = broken
sys.argv = ["data-designer", *sys.argv[1:]]
main()
"""


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {PROFILE_ENV_VAR, "XDG_CONFIG_HOME"}}
    env.update({"HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1", **extra})
    return env


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    return subprocess.run(
        [str(DATA_DESIGNER), *args],
        env=environment(home),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    (path / "profile.yaml").write_text(PROFILE.format(root=tmp_path / "ws"), encoding="utf-8")
    (path / "run.yaml").write_text(RUN, encoding="utf-8")
    return path


def one_json_error(done: subprocess.CompletedProcess[str]) -> ErrorInfo:
    assert done.stdout == "", done.stdout
    assert len(done.stderr.splitlines()) == 1, done.stderr
    info = ErrorInfo.model_validate_json(done.stderr)
    assert info.exit_code == done.returncode
    return info


def test_a_usage_error_with_json_anywhere_is_one_json_object(home: Path) -> None:
    done = run(home, "slurm", "execute", "--json", "run.yaml", "--bogus")
    assert done.returncode == 2
    info = one_json_error(done)
    assert (info.code, info.operation, info.key_path) == ("usage_error", "execute", ("--bogus",))
    assert info.hint == "see 'data-designer slurm execute --help'"


def test_a_usage_error_without_json_is_one_line_without_a_box(home: Path) -> None:
    done = run(home, "slurm", "profile", "validate", "--probe-timeout", "0")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: --probe-timeout: ")
    assert line.endswith("(fix: see 'data-designer slurm profile validate --help')")


def test_an_injected_internal_error_is_one_json_object_without_traceback(home: Path) -> None:
    argv = ["slurm", "execute", "run.yaml", "--profile", "profile.yaml", "--dry-run", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", INJECT, *argv],
        env=environment(home),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    info = one_json_error(done)
    assert (info.category, info.message) == (ErrorCategory.INTERNAL, "internal error: MemoryError: injected")


def test_sigint_while_blocked_on_slurm_exits_130_with_one_json_object(home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "scontrol-started"
    for name in ("scontrol", "sinfo"):  # execute's first Slurm call, whichever it is, blocks
        command = bin_dir / name
        command.write_text(f"#!/bin/sh\ntouch '{started}'\nexec sleep 60\n", encoding="utf-8")
        command.chmod(0o755)
    env = environment(home, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    process = subprocess.Popen(
        [str(DATA_DESIGNER), "slurm", "execute", "run.yaml", "--profile", "profile.yaml", "--json"],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the fake scontrol never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    info = one_json_error(done)
    assert (info.category, info.code, info.operation) == (ErrorCategory.INTERRUPTED, "interrupted", "execute")
    assert not (tmp_path / "ws").exists()
