"""An OpenAI-compatible model server for tests, the demo and benchmarks: deterministic and breakable (the standard
library, and ``prometheus_client`` for ``/metrics``).

Endpoints: ``GET /health``, ``GET /metrics``, ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST
/v1/completions`` and ``POST /v1/embeddings``, with OpenAI's response shapes and ``usage`` counted in whitespace-split
words. Every answer is derived from a sha256 of the request body (canonical JSON), so the same request
gets the same text from every replica except for the leading ``replica=<id>`` word that names the
replica that served it. Structured requests get a JSON object built from the schema: an explicit
``response_format`` (``json_schema`` or ``json_object``), or the ``<response_schema>`` block Data
Designer writes into its prompts for structured and judge columns (answered in a ```json fence);
code columns get one code fence in the requested language.

Readiness, like vLLM: the port is bound at once (so nobody else takes it) but only listened on once
the start delay has passed; until then connections are refused. When it listens the server prints
``ready HOST:PORT`` on stdout, and ``/health`` answers 200 with ``ready_at`` (Unix time), so a
supervisor computes its readiness lag as (time it saw 200) - ``ready_at``.

Serving, like vLLM's scheduler: at most ``max_num_seqs`` inference requests run at once (each for ``latency_s``);
the others wait, first come first served. ``GET /metrics`` (open without the API key, as vLLM's) answers Prometheus
text with vLLM's own names, types and labels (``model_name``, ``engine="0"``; vLLM 0.32/0.33,
``vllm/v1/metrics/loggers.py``), modelled from this state, never random: the gauges ``vllm:num_requests_running``
(requests holding a slot), ``vllm:num_requests_waiting`` (admitted, waiting for one) and
``vllm:kv_cache_usage_perc`` (running / ``max_num_seqs``: every sequence holds an equal share of the cache), and the
counter ``vllm:num_preemptions_total`` (0: the stub never evicts a running request). ``metrics=False``
(``--no-metrics``) answers 404 there, like a server without them.

Failure injection: ``fail_fraction`` answers ``fail_status`` (500 or 503) to exactly that fraction of inference
requests, deterministically by arrival: the n-th request (1-based, per replica) fails when ``floor(n * F)`` exceeds
``floor((n - 1) * F)`` (F = 0.25: the 4th, 8th, ...; a fraction below 1 never fails the first), at once, without
holding a slot. ``crash_at_start`` exits with :data:`EXIT_CRASH_AT_START` after the start delay
with a message on stderr; ``crash_after=N`` exits hard (``os._exit(EXIT_CRASHED)``) right after the
N-th inference request (chat, completion, embedding; Data Designer's own "Hello!" health check counts)
was answered with 200; requests admitted beyond N never get an answer. ``/health`` and ``/v1/models``
never count; only ``/health`` is open without the API key (as in vLLM). The port is bound without
``SO_REUSEADDR``, so two replicas given one port collide at once, not after their start delays.

Model names: ``/v1/models`` lists exactly ``model``, and an inference request naming another model gets 404
``model_not_found`` (strict, as vLLM), unless ``permissive``: then any model name is answered (as some
servers do), which is how a wrong name goes unnoticed without the supervisor's ``/v1/models`` check.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

EXIT_BAD_ARGUMENTS = 2
"""Invalid flags, or ``--api-key-env`` names an unset variable (argparse uses 2 too)."""
EXIT_BIND_FAILED = 3
"""The port could not be bound (already taken): pick another port and start again."""
EXIT_CRASH_AT_START = 4
"""``--crash-at-start``: the simulated startup failure."""
EXIT_CRASHED = 5
"""``--crash-after N``: the simulated death after N answered inference requests."""

DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's classic ``--max-num-seqs`` default: requests running at once before the rest wait."""
FAIL_STATUSES = frozenset({500, 503})
"""What ``--fail-status`` may answer (an internal error, or overloaded)."""

_REPLICA_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_INFERENCE_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})
_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class StubServerConfig:
    """What one replica serves and how it misbehaves; the CLI flags map one to one."""

    model: str
    replica_id: str
    host: str = "127.0.0.1"
    port: int = 0
    start_delay_s: float = 0.0
    latency_s: float = 0.0
    crash_at_start: bool = False
    crash_after: int | None = None
    max_tokens: int = 16
    api_key: str | None = field(default=None, repr=False)
    request_log: Path | None = None
    ignore_sigterm: bool = False
    permissive: bool = False
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    fail_fraction: float = 0.0
    fail_status: int = 500
    metrics: bool = True

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must not be empty")
        if not _REPLICA_ID.fullmatch(self.replica_id):
            raise ValueError(f"replica_id {self.replica_id!r} must match {_REPLICA_ID.pattern}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port!r} is not in [0, 65535]")
        if not (0 <= self.start_delay_s < math.inf and 0 <= self.latency_s < math.inf):
            raise ValueError("start_delay_s and latency_s must be finite and not negative")
        if self.crash_after is not None and self.crash_after < 0:
            raise ValueError(f"crash_after {self.crash_after!r} must not be negative")
        if self.max_tokens < 2:
            raise ValueError(f"max_tokens {self.max_tokens!r} must be at least 2 (replica and digest words)")
        if self.api_key == "":
            raise ValueError("api_key must not be empty (use None for no key)")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs {self.max_num_seqs!r} must be at least 1")
        if not 0 <= self.fail_fraction <= 1:
            raise ValueError(f"fail_fraction {self.fail_fraction!r} must lie in [0, 1]")
        if self.fail_status not in FAIL_STATUSES:
            raise ValueError(f"fail_status {self.fail_status!r} must be one of {sorted(FAIL_STATUSES)}")


TEST_SERVER_MODULE = "data_designer.slurm.runtime.testing.test_server"
"""The test server's command-line module (``python -m``)."""


def stub_server_argv(
    config: StubServerConfig, *, python: str = sys.executable, api_key_env: str | None = None
) -> list[str]:
    """The command line that runs ``config`` as its own process (the API key travels by environment name)."""
    if config.api_key is not None and api_key_env is None:
        raise ValueError("a config with an api_key needs api_key_env: keys never travel on the command line")
    argv = [python, "-m", TEST_SERVER_MODULE]
    argv += ["--host", config.host, "--port", str(config.port), "--model", config.model]
    argv += ["--replica-id", config.replica_id, "--max-tokens", str(config.max_tokens)]
    argv += ["--start-delay-s", repr(config.start_delay_s), "--latency-s", repr(config.latency_s)]
    if config.crash_at_start:
        argv.append("--crash-at-start")
    if config.crash_after is not None:
        argv += ["--crash-after", str(config.crash_after)]
    if api_key_env is not None:
        argv += ["--api-key-env", api_key_env]
    if config.request_log is not None:
        argv += ["--request-log", str(config.request_log)]
    if config.ignore_sigterm:
        argv.append("--ignore-sigterm")
    if config.permissive:
        argv.append("--permissive")
    if config.max_num_seqs != DEFAULT_MAX_NUM_SEQS:
        argv += ["--max-num-seqs", str(config.max_num_seqs)]
    if config.fail_fraction:
        argv += ["--fail-fraction", repr(config.fail_fraction), "--fail-status", str(config.fail_status)]
    if not config.metrics:
        argv.append("--no-metrics")
    return argv


METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST
"""What ``GET /metrics`` answers with: Prometheus text format 0.0.4, as vLLM's."""
METRIC_RUNNING = "vllm:num_requests_running"
METRIC_WAITING = "vllm:num_requests_waiting"
METRIC_KV_USAGE = "vllm:kv_cache_usage_perc"
METRIC_PREEMPTIONS = "vllm:num_preemptions"
"""A counter: exposed as ``vllm:num_preemptions_total``, as ``prometheus_client`` (and so vLLM) names counters."""
_LABELS = ("model_name", "engine")


class _Metrics:
    """vLLM's scheduler gauges and preemption counter in a registry of their own, set from the server's state."""

    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = (model, "0")  # one engine: vLLM labels every series with the served name and the engine index
        documented = {
            METRIC_RUNNING: "Number of requests in model execution batches.",
            METRIC_WAITING: "Number of requests waiting to be processed.",
            METRIC_KV_USAGE: "KV-cache usage. 1 means 100 percent usage.",
        }
        self.gauges = {
            name: Gauge(name, text, _LABELS, registry=self.registry).labels(*labels)
            for name, text in documented.items()
        }
        text = "Cumulative number of preemption from the engine."
        self.preemptions = Counter(METRIC_PREEMPTIONS, text, _LABELS, registry=self.registry).labels(*labels)
        self.counted = 0

    def render(self, running: int, waiting: int, max_num_seqs: int, preemptions: int) -> bytes:
        self.gauges[METRIC_RUNNING].set(running)
        self.gauges[METRIC_WAITING].set(waiting)
        self.gauges[METRIC_KV_USAGE].set(running / max_num_seqs)
        self.preemptions.inc(preemptions - self.counted)
        self.counted = preemptions
        return generate_latest(self.registry)


def _fails(n: int, fraction: float) -> bool:
    """Whether the n-th request (1-based) is one of ``fraction`` of them, spread evenly: floor(nF) > floor((n-1)F)."""
    return math.floor(n * fraction) > math.floor((n - 1) * fraction)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    # Without SO_REUSEADDR, two replicas given one port collide at bind time, even while both wait out
    # their start delays (Linux lets two SO_REUSEADDR sockets bind one port until one of them listens).
    allow_reuse_address = False

    def __init__(self, stub: StubModelServer, address: tuple[str, int], family: socket.AddressFamily) -> None:
        self.address_family = family
        self.stub = stub
        super().__init__(address, _Handler, bind_and_activate=False)


class StubModelServer:
    """One replica. The constructor binds the port; :meth:`serve_forever` waits the start delay, listens, serves.

    In-process use (``with StubModelServer(config) as server: ... server.base_url``) is for tests of
    clients and routers; the crash options end the whole process, so they are refused here and belong to
    the subprocess started by :func:`stub_server_argv`.
    """

    def __init__(self, config: StubServerConfig, *, allow_crash: bool = False) -> None:
        if not allow_crash and (config.crash_at_start or config.crash_after is not None):
            raise ValueError("crash options end the process: run the stub server as a subprocess (stub_server_argv)")
        self.config = config
        self.lock = threading.Lock()
        self.admitted = 0  # inference requests taken in, under lock
        self.answered = 0  # inference requests answered (or whose client went away), under lock
        # replies committed before they are written, under lock: /health counts these, so a client that has
        # read its reply always finds it counted (``answered`` only grows after the write, for --crash-after)
        self.replying = 0
        self.arrived = 0  # inference requests that reached --fail-fraction's count, under lock
        self.failed = 0  # of those, answered with the injected fail_status, under lock
        self.running = 0  # inference requests holding one of max_num_seqs slots, under lock
        self.waiting = 0  # inference requests waiting for a slot, under lock
        self.preemptions = 0  # never raised: the stub evicts no running request
        self.slots = threading.Condition(self.lock)
        # In-process tests hold running requests (slot taken, no answer yet) with gate.clear(), release with set().
        self.gate = threading.Event()
        self.gate.set()
        self._metrics = _Metrics(config.model) if config.metrics else None
        self.ready = threading.Event()
        self.ready_at: float | None = None
        self._log_lock = threading.Lock()
        family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        self._http = _HTTPServer(self, (config.host, config.port), family)
        try:
            self._http.server_bind()
        except OSError:
            self._http.server_close()
            raise
        self.port: int = self._http.server_address[1]
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def base_url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}/v1"

    def serve_forever(self, on_ready: Callable[[StubModelServer], None] | None = None) -> None:
        if self.config.start_delay_s:
            time.sleep(self.config.start_delay_s)
        if self._closed:
            return
        self._http.server_activate()  # listen(): connections were refused until now
        self.ready_at = time.time()
        self.ready.set()
        if on_ready is not None:
            on_ready(self)
        self._http.serve_forever(poll_interval=0.05)

    def start(self) -> StubModelServer:
        """Serve on a daemon thread; returns at once (see :meth:`wait_ready`)."""
        self._thread = threading.Thread(target=self.serve_forever, name=f"stub-{self.config.replica_id}", daemon=True)
        self._thread.start()
        return self

    def wait_ready(self, timeout_s: float) -> None:
        if not self.ready.wait(timeout_s):
            raise TimeoutError(f"stub server {self.config.replica_id!r} not ready within {timeout_s} s")

    def close(self) -> None:
        self._closed = True
        if self._thread is not None and self.ready.is_set():
            self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubModelServer:
        self.start().wait_ready(self.config.start_delay_s + 10)
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def metrics_text(self) -> Callable[[], bytes] | None:
        """The ``/metrics`` page renderer; None with ``metrics=False`` (the route answers 404)."""
        return None if self._metrics is None else self._render_metrics

    def _render_metrics(self) -> bytes:
        assert self._metrics is not None
        with self.lock:  # one consistent state; rendering under the lock also keeps the registry single-writer
            return self._metrics.render(self.running, self.waiting, self.config.max_num_seqs, self.preemptions)

    def log_request(self, path: str, status: int, body: dict[str, Any] | None) -> None:
        if self.config.request_log is None:
            return
        entry = {
            "time": time.time(),
            "replica_id": self.config.replica_id,
            "path": path,
            "status": status,
            "digest": request_digest(body)[:12] if body is not None else None,
            "request": body,
        }
        line = json.dumps(entry, sort_keys=True, default=str) + "\n"
        with self._log_lock, self.config.request_log.open("a", encoding="utf-8") as stream:
            stream.write(line)


class _HandledError(Exception):
    def __init__(self, status: HTTPStatus, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per request would swamp the replica's log; use ``--request-log`` instead."""

    @property
    def stub(self) -> StubModelServer:
        return self.server.stub

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path == "/health":
                self._send(HTTPStatus.OK, self._health())
            elif path == "/metrics" and self.stub.metrics_text is not None:
                self._send_text(HTTPStatus.OK, self.stub.metrics_text(), METRICS_CONTENT_TYPE)
            elif path == "/v1/models":
                self._authorize()
                self._send(HTTPStatus.OK, self._models())
            else:
                raise _HandledError(HTTPStatus.NOT_FOUND, f"no route GET {path}", "not_found")
        except _HandledError as error:
            self._send_error(error)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        body: dict[str, Any] | None = None
        try:
            if path not in _INFERENCE_PATHS:
                self._drain_body()
                raise _HandledError(HTTPStatus.NOT_FOUND, f"no route POST {path}", "not_found")
            body = self._read_json()
            self._authorize()
            reply = self._infer(path, body)
            self._maybe_fail()
        except _HandledError as error:
            self.stub.log_request(path, error.status, body)
            self._send_error(error)
            return
        self._answer_inference(path, body, reply)

    def _health(self) -> dict[str, Any]:
        stub, config = self.stub, self.stub.config
        with stub.lock:
            counts = {"requests_answered": stub.replying}
        return {
            "status": "ok",
            "model": config.model,
            "replica_id": config.replica_id,
            "ready_at": stub.ready_at,
        } | counts

    def _models(self) -> dict[str, Any]:
        created = int(self.stub.ready_at or 0)
        model = {"id": self.stub.config.model, "object": "model", "created": created, "owned_by": "stub"}
        return {"object": "list", "data": [model]}

    def _authorize(self) -> None:
        key = self.stub.config.api_key
        if key is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise _HandledError(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token", "invalid_api_key")

    def _maybe_fail(self) -> None:
        """``--fail-fraction``: the n-th valid inference request fails when floor(n F) > floor((n - 1) F)."""
        stub = self.stub
        with stub.lock:
            stub.arrived += 1
            fail = _fails(stub.arrived, stub.config.fail_fraction)
            stub.failed += fail
        if fail:
            status = HTTPStatus(stub.config.fail_status)
            raise _HandledError(status, f"injected failure ({stub.arrived}th request)", "injected_failure")

    def _drain_body(self) -> None:
        length = self.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) <= _MAX_BODY_BYTES:
            self.rfile.read(int(length))
        elif length is not None:
            self.close_connection = True

    def _read_json(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise _HandledError(HTTPStatus.BAD_REQUEST, "a JSON body with Content-Length is required", "bad_request")
        if int(length) > _MAX_BODY_BYTES:
            self.close_connection = True
            raise _HandledError(HTTPStatus.BAD_REQUEST, f"body over {_MAX_BODY_BYTES} bytes", "bad_request")
        raw = self.rfile.read(int(length))
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise _HandledError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {error}", "bad_request") from None
        if not isinstance(body, dict):
            raise _HandledError(HTTPStatus.BAD_REQUEST, "body must be a JSON object", "bad_request")
        return body

    def _infer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        config = self.stub.config
        model = body.get("model")
        if model != config.model and not config.permissive:
            raise _HandledError(HTTPStatus.NOT_FOUND, f"the model {model!r} does not exist", "model_not_found")
        if body.get("stream"):
            raise _HandledError(HTTPStatus.BAD_REQUEST, "stream=true is not supported", "bad_request")
        if path == "/v1/chat/completions":
            return _chat_response(config, body)
        if path == "/v1/completions":
            return _completion_response(config, body)
        return _embedding_response(config, body)

    def _answer_inference(self, path: str, body: dict[str, Any], reply: dict[str, Any]) -> None:
        stub = self.stub
        limit = stub.config.crash_after
        with stub.lock:
            stub.admitted += 1
            over_budget = limit is not None and stub.admitted > limit
            dying = over_budget and stub.answered >= (limit or 0)
        if dying:
            self._crash(limit)
        if over_budget:
            threading.Event().wait()  # the process is about to die: this request never gets an answer
        with stub.slots:  # at most max_num_seqs run at once; the others wait
            stub.waiting += 1
            while stub.running >= stub.config.max_num_seqs:
                stub.slots.wait()
            stub.waiting -= 1
            stub.running += 1
        try:
            stub.gate.wait()
            if stub.config.latency_s:
                time.sleep(stub.config.latency_s)
            stub.log_request(path, HTTPStatus.OK, body)
        finally:
            with stub.slots:  # generated: the slot goes to the next waiting request
                stub.running -= 1
                stub.slots.notify()
        with stub.lock:
            stub.replying += 1
        try:
            self._send(HTTPStatus.OK, reply)
        finally:
            with stub.lock:
                stub.answered += 1
                crash = limit is not None and stub.answered >= limit
            if crash:
                self._crash(limit)

    def _crash(self, limit: int | None) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
        print(f"stub-server {self.stub.config.replica_id}: crashing after {limit} answered requests", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_CRASHED)

    def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Replica-Id", self.stub.config.replica_id)
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: HTTPStatus, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Replica-Id", self.stub.config.replica_id)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: _HandledError) -> None:
        kind = "invalid_request_error" if error.status != HTTPStatus.UNAUTHORIZED else "authentication_error"
        self._send(error.status, {"error": {"message": str(error), "type": kind, "param": None, "code": error.code}})


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _requested_max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _HandledError(HTTPStatus.BAD_REQUEST, f"{key} must be a positive integer", "bad_request")
        return value
    return None


def _choice_count(body: dict[str, Any]) -> int:
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 16:
        raise _HandledError(HTTPStatus.BAD_REQUEST, "n must be an integer in [1, 16]", "bad_request")
    return n


def _message_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _HandledError(HTTPStatus.BAD_REQUEST, "messages must be a non-empty list", "bad_request")
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise _HandledError(HTTPStatus.BAD_REQUEST, "every message needs a role", "bad_request")
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [
                str(p["text"]) for p in content if isinstance(p, dict) and p.get("type") == "text" and "text" in p
            ]
    return "\n".join(parts)


def _chat_response(config: StubServerConfig, body: dict[str, Any]) -> dict[str, Any]:
    prompt = _message_text(body)
    n = _choice_count(body)
    limit = _requested_max_tokens(body)
    response_format = body.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise _HandledError(HTTPStatus.BAD_REQUEST, "response_format must be an object", "bad_request")
    digest = request_digest(body)
    text, finish_reason = chat_reply(config.replica_id, digest, prompt, response_format, config.max_tokens, limit)
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
    choices = [{**choice, "index": index} for index in range(n)]
    return {
        "id": f"chatcmpl-{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": config.model,
        "choices": choices,
        "usage": _usage(word_count(prompt), n * word_count(text)),
    }


def _completion_response(config: StubServerConfig, body: dict[str, Any]) -> dict[str, Any]:
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise _HandledError(HTTPStatus.BAD_REQUEST, "prompt must be a string or a list of strings", "bad_request")
    n = _choice_count(body)
    limit = _requested_max_tokens(body)
    digest = request_digest(body)
    choices: list[dict[str, Any]] = []
    completion_tokens = 0
    for position in range(len(prompts)):
        words, finish_reason = completion_words(config.replica_id, f"{digest}{position}", config.max_tokens, limit)
        for _ in range(n):
            text = " ".join(words)
            completion_tokens += len(words)
            choices.append({"index": len(choices), "text": text, "logprobs": None, "finish_reason": finish_reason})
    return {
        "id": f"cmpl-{digest[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": config.model,
        "choices": choices,
        "usage": _usage(sum(word_count(p) for p in prompts), completion_tokens),
    }


def _embedding_response(config: StubServerConfig, body: dict[str, Any]) -> dict[str, Any]:
    given = body.get("input")
    inputs = [given] if isinstance(given, str) else given
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
        raise _HandledError(HTTPStatus.BAD_REQUEST, "input must be a string or a list of strings", "bad_request")
    data = [{"object": "embedding", "index": i, "embedding": embedding_vector(text)} for i, text in enumerate(inputs)]
    prompt_tokens = sum(word_count(text) for text in inputs)
    return {"object": "list", "data": data, "model": config.model, "usage": _usage(prompt_tokens, 0)}


_VOCABULARY = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "iris", "juniper", "kelp")
_RESPONSE_SCHEMA = re.compile(r"<response_schema>\s*(\{.*?\})\s*</response_schema>", re.DOTALL)
_CODE_LANGUAGE = re.compile(r"Your response must be code written in ([A-Za-z0-9_+#-]+)\.")
_HASH_COMMENT_LANGUAGES = frozenset({"python", "bash", "ruby", "r", "perl", "shell", "sh"})


def request_digest(body: Any) -> str:
    """sha256 of the canonical JSON of a request body: the seed of every answer to it."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def word_count(text: str) -> int:
    """The stub's token count: whitespace-split words."""
    return len(text.split())


def completion_words(replica_id: str, seed: str, full: int, limit: int | None) -> tuple[list[str], str]:
    """``replica=<id> req=<digest12>`` then vocabulary words drawn from ``seed``: ``full`` words, cut at ``limit``."""
    stream = hashlib.sha256(seed.encode()).digest()
    words = [f"replica={replica_id}", f"req={seed[:12]}"]
    while len(words) < full:
        if len(stream) < 2:
            stream = hashlib.sha256(stream + seed.encode()).digest() + stream
        words.append(_VOCABULARY[stream[0] % len(_VOCABULARY)])
        stream = stream[1:]
    if limit is not None and limit < len(words):
        return words[:limit], "length"
    return words, "stop"


def chat_reply(
    replica_id: str, digest: str, prompt: str, response_format: dict[str, Any] | None, full: int, limit: int | None
) -> tuple[str, str]:
    """The assistant text for a chat request and its finish reason (structured answers are never cut)."""
    kind = response_format.get("type") if response_format else None
    if kind == "json_schema" and response_format is not None:
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return json.dumps(instance_for_schema(schema if isinstance(schema, dict) else {}, replica_id, digest)), "stop"
    if kind == "json_object":
        return json.dumps({"replica_id": replica_id, "digest": digest[:12]}), "stop"
    embedded = _RESPONSE_SCHEMA.search(prompt)
    if embedded is not None:
        with contextlib.suppress(json.JSONDecodeError):
            schema = json.loads(embedded.group(1))
            if isinstance(schema, dict):
                return f"```json\n{json.dumps(instance_for_schema(schema, replica_id, digest))}\n```", "stop"
    words, finish_reason = completion_words(replica_id, digest, full, limit)
    language = _CODE_LANGUAGE.search(prompt)
    if language is not None:
        name = language.group(1).lower()
        comment = "#" if name in _HASH_COMMENT_LANGUAGES else ("--" if name == "sql" else "//")
        return f"```{name}\n{comment} {' '.join(words)}\n```", "stop"
    return " ".join(words), finish_reason


def instance_for_schema(schema: dict[str, Any], replica_id: str, digest: str) -> Any:
    """A small deterministic value satisfying a simple JSON schema (objects, arrays, enums, refs, bounds)."""
    return _instance(schema, schema, replica_id, digest, "value", 0)


def _instance(node: Any, root: dict[str, Any], replica_id: str, digest: str, name: str, depth: int) -> Any:
    if not isinstance(node, dict) or depth > 32:
        return None
    if "$ref" in node:
        target: Any = root
        for part in str(node["$ref"]).removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) and part else target
        return _instance(target, root, replica_id, digest, name, depth + 1)
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        options = [o for o in node.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return _instance(options[0], root, replica_id, digest, name, depth + 1)
    if isinstance(node.get("allOf"), list):
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            merged.update(part if isinstance(part, dict) else {})
        return _instance(merged, root, replica_id, digest, name, depth + 1)
    kind = node.get("type", "object" if "properties" in node else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = node.get("properties", {})
        return {key: _instance(sub, root, replica_id, digest, key, depth + 1) for key, sub in properties.items()}
    if kind == "array":
        count = max(int(node.get("minItems", 1)), 1)
        return [_instance(node.get("items", {}), root, replica_id, digest, name, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number_for(node, integer=kind == "integer")
    if kind == "boolean":
        return int(digest[:2], 16) % 2 == 0
    if kind == "null":
        return None
    return _string_for(node, replica_id, digest, name)


def _number_for(node: dict[str, Any], *, integer: bool) -> float:
    exclusive = "minimum" not in node and isinstance(node.get("exclusiveMinimum"), int | float)
    low = node.get("minimum", node.get("exclusiveMinimum", 0))
    value: float = (low if isinstance(low, int | float) else 0) + (1 if exclusive else 0)
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if isinstance(high, int | float) and value >= high:
        value = (value - 1 + high) / 2 if exclusive or "exclusiveMaximum" in node else high
    return math.ceil(value) if integer else float(value)


def _string_for(node: dict[str, Any], replica_id: str, digest: str, name: str) -> str:
    special = {"date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z", "email": "stub@example.com"}
    text = special.get(str(node.get("format")), f"{name} replica={replica_id} req={digest[:12]}")
    minimum = int(node.get("minLength", 0))
    text = text + "x" * max(minimum - len(text), 0)
    maximum = node.get("maxLength")
    return text[: int(maximum)] if isinstance(maximum, int) else text


def embedding_vector(text: str, dimensions: int = 8) -> list[float]:
    raw = hashlib.sha256(text.encode()).digest()
    return [round(byte / 255 - 0.5, 6) for byte in raw[:dimensions]]
