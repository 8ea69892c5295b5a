"""Slurm time limits: every accepted form, the canonical form, and their round-trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from data_designer.slurm.contracts import TimeLimit, format_time_limit, parse_time_limit

TIME_LIMIT = TypeAdapter(TimeLimit)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90 * 60),
        ("0", 0),
        ("05:30", 5 * 60 + 30),
        ("01:00:00", 3600),
        ("48:00:00", 48 * 3600),
        ("2-00", 2 * 86400),
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
        ("0-00:00:01", 1),
    ],
)
def test_parse_time_limit_accepts_every_slurm_form(text: str, seconds: int) -> None:
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "1h",
        "-5",
        "1:2:3:4",
        "1-",
        "-1:00",
        "01:00:00 ",
        " 01:00:00",
        "1.5",
        "1-1-1",
        "04:00:00\n",
        "90\n",
        "UNLIMITED",
    ],
)
def test_parse_time_limit_rejects_other_text(text: str) -> None:
    assert parse_time_limit(text) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "00:00:00"),
        (1, "00:01:00"),
        (60, "00:01:00"),
        (61, "00:02:00"),
        (3600, "01:00:00"),
        (86399, "1-00:00:00"),
        (86400, "1-00:00:00"),
        (90061, "1-01:02:00"),
        (10 * 86400 + 23 * 3600 + 59 * 60, "10-23:59:00"),
    ],
)
def test_format_time_limit_rounds_up_to_minutes_in_canonical_form(seconds: int, text: str) -> None:
    assert format_time_limit(seconds) == text


@given(st.integers(min_value=0, max_value=10**8))
def test_format_then_parse_rounds_up_to_the_minute_and_is_stable(seconds: int) -> None:
    text = format_time_limit(seconds)
    parsed = parse_time_limit(text)
    assert parsed is not None
    assert parsed % 60 == 0
    assert 0 <= parsed - seconds < 60
    assert format_time_limit(parsed) == text


_NUMBER = st.integers(min_value=0, max_value=999).map(str)


@given(
    st.one_of(
        _NUMBER,
        st.tuples(_NUMBER, _NUMBER).map(":".join),
        st.tuples(_NUMBER, _NUMBER, _NUMBER).map(":".join),
        st.tuples(_NUMBER, _NUMBER).map("-".join),
        st.tuples(_NUMBER, _NUMBER, _NUMBER).map(lambda p: f"{p[0]}-{p[1]}:{p[2]}"),
        st.tuples(_NUMBER, _NUMBER, _NUMBER, _NUMBER).map(lambda p: f"{p[0]}-{p[1]}:{p[2]}:{p[3]}"),
    )
)
def test_format_of_parse_is_a_fixed_point(text: str) -> None:
    seconds = parse_time_limit(text)
    assert seconds is not None
    canonical = format_time_limit(seconds)
    again = parse_time_limit(canonical)
    assert again is not None
    assert format_time_limit(again) == canonical


@pytest.mark.parametrize("text", ["04:00:00", "30", "1-00:00:00", "00:00:01"])
def test_time_limit_type_keeps_the_value_as_written(text: str) -> None:
    assert TIME_LIMIT.validate_python(text) == text


@pytest.mark.parametrize("text", ["0", "00:00:00", "0-00:00:00", "soon", "", "04:00:00\n"])
def test_time_limit_type_rejects_zero_and_malformed_values_with_a_hint(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TIME_LIMIT.validate_python(text)
    error = caught.value.errors()[0]
    assert error["type"] == "time_limit"
    assert "hint" in (error.get("ctx") or {})
