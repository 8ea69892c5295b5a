"""The stub OpenAI-compatible server, run as the subprocess a supervisor would start, over real HTTP.

Every behaviour a supervisor or a router relies on is exercised on a real port: readiness (bound but
refusing until the start delay passed, then ``ready HOST:PORT`` and ``/health``), OpenAI response
shapes with whitespace-word usage, determinism across replicas, structured and code answers, API
keys, errors, latency, concurrency, and the injected failures (crash at start, once at start through a
claim file, crash after N, bind failure, SIGTERM handling).
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from data_designer.slurm.runtime.testing import closed_port
from data_designer.slurm.runtime.testing._test_server import (
    EXIT_BAD_ARGUMENTS,
    EXIT_BIND_FAILED,
    EXIT_CRASH_AT_START,
    EXIT_CRASHED,
    TEST_SERVER_MODULE,
    StubModelServer,
    StubServerConfig,
    instance_for_schema,
    request_digest,
    stub_server_argv,
)

MODEL = "stub/model-a"


@dataclass
class Replica:
    process: subprocess.Popen[str]
    port: int
    ready_line: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=10)
        return self.process.returncode, stderr


def spawn(config: StubServerConfig, *, env: dict[str, str] | None = None, api_key_env: str | None = None) -> Any:
    argv = stub_server_argv(config, api_key_env=api_key_env)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def read_line(stream: IO[str] | None, timeout_s: float) -> str:
    assert stream is not None
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"no line within {timeout_s} s")
    return stream.readline().strip()


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        if replica.process.poll() is None:
            replica.process.kill()
        replica.process.communicate(timeout=10)


@pytest.fixture(scope="module")
def shared() -> Iterator[Replica]:
    """One replica for the tests that only read (spawning costs about a second on a 2-core machine)."""
    started: list[Replica] = []
    yield start(started, "shared")
    code, stderr = started[0].stop()
    assert code == 0, stderr


def answered(replica: Replica) -> int:
    count: int = call(replica.url, "/health")[1]["requests_answered"]
    return count


def start(replicas: list[Replica], replica_id: str = "r1", **options: Any) -> Replica:
    api_key_env = options.pop("api_key_env", None)
    env = options.pop("env", None)
    config = StubServerConfig(model=MODEL, replica_id=replica_id, **options)
    replica = Replica(spawn(config, env=env, api_key_env=api_key_env), 0, "")
    replicas.append(replica)
    replica.ready_line = read_line(replica.process.stdout, 10 + config.start_delay_s)
    assert replica.ready_line.startswith("ready 127.0.0.1:"), replica.ready_line
    replica.port = int(replica.ready_line.rsplit(":", 1)[1])
    return replica


def call(url: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
    } | extra


def test_ready_line_health_and_models(replicas: list[Replica]) -> None:
    before = time.time()
    replica = start(replicas, "node1-r0")
    status, health = call(replica.url, "/health")
    assert status == 200
    assert health["status"] == "ok"
    assert health["replica_id"] == "node1-r0"
    assert health["model"] == MODEL
    assert before <= health["ready_at"] <= time.time()
    assert health["requests_answered"] == 0
    status, models = call(replica.url, "/v1/models")
    assert status == 200
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [MODEL]
    code, stderr = replica.stop()
    assert code == 0
    assert stderr.splitlines() == [
        f"stub-server node1-r0: bound 127.0.0.1:{replica.port}",
        f"stub-server node1-r0: model 'stub/model-a' ready_at {health['ready_at']}",
        "stub-server node1-r0: stopped",
    ]


def test_chat_completion_shape_usage_and_determinism(replicas: list[Replica]) -> None:
    first, second = start(replicas, "r1"), start(replicas, "r2")
    body = chat("write one short sentence about rivers")
    status, reply = call(first.url, "/v1/chat/completions", body)
    assert status == 200
    assert reply["object"] == "chat.completion"
    assert reply["model"] == MODEL
    message = reply["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert reply["choices"][0]["finish_reason"] == "stop"
    text = message["content"]
    words = text.split()
    assert words[0] == "replica=r1"
    assert words[1] == f"req={request_digest(body)[:12]}"
    assert len(words) == 16
    assert reply["usage"] == {"prompt_tokens": 2 + 6, "completion_tokens": 16, "total_tokens": 24}
    assert call(first.url, "/v1/chat/completions", body)[1]["choices"][0]["message"]["content"] == text
    other = call(second.url, "/v1/chat/completions", body)[1]["choices"][0]["message"]["content"]
    assert other.split() == ["replica=r2", *words[1:]]
    different = call(first.url, "/v1/chat/completions", chat("another prompt"))[1]["choices"][0]["message"]["content"]
    assert different.split()[1:] != words[1:]
    assert call(first.url, "/health")[1]["requests_answered"] == 3


def test_chat_limits_n_and_content_parts(replicas: list[Replica]) -> None:
    replica = start(replicas, max_tokens=6)
    body = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}], "n": 2}
    reply = call(replica.url, "/v1/chat/completions", body)[1]
    assert [choice["index"] for choice in reply["choices"]] == [0, 1]
    assert len(reply["choices"][0]["message"]["content"].split()) == 6
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15}
    cut = call(replica.url, "/v1/chat/completions", chat("x", max_tokens=3))[1]
    assert cut["choices"][0]["finish_reason"] == "length"
    assert len(cut["choices"][0]["message"]["content"].split()) == 3
    assert cut["usage"]["completion_tokens"] == 3


def test_text_completions_and_embeddings(shared: Replica) -> None:
    replica = shared
    status, reply = call(
        replica.url, "/v1/completions", {"model": MODEL, "prompt": ["one two", "three"], "max_tokens": 4}
    )
    assert status == 200
    assert reply["object"] == "text_completion"
    texts = [choice["text"] for choice in reply["choices"]]
    assert [t.split()[0] for t in texts] == ["replica=shared", "replica=shared"]
    assert texts[0] != texts[1]
    assert [choice["finish_reason"] for choice in reply["choices"]] == ["length", "length"]
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11}
    single = call(replica.url, "/v1/completions", {"model": MODEL, "prompt": "just one prompt"})[1]
    assert single["usage"] == {"prompt_tokens": 3, "completion_tokens": 16, "total_tokens": 19}
    assert single["choices"][0]["finish_reason"] == "stop"
    embedded = call(replica.url, "/v1/embeddings", {"model": MODEL, "input": ["a b", "c"]})[1]
    assert [len(item["embedding"]) for item in embedded["data"]] == [8, 8]
    assert embedded["usage"] == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}


def test_structured_and_code_answers(shared: Replica) -> None:
    replica = shared
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "score": {"type": "number", "exclusiveMinimum": 0.5},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "level": {"enum": ["low", "high"]},
            "nested": {"$ref": "#/$defs/Inner"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        },
        "$defs": {"Inner": {"type": "object", "properties": {"ok": {"const": True}}}},
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    reply = call(replica.url, "/v1/chat/completions", chat("a person", response_format=response_format))[1]
    content = reply["choices"][0]["message"]["content"]
    value = json.loads(content)
    assert value["name"] == "name replica"
    assert value["age"] == 18
    assert value["score"] == 1.5
    assert value["tags"][0].startswith("tags replica=shared req=")
    assert len(value["tags"]) == 2
    assert value["level"] == "low"
    assert value["nested"] == {"ok": True}
    assert isinstance(value["maybe"], bool)
    assert reply["usage"]["completion_tokens"] == len(content.split())
    as_object = call(replica.url, "/v1/chat/completions", chat("x", response_format={"type": "json_object"}))[1]
    assert json.loads(as_object["choices"][0]["message"]["content"])["replica_id"] == "shared"
    in_prompt = "Answer.\n<response_schema>\n" + json.dumps(schema) + "\n</response_schema>"
    fenced = call(replica.url, "/v1/chat/completions", chat(in_prompt))[1]["choices"][0]["message"]["content"]
    assert fenced.startswith("```json\n")
    assert fenced.endswith("\n```")
    assert json.loads(fenced.removeprefix("```json\n").removesuffix("\n```"))["level"] == "low"
    code_prompt = "* Your response must be code written in sql.\n* Only respond with a SINGLE code block."
    code = call(replica.url, "/v1/chat/completions", chat(code_prompt))[1]["choices"][0]["message"]["content"]
    assert code.startswith("```sql\n-- replica=shared ")
    assert code.endswith("\n```")


def test_instance_for_schema_edges() -> None:
    assert instance_for_schema({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5}, "r", "d" * 64) == 4
    assert instance_for_schema({"type": "number", "minimum": 2, "maximum": 1}, "r", "d" * 64) == 1.0
    assert instance_for_schema({"type": "string", "minLength": 40}, "r", "ab" * 32).endswith("x")
    assert instance_for_schema({"type": "string", "format": "date"}, "r", "d" * 64) == "2024-01-01"
    assert instance_for_schema({"type": ["null", "integer"]}, "r", "d" * 64) == 0
    merged = {"allOf": [{"properties": {"a": {"type": "boolean"}}}, {"type": "object"}]}
    assert set(instance_for_schema(merged, "r", "d" * 64)) == {"a"}
    recursive = {"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#"}}}}}
    assert isinstance(instance_for_schema(recursive, "r", "d" * 64), dict)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/nowhere", None, 404, "not_found"),
        ("POST", "/v1/nowhere", {"model": MODEL}, 404, "not_found"),
        ("POST", "/v1/chat/completions", b"{not json", 400, "bad_request"),
        ("POST", "/v1/chat/completions", b"[1, 2]", 400, "bad_request"),
        ("POST", "/v1/chat/completions", b"\xff\xfe", 400, "bad_request"),
        ("POST", "/v1/chat/completions", {"model": MODEL}, 400, "bad_request"),
        ("POST", "/v1/chat/completions", {"model": MODEL, "messages": [{"content": "no role"}]}, 400, "bad_request"),
        ("POST", "/v1/chat/completions", chat("x", max_tokens=0), 400, "bad_request"),
        ("POST", "/v1/chat/completions", chat("x", n=99), 400, "bad_request"),
        ("POST", "/v1/chat/completions", chat("x", stream=True), 400, "bad_request"),
        ("POST", "/v1/chat/completions", chat("x", response_format="json"), 400, "bad_request"),
        ("POST", "/v1/chat/completions", chat("x", model="other/model"), 404, "model_not_found"),
        ("POST", "/v1/completions", {"model": MODEL, "prompt": [1, 2]}, 400, "bad_request"),
        ("POST", "/v1/embeddings", {"model": MODEL, "input": None}, 400, "bad_request"),
    ],
)
def test_errors_are_openai_shaped(shared: Replica, method: str, path: str, body: Any, status: int, code: str) -> None:
    url = shared.url
    before = answered(shared)
    got_status, reply = call(url, path, body) if method == "POST" else call(url, path)
    assert got_status == status
    assert reply["error"]["code"] == code
    assert reply["error"]["message"]
    assert answered(shared) == before


def test_post_without_content_length_is_rejected(shared: Replica) -> None:
    replica = shared
    connection = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=10)
    connection.putrequest("POST", "/v1/chat/completions")
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 400
    assert json.loads(response.read())["error"]["code"] == "bad_request"
    connection.close()


def test_api_key_is_enforced_on_v1_only(replicas: list[Replica]) -> None:
    env = {**os.environ, "STUB_KEY": "s3cret"}
    replica = start(replicas, api_key="s3cret", api_key_env="STUB_KEY", env=env)
    assert call(replica.url, "/health")[0] == 200
    assert call(replica.url, "/v1/models")[0] == 401
    status, reply = call(replica.url, "/v1/chat/completions", chat("x"))
    assert (status, reply["error"]["code"]) == (401, "invalid_api_key")
    assert call(replica.url, "/v1/chat/completions", chat("x"), headers={"Authorization": "Bearer wrong"})[0] == 401
    good = {"Authorization": "Bearer s3cret"}
    assert call(replica.url, "/v1/models", headers=good)[0] == 200
    assert call(replica.url, "/v1/chat/completions", chat("x"), headers=good)[0] == 200
    assert "s3cret" not in repr(replica.process.args)


def test_api_key_env_must_be_set() -> None:
    env = {key: value for key, value in os.environ.items() if key != "STUB_MISSING_KEY"}
    argv = [*stub_server_argv(StubServerConfig(model=MODEL, replica_id="r1")), "--api-key-env", "STUB_MISSING_KEY"]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=False)
    assert result.returncode == EXIT_BAD_ARGUMENTS
    assert "STUB_MISSING_KEY" in result.stderr
    assert result.stdout == ""


def test_start_delay_holds_the_port_but_refuses_connections(replicas: list[Replica]) -> None:
    port = closed_port()
    # A generous delay: the refused connection below must happen before it ends, even on a loaded machine.
    config = StubServerConfig(model=MODEL, replica_id="slow", port=port, start_delay_s=3.0)
    replica = Replica(spawn(config), port, "")
    replicas.append(replica)
    assert read_line(replica.process.stderr, 10) == f"stub-server slow: bound 127.0.0.1:{port}"
    bound = time.monotonic()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    with pytest.raises(OSError, match="Address already in use"), socket.socket() as thief:
        thief.bind(("127.0.0.1", port))
    assert read_line(replica.process.stdout, 10) == f"ready 127.0.0.1:{port}"
    assert time.monotonic() - bound >= 2.9
    status, health = call(replica.url, "/health")
    assert status == 200
    assert health["ready_at"] <= time.time()


def test_latency_and_concurrency(replicas: list[Replica]) -> None:
    replica = start(replicas, latency_s=0.3)
    started = time.monotonic()
    assert call(replica.url, "/v1/chat/completions", chat("one"))[0] == 200
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda i: call(replica.url, "/v1/chat/completions", chat(f"prompt {i}")), range(32)))
    elapsed = time.monotonic() - started
    assert [status for status, _ in results] == [200] * 32
    assert len({reply["choices"][0]["message"]["content"] for _, reply in results}) == 32
    assert elapsed < 0.3 * 32 / 4
    assert call(replica.url, "/health")[1]["requests_answered"] == 33


def test_crash_at_start_exits_nonzero_with_message() -> None:
    config = StubServerConfig(model=MODEL, replica_id="doomed", crash_at_start=True, start_delay_s=0.3)
    started = time.monotonic()
    result = subprocess.run(stub_server_argv(config), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == EXIT_CRASH_AT_START
    assert time.monotonic() - started >= 0.3
    assert result.stdout == ""
    assert "stub-server doomed: simulated crash at start (--crash-at-start)" in result.stderr


def test_fail_once_at_start_fails_only_the_replica_that_creates_the_claim(
    replicas: list[Replica], tmp_path: Path
) -> None:
    claim = tmp_path / "start.claim"
    argv = [*stub_server_argv(StubServerConfig(model=MODEL, replica_id="first")), "--fail-once-at-start", str(claim)]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert first.returncode == EXIT_CRASH_AT_START, first.stderr
    assert first.stdout == ""
    assert f"stub-server first: simulated crash at start (--fail-once-at-start: created {claim})" in first.stderr
    assert claim.exists()

    # Every later start (another replica, a retry) finds the claim and serves.
    config = StubServerConfig(model=MODEL, replica_id="again")
    process = subprocess.Popen(
        [*stub_server_argv(config), "--fail-once-at-start", str(claim)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    replica = Replica(process, 0, read_line(process.stdout, 10))
    replicas.append(replica)
    assert replica.ready_line.startswith("ready 127.0.0.1:"), replica.ready_line
    replica.port = int(replica.ready_line.rsplit(":", 1)[1])
    assert call(replica.url, "/v1/chat/completions", chat("served"))[0] == 200


def test_fail_once_at_start_in_a_missing_directory_is_a_bad_argument(tmp_path: Path) -> None:
    claim = tmp_path / "absent" / "start.claim"
    argv = [*stub_server_argv(StubServerConfig(model=MODEL, replica_id="r1")), "--fail-once-at-start", str(claim)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == EXIT_BAD_ARGUMENTS
    assert f"stub-server: cannot create the claim file {str(claim)!r}: No such file or directory" in result.stderr


def test_crash_after_n_answers(replicas: list[Replica]) -> None:
    replica = start(replicas, "dying", crash_after=3)
    assert call(replica.url, "/health")[0] == 200
    for i in range(3):
        assert call(replica.url, "/v1/chat/completions", chat(f"request {i}"))[0] == 200
    assert replica.process.wait(timeout=10) == EXIT_CRASHED
    with pytest.raises(urllib.error.URLError):
        call(replica.url, "/v1/chat/completions", chat("one too many"))
    _, stderr = replica.process.communicate(timeout=10)
    assert "stub-server dying: crashing after 3 answered requests" in stderr


def test_crash_after_n_under_concurrency_answers_exactly_n(replicas: list[Replica]) -> None:
    replica = start(replicas, "dying", crash_after=2, latency_s=0.3)

    def attempt(i: int) -> bool:
        try:
            return call(replica.url, "/v1/chat/completions", chat(f"request {i}"))[0] == 200
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException):
            return False

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(attempt, range(6)))
    assert sum(outcomes) == 2
    assert replica.process.wait(timeout=10) == EXIT_CRASHED


def test_crash_after_zero_dies_on_first_request(replicas: list[Replica]) -> None:
    replica = start(replicas, "dead", crash_after=0)
    assert call(replica.url, "/health")[0] == 200
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        call(replica.url, "/v1/completions", {"model": MODEL, "prompt": "x"})
    assert replica.process.wait(timeout=10) == EXIT_CRASHED


def test_port_in_use_exits_with_bind_failure() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        config = StubServerConfig(model=MODEL, replica_id="r1", port=holder.getsockname()[1])
        result = subprocess.run(stub_server_argv(config), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == EXIT_BIND_FAILED
    assert "stub-server r1: cannot bind 127.0.0.1:" in result.stderr


def test_two_replicas_on_one_port_collide_at_bind_even_while_starting(replicas: list[Replica]) -> None:
    port = closed_port()
    first = Replica(spawn(StubServerConfig(model=MODEL, replica_id="first", port=port, start_delay_s=5.0)), port, "")
    replicas.append(first)
    assert read_line(first.process.stderr, 10) == f"stub-server first: bound 127.0.0.1:{port}"
    config = StubServerConfig(model=MODEL, replica_id="second", port=port, start_delay_s=5.0)
    started = time.monotonic()
    result = subprocess.run(stub_server_argv(config), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == EXIT_BIND_FAILED
    assert time.monotonic() - started < 5.0, "the collision must show before the start delay ends"
    assert "Address already in use" in result.stderr
    assert read_line(first.process.stdout, 10) == f"ready 127.0.0.1:{port}"


def test_sigterm_stops_cleanly_unless_ignored(replicas: list[Replica]) -> None:
    polite = start(replicas, "polite")
    code, stderr = polite.stop()
    assert code == 0
    assert stderr.endswith("stub-server polite: stopped\n")
    stubborn = start(replicas, "stubborn", ignore_sigterm=True)
    process = stubborn.process
    process.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.5)
    assert call(replicas[-1].url, "/health")[0] == 200
    process.kill()
    assert process.wait(timeout=10) == -signal.SIGKILL


def test_request_log_records_every_request(replicas: list[Replica], tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    replica = start(replicas, "logged", request_log=log)
    body = chat("logged prompt")
    call(replica.url, "/v1/chat/completions", body)
    call(replica.url, "/v1/chat/completions", chat("x", model="nope"))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["path"], e["status"], e["replica_id"]) for e in entries] == [
        ("/v1/chat/completions", 200, "logged"),
        ("/v1/chat/completions", 404, "logged"),
    ]
    assert entries[0]["digest"] == request_digest(body)[:12]
    assert entries[0]["request"] == body


def test_in_process_server_and_its_guards() -> None:
    with StubModelServer(StubServerConfig(model=MODEL, replica_id="inproc")) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        status, reply = call(server.base_url.removesuffix("/v1"), "/v1/chat/completions", chat("hi"))
        assert status == 200
        assert reply["choices"][0]["message"]["content"].startswith("replica=inproc ")
    with pytest.raises(ValueError, match="subprocess"):
        StubModelServer(StubServerConfig(model=MODEL, replica_id="x", crash_after=1))
    with pytest.raises(ValueError, match="api_key_env"):
        stub_server_argv(StubServerConfig(model=MODEL, replica_id="x", api_key="k"))


@pytest.mark.parametrize(
    "options",
    [
        {"replica_id": "has space"},
        {"replica_id": ""},
        {"port": 70000},
        {"start_delay_s": -1.0},
        {"latency_s": float("nan")},
        {"crash_after": -1},
        {"max_tokens": 1},
        {"api_key": ""},
        {"model": ""},
    ],
)
def test_config_rejects_bad_values(options: dict[str, Any]) -> None:
    values: dict[str, Any] = {"model": MODEL, "replica_id": "r1"} | options
    with pytest.raises(ValueError, match=r"must|port"):
        StubServerConfig(**values)


def test_cli_rejects_bad_replica_id() -> None:
    argv = [sys.executable, "-m", TEST_SERVER_MODULE, "--port", "0"]
    result = subprocess.run(
        [*argv, "--model", MODEL, "--replica-id", "a b"], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == EXIT_BAD_ARGUMENTS
    assert "replica_id 'a b'" in result.stderr
