"""What errors show of values: short excerpts, never secrets, always encodable text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import (
    EXCERPT_LIMIT,
    ErrorInfo,
    InvalidInputError,
    Problem,
    excerpt,
    looks_like_token,
    looks_secret,
    redact,
)

TAIL = "Zq8wX2cV5bN7mL1kJ4hG"
TOKENS = [
    f"nvapi-{TAIL}",
    f"sk-proj-{TAIL}",
    f"hf_{TAIL}",
    f"ghp_{TAIL}",
    f"github_pat_{TAIL}",
    f"xoxb-{TAIL}",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "Bearer abc123def456ghi789",
    "authorization: token 0123456789abcdef",
    "https://bob:hunter2@api.example.com/v1",
    "s3://AKIDEXAMPLE:wJalrXUtnFEMI@bucket/key",
]
HIGH_ENTROPY = "Qx7vR2mK9pL4zT8wN3bY6cF1hJ5dG0sA"
HARMLESS = [
    "Write a short product review.",
    "Meta-Llama-3.1-8B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "/shared/models/llama-3.1-70b-instruct",
    "sha256:" + "0123456789abcdef" * 4,
    "nvcr.io/nvidia/vllm:25.01-py3",
    "Bearer bonds are a kind of security.",
    "Use basic arithmetic only.",
    "ssh://git@github.com/org/repo",
    "https://integrate.api.nvidia.com/v1",
    "max-num-seqs",
    "04:00:00",
]


@pytest.mark.parametrize("value", TOKENS)
def test_known_token_shapes_and_url_passwords_are_tokens(value: str) -> None:
    assert looks_like_token(value)
    assert looks_like_token(f"prefix {value} suffix")


@pytest.mark.parametrize("value", HARMLESS)
def test_prompts_model_ids_paths_and_digests_are_neither_tokens_nor_secrets(value: str) -> None:
    assert not looks_like_token(value)
    assert not looks_secret(value)
    assert redact(value) == value


def test_a_long_high_entropy_word_is_secret_but_not_a_known_token() -> None:
    assert not looks_like_token(HIGH_ENTROPY)
    assert looks_secret(HIGH_ENTROPY)
    assert redact(f"account {HIGH_ENTROPY} is unknown") == "account <redacted> is unknown"


@pytest.mark.parametrize("value", [*TOKENS, HIGH_ENTROPY])
def test_redact_removes_every_secret_from_a_message(value: str) -> None:
    secret = value.split("//")[-1].split("@")[0] if "://" in value else value.split()[-1]
    message = redact(f"key 'x' holds {value} at line 3")
    assert secret not in message
    assert "<redacted>" in message
    assert message.startswith("key 'x' holds ")


def test_a_url_password_is_redacted_but_the_scheme_host_and_path_stay() -> None:
    assert redact("user@host and ssh://git@h/x") == "user@host and ssh://git@h/x"
    assert redact("see https://bob:hunter2@h/x") == "see https://<redacted>@h/x"
    assert "hunter2" not in redact("https://bob:hunter2@api.example.com/v1")
    assert redact("https://bob:hunter2@api.example.com/v1").endswith("api.example.com/v1")


def test_excerpt_shows_short_values_as_repr_and_cuts_long_ones_with_their_length() -> None:
    assert excerpt("abc") == "'abc'"
    assert excerpt(5) == "5"
    assert excerpt(None) == "None"
    long = "root:x:0:0:root:/root:/bin/bash\n" * 40
    shown = excerpt(long)
    assert shown == f"{long[:EXCERPT_LIMIT]!r}... ({len(long)} characters)"
    assert len(shown) < 2 * EXCERPT_LIMIT


def test_excerpt_never_shows_any_part_of_a_secret() -> None:
    assert excerpt(f"nvapi-{TAIL}") == f"<redacted, {len(TAIL) + 6} characters>"
    assert excerpt(f"{'x' * 60} {HIGH_ENTROPY}") == f"<redacted, {61 + len(HIGH_ENTROPY)} characters>"
    assert TAIL not in excerpt({"k": f"hf_{TAIL}"})
    assert excerpt(list(range(100))) == "a list of 100 entries"


@given(st.text(max_size=80))
def test_excerpt_is_short_and_redact_is_idempotent(text: str) -> None:
    assert len(excerpt(text)) <= 4 * EXCERPT_LIMIT + 40
    assert redact(redact(text)) == redact(text)


def test_problems_and_errors_redact_their_text_even_when_built_carelessly() -> None:
    problem = Problem(code="x", message=f"got 'nvapi-{TAIL}'", key_path=("a", f"hf_{TAIL}"), hint=f"not {HIGH_ENTROPY}")
    assert TAIL not in problem.render()
    assert HIGH_ENTROPY not in problem.render()
    error = InvalidInputError(f"bad sk-{TAIL}", hint=f"Bearer {TAIL}0")
    assert TAIL not in str(error)
    assert TAIL not in error.info.model_dump_json()
    assert TAIL not in ErrorInfo.model_validate_json(error.info.model_dump_json()).model_dump_json()


def test_lone_surrogates_are_escaped_so_an_error_always_encodes() -> None:
    problem = Problem(code="x", message="unknown key '\ud800'", key_path=("a\udfff",))
    problem.render().encode("utf-8")
    assert problem.key_path == ("a\\udfff",)
