"""Model identity at readiness (``supervisor._served_models``): ``GET /v1/models`` with the per-attempt key,
judged against the name the plan expects, against the in-process test server and canned answers."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, ReplicaPlan
from data_designer.slurm.planner import compile, load_run, resolve_config
from data_designer.slurm.runtime.supervisor._served_models import ModelsReply, ask_models, judge
from data_designer.slurm.runtime.testing import writer_run
from data_designer.slurm.runtime.testing._test_server import StubModelServer, StubServerConfig

KEY = "per-attempt-key-0123"


def writer_replica(**changes: Any) -> ReplicaPlan:
    """Replica 0 of the compiled ``writer`` test plan (a command engine serving ``{served_name}``: 'writer')."""
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
        }
    )
    spec = load_run(json.dumps(writer_run("names", replicas=1)), file="run.json")
    replica = compile(spec, profile, cluster="c", config=resolve_config(spec)).allocation.replicas[0]
    return replica.model_copy(update=changes)


@pytest.fixture
def stub() -> Iterator[StubModelServer]:
    with StubModelServer(StubServerConfig(model="other-model", replica_id="r0", api_key=KEY)) as server:
        yield server


def test_the_plan_expects_the_name_the_client_asks_for() -> None:
    assert writer_replica().served_name == "writer"


def test_the_key_is_sent_and_the_listed_names_are_read(stub: StubModelServer) -> None:
    assert ask_models(stub.base_url, KEY) == ModelsReply(200, ("other-model",), "HTTP 200")
    assert ask_models(stub.base_url, "wrong-key").status == 401
    assert ask_models(stub.base_url, None).status == 401


def test_a_server_listing_another_name_fails_naming_both(stub: StubModelServer) -> None:
    identity = judge(writer_replica(), "writer-r0", ask_models(stub.base_url, KEY))
    assert identity.verdict == "failed"
    assert identity.message.startswith(
        "server writer-r0 serves 'other-model' but the client will ask for 'writer' (deployment 'writer'): "
    )
    assert "deployments.writer.argv" in identity.message


def test_a_server_listing_the_expected_name_is_ready() -> None:
    with StubModelServer(StubServerConfig(model="writer", replica_id="r0", api_key=KEY)) as server:
        assert judge(writer_replica(), "writer-r0", ask_models(server.base_url, KEY)).verdict == "ready"


def test_a_refused_key_fails() -> None:
    identity = judge(writer_replica(), "writer-r0", ModelsReply(401, detail="HTTP 401"))
    assert identity.verdict == "failed"
    assert "refused the per-attempt key" in identity.message


@pytest.mark.parametrize("reply", [ModelsReply(None, detail="refused"), ModelsReply(503, detail="HTTP 503")])
@pytest.mark.parametrize("engine", ["command", "vllm"])
def test_no_answer_or_a_server_error_is_asked_again(reply: ModelsReply, engine: str) -> None:
    identity = judge(writer_replica(engine=engine), "writer-r0", reply)
    assert identity.verdict == "wait"
    assert reply.detail in identity.message


@pytest.mark.parametrize("reply", [ModelsReply(404, detail="HTTP 404"), ModelsReply(200, None, "HTTP 200")])
def test_a_command_server_without_a_model_list_is_ready_on_health_alone(reply: ModelsReply) -> None:
    identity = judge(writer_replica(), "writer-r0", reply)
    assert identity.verdict == "ready"
    assert "readiness is /health alone" in identity.message


@pytest.mark.parametrize("reply", [ModelsReply(404, detail="HTTP 404"), ModelsReply(200, None, "HTTP 200")])
def test_vllm_without_a_model_list_fails(reply: ModelsReply) -> None:
    identity = judge(writer_replica(engine="vllm"), "writer-r0", reply)
    assert identity.verdict == "failed"
    assert "no model list" in identity.message


def test_vllm_listing_another_name_fails() -> None:
    identity = judge(writer_replica(engine="vllm"), "writer-r0", ModelsReply(200, ("a", "b"), "HTTP 200"))
    assert identity.verdict == "failed"
    assert "serves 'a', 'b' but the client will ask for 'writer'" in identity.message


class _Canned(BaseHTTPRequestHandler):
    """Answers GET /v1/models with the status and body of the server's ``canned`` attribute."""

    server: Any

    def do_GET(self) -> None:
        status, body = self.server.canned
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, b"{}", ModelsReply(404, None, "HTTP 404")),
        (200, b"<html>", ModelsReply(200, None, "HTTP 200")),
        (200, b'{"data": "x"}', ModelsReply(200, None, "HTTP 200")),
        (200, b'{"data": [{"id": "a"}, {"no": "id"}, 3]}', ModelsReply(200, ("a",), "HTTP 200")),
        (500, b"", ModelsReply(500, None, "HTTP 500")),
    ],
)
def test_answers_other_than_a_model_list_are_read_as_such(status: int, body: bytes, expected: ModelsReply) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    server.canned = (status, body)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert ask_models(f"http://127.0.0.1:{server.server_address[1]}/v1", KEY) == expected
    finally:
        server.shutdown()
        server.server_close()


def test_nothing_listening_is_no_answer() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    port = server.server_address[1]
    server.server_close()
    assert ask_models(f"http://127.0.0.1:{port}/v1", KEY).status is None


def test_a_permissive_test_server_answers_any_model_name_but_lists_only_its_own() -> None:
    config = StubServerConfig(model="other-model", replica_id="r0", permissive=True)
    with StubModelServer(config) as server:
        assert ask_models(server.base_url, None).names == ("other-model",)
        body = json.dumps({"model": "writer", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200
