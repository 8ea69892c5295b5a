"""The external-endpoint preflight over real sockets: the in-tree test server, closed ports, silent sockets, TLS,
canned answers and a tiny recording proxy, each classified and never showing the key.
"""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from data_designer.slurm.contracts import EndpointPlan
from data_designer.slurm.contracts.records import EXIT_CODES
from data_designer.slurm.runtime.supervisor._preflight import (
    EndpointCheck,
    check_external_endpoints,
    environment_proxies,
    models_url,
    preflight_failure,
    proxy_for,
)
from data_designer.slurm.runtime.testing import StubModelServer, StubServerConfig, closed_port

MODEL = "stub/external"
KEY = "preflight-secret-3f9a"
KEY_ENV = "EXT_KEY"
PROXY_NAMES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def external(endpoint: str, *, alias: str = "judge", key_env: str | None = KEY_ENV) -> EndpointPlan:
    return EndpointPlan(
        alias=alias, kind="external", model=MODEL, endpoint=endpoint, api_key_env=key_env, concurrency=1
    )


def check_one(endpoint: EndpointPlan, environ: dict[str, str], *, timeout_s: float = 5.0) -> EndpointCheck:
    (check,) = check_external_endpoints([endpoint], environ, timeout_s=timeout_s)
    assert KEY not in repr(check)
    assert KEY not in check.describe()
    return check


class Canned(ThreadingHTTPServer):
    """Answers every request (CONNECT included) with one status, and records each request line and headers."""

    daemon_threads = True

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _CannedHandler)
        self.status, self.extra = status, headers or {}
        self.seen: list[tuple[str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _CannedHandler(BaseHTTPRequestHandler):
    server: Canned

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _answer(self) -> None:
        self.server.seen.append((self.requestline, dict(self.headers.items())))
        body = b'{"object": "list", "data": []}'
        self.send_response(self.server.status)
        for name, value in self.server.extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_CONNECT = _answer


@pytest.fixture
def stub() -> Iterator[StubModelServer]:
    with StubModelServer(StubServerConfig(model=MODEL, replica_id="ext", api_key=KEY)) as server:
        yield server


CannedFactory = Callable[..., Canned]


@pytest.fixture
def canned() -> Iterator[CannedFactory]:
    """``canned(status, headers=None, tls=None)`` starts a :class:`Canned` server; all are shut down afterwards."""
    started: list[Canned] = []

    def start(status: int, headers: dict[str, str] | None = None, tls: ssl.SSLContext | None = None) -> Canned:
        server = Canned(status, headers)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def test_a_served_endpoint_with_its_key_is_reachable(stub: StubModelServer) -> None:
    check = check_one(external(stub.base_url), {KEY_ENV: KEY})
    assert (check.alias, check.url, check.outcome, check.http_status) == (
        "judge",
        f"{stub.base_url}/models",
        "reachable",
        200,
    )
    assert (check.detail, check.api_key_env, check.proxy) == ("HTTP 200", KEY_ENV, None)
    assert preflight_failure([check]) is None


def test_only_external_aliases_are_checked_in_order(stub: StubModelServer) -> None:
    deployed = EndpointPlan(alias="writer", kind="deployed", model="m", replicas=(0,), concurrency=1)
    endpoints = [deployed, external(stub.base_url, alias="b"), external(stub.base_url + "/", alias="a")]
    checks = check_external_endpoints(endpoints, {KEY_ENV: KEY})
    assert [(c.alias, c.url, c.outcome) for c in checks] == [
        ("b", f"{stub.base_url}/models", "reachable"),
        ("a", f"{stub.base_url}/models", "reachable"),
    ]


def test_models_url_joins_any_base() -> None:
    assert models_url("https://api.example/v1") == "https://api.example/v1/models"
    assert models_url("https://api.example/v1/") == "https://api.example/v1/models"
    assert models_url("https://api.example") == "https://api.example/models"
    assert models_url("https://api.example/v1?tenant=a#x") == "https://api.example/v1/models?tenant=a"


def test_a_wrong_key_is_rejected_and_classified_invalid_config(stub: StubModelServer) -> None:
    check = check_one(external(stub.base_url), {KEY_ENV: "not-" + KEY})
    assert (check.outcome, check.http_status) == ("key_rejected", 401)
    failure = preflight_failure([check])
    assert failure is not None
    status, message = failure
    assert (status, EXIT_CODES[status]) == ("invalid_config", 2)
    assert message == (
        f"external endpoint 'judge' (GET {stub.base_url}/models): HTTP 401: the endpoint refused the key in EXT_KEY; "
        "fix: set EXT_KEY to a key this endpoint accepts"
    )
    assert KEY not in message


def test_an_endpoint_wanting_a_key_the_run_does_not_name_is_invalid_config(stub: StubModelServer) -> None:
    check = check_one(external(stub.base_url, key_env=None), {KEY_ENV: KEY})
    assert (check.outcome, check.http_status) == ("key_rejected", 401)
    failure = preflight_failure([check])
    assert failure is not None
    assert failure[0] == "invalid_config"
    assert "fix: name the variable holding the key in external.judge.api_key_env" in failure[1]


def test_an_unset_key_variable_is_invalid_config_without_a_request(canned: CannedFactory) -> None:
    server = canned(200)
    for environ in ({}, {KEY_ENV: ""}):
        check = check_one(external(server.url + "/v1"), environ)
        assert (check.outcome, check.http_status) == ("key_missing", None)
        failure = preflight_failure([check])
        assert failure is not None
        assert failure[0] == "invalid_config"
        assert "the variable EXT_KEY is not set or empty in the job's environment" in failure[1]
        assert "fix: set EXT_KEY (not empty) in the shell that runs 'execute'" in failure[1]
    assert server.seen == []


def test_a_key_no_header_can_carry_is_invalid_config_without_a_request(canned: CannedFactory) -> None:
    server = canned(200)
    (check,) = check_external_endpoints([external(server.url + "/v1")], {KEY_ENV: KEY + "\n"})
    assert (check.outcome, check.detail) == (
        "key_rejected",
        "the value of EXT_KEY holds a line break or NUL, which no HTTP header carries",
    )
    failure = preflight_failure([check])
    assert failure is not None
    assert failure[0] == "invalid_config"
    assert KEY not in failure[1]
    assert server.seen == []


def test_a_closed_port_is_unreachable_exit_15() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    check = check_one(external(url), {KEY_ENV: KEY})
    assert (check.outcome, check.detail, check.http_status) == ("unreachable", "connection refused", None)
    failure = preflight_failure([check])
    assert failure is not None
    status, message = failure
    assert (status, EXIT_CODES[status]) == ("endpoint_unreachable", 15)
    assert message.startswith(
        f"external endpoint 'judge' (GET {url}/models) is unreachable from the allocation: connection refused; "
        "fix: check external.judge.endpoint in the run file and that the compute nodes reach it"
    )
    assert "https_proxy, http_proxy and no_proxy are listed under the profile's 'environment'" in message


def test_a_socket_that_accepts_and_never_answers_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        check = check_one(external(url), {KEY_ENV: KEY}, timeout_s=0.5)
    assert (check.outcome, check.detail) == ("unreachable", "no answer within 0.5s")
    assert 0.5 <= check.elapsed_s < 5


@pytest.mark.parametrize(
    ("status", "outcome", "detail"),
    [
        (204, "reachable", "HTTP 204"),
        (404, "reachable", "HTTP 404"),
        (405, "reachable", "HTTP 405"),
        (429, "reachable", "HTTP 429"),
        (403, "key_rejected", "HTTP 403: the endpoint refused the key in EXT_KEY"),
        (407, "unreachable", "HTTP 407: the proxy asks for credentials"),
        (500, "unreachable", "HTTP 500: the endpoint answers but cannot serve"),
        (503, "unreachable", "HTTP 503: the endpoint answers but cannot serve"),
    ],
)
def test_http_answers_are_classified(canned: CannedFactory, status: int, outcome: str, detail: str) -> None:
    server = canned(status)
    check = check_one(external(server.url + "/v1"), {KEY_ENV: KEY})
    assert (check.outcome, check.detail, check.http_status) == (outcome, detail, status)
    [(line, headers)] = server.seen
    assert line == "GET /v1/models HTTP/1.1"
    assert headers["Authorization"] == f"Bearer {KEY}"


def test_a_missing_route_on_the_test_server_is_still_reachable(stub: StubModelServer) -> None:
    check = check_one(external(stub.base_url.removesuffix("/v1") + "/elsewhere"), {KEY_ENV: KEY})
    assert (check.outcome, check.http_status) == ("reachable", 404)


def test_a_redirect_is_not_followed_so_the_key_stays_with_the_endpoint(canned: CannedFactory) -> None:
    elsewhere = canned(200)
    server = canned(302, {"Location": elsewhere.url + "/v1/models"})
    check = check_one(external(server.url + "/v1"), {KEY_ENV: KEY})
    assert (check.outcome, check.http_status) == ("reachable", 302)
    assert elsewhere.seen == []


def test_tls_to_a_plain_http_server_fails(canned: CannedFactory) -> None:
    server = canned(200)
    url = server.url.replace("http://", "https://") + "/v1"
    check = check_one(external(url), {KEY_ENV: KEY})
    assert check.outcome == "unreachable"
    assert check.detail.startswith("TLS failed: "), check.detail


def test_tls_certificates_are_verified(tmp_path: Path, canned: CannedFactory) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    _self_signed(cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = canned(200, tls=context)
    url = server.url.replace("http://", "https://") + "/v1"
    check = check_one(external(url), {KEY_ENV: KEY})
    assert check.outcome == "unreachable"
    assert check.detail.startswith("TLS certificate verification failed: "), check.detail
    # The same endpoint is reachable for an opener that trusts the certificate: the failure was verification.
    trusting = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cert)))
    (trusted,) = check_external_endpoints(
        [external(url.replace("127.0.0.1", "localhost"))], {KEY_ENV: KEY}, opener=trusting
    )
    assert (trusted.outcome, trusted.http_status) == ("reachable", 200)


def _self_signed(cert: Path, key: Path) -> None:
    """A certificate for ``localhost`` signed by its own key (``cryptography``, locked through the host's deps)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def test_a_name_that_does_not_resolve_is_unreachable() -> None:
    class Unresolvable(urllib.request.OpenerDirector):
        def open(self, fullurl: object, data: object = None, timeout: float | None = None) -> object:
            raise urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))

    (check,) = check_external_endpoints(
        [external("https://api.example.invalid/v1")], {KEY_ENV: KEY}, opener=Unresolvable()
    )
    assert (check.outcome, check.detail) == (
        "unreachable",
        "the host name does not resolve (Name or service not known)",
    )


def test_an_http_proxy_from_the_environment_is_used(canned: CannedFactory) -> None:
    proxy = canned(200)
    environ = {KEY_ENV: KEY, "http_proxy": proxy.url.replace("http://", "http://user:p%40ss@")}
    check = check_one(external("http://models.example.invalid/v1"), environ)
    assert (check.outcome, check.proxy) == ("reachable", proxy.url)
    [(line, headers)] = proxy.seen
    assert line == "GET http://models.example.invalid/v1/models HTTP/1.1"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Proxy-Authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss


def test_an_https_endpoint_is_tunnelled_through_the_https_proxy(canned: CannedFactory) -> None:
    proxy = canned(502)
    host = proxy.url.removeprefix("http://")
    check = check_one(external("https://models.example.invalid/v1"), {KEY_ENV: KEY, "HTTPS_PROXY": host})
    assert (check.outcome, check.proxy) == ("unreachable", proxy.url)
    assert "502" in check.detail
    [(line, headers)] = proxy.seen
    assert line == "CONNECT models.example.invalid:443 HTTP/1.0"
    assert "Authorization" not in headers, "the key travels inside the tunnel only"
    failure = preflight_failure([check])
    assert failure is not None
    assert f"(GET https://models.example.invalid/v1/models via proxy {proxy.url}) is unreachable" in failure[1]


def test_a_dead_proxy_makes_a_live_endpoint_unreachable_unless_no_proxy_bypasses_it(stub: StubModelServer) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    check = check_one(external(stub.base_url), {KEY_ENV: KEY, "http_proxy": dead})
    assert (check.outcome, check.detail, check.proxy) == ("unreachable", "connection refused", dead)
    for no_proxy in ("127.0.0.1", "localhost, 127.0.0.1", f"127.0.0.1:{stub.port}", "*"):
        bypassed = check_one(external(stub.base_url), {KEY_ENV: KEY, "http_proxy": dead, "NO_PROXY": no_proxy})
        assert (bypassed.outcome, bypassed.proxy) == ("reachable", None), no_proxy


def test_the_given_environment_is_used_never_this_process_s(
    stub: StubModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROXY_NAMES:
        monkeypatch.setenv(name, f"http://127.0.0.1:{closed_port()}")
    assert check_one(external(stub.base_url), {KEY_ENV: KEY}).outcome == "reachable"
    for name in PROXY_NAMES:
        monkeypatch.delenv(name)
    monkeypatch.setenv(KEY_ENV, KEY)
    assert check_one(external(stub.base_url), {}).outcome == "key_missing"


def test_proxy_variables_follow_the_client_s_rules() -> None:
    environ = {
        "HTTP_PROXY": "http://upper:1",
        "http_proxy": "http://lower:1",
        "ALL_PROXY": "fallback:3128",
        "no_proxy": ".corp.example,internal:8443",
        "NOT_A_PROXY_VAR": "x",
        "ftp_proxy": "",
    }
    proxies = environment_proxies(environ)
    assert proxies == {"http": "http://lower:1", "all": "fallback:3128", "no": ".corp.example,internal:8443"}
    assert proxy_for("http://api.example/v1/models", proxies) == "http://lower:1"
    assert proxy_for("https://api.example/v1/models", proxies) == "http://fallback:3128"
    assert proxy_for("https://a.corp.example/v1/models", proxies) is None
    assert proxy_for("https://corp.example/v1/models", proxies) is None
    assert proxy_for("https://notcorp.example/v1/models", proxies) == "http://fallback:3128"
    assert proxy_for("https://internal:8443/v1/models", proxies) is None
    assert proxy_for("https://internal/v1/models", proxies) == "http://fallback:3128"
    assert proxy_for("https://api.example/v1/models", {}) is None


def test_a_key_problem_outranks_unreachable_and_every_failure_is_named(stub: StubModelServer) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    endpoints = [
        external(stub.base_url, alias="ok"),
        external(dead, alias="down"),
        external(stub.base_url, alias="bad"),
    ]
    checks = check_external_endpoints(endpoints, {KEY_ENV: KEY})
    assert [c.outcome for c in checks] == ["reachable", "unreachable", "reachable"]
    wrong = check_external_endpoints([endpoints[2]], {KEY_ENV: "wrong"})
    failure = preflight_failure([*checks, *wrong])
    assert failure is not None
    status, message = failure
    assert status == "invalid_config"
    parts = message.split("; fix: ")
    assert len(parts) == 3
    assert parts[0].startswith("external endpoint 'down' ")
    assert "external endpoint 'bad' " in parts[1]
    assert "'ok'" not in message
