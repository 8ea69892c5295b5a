"""``client-error.json``: the worker names the exception it caught as a cause with a fix (``worker._failure``).

Exceptions named like the host's stand in for them (the worker matches type names, base classes included);
the real host's model-not-found is ``tests/test_host_worker.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from data_designer.slurm.contracts.records import (
    CLIENT_ERROR_MESSAGE_LIMIT,
    CLIENT_ERROR_SCHEMA,
    AliasEndpoints,
    ClientErrorRecord,
)
from data_designer.slurm.runtime.store import AttemptWriter, RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.worker._failure import chain, explain, write_client_error
from data_designer.slurm.runtime.worker._host import ConfigRejected
from data_designer.slurm.runtime.worker._inputs import WorkerInputError

ENDPOINTS = {
    "writer": AliasEndpoints(kind="deployed", base_urls=("http://127.0.0.1:1/v1",), model="writer", api_key_env=None),
    "critic": AliasEndpoints(
        kind="external", base_urls=("https://api.example/v1",), model="m/critic", api_key_env="CRITIC_KEY"
    ),
}


@dataclass
class FormattedLLMErrorMessage:
    """The host's model error text: cause, solution, the provider's message (its ``__str__`` draws a box)."""

    cause: str
    solution: str
    provider_message: str | None = None

    def __str__(self) -> str:
        return f"  |----------\n  | Cause: {self.cause}\n  | Solution: {self.solution}\n  |----------"


class DataDesignerError(Exception): ...


class ModelNotFoundError(DataDesignerError): ...


class ModelAPIConnectionError(DataDesignerError): ...


class ModelAuthenticationError(DataDesignerError): ...


class ModelTimeoutError(DataDesignerError): ...


class ModelRequestAdmissionTimeoutError(ModelTimeoutError): ...


class DataDesignerGenerationError(DataDesignerError): ...


def host_raises(inner: BaseException) -> BaseException:
    """What the host's create raises: its generation error ``from`` the model error."""
    try:
        try:
            raise inner
        except DataDesignerError as exc:
            raise DataDesignerGenerationError(f"🛑 Error generating dataset: {exc}") from exc
    except DataDesignerGenerationError as outer:
        return outer


def not_found(model: str) -> BaseException:
    text = FormattedLLMErrorMessage(
        cause=f"The specified model {model!r} could not be found while running health checks.",
        solution="Check that the model name is correct and supported by your model provider 'ddslurm-writer'.",
    )
    return host_raises(ModelNotFoundError(text))


def test_a_model_the_server_does_not_serve_names_the_deployment_s_model_key() -> None:
    record = explain(not_found("writer"), "client_error", ENDPOINTS)

    assert record == ClientErrorRecord(
        kind="client_error",
        cause="model_not_found",
        exception="ModelNotFoundError",
        message="The specified model 'writer' could not be found while running health checks.",
        alias="writer",
        fix="set deployments.writer.model to the name the server serves (its /v1/models lists it)",
    )


def test_an_external_model_not_found_names_the_external_key() -> None:
    record = explain(not_found("m/critic"), "client_error", ENDPOINTS)
    assert (record.cause, record.alias) == ("model_not_found", "critic")
    assert record.fix.startswith("set external.critic.model ")


def test_an_unknown_model_name_points_at_every_model_key() -> None:
    record = explain(not_found("someone/else"), "client_error", ENDPOINTS)
    assert (record.cause, record.alias) == ("model_not_found", None)
    assert "deployments.<alias>.model" in record.fix


@pytest.mark.parametrize(
    ("inner", "cause", "fix"),
    [
        (
            ModelAPIConnectionError(FormattedLLMErrorMessage("Connection to model 'writer' failed.", "Check.")),
            "connection_failed",
            "a model server stopped answering: read logs/server-writer-*.log, then retry the run",
        ),
        (
            ModelAPIConnectionError(FormattedLLMErrorMessage("Connection to model 'm/critic' failed.", "Check.")),
            "connection_failed",
            "check external.critic.endpoint: the endpoint did not answer",
        ),
        (
            ModelAuthenticationError(FormattedLLMErrorMessage("Key refused for model 'm/critic'.", "Check.")),
            "authentication",
            "check the key in $CRITIC_KEY (external.critic.api_key_env): the endpoint refused it",
        ),
        (
            ModelRequestAdmissionTimeoutError(FormattedLLMErrorMessage("Model 'writer' timed out.", "Wait.")),
            "timeout",
            "the requests timed out: lower client.concurrency.writer or give the model more time in the Data "
            "Designer config",
        ),
    ],
    ids=["refused-deployed", "refused-external", "authentication", "timeout-subclass"],
)
def test_well_known_host_errors_map_to_causes_and_fixes(inner: BaseException, cause: str, fix: str) -> None:
    record = explain(host_raises(inner), "client_error", ENDPOINTS)
    assert (record.cause, record.exception, record.fix) == (cause, type(inner).__name__, fix)


def test_a_plain_connection_refused_is_a_connection_failure() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise RuntimeError("request failed") from exc
    except RuntimeError as outer:
        record = explain(outer, "client_error", ENDPOINTS)
    assert (record.cause, record.exception) == ("connection_failed", "ConnectionRefusedError")
    assert record.message == "[Errno 111] Connection refused"


def test_the_worker_s_own_config_rejection_keeps_its_message_and_fix() -> None:
    try:
        try:
            raise ValueError("inner detail")
        except ValueError as exc:
            raise ConfigRejected(
                "model alias 'critic' takes its API key from $CRITIC_KEY", fix="set $CRITIC_KEY"
            ) from exc
    except ConfigRejected as rejected:
        record = explain(rejected, "invalid_config", ENDPOINTS)
    assert (record.cause, record.exception, record.alias, record.fix) == (
        "invalid_config",
        "ConfigRejected",
        "critic",
        "set $CRITIC_KEY",
    )
    assert record.message == "model alias 'critic' takes its API key from $CRITIC_KEY"


def test_a_config_rejection_without_a_fix_points_at_the_config_and_bad_inputs_at_a_new_run() -> None:
    record = explain(ConfigRejected("the host rejects the config: no column 'x'"), "invalid_config", ENDPOINTS)
    assert record.fix == "correct the Data Designer config (the run file's data_designer key): retrying cannot help"
    record = explain(WorkerInputError("shard 9 is not in the plan"), "client_error", ENDPOINTS)
    assert (record.cause, record.exception) == ("bad_inputs", "WorkerInputError")
    assert "start a new run with execute" in record.fix


def test_anything_else_is_other_and_points_at_the_client_log() -> None:
    record = explain(RuntimeError("the host produced 3 of the 5 records of [0, 5)"), "client_error", ENDPOINTS)
    assert (record.cause, record.exception, record.alias) == ("other", "RuntimeError", None)
    assert record.message == "the host produced 3 of the 5 records of [0, 5)"
    assert "logs/client.log" in record.fix


def test_the_message_is_one_line_shortened_and_never_a_secret() -> None:
    token = "nvapi-" + "Ab3" * 12
    record = explain(RuntimeError(f"bad key {token}\nat line 2 " + "x" * 2000), "client_error", ENDPOINTS)
    assert token not in record.message
    assert "<redacted>" in record.message
    assert "\n" not in record.message
    assert len(record.message) == CLIENT_ERROR_MESSAGE_LIMIT
    assert record.message.endswith("...")


def test_the_chain_follows_causes_and_unsuppressed_contexts_once() -> None:
    first = ValueError("first")
    second = KeyError("second")
    second.__context__ = first
    third = RuntimeError("third")
    third.__cause__ = second
    assert [type(e) for e in chain(third)] == [RuntimeError, KeyError, ValueError]
    second.__suppress_context__ = True
    assert [type(e) for e in chain(third)] == [RuntimeError, KeyError]
    first.__context__ = third  # a cycle ends the walk
    second.__suppress_context__ = False
    assert len(list(chain(third))) == 3


def test_the_record_is_written_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = AttemptWriter(RunLayout.of(tmp_path, "r-20260101T000000Z-abcdef"), 0, 1)
    record = explain(not_found("writer"), "client_error", ENDPOINTS)
    write_client_error(writer, record)
    write_client_error(writer, record.model_copy(update={"message": "another"}))

    found = read_record(writer.layout.client_error(0, 1), CLIENT_ERROR_SCHEMA)
    assert isinstance(found, RecordOk)
    assert found.payload == record
    assert "already exists; not replaced" in capsys.readouterr().err


def test_an_unwritable_record_only_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = AttemptWriter(RunLayout.of(tmp_path, "r-20260101T000000Z-abcdef"), 0, 1)
    writer.layout.attempt_dir(0, 1).parent.mkdir(parents=True)
    writer.layout.attempt_dir(0, 1).write_text("a file where the attempt directory should be")
    write_client_error(writer, explain(RuntimeError("x"), "client_error", ENDPOINTS))
    assert "cannot write" in capsys.readouterr().err
