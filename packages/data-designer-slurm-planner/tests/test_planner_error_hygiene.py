"""Errors about authored files name the file, key and fix, and never echo secrets or file contents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from data_designer.slurm.contracts import EXCERPT_LIMIT, InvalidInputError, Problem
from data_designer.slurm.planner import (
    Document,
    is_secret_like_key,
    load_base_run,
    load_benchmark,
    load_run,
    read_dd_config,
)

TOKEN = "nvapi-Zq8wX2cV5bN7mL1kJ4hG"
PASSWD = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n" * 20

DD: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write."}],
}


def run(**update: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": DD},
        "records": 10,
        "sharding": {"shards": 1},
        "deployments": {"writer": {"engine": "vllm", "model": "/models/m"}},
    }
    doc.update(update)
    return doc


def problems(text: str, file: str = "run.json") -> tuple[Problem, ...]:
    with pytest.raises(InvalidInputError) as caught:
        load_run(text, file=file)
    return caught.value.problems


def shown(found: tuple[Problem, ...]) -> str:
    return "\n".join(p.render() for p in found)


@pytest.mark.parametrize(
    "key",
    ["hfToken", "apiKey", "APIKey", "x-api-key", "clientSecret", "accessToken", "password", "Authorization", "cookie"],
)
def test_camel_kebab_and_snake_secret_names_are_secret_like(key: str) -> None:
    assert is_secret_like_key(key)


@pytest.mark.parametrize("key", ["maxTokens", "keyboard", "monkey", "secretary", "primaryKeys", "authorName"])
def test_words_that_merely_contain_a_secret_word_are_not(key: str) -> None:
    assert not is_secret_like_key(key)


def test_a_token_under_a_non_secret_key_is_reported_once_and_never_echoed() -> None:
    found = problems(json.dumps(run(records=TOKEN)))
    assert [(p.code, p.key_path) for p in found] == [("secret_literal", ("records",))]
    assert TOKEN not in shown(found)


def test_a_literal_under_a_secret_key_hides_every_other_problem_at_that_key() -> None:
    external = {"judge": {"endpoint": "https://h.example/v1", "api_key_env": "hunter2-is-my-password"}}
    found = problems(json.dumps(run(external=external)))
    assert [(p.code, p.key_path) for p in found] == [("secret_literal", ("external", "judge", "api_key_env"))]
    assert "hunter2" not in shown(found)


@pytest.mark.parametrize(
    "inline",
    [
        {**DD, "headers": {"Authorization": "Bearer opaque"}},
        {**DD, "extra_headers": ["Authorization: Bearer abc123def456ghi"]},
        {**DD, "model_providers": [{"name": "p", "endpoint": "https://h/v1", "hfToken": "abc"}]},
    ],
)
def test_authorization_headers_and_camel_case_secrets_in_an_inline_config_are_refused(inline: dict[str, Any]) -> None:
    found = problems(json.dumps(run(data_designer={"inline": inline})))
    assert {p.code for p in found} == {"secret_literal"}
    assert "opaque" not in shown(found)
    assert "abc123def456ghi" not in shown(found)


def test_a_data_designer_config_file_gets_the_same_secret_rules() -> None:
    data = {**DD, "model_providers": [{"name": "p", "api_key": "literal-key", "headers": {"x-api-key": "k"}}]}
    with pytest.raises(InvalidInputError) as caught:
        read_dd_config(Document(file="dd.yaml", data=data))
    assert [(p.code, p.key_path) for p in caught.value.problems] == [
        ("secret_literal", ("model_providers", 0, "api_key")),
        ("secret_literal", ("model_providers", 0, "headers", "x-api-key")),
    ]
    assert "literal-key" not in shown(caught.value.problems)


def test_a_file_of_another_kind_is_named_not_echoed() -> None:
    found = problems(PASSWD, file="/etc/passwd")
    assert [(p.code, p.file, p.key_path) for p in found] == [("not_a_document", "/etc/passwd", None)]
    assert "run file" in found[0].message
    assert "daemon" not in shown(found)
    assert "root:x" not in shown(found)


def test_a_benchmark_whose_base_run_is_not_a_run_file_does_not_print_it() -> None:
    benchmark = load_benchmark(
        json.dumps(
            {
                "schema_version": 1,
                "name": "b",
                "base": {"run": "/etc/passwd"},
                "axes": [{"axis": "replicas", "alias": "writer", "values": [1, 2]}],
                "records": {"policy": "fixed", "records": 10},
            }
        ),
        file="bench.json",
    )
    with pytest.raises(InvalidInputError) as caught:
        load_base_run(benchmark, PASSWD, file="bench.json")
    assert [(p.code, p.file) for p in caught.value.problems] == [("not_a_document", "/etc/passwd")]
    assert "daemon" not in str(caught.value)


def test_long_values_and_keys_are_cut_to_an_excerpt_with_their_length() -> None:
    long = "x" * 5000
    found = problems(json.dumps(run(name=long, **{"y" * 300: 1})))
    messages = {p.code: p.message for p in found}
    assert messages["invalid_name"].count("x") == EXCERPT_LIMIT
    assert "(5000 characters)" in messages["invalid_name"]
    assert "(300 characters)" in messages["unknown_key"]
    assert len(shown(found)) < 1000


def test_a_wrong_type_in_a_data_designer_config_shows_an_excerpt() -> None:
    data = {"columns": [{"name": "t", "column_type": ["z" * 500]}]}
    with pytest.raises(InvalidInputError) as caught:
        read_dd_config(Document(file="dd.yaml", data=data))
    assert "z" * (EXCERPT_LIMIT + 1) not in shown(caught.value.problems)


def test_an_engine_arg_with_a_nul_is_refused_at_its_key() -> None:
    deployments = {"writer": {"engine": "vllm", "model": "/m", "engine_args": {"chat-template": "a\u0000b"}}}
    found = problems(json.dumps(run(deployments=deployments)))
    assert [(p.code, p.key_path) for p in found] == [
        ("control_character", ("deployments", "writer", "engine_args", "chat-template"))
    ]


def test_a_health_path_that_names_another_host_is_refused() -> None:
    deployments = {
        "writer": {"engine": "command", "argv": ["serve"], "model": "m", "health_path": "@evil.example:80/health"}
    }
    found = problems(json.dumps(run(deployments=deployments)))
    assert [(p.code, p.key_path) for p in found] == [("url_path", ("deployments", "writer", "health_path"))]
    assert found[0].hint
    assert "'/'" in found[0].hint


@pytest.mark.parametrize("endpoint", ["https://bob:hunter2@h.example/v1", "file:///etc/passwd"])
def test_external_endpoints_with_credentials_or_other_schemes_are_refused(endpoint: str) -> None:
    found = problems(json.dumps(run(external={"judge": {"endpoint": endpoint}})))
    assert [p.key_path for p in found] == [("external", "judge", "endpoint")]
    assert "hunter2" not in shown(found)


def test_a_lone_surrogate_is_a_problem_not_a_crash() -> None:
    found = problems('{"schema_version": 1, "name": "\\ud800"}')
    assert [(p.code, p.key_path) for p in found] == [("unsupported_value", ("name",))]
    shown(found).encode("utf-8")
