"""Run-file URLs and engine-arg values: endpoints without credentials, health paths on the replica's host."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from data_designer.slurm.contracts import CommandDeployment, ExternalEndpoint, VllmDeployment


def endpoint_error(url: str) -> str:
    with pytest.raises(ValidationError) as info:
        ExternalEndpoint.model_validate({"endpoint": url})
    (error,) = info.value.errors()
    return str(error["type"])


@pytest.mark.parametrize(
    "url",
    ["https://integrate.api.nvidia.com/v1", "http://10.0.0.5:8000/v1", "http://[::1]:8000", "HTTPS://Host.Example/v1/"],
)
def test_http_endpoints_with_a_host_are_accepted(url: str) -> None:
    assert ExternalEndpoint.model_validate({"endpoint": url}).endpoint == url


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("file:///etc/passwd", "endpoint_scheme"),
        ("ftp://host/x", "endpoint_scheme"),
        ("javascript:alert(1)", "endpoint_scheme"),
        ("api.example.com/v1", "endpoint_scheme"),
        ("https://user:password@host/v1", "endpoint_userinfo"),
        ("https://user@host/v1", "endpoint_userinfo"),
        ("https://:8000/v1", "endpoint_host"),
        ("https:///v1", "endpoint_host"),
        ("https://host:99999/v1", "endpoint_url"),
        ("https://host:0/v1", "endpoint_url"),
        ("https://[::1/v1", "endpoint_url"),
        ("https://host/v1?key=x", "endpoint_query"),
        ("https://host/v1#x", "endpoint_query"),
        ("https://host/v1?", "endpoint_query"),
        ("https://host/v 1", "endpoint_character"),
        ("https://host\\@evil/v1", "endpoint_character"),
        ("https://host/v1\n", "endpoint_character"),
    ],
)
def test_other_endpoints_are_refused_with_a_stable_code(url: str, code: str) -> None:
    assert endpoint_error(url) == code


def test_the_userinfo_refusal_never_shows_the_password() -> None:
    with pytest.raises(ValidationError) as info:
        ExternalEndpoint.model_validate({"endpoint": "https://bob:hunter2@host/v1"})
    (error,) = info.value.errors()
    assert "hunter2" not in error["msg"]
    assert "hunter2" not in str(error.get("ctx"))


def command(**update: object) -> dict[str, object]:
    return {"engine": "command", "argv": ["serve"], "model": "m", **update}


@pytest.mark.parametrize("path", ["/health", "/v1/models", "/health?ready=1", "/a:b/%20/~x"])
def test_absolute_url_paths_are_health_paths(path: str) -> None:
    assert CommandDeployment.model_validate(command(health_path=path)).health_path == path


@pytest.mark.parametrize(
    "path",
    [
        "@evil.example:80/health",
        "health",
        "//evil.example/health",
        "/a@evil.example",
        "http://evil.example/health",
        "/health#x",
        "/he alth",
        "/health\n",
        "/he\\alth",
        "",
        "/h\u00e9",
    ],
)
def test_a_health_path_cannot_change_the_host_or_hold_odd_characters(path: str) -> None:
    with pytest.raises(ValidationError) as info:
        CommandDeployment.model_validate(command(health_path=path))
    assert [e["type"] for e in info.value.errors()] == ["url_path"]


@given(st.text(max_size=30))
def test_every_accepted_health_path_keeps_the_replica_host(path: str) -> None:
    from urllib.parse import urlsplit

    try:
        deployment = CommandDeployment.model_validate(command(health_path=path))
    except ValidationError:
        return
    assert urlsplit(f"http://10.0.0.1:8000{deployment.health_path}").netloc == "10.0.0.1:8000"


@pytest.mark.parametrize("value", ["a\x00b", "line\nbreak", "del\x7f", "tab\t"])
def test_engine_arg_values_are_printable_text(value: str) -> None:
    with pytest.raises(ValidationError) as info:
        VllmDeployment.model_validate({"engine": "vllm", "model": "m", "engine_args": {"chat-template": value}})
    assert "control_character" in {e["type"] for e in info.value.errors()}


def test_engine_arg_values_may_be_empty_or_any_printable_text() -> None:
    args = {"chat-template": "", "override-generation-config": '{"temperature": 0.5}', "x": "é ✓"}
    deployment = VllmDeployment.model_validate({"engine": "vllm", "model": "m", "engine_args": args})
    assert deployment.engine_args == args
