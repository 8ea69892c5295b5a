"""The reachability preflight of external endpoints, run inside the allocation before generation starts.

For each alias the plan serves from an external endpoint (``EndpointPlan.kind == "external"``),
:func:`check_external_endpoints` makes one ``GET <endpoint>/models`` from the node the client runs on,
with ``Authorization: Bearer $<api_key_env>`` when the endpoint names a key variable, and returns one
:class:`EndpointCheck` per alias. :func:`preflight_failure` turns the checks into the attempt's
classification and one message naming each failing alias, its URL and the fix.

- **Outcomes.** Any HTTP answer below 500 other than 401, 403 and 407 is ``reachable`` (404 and 405
  included: not every OpenAI-compatible server lists its models). 401/403 is ``key_rejected`` (so is a
  key no HTTP header can carry); a key variable named but unset or empty is ``key_missing`` (no request
  is made for either); both end the attempt as ``invalid_config`` (exit 2): a retry cannot fix them.
  Everything else is ``unreachable`` and ends it as ``endpoint_unreachable`` (exit 15): no DNS answer,
  refused, no answer within the timeout, a TLS failure, a proxy that refused (407 included), or a 5xx
  answer (it answers, but cannot serve now).
- **Proxies.** Unlike the node-local health checks, an external endpoint may only be reachable through
  the site's proxy, so the environment's proxy variables are honoured the way the client's HTTP stack
  (httpx) reads them: ``<scheme>_proxy`` then ``all_proxy`` (lower case before upper case), a proxy
  without a scheme is ``http://``, and ``no_proxy`` (``*``, host names, domain suffixes, optional
  ``:port``) bypasses them. They are read from the ``environ`` given, never from this process's.
- **TLS** is verified (the default context: system CAs, ``SSL_CERT_FILE``/``SSL_CERT_DIR``).
- **Redirects are not followed**: a 3xx answer is reachable, and the key never travels to another host.
- **The key is never printed or kept**: no :class:`EndpointCheck` field, message or exception text
  holds it; the bodies of answers are not read.

Each request has ``timeout_s`` per socket operation (connect, each read); name resolution is the
system resolver's and not bounded by it.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from data_designer.slurm.contracts import EndpointPlan
from data_designer.slurm.contracts.records import FinalStatus

DEFAULT_TIMEOUT_S = 10.0
USER_AGENT = "data-designer-slurm-preflight"

PreflightOutcome = Literal["reachable", "key_rejected", "key_missing", "unreachable"]
"""How one external endpoint answered the preflight (see the module docstring)."""

_FAILURE_STATUS: dict[str, FinalStatus] = {
    "key_rejected": "invalid_config",
    "key_missing": "invalid_config",
    "unreachable": "endpoint_unreachable",
}


@dataclass(frozen=True)
class EndpointCheck:
    """The preflight of one external alias: what was asked, through which proxy, and how it ended (no key)."""

    alias: str
    url: str
    outcome: PreflightOutcome
    detail: str
    http_status: int | None = None
    api_key_env: str | None = None
    proxy: str | None = None
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """One line for the supervisor's log."""
        via = f" via proxy {self.proxy}" if self.proxy else ""
        return f"preflight {self.alias}: GET {self.url}{via}: {self.outcome} ({self.detail}, {self.elapsed_s:.2f}s)"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx answer is an answer: following it could send the key to another host."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: object,
        code: int,
        msg: str,
        headers: object,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def default_opener() -> urllib.request.OpenerDirector:
    """No proxies of this process's environment (each request sets its own), no redirects, TLS verified."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def models_url(endpoint: str) -> str:
    """``<endpoint>/models`` for a base URL with or without a trailing slash (its query, if any, kept)."""
    parts = urllib.parse.urlsplit(endpoint)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/models", fragment=""))


def environment_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``{scheme: proxy URL, "no": no_proxy}`` from ``environ``; lower-case names win over upper-case ones."""
    proxies: dict[str, str] = {}
    for upper_first in (True, False):
        for name, value in environ.items():
            lowered = name.lower()
            if value and lowered.endswith("_proxy") and (name.isupper() if upper_first else name == lowered):
                proxies[lowered.removesuffix("_proxy")] = value
    return proxies


def proxy_for(url: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy URL a request for ``url`` goes through, or None (no proxy set, or ``no_proxy`` matches)."""
    parts = urllib.parse.urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or _bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    host = host.lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        name = name.strip("[]").lstrip(".")
        if not name or (entry_port and entry_port != str(port)):
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def check_external_endpoints(
    endpoints: Sequence[EndpointPlan],
    environ: Mapping[str, str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    opener: urllib.request.OpenerDirector | None = None,
) -> tuple[EndpointCheck, ...]:
    """One :class:`EndpointCheck` per external alias of ``endpoints``, in their order (deployed ones are skipped)."""
    opener = opener if opener is not None else default_opener()
    proxies = environment_proxies(environ)
    return tuple(
        _check(endpoint, environ, proxies, timeout_s=timeout_s, opener=opener)
        for endpoint in endpoints
        if endpoint.kind == "external"
    )


def _check(
    endpoint: EndpointPlan,
    environ: Mapping[str, str],
    proxies: Mapping[str, str],
    *,
    timeout_s: float,
    opener: urllib.request.OpenerDirector,
) -> EndpointCheck:
    url = models_url(endpoint.endpoint or "")
    proxy = proxy_for(url, proxies)
    shown_proxy = _without_credentials(proxy) if proxy else None

    def check(outcome: PreflightOutcome, detail: str, status: int | None = None) -> EndpointCheck:
        elapsed = round(time.monotonic() - started, 3)
        return EndpointCheck(endpoint.alias, url, outcome, detail, status, endpoint.api_key_env, shown_proxy, elapsed)

    started = time.monotonic()
    key_env = endpoint.api_key_env
    key = environ.get(key_env, "") if key_env else ""
    if key_env and not key:
        return check("key_missing", f"the variable {key_env} is not set or empty in the job's environment")
    if any(character in key for character in "\r\n\0"):
        return check("key_rejected", f"the value of {key_env} holds a line break or NUL, which no HTTP header carries")
    try:
        request = _request(url, key, proxy)
        with opener.open(request, timeout=timeout_s) as answer:
            status: int = answer.status
    except urllib.error.HTTPError as exc:
        exc.close()
        status = exc.code
    except (OSError, http.client.HTTPException, ValueError) as exc:
        detail = _failure(exc, timeout_s)
        return check("unreachable", detail.replace(key, "<key>") if key else detail)  # never echo the key
    detail = f"HTTP {status}"
    if status in (401, 403):
        sent = f"the key in {key_env}" if key_env else "no key (the run file names no api_key_env)"
        return check("key_rejected", f"{detail}: the endpoint refused {sent}", status)
    if status == 407:
        return check("unreachable", f"{detail}: the proxy asks for credentials", status)
    if status >= 500:
        return check("unreachable", f"{detail}: the endpoint answers but cannot serve", status)
    return check("reachable", detail, status)


def _request(url: str, key: str, proxy: str | None) -> urllib.request.Request:
    request = urllib.request.Request(url, method="GET", headers={"User-Agent": USER_AGENT})
    if key:
        request.add_unredirected_header("Authorization", f"Bearer {key}")
    if proxy is not None:
        parts = urllib.parse.urlsplit(proxy)
        if parts.username is not None:
            credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            request.add_header("Proxy-Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
        # What urllib's ProxyHandler does, minus its no_proxy check against this process's environment: an
        # https URL is tunnelled (CONNECT), an http URL is asked of the proxy by its full URL.
        request.set_proxy(parts.netloc.rpartition("@")[2], parts.scheme)
    return request


def _without_credentials(proxy: str) -> str:
    parts = urllib.parse.urlsplit(proxy)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _failure(exc: BaseException, timeout_s: float) -> str:
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {reason.verify_message}"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed: {reason.reason or reason}"
    if isinstance(reason, socket.gaierror):
        return f"the host name does not resolve ({reason.strerror})"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout_s:g}s"
    if isinstance(reason, http.client.RemoteDisconnected):
        return "the connection was closed without an answer"
    return reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"


def preflight_failure(checks: Sequence[EndpointCheck]) -> tuple[FinalStatus, str] | None:
    """How the attempt ends when a check failed (``invalid_config`` before ``endpoint_unreachable``), or None.

    The message names every failing alias with its URL and the fix, in check order.
    """
    failed = [c for c in checks if c.outcome != "reachable"]
    if not failed:
        return None
    key_problem = any(_FAILURE_STATUS[c.outcome] == "invalid_config" for c in failed)
    status: FinalStatus = "invalid_config" if key_problem else "endpoint_unreachable"
    return status, "; ".join(_message(c) for c in failed)


def _message(check: EndpointCheck) -> str:
    where = f"external endpoint {check.alias!r} (GET {check.url}"
    where += f" via proxy {check.proxy})" if check.proxy else ")"
    alias = check.alias
    if check.outcome == "key_missing":
        return (
            f"{where}: {check.detail}; fix: set {check.api_key_env} (not empty) in the shell that runs 'execute': "
            "the job receives it by name"
        )
    if check.outcome == "key_rejected":
        fix = (
            f"set {check.api_key_env} to a key this endpoint accepts"
            if check.api_key_env
            else f"name the variable holding the key in external.{alias}.api_key_env"
        )
        return f"{where}: {check.detail}; fix: {fix}"
    return (
        f"{where} is unreachable from the allocation: {check.detail}; fix: check external.{alias}.endpoint in the "
        "run file and that the compute nodes reach it (a site proxy reaches the job only when https_proxy, "
        "http_proxy and no_proxy are listed under the profile's 'environment')"
    )
