"""One local endpoint in front of a model alias's replicas: least outstanding requests, failover from dead ones.

The client worker starts one :class:`Router` per deployed alias (one base URL or several) and points the host's
provider at :attr:`Router.base_url` (``http://127.0.0.1:<ephemeral port>``, no path). A request to
``<router>/<path>`` goes to ``<upstream base URL>/<path>`` with its method, headers (``Authorization``
included) and body. The upstream is the live one with the fewest requests outstanding; ties go round
the upstreams in turn.

Upstream answers are read in full before anything is sent to the client, so a failure anywhere in
the exchange (connection refused or reset, the upstream closing before or while it answers: a
replica dying) leaves the client unanswered: the upstream is marked dead for ``cooldown_s`` and the
request goes to another upstream (a failover). Retrying is safe for the OpenAI inference requests
routed here because nothing was answered. Upstreams marked dead are tried last, so a replica that
came back is found again. A request that no upstream answers gets ``502`` with an OpenAI-shaped
error. A status the upstream sent (even a 5xx) is its answer and is passed through.

A router given the per-attempt key (``api_key``) answers ``401`` to a request without ``Authorization: Bearer
<key>``, before anything is sent upstream: other users of a shared node cannot use it (nor a ``command`` server
that checks no key through it).

Every admitted request is counted in :attr:`Router.requests` (``runtime.requests.RequestRecorder``: the
per-request evidence of ``requests.json``): sent, how it ended (a 2xx answer, another status, no answer because
the last exchange timed out or failed to connect), the failovers, the end-to-end latency of each successful one
(from admission to the answer read in full) and ``usage.completion_tokens`` of a successful JSON answer (found
without parsing it; a streamed answer reports none).

For the worker's drain, :meth:`Router.hold` stops admitting requests (a new one waits unanswered and is
never sent) while admitted ones run to their end; :attr:`Router.outstanding` counts those.
"""

from __future__ import annotations

import hmac
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from data_designer.slurm.runtime.requests import Outcome, RequestRecorder, completion_tokens

_DROPPED = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding"}
    | {"upgrade", "host", "content-length", "server", "date"}
)
"""Hop-by-hop headers, and those each side of the router sets itself."""


MAX_FAILOVER_TIMES = 100
_UNAUTHORIZED_BODY = json.dumps(
    {"error": {"message": "missing or wrong bearer token", "type": "authentication_error", "code": "invalid_api_key"}}
).encode()


@dataclass(frozen=True)
class UpstreamStats:
    base_url: str
    requests: int
    """Requests this upstream answered (any status)."""
    failures: int
    """Exchanges with this upstream that failed (each marked it dead)."""


@dataclass(frozen=True)
class RouterStats:
    upstreams: tuple[UpstreamStats, ...]
    failovers: int
    """Requests sent on to another upstream after one failed."""
    unrouted: int
    """Requests answered 502 because no upstream answered them."""
    failover_s: tuple[float, ...] = ()
    """For the first :data:`MAX_FAILOVER_TIMES` failed-over requests that another upstream then answered: seconds
    from the first failed exchange's failure to that answer (what a replica's death costs a request)."""


@dataclass(frozen=True)
class _Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes


_UNAUTHORIZED = _Answer(401, "Unauthorized", [("Content-Type", "application/json")], _UNAUTHORIZED_BODY)


class _Upstream:
    def __init__(self, base_url: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"the router forwards to plain http://HOST:PORT[/path] URLs, not {base_url!r}")
        self.base_url = base_url
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = parts.path.rstrip("/")
        self.outstanding = 0
        self.requests = 0
        self.failures = 0
        self.dead_until = 0.0


def start_routers(
    base_urls: Mapping[str, Sequence[str]], api_keys: Mapping[str, str | None] | None = None
) -> dict[str, Router]:
    """A started router for every key (one base URL or several), requiring ``api_keys[key]`` when one is given."""
    routers: dict[str, Router] = {}
    try:
        for key, urls in base_urls.items():
            routers[key] = Router(tuple(urls), api_key=(api_keys or {}).get(key)).start()
    except BaseException:
        for router in routers.values():
            router.close()
        raise
    return routers


class Router:
    """A threaded reverse proxy on ``127.0.0.1``; :meth:`start` it, :meth:`close` it (or use ``with``)."""

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        cooldown_s: float = 5.0,
        timeout_s: float = 600.0,
        api_key: str | None = None,
    ):
        if not base_urls:
            raise ValueError("a router needs at least one upstream base URL")
        self._authorization = None if api_key is None else f"Bearer {api_key}".encode()
        self._upstreams = [_Upstream(url) for url in base_urls]
        self._cooldown_s = cooldown_s
        self._timeout_s = timeout_s
        self._lock = threading.RLock()  # reentrant: hold() may run in a signal handler on a thread holding it
        self._turn = 0
        self._failovers = 0
        self._unrouted = 0
        self._failover_s: list[float] = []
        self._holding = False
        self._held = 0
        self._admitted = 0
        self._closed = threading.Event()
        self.requests = RequestRecorder()
        self._server = _Server(self)
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def authorized(self, authorization: str) -> bool:
        """Whether a request with this ``Authorization`` header may pass (always, when the router has no key)."""
        expected = self._authorization
        return expected is None or hmac.compare_digest(authorization.encode(), expected)

    def start(self) -> Router:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="ddslurm-router")
        self._thread.daemon = True
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> Router:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def hold(self) -> None:
        """Stop admitting requests: from now on a new request waits unanswered until :meth:`close` (then 503).

        Requests already admitted run to their end (failover included). The drain uses this
        (``runtime._worker_drain``): nothing new starts while in-flight requests finish.
        """
        with self._lock:
            self._holding = True

    @property
    def outstanding(self) -> int:
        """Admitted requests not yet answered or given up."""
        with self._lock:
            return self._admitted

    @property
    def held(self) -> int:
        """Requests that arrived after :meth:`hold` (never sent upstream)."""
        with self._lock:
            return self._held

    def stats(self) -> RouterStats:
        with self._lock:
            upstreams = tuple(UpstreamStats(item.base_url, item.requests, item.failures) for item in self._upstreams)
            return RouterStats(
                upstreams=upstreams,
                failovers=self._failovers,
                unrouted=self._unrouted,
                failover_s=tuple(self._failover_s),
            )

    def forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        """Send the request to upstreams in turn until one answers; 502 when none does."""
        with self._lock:
            holding = self._holding
            if holding:
                self._held += 1
            else:
                self._admitted += 1
        if holding:
            self._closed.wait()
            return _Answer(503, "Service Unavailable", [("Content-Type", "application/json")], b'{"error":"draining"}')
        recorder = self.requests
        recorder.sent()
        started = time.perf_counter_ns()
        outcome: Outcome = "connection"
        answer: _Answer | None = None
        try:
            answer, outcome = self._route(method, path, headers, body)
            return answer
        finally:
            with self._lock:
                self._admitted -= 1
            if answer is None:
                recorder.ended("connection")
            elif outcome == "succeeded":
                streamed = any(
                    name.lower() == "content-type" and "event-stream" in value for name, value in answer.headers
                )
                tokens = None if streamed else completion_tokens(answer.body)
                recorder.ended(outcome, latency_ns=time.perf_counter_ns() - started, tokens=tokens)
            else:
                recorder.ended(outcome, status=answer.status)

    def _route(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> tuple[_Answer, Outcome]:
        tried: list[_Upstream] = []
        errors: list[str] = []
        first_failure: float | None = None
        timed_out = False
        while (upstream := self._choose(tried)) is not None:
            if tried:
                with self._lock:
                    self._failovers += 1
                self.requests.retried()
            tried.append(upstream)
            try:
                answer = self._exchange(upstream, method, path, headers, body)
            except (OSError, http.client.HTTPException) as exc:
                errors.append(f"{upstream.base_url}: {type(exc).__name__}: {exc}")
                timed_out = isinstance(exc, TimeoutError)
                self._finish(upstream, failed=True)
                first_failure = time.monotonic() if first_failure is None else first_failure
                continue
            self._finish(upstream, failed=False)
            if first_failure is not None:
                with self._lock:
                    if len(self._failover_s) < MAX_FAILOVER_TIMES:
                        self._failover_s.append(round(time.monotonic() - first_failure, 6))
            return answer, "succeeded" if 200 <= answer.status < 300 else "status"
        with self._lock:
            self._unrouted += 1
        message = "ddslurm router: no replica answered (" + "; ".join(errors) + ")"
        payload = {"error": {"message": message, "type": "router_error", "param": None, "code": "no_live_replica"}}
        data = json.dumps(payload).encode()
        return _Answer(502, "Bad Gateway", [("Content-Type", "application/json")], data), (
            "timeout" if timed_out else "connection"
        )

    def _choose(self, tried: list[_Upstream]) -> _Upstream | None:
        """The live untried upstream with the fewest outstanding requests (ties in turn), else a dead untried one."""
        now = time.monotonic()
        with self._lock:
            count = len(self._upstreams)
            order = [(index - self._turn) % count for index in range(count)]
            candidates = [
                (item.dead_until > now, item.outstanding if item.dead_until <= now else item.dead_until, turn, index)
                for index, (item, turn) in enumerate(zip(self._upstreams, order, strict=True))
                if item not in tried
            ]
            if not candidates:
                return None
            index = min(candidates)[3]
            self._turn = (index + 1) % count
            chosen = self._upstreams[index]
            chosen.outstanding += 1
            return chosen

    def _finish(self, upstream: _Upstream, *, failed: bool) -> None:
        with self._lock:
            upstream.outstanding -= 1
            if failed:
                upstream.failures += 1
                upstream.dead_until = time.monotonic() + self._cooldown_s
            else:
                upstream.requests += 1
                upstream.dead_until = 0.0

    def _exchange(
        self, upstream: _Upstream, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Answer:
        connection = http.client.HTTPConnection(upstream.host, upstream.port, timeout=self._timeout_s)
        try:
            connection.putrequest(method, upstream.path + path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
            kept = [(name, value) for name, value in response.getheaders() if name.lower() not in _DROPPED]
            return _Answer(response.status, response.reason, kept, data)
        finally:
            connection.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, router: Router) -> None:
        self.router = router
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the worker's log is the host's
        return

    def do_GET(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def do_PUT(self) -> None:
        self._proxy()

    def do_DELETE(self) -> None:
        self._proxy()

    def _proxy(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._reply(_Answer(411, "Length Required", [], b""), close=True)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.server.router.authorized(self.headers.get("Authorization", "")):
            self._reply(_UNAUTHORIZED, close=False)
            return
        headers = [(name, value) for name, value in self.headers.items() if name.lower() not in _DROPPED]
        self._reply(self.server.router.forward(self.command, self.path, headers, body), close=False)

    def _reply(self, answer: _Answer, *, close: bool) -> None:
        self.send_response(answer.status, answer.reason)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer.body)
