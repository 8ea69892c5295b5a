"""The real Data Designer client generates records against the stub server, with no network beyond loopback.

The stub runs as its own process through its CLI (``stub_server_argv``), with an API key passed by
environment name, exactly as a supervisor starts it. The host runs in a child process with HOME in a
temporary directory, an empty tiktoken cache and every proxy variable pointing at a closed local port
(``NO_PROXY`` exempts loopback), so any attempt to leave the machine fails at once: the post-generation
profiler's tokenizer download fails and is only logged, and generation must still succeed.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.runtime.testing import StubServerConfig, stub_server_argv

pytestmark = pytest.mark.host

MODEL = "stub/writer-8b"

HOST_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path

    import data_designer.config as dd
    from data_designer.config.models import ModelProvider
    from data_designer.config.run_config import RunConfig
    from data_designer.interface.data_designer import DataDesigner

    endpoint, model, records, kinds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])
    builder = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="writer", model=model, provider="stub-local")]
    )
    builder.add_column(
        dd.SamplerColumnConfig(
            name="topic", sampler_type="category", params=dd.CategorySamplerParams(values=["rivers", "mountains"])
        )
    )
    builder.add_column(dd.LLMTextColumnConfig(name="text", prompt="Write about {{ topic }}.", model_alias="writer"))
    if kinds == "all":
        schema = {"type": "object", "properties": {"title": {"type": "string"}, "rank": {"type": "integer", "minimum": 1}},
                  "required": ["title", "rank"]}
        builder.add_column(dd.LLMStructuredColumnConfig(name="card", prompt="Describe {{ topic }}.", model_alias="writer",
                                                        output_format=schema))
        builder.add_column(dd.LLMCodeColumnConfig(name="code", prompt="Code about {{ topic }}.", model_alias="writer",
                                                  code_lang="python"))
        builder.add_column(dd.LLMJudgeColumnConfig(name="verdict", prompt="Judge: {{ text }}", model_alias="writer",
                                                   scores=[dd.Score(name="quality", description="How good",
                                                                    options={1: "poor", 2: "fine"})]))
    provider = ModelProvider(name="stub-local", endpoint=endpoint, provider_type="openai", api_key="STUB_API_KEY")
    designer = DataDesigner(out / "artifacts", model_providers=[provider])
    designer.set_run_config(RunConfig(otel_metrics_port=None))  # no metrics listener on 127.0.0.1:9464
    batches = []
    started = time.monotonic()
    results = designer.create(builder, num_records=records, dataset_name="stub-run",
                              on_batch_complete=lambda path: batches.append(time.monotonic() - started))
    finished = time.monotonic() - started
    frame = results.load_dataset()
    summary = {
        "records": len(frame),
        "columns": sorted(frame.columns),
        "rows": json.loads(frame.to_json(orient="records")),
        "generation_s": batches[-1],
        "create_s": finished,
    }
    (out / "summary.json").write_text(json.dumps(summary))
    """
)


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A stub replica subprocess with an API key; yields its /v1 endpoint, request log and an offline environment."""
    log = tmp_path / "requests.jsonl"
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "tiktoken").mkdir()
    dead = "http://127.0.0.1:9"
    env = {
        **os.environ,
        "HOME": str(home),
        "STUB_API_KEY": "local-secret",
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"),
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "ALL_PROXY": dead,
        "http_proxy": dead,
        "https_proxy": dead,
        "all_proxy": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    config = StubServerConfig(model=MODEL, replica_id="hostA", api_key="local-secret", request_log=log)
    argv = stub_server_argv(config, api_key_env="STUB_API_KEY")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(30), "the stub server printed no ready line within 30 s"
        line = process.stdout.readline().strip()
        assert line.startswith("ready 127.0.0.1:"), line
        yield f"http://127.0.0.1:{line.rsplit(':', 1)[1]}/v1", log, env
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr


def generate(tmp_path: Path, endpoint: str, env: dict[str, str], records: int, kinds: str) -> dict[str, Any]:
    script = tmp_path / "host_run.py"
    script.write_text(HOST_SCRIPT)
    argv = [sys.executable, str(script), endpoint, MODEL, str(records), kinds, str(tmp_path)]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "openaipublic.blob.core.windows.net" in result.stderr, "expected the offline tokenizer download to fail"
    summary: dict[str, Any] = json.loads((tmp_path / "summary.json").read_text())
    return summary


def requests_in(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_text_column_records_come_from_the_stub_replica(tmp_path: Path, stub: tuple[str, Path, dict[str, str]]) -> None:
    endpoint, log, env = stub
    summary = generate(tmp_path, endpoint, env, 20, "text")
    assert summary["records"] == 20
    assert summary["columns"] == ["text", "topic"]
    rows = summary["rows"]
    assert {row["topic"] for row in rows} <= {"rivers", "mountains"}
    assert all(row["text"].startswith("replica=hostA req=") for row in rows)
    assert all(len(row["text"].split()) == 16 for row in rows)
    texts_by_topic = {row["topic"]: row["text"] for row in rows}
    assert all(texts_by_topic[row["topic"]] == row["text"] for row in rows), "same prompt, same text"
    entries = requests_in(log)
    assert [entry["status"] for entry in entries] == [200] * 21, "one health check, then one request per record"
    assert entries[0]["request"]["messages"][-1]["content"][0]["text"] == "Hello!"
    assert {entry["request"]["model"] for entry in entries} == {MODEL}


@pytest.mark.slow
def test_structured_code_and_judge_columns_parse(tmp_path: Path, stub: tuple[str, Path, dict[str, str]]) -> None:
    endpoint, log, env = stub
    summary = generate(tmp_path, endpoint, env, 10, "all")
    assert summary["records"] == 10
    assert summary["columns"] == ["card", "code", "text", "topic", "verdict"]
    for row in summary["rows"]:
        assert row["card"]["title"].startswith("title replica=hostA req=")
        assert row["card"]["rank"] == 1
        assert row["code"].startswith("# replica=hostA req=")
        assert row["verdict"]["quality"]["score"] == 1
        assert "replica=hostA" in row["verdict"]["quality"]["reasoning"]
    assert len(requests_in(log)) == 1 + 10 * 4
