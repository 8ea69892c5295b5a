"""URLs in run files: external endpoints and the health path of a command deployment.

An external endpoint is an ``http``/``https`` base URL with a host and no user information: a
password in ``https://user:pass@host/v1`` would be stored in the plan and printed by the preflight,
so credentials travel only through the variable ``api_key_env`` names. The refusal never shows the
password. A health path is appended to ``http://{host}:{port}`` by the supervisor, so it must be an
absolute URL path that cannot move the request to another host (``@evil.example/health``,
``//evil.example/health``); a query (``/health?ready=1``) is allowed, a fragment is not.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._redact import excerpt

ENDPOINT_SCHEMES = ("http", "https")
_PCHAR = r"A-Za-z0-9._~!$&'()*+,;=:%/-"
_URL_PATH = re.compile(rf"/(?!/)[{_PCHAR}]*(?:\?[{_PCHAR}?]*)?")
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")


def _endpoint_error(code: str, message: str, hint: str, **context: object) -> PydanticCustomError:
    return PydanticCustomError(code, message, {**context, "hint": hint})


def _http_endpoint(value: str) -> str:
    example = "e.g. 'https://integrate.api.nvidia.com/v1'"
    if _UNSAFE.search(value):
        raise _endpoint_error(
            "endpoint_character",
            "the endpoint contains a space, a backslash or a control character",
            f"write a plain http(s) URL, {example}",
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise _endpoint_error(
            "endpoint_url", "the endpoint is not a valid URL", f"write an http(s) URL, {example}"
        ) from exc
    if parts.scheme.lower() not in ENDPOINT_SCHEMES:
        raise _endpoint_error(
            "endpoint_scheme",
            "the endpoint's scheme {scheme} is not http or https",
            f"write an http(s) URL, {example}",
            scheme=excerpt(parts.scheme) if parts.scheme else "(none)",
        )
    if "@" in parts.netloc:
        raise _endpoint_error(
            "endpoint_userinfo",
            "the endpoint holds user information ('user:password@'), which would be stored in the plan",
            "remove it and name the variable holding the API key in 'api_key_env'",
        )
    if not parts.hostname:
        raise _endpoint_error("endpoint_host", "the endpoint names no host", f"write a host, {example}")
    if port == 0:
        raise _endpoint_error("endpoint_url", "the endpoint's port is 0", "write a port from 1 to 65535")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise _endpoint_error(
            "endpoint_query",
            "the endpoint has a query or fragment; it is a base URL that request paths are appended to",
            f"remove everything from '?' or '#', {example}",
        )
    return value


def _url_path(value: str) -> str:
    if not _URL_PATH.fullmatch(value):
        raise PydanticCustomError(
            "url_path",
            "health path {value} is not an absolute URL path",
            {
                "value": excerpt(value),
                "hint": "write a path starting with one '/', without '@', '#', spaces or a scheme, e.g. '/health'",
            },
        )
    return value


HttpEndpoint = Annotated[str, AfterValidator(_http_endpoint)]
"""An ``http``/``https`` base URL with a host, without user information, query or fragment."""

UrlPath = Annotated[str, AfterValidator(_url_path)]
"""An absolute URL path (``/health``, ``/v1/models?ready=1``) that cannot change the request's host."""
