"""Secret scanning: secret-like keys hold environment-variable names, token-shaped values are flagged anywhere."""

from __future__ import annotations

import pytest

from data_designer.slurm.planner import find_secret_literals, is_secret_like_key, looks_like_token, parse_document

TOKEN_TAIL = "abcdefghijklmnop0123"


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "api_key",
        "apikey",
        "API_KEY",
        "hf-token",
        "password",
        "passwd",
        "db.secret",
        "client_secret",
        "credentials",
        "credential",
        "key",
        "NVIDIA_API_KEY",
    ],
)
def test_secret_like_keys(key: str) -> None:
    assert is_secret_like_key(key)


@pytest.mark.parametrize(
    "key",
    ["hf_home", "keyboard", "monkey", "tokens", "secretary", "workspace_root", "environment", "account", "keys", ""],
)
def test_harmless_keys(key: str) -> None:
    assert not is_secret_like_key(key)


@pytest.mark.parametrize(
    "value",
    [
        f"sk-{TOKEN_TAIL}",
        f"nvapi-{TOKEN_TAIL}",
        f"ghp_{TOKEN_TAIL}",
        f"hf_{TOKEN_TAIL}",
        f"Bearer sk-{TOKEN_TAIL}",
        f"--comment=nvapi-{TOKEN_TAIL}",
        f"/shared/hf_{TOKEN_TAIL}/cache",
        f"sk-proj-{TOKEN_TAIL}",
    ],
)
def test_token_shapes_are_found_anywhere_in_a_value(value: str) -> None:
    assert looks_like_token(value)


@pytest.mark.parametrize(
    "value",
    ["sk-1", "hf_home", "nvapi-short", "ghp_", f"task-{TOKEN_TAIL}", f"mask-{TOKEN_TAIL}", f"xhf_{TOKEN_TAIL}", ""],
)
def test_short_or_embedded_lookalikes_are_not_tokens(value: str) -> None:
    assert not looks_like_token(value)


def test_secret_like_keys_may_hold_only_environment_variable_names() -> None:
    text = f"""\
auth:
  api_key: NVIDIA_API_KEY
  token: hf_{TOKEN_TAIL}
  password: hunter2
  hf_token: 12345
  secret: null
  client_secret: HF_TOKEN
"""
    document = parse_document(text, file="c.yaml")
    problems = find_secret_literals(document)
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("secret_literal", ("auth", "token"), 3),
        ("secret_literal", ("auth", "password"), 4),
        ("secret_literal", ("auth", "hf_token"), 5),
    ]
    for problem in problems:
        assert problem.file == "c.yaml"
        assert problem.hint
        assert "hunter2" not in problem.message
        assert TOKEN_TAIL not in problem.message


def test_token_shaped_values_are_found_under_any_key_and_in_lists() -> None:
    text = f"""\
clusters:
  a:
    account: nvapi-{TOKEN_TAIL}
    sbatch_options:
      - --exclusive
      - --comment=ghp_{TOKEN_TAIL}
"""
    problems = find_secret_literals(parse_document(text, file="p.yaml"))
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("secret_literal", ("clusters", "a", "account"), 3),
        ("secret_literal", ("clusters", "a", "sbatch_options", 1), 6),
    ]


def test_secret_like_keys_holding_mappings_are_walked() -> None:
    text = f"credentials:\n  store: HF_TOKEN\n  backup: sk-{TOKEN_TAIL}\n"
    problems = find_secret_literals(parse_document(text, file="p.yaml"))
    assert [(p.key_path, p.line) for p in problems] == [(("credentials", "backup"), 3)]


def test_an_environment_variable_name_with_a_trailing_newline_is_a_literal() -> None:
    problems = find_secret_literals(parse_document('token: "HF_TOKEN\\n"\n', file="p.yaml"))
    assert [(p.code, p.key_path) for p in problems] == [("secret_literal", ("token",))]


def test_harmless_documents_have_no_secret_literals() -> None:
    text = "hf_home: /shared/hf\nkeyboard: sk-1\nenvironment: [HF_TOKEN, NVIDIA_API_KEY]\ntoken: ~\n"
    assert find_secret_literals(parse_document(text, file="p.yaml")) == []


def test_a_token_as_the_whole_document_is_found() -> None:
    problems = find_secret_literals(parse_document(f"sk-{TOKEN_TAIL}\n", file="p.yaml"))
    assert [(p.code, p.key_path, p.line) for p in problems] == [("secret_literal", None, 1)]
