"""What the human renderers show of untrusted text (job logs, ``slurm-*.err``, scheduler errors): control and bidi
characters escaped, secrets redacted, CSV cells a spreadsheet cannot run as formulas; ``--json`` keeps the text."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.cli._benchmark_commands import render_analysis
from data_designer.slurm.cli._benchmark_commands import render_status as render_benchmark_status
from data_designer.slurm.cli._output import one_line, run, table
from data_designer.slurm.cli._runs_commands import render_runs
from data_designer.slurm.cli._status_commands import _Progress, render_csv, render_status
from data_designer.slurm.contracts import (
    AnalyzeResult,
    BenchmarkAnalysis,
    BenchmarkStatus,
    RunsList,
    RunStatus,
)
from data_designer.slurm.contracts.records import CLAIM_SCHEMA, STATUS_SCHEMA, ClaimOwner, StatusRecord
from data_designer.slurm.runtime.analysis import analysis_csv
from data_designer.slurm.runtime.store import RunLayout, run_id_factory, write_record_once
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run

HOSTILE = "boom \x1b[2J\x1b]0;pwned\x07 \x9b31m \u202eevil\u202c done"
"""A log line that clears the screen, retitles the terminal, uses a C1 CSI and reverses the text after it."""
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c")
SECRET_LINE = (
    "Authorization: Bearer abcdef0123456789abcdef sk-abcdefghijklmnop0123 hf_abcdefghijklmnop0123 "
    "api_key=AbC9xYz8WvU7tSr6QpO5nMl4 https://alice:hunter2@hub.example.com/x"
)
SECRETS = ("abcdef0123456789abcdef", "sk-abcdefghijklmnop0123", "hf_abcdefghijklmnop0123", "AbC9xYz8WvU7tSr6QpO5nMl4")

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

CONFIG = """\
model_configs:
  - {alias: writer, model: test-model, provider: local}
columns:
  - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer: {{config: {config}}}
records: 20
sharding: {{shards: 2}}
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
    """A run submitted to a fake Slurm whose shards end with the log tails a test gives."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        self.workspace = root / "workspace"
        (root / "in").mkdir(parents=True)
        config = root / "in" / "config.yaml"
        config.write_text(CONFIG)
        run_file = root / "in" / "run.yaml"
        run_file.write_text(RUN.format(config=config, python=sys.executable))
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable))
        result = execute_run(
            run_file,
            profile=self.profile,
            runner=self.fake,
            clock=self.fake.clock,
            environ={},
            id_factory=run_id_factory(self.fake.clock, token=lambda: "abc123"),
        )
        self.run_id = result.run_id
        self.layout = RunLayout.of(self.workspace, self.run_id)
        import data_designer.slurm.services.context._context as context_module

        fake = self.fake
        monkeypatch.setattr(context_module, "SubprocessRunner", lambda env=None: fake)
        self.fake.advance(4)

    def end(self, shard: int, *, message: str, last_line: str) -> None:
        job = json.loads(next(self.layout.submissions_dir.glob("*.json")).read_text())["payload"]["jobs"][0]["job_id"]
        now = self.fake.clock()
        owner = ClaimOwner(host="n1", pid=1, job_id=str(job), array_task=shard, attempt=1, time=now)
        write_record_once(self.layout.claim(shard, 1), CLAIM_SCHEMA, owner)
        record = StatusRecord(
            status="client_error",
            exit_code=3,
            message=message,
            log_tail=("line one", last_line),
            started_at=now,
            finished_at=now,
        )
        write_record_once(self.layout.status(shard, 1), STATUS_SCHEMA, record)

    def cli(self, *args: str) -> Any:
        return CliRunner().invoke(app, [*args, self.run_id, "--profile", str(self.profile)])


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


ModelT = TypeVar("ModelT", bound=BaseModel)


def _model(cls: type[ModelT], data: dict[str, Any]) -> ModelT:
    """``data`` read as ``cls`` reads it from JSON (lists for tuples)."""
    return cls.model_validate_json(json.dumps(data))


def printed(result: BaseModel, render: Callable[[Any], str], capsys: pytest.CaptureFixture[str]) -> str:
    """What a command prints for ``result`` rendered by ``render``, through the CLI's one printing boundary."""
    run("test", lambda: result, render, as_json=False, debug=False)
    return capsys.readouterr().out


def assert_escaped(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text)
    assert "\\x1b[2J" in text
    assert "\\u202e" in text


# --- terminal control sequences ---------------------------------------------------------------------------------


def test_one_line_escapes_c0_c1_and_bidi_controls_and_is_idempotent() -> None:
    escaped = one_line(HOSTILE)
    assert escaped == "boom \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m \\u202eevil\\u202c done"
    assert one_line(escaped) == escaped


def test_table_cells_are_escaped_and_aligned_by_what_is_printed() -> None:
    out = table(["A", "B"], [["\x1b[2J", "|"], ["abc", "!"]])
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[1].index("|") == lines[2].index("!") == len("\\x1b[2J  ")


def test_status_table_escapes_the_last_log_line_and_json_keeps_it(env: Env) -> None:
    env.end(0, message="client exited 3", last_line=HOSTILE)
    human = env.cli("status")
    assert human.exit_code == 0, human.output
    assert_escaped(human.stdout)
    as_json = env.cli("status", "--json")
    shard = RunStatus.model_validate_json(as_json.stdout).shards[0]
    assert shard.last_log_line == HOSTILE  # JSON escapes it itself: the text is kept
    assert "\\u001b[2J" in as_json.stdout


def test_status_reason_column_escapes_a_message_from_the_logs(env: Env) -> None:
    env.end(0, message=HOSTILE, last_line="plain")
    human = env.cli("status")
    assert_escaped(human.stdout)


def test_wait_escapes_its_final_table(env: Env) -> None:
    env.end(0, message="client exited 3", last_line=HOSTILE)
    result = env.cli("wait", "--timeout", "0")
    assert "wait: " in result.stdout
    assert_escaped(result.stdout)


def test_wait_progress_lines_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    status = _model(
        RunStatus,
        {
            "run_id": "r-1",
            "run_dir": "/ws/runs/r-1",
            "name": "r",
            "cluster": "c",
            "state": "running",
            "records_total": 10,
            "records_done": 0,
            "shards_total": 1,
            "counts": {"running": 1},
            "shards": (),
            "checked_at": "2026-12-02T00:00:00Z",
            "evidence": "live",
            "scheduler_calls": 1,
            "degraded": [{"source": "sacct", "status": "failed \x1b[2J \u202e", "hides": "ended jobs", "shards": []}],
        },
    )
    lines: list[str] = []
    _Progress(enabled=True, tty=False, echo=lines.append).show(status)
    assert lines
    for char in RAW:
        assert char not in lines[0]
    for char in RAW[:1] + RAW[3:4]:
        assert char not in printed(status, lambda r: render_status(r, True), capsys)


def test_status_scheduler_error_line_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    status = _model(
        RunStatus,
        {
            "run_id": "r-1",
            "run_dir": "/ws/runs/r-1",
            "name": "r",
            "cluster": "c",
            "state": "unknown",
            "records_total": 10,
            "records_done": 0,
            "shards_total": 1,
            "counts": {"unknown": 1},
            "shards": (),
            "checked_at": "2026-12-02T00:00:00Z",
            "evidence": "none",
            "scheduler_calls": 2,
            "scheduler_error": "squeue: " + HOSTILE,
        },
    )
    assert_escaped(printed(status, lambda r: render_status(r, False), capsys))


def test_runs_ls_escapes_problems_and_scheduler_errors(capsys: pytest.CaptureFixture[str]) -> None:
    listing = _model(
        RunsList,
        {
            "workspace": "/ws",
            "cluster": "c",
            "runs": [{"run_id": "bad-run", "run_dir": "/ws/runs/bad-run", "state": "unreadable", "problem": HOSTILE}],
            "total": 1,
            "hidden": 0,
            "refreshed": True,
            "scheduler_calls": 2,
            "scheduler_error": HOSTILE,
        },
    )
    assert_escaped(printed(listing, render_runs, capsys))


def test_benchmark_status_escapes_reasons_and_problems(capsys: pytest.CaptureFixture[str]) -> None:
    result = _model(
        BenchmarkStatus,
        {
            "benchmark_id": "sweep-0123456789ab",
            "benchmark_dir": "/ws/benchmarks/sweep-0123456789ab",
            "name": "sweep",
            "digest": "0" * 64,
            "cluster": "c",
            "benchmark_file": "/in/bench.yaml",
            "exclusive": True,
            "max_concurrent_children": 1,
            "children": [
                {
                    "index": 0,
                    "child_id": "c0",
                    "case": [["replicas.writer", 1]],
                    "repeat": 0,
                    "state": "failed",
                    "reason": HOSTILE,
                    "run_id": "r-1",
                    "run": {"run_id": "r-1", "run_dir": "/ws/runs/r-1", "state": "failed", "problem": HOSTILE},
                }
            ],
            "counts": {"failed": 1},
            "complete": False,
            "evidence": "live",
            "scheduler_calls": 2,
            "scheduler_error": HOSTILE,
        },
    )
    assert_escaped(printed(result, render_benchmark_status, capsys))


def _stat() -> dict[str, Any]:
    return {"mean": -1.5, "std": None, "n": 1}


def _analysis(reason: str, label: str = "replicas.writer") -> BenchmarkAnalysis:
    stats = {
        m: _stat()
        for m in (
            "records_per_s",
            "output_tokens_per_s",
            "requests_per_s",
            "records_per_s_per_gpu",
            "boot_s",
            "generation_s",
            "wall_s",
            "gpu_hours_per_1k",
        )
    }
    return _model(
        BenchmarkAnalysis,
        {
            "benchmark_id": "sweep-0123456789ab",
            "name": "sweep",
            "digest": "0" * 64,
            "axes": [label],
            "targets": {},
            "evidence_digest": "1" * 64,
            "complete": False,
            "children": [
                {
                    "index": 0,
                    "child_id": "c0",
                    "case_index": 0,
                    "repeat": 0,
                    "run_id": "r-1",
                    "state": "failed",
                    "reason": reason,
                    "measured": False,
                }
            ],
            "pareto": [],
            "cases": [
                {
                    "case_index": 0,
                    "case": [[label, 1]],
                    "children": [0],
                    "complete": False,
                    "reason": reason,
                    **stats,
                }
            ],
        },
    )


def test_benchmark_analyze_table_escapes_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    result = _model(
        AnalyzeResult,
        {
            "analysis": _analysis(HOSTILE).model_dump(mode="json"),
            "analysis_file": "/ws/a.json",
            "evidence": "live",
            "scheduler_calls": 2,
            "unknown_children": 0,
            "scheduler_error": HOSTILE,
        },
    )
    assert_escaped(printed(result, render_analysis, capsys))


# --- redaction of the last log line -----------------------------------------------------------------------------


def test_the_last_log_line_is_redacted_in_the_table_csv_and_json(env: Env) -> None:
    env.end(0, message="client exited 3", last_line=SECRET_LINE)
    for args in (("status",), ("status", "--json"), ("status", "--format", "csv"), ("wait", "--timeout", "0")):
        out = env.cli(*args).stdout
        for secret in (*SECRETS, "hunter2"):
            assert secret not in out, (args, secret, out)
        assert "<redacted>" in out, args
    shard = RunStatus.model_validate_json(env.cli("status", "--json").stdout).shards[0]
    assert shard.last_log_line is not None
    assert "https://<redacted>@hub.example.com/x" in shard.last_log_line


# --- CSV injection ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_text_neutralises_formula_prefixes(text: str) -> None:
    from data_designer.slurm.contracts import csv_text

    assert csv_text(text) == "'" + text


@pytest.mark.parametrize("text", ["", "plain", "a=b", "'quoted", "1-2"])
def test_csv_text_leaves_other_text_alone(text: str) -> None:
    from data_designer.slurm.contracts import csv_text

    assert csv_text(text) == text


def test_status_csv_neutralises_text_cells_from_logs(env: Env) -> None:
    env.end(0, message="=cmd|' /C calc'!A0", last_line="@SUM(1+1)*cmd|' /C calc'!A0")
    out = env.cli("status", "--format", "csv").stdout
    rows = {row["shard"]: row for row in csv.DictReader(io.StringIO(out))}
    assert rows["0"]["message"] == "'=cmd|' /C calc'!A0"
    assert rows["0"]["last_log_line"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert rows["0"]["records_done"] == "0"


def test_status_csv_keeps_numbers_numeric() -> None:
    status = _model(
        RunStatus,
        {
            "run_id": "r-1",
            "run_dir": "/ws/runs/r-1",
            "name": "r",
            "cluster": "c",
            "state": "failed",
            "records_total": 10,
            "records_done": 0,
            "shards_total": 1,
            "counts": {"failed": 1},
            "shards": [
                {
                    "shard": 0,
                    "state": "failed",
                    "records_total": 10,
                    "records_done": 0,
                    "missing": [],
                    "reason": "-x",
                    "message": "+y",
                    "job_id": "123",
                    "array_task": 0,
                }
            ],
            "checked_at": "2026-12-02T00:00:00Z",
            "evidence": "live",
            "scheduler_calls": 2,
        },
    )
    (row,) = csv.DictReader(io.StringIO(render_csv(status)))
    assert (row["reason"], row["message"], row["records_done"], row["array_task"]) == ("'-x", "'+y", "0", "0")


def test_analysis_csv_neutralises_reasons_and_keeps_negative_numbers() -> None:
    (row,) = csv.DictReader(io.StringIO(analysis_csv(_analysis("=1+1"))))
    assert row["reason"] == "'=1+1"
    assert row["records_per_s_mean"] == "-1.5"
    assert row["case"] == "replicas.writer=1"


def test_the_python_clients_escaping_is_the_clis() -> None:
    """Notebook reprs (``services.context.safe``) and the CLI (``one_line``) escape exactly alike: the CLI keeps its
    own copy only so that ``--help`` imports no services."""
    from data_designer.slurm.cli._output import one_line
    from data_designer.slurm.services.context import safe

    hostile = [
        "plain",
        "bell\x07 and escape \x1b[31mred\x1b[0m",
        "tab\tcr\rnl\n",
        "c1 \x85 \x9b",
        "bidi \u202e gnirts \u2066 \u200b",
        "line sep \u2028 para \u2029",
        "del \x7f",
        "émoji ✓ 漢字",
    ]
    for text in hostile:
        assert safe(text) == one_line(text), text
