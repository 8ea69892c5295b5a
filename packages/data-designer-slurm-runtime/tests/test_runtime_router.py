"""The worker's local router over real HTTP: spreading by load, failover from dead replicas, 502 when none is left.

In-process :class:`StubModelServer` replicas serve the healthy cases; replicas that die mid-run are
the test server's own subprocess with ``--crash-after N`` (the crash ends the whole process).
"""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import pytest

from data_designer.slurm.runtime.testing import (
    EXIT_CRASHED,
    StubModelServer,
    StubServerConfig,
    closed_port,
    stub_server_argv,
)
from data_designer.slurm.runtime.worker._router import Router, start_routers

MODEL = "stub/model-r"
KEY = "router-test-key"


def post(router: Router, *, key: str | None = KEY, text: str = "hi") -> tuple[int, dict[str, Any]]:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}]}).encode()
    request = urllib.request.Request(router.base_url + "/chat/completions", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def replica_of(reply: dict[str, Any]) -> str:
    text: str = reply["choices"][0]["message"]["content"]
    return text.split()[0].removeprefix("replica=")


def dead_url() -> str:
    return f"http://127.0.0.1:{closed_port()}/v1"


@pytest.fixture
def two_stubs() -> Iterator[list[StubModelServer]]:
    with ExitStack() as stack:
        yield [
            stack.enter_context(StubModelServer(StubServerConfig(model=MODEL, replica_id=name, api_key=KEY)))
            for name in ("a", "b")
        ]


def test_sequential_requests_alternate_between_idle_replicas(two_stubs: list[StubModelServer]) -> None:
    with Router([stub.base_url for stub in two_stubs]) as router:
        replies = [post(router, text=f"q{i}") for i in range(10)]
    assert [status for status, _ in replies] == [200] * 10
    assert [replica_of(reply) for _, reply in replies] == ["a", "b"] * 5
    stats = router.stats()
    assert [(item.requests, item.failures) for item in stats.upstreams] == [(5, 0), (5, 0)]
    assert (stats.failovers, stats.unrouted) == (0, 0)


def test_headers_and_answers_pass_through(two_stubs: list[StubModelServer]) -> None:
    with Router([stub.base_url for stub in two_stubs]) as router:
        status, reply = post(router, key=None)
        assert (status, reply["error"]["type"]) == (401, "authentication_error")
        status, reply = post(router, key="wrong")
        assert status == 401
        status, reply = post(router)
        assert status == 200
        assert reply["usage"]["total_tokens"] > 0
    assert sum(item.requests for item in router.stats().upstreams) == 3


def test_a_router_with_the_attempt_key_refuses_requests_without_it_before_any_upstream() -> None:
    # The upstream checks no key (a command engine that cannot): the router is then the only guard.
    with StubModelServer(StubServerConfig(model=MODEL, replica_id="open")) as open_stub:
        router = start_routers({"writer": [open_stub.base_url]}, {"writer": KEY})["writer"]
        try:
            assert [post(router, key=k)[0] for k in (None, "wrong", KEY.upper())] == [401, 401, 401]
            status, reply = post(router, key=None)
            assert (status, reply["error"]["type"]) == (401, "authentication_error")
            assert sum(item.requests for item in router.stats().upstreams) == 0, "nothing reached the upstream"
            assert post(router)[0] == 200
        finally:
            router.close()
        assert sum(item.requests for item in router.stats().upstreams) == 1


def test_the_replica_with_fewer_outstanding_requests_is_chosen() -> None:
    slow = StubServerConfig(model=MODEL, replica_id="slow", latency_s=1.0)
    fast = StubServerConfig(model=MODEL, replica_id="fast")
    with (
        StubModelServer(slow) as first,
        StubModelServer(fast) as second,
        Router([first.base_url, second.base_url]) as r,
    ):
        held: list[tuple[int, dict[str, Any]]] = []
        thread = threading.Thread(target=lambda: held.append(post(r, key=None, text="long")))
        thread.start()
        while first.admitted == 0 and thread.is_alive():
            threading.Event().wait(0.01)
        quick = [post(r, key=None, text=f"q{i}") for i in range(3)]
        thread.join(timeout=10)
    assert [replica_of(reply) for _, reply in held] == ["slow"]
    assert [replica_of(reply) for _, reply in quick] == ["fast"] * 3
    assert [item.requests for item in r.stats().upstreams] == [1, 3]


def test_a_dead_replica_is_failed_over_once_then_avoided(two_stubs: list[StubModelServer]) -> None:
    dead = dead_url()
    with Router([dead, two_stubs[0].base_url], cooldown_s=60) as router:
        replies = [post(router) for _ in range(6)]
    assert [status for status, _ in replies] == [200] * 6
    stats = router.stats()
    assert [(item.base_url, item.requests, item.failures) for item in stats.upstreams] == [
        (dead, 0, 1),
        (two_stubs[0].base_url, 6, 0),
    ]
    assert (stats.failovers, stats.unrouted) == (1, 0)
    assert len(stats.failover_s) == 1


def test_a_held_router_lets_admitted_requests_finish_and_admits_nothing_new() -> None:
    slow = StubServerConfig(model=MODEL, replica_id="slow", latency_s=0.5)
    with StubModelServer(slow) as stub, Router([stub.base_url]) as router:
        answers: list[tuple[int, dict[str, Any]]] = []
        first = threading.Thread(target=lambda: answers.append(post(router, key=None, text="in flight")))
        first.start()
        while router.outstanding == 0:
            threading.Event().wait(0.01)
        router.hold()
        late: list[tuple[int, dict[str, Any]]] = []
        second = threading.Thread(target=lambda: late.append(post(router, key=None, text="too late")), daemon=True)
        second.start()
        while router.held == 0:
            threading.Event().wait(0.01)
        first.join(timeout=10)
        assert [status for status, _ in answers] == [200]
        assert router.outstanding == 0
        assert late == []
        assert stub.admitted == 1, "the held request never reached the server"
    second.join(timeout=10)
    assert [status for status, _ in late] == [503]  # released by close, never forwarded
    assert router.stats().upstreams[0].requests == 1


def test_no_live_replica_is_a_clear_502() -> None:
    urls = [dead_url(), dead_url()]
    with Router(urls, cooldown_s=60) as router:
        status, reply = post(router)
        again, _ = post(router)  # replicas marked dead are still tried: one may have come back
    assert (status, again) == (502, 502)
    assert reply["error"]["code"] == "no_live_replica"
    assert all(url in reply["error"]["message"] for url in urls)
    stats = router.stats()
    assert [item.failures for item in stats.upstreams] == [2, 2]
    assert (stats.failovers, stats.unrouted) == (2, 2)


def test_every_alias_gets_a_router_one_url_or_several(two_stubs: list[StubModelServer]) -> None:
    routers = start_routers({"one": [two_stubs[0].base_url], "two": [stub.base_url for stub in two_stubs]})
    try:
        assert set(routers) == {"one", "two"}
        assert post(routers["one"])[0] == 200
        assert post(routers["two"])[0] == 200
    finally:
        for router in routers.values():
            router.close()


@pytest.fixture
def crashing_pair() -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str], list[str]]]:
    processes: list[subprocess.Popen[str]] = []
    urls: list[str] = []
    try:
        for config in (
            StubServerConfig(model=MODEL, replica_id="dies", crash_after=3, latency_s=0.02),
            StubServerConfig(model=MODEL, replica_id="lives", latency_s=0.02),
        ):
            argv = stub_server_argv(config)
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            processes.append(process)
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("ready "), (line, process.stderr.read() if process.stderr else "")
            urls.append(f"http://{line.removeprefix('ready ')}/v1")
        yield processes[0], processes[1], urls
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=10)


def test_a_replica_dying_mid_run_is_failed_over(
    crashing_pair: tuple[subprocess.Popen[str], subprocess.Popen[str], list[str]],
) -> None:
    dies, lives, urls = crashing_pair
    with Router(urls, cooldown_s=60) as router, ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda i: post(router, key=None, text=f"q{i}"), range(40)))
    assert [status for status, _ in replies] == [200] * 40
    assert dies.wait(timeout=10) == EXIT_CRASHED
    assert lives.poll() is None
    served = Counter(replica_of(reply) for _, reply in replies)
    assert served == {"dies": 3, "lives": 37}
    stats = router.stats()
    assert [item.requests for item in stats.upstreams] == [3, 37]
    assert stats.upstreams[0].failures >= 1
    assert stats.failovers >= 1
    assert stats.failovers == stats.upstreams[0].failures
    assert stats.unrouted == 0
    assert len(stats.failover_s) == stats.failovers
    assert all(0 <= seconds < 5 for seconds in stats.failover_s)


# -- request evidence (issue 31) ------------------------------------------------------------------------------------


class _Scripted(http.server.BaseHTTPRequestHandler):
    """A tiny upstream: ``/status/<code>`` answers that status, ``/hang`` never answers in time."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/hang"):
            self.server.release.wait(10)  # type: ignore[attr-defined]
            return
        code = int(self.path.rsplit("/", 1)[-1])
        body = b'{"error":{"message":"scripted"}}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def scripted() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.daemon_threads = True
    server.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def send(router: Router, path: str) -> int:
    request = urllib.request.Request(router.base_url + path, data=b"{}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        return int(exc.code)


def test_the_router_counts_successes_with_their_latency_and_output_tokens(two_stubs: list[StubModelServer]) -> None:
    with Router([stub.base_url for stub in two_stubs]) as router:
        replies = [post(router, text=f"q{i}") for i in range(8)]
    evidence = router.requests.snapshot()
    assert (evidence.sent, evidence.succeeded, evidence.failed, evidence.retried) == (8, 8, 0, 0)
    assert evidence.latency_us.count == 8
    assert evidence.latency_us.min is not None
    assert evidence.latency_us.min > 0
    tokens = [reply["usage"]["completion_tokens"] for _, reply in replies]
    assert (evidence.output_tokens.count, evidence.output_tokens.sum) == (8, sum(tokens))
    assert (evidence.output_tokens.min, evidence.output_tokens.max) == (min(tokens), max(tokens))


def test_the_router_counts_failures_by_status_and_failovers(two_stubs: list[StubModelServer], scripted: str) -> None:
    with Router([scripted]) as router:
        statuses = [send(router, path) for path in ("/status/500", "/status/500", "/status/429", "/status/200")]
    assert statuses == [500, 500, 429, 200]
    evidence = router.requests.snapshot()
    assert (evidence.sent, evidence.succeeded, evidence.failed) == (4, 1, 3)
    assert [(item.status, item.count) for item in evidence.failed_status] == [(429, 1), (500, 2)]
    assert evidence.output_tokens.count == 0, "an answer without usage reports no tokens"
    with Router([dead_url(), two_stubs[0].base_url], cooldown_s=60) as failing_over:
        assert [post(failing_over)[0] for _ in range(3)] == [200] * 3
    evidence = failing_over.requests.snapshot()
    assert (evidence.sent, evidence.succeeded, evidence.failed, evidence.retried) == (3, 3, 0, 1)


def test_the_router_tells_timeouts_from_connection_failures(scripted: str) -> None:
    with Router([scripted], timeout_s=0.2) as router:
        assert send(router, "/hang") == 502
    evidence = router.requests.snapshot()
    assert (evidence.sent, evidence.failed_timeout, evidence.failed_connection, evidence.succeeded) == (1, 1, 0, 0)
    with Router([dead_url(), dead_url()], cooldown_s=60) as dead:
        assert send(dead, "/v1/chat/completions") == 502
    evidence = dead.requests.snapshot()
    assert (evidence.sent, evidence.failed_timeout, evidence.failed_connection, evidence.retried) == (1, 0, 1, 1)
    assert evidence.latency_us.count == 0, "only successful requests have a latency"
