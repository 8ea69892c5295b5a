"""The status message of a failed client worker: its recorded cause and fix, else how it ended (pure)."""

from __future__ import annotations

from pathlib import Path

from data_designer.slurm.contracts.records import CLIENT_ERROR_SCHEMA, ClientErrorRecord
from data_designer.slurm.runtime.store import write_record_once
from data_designer.slurm.runtime.supervisor._client_ending import client_failure_message, read_client_error

RECORD = ClientErrorRecord(
    kind="client_error",
    cause="model_not_found",
    exception="ModelNotFoundError",
    message="The specified model 'writer' could not be found while running health checks.",
    alias="writer",
    fix="set deployments.writer.model to the name the server serves (its /v1/models lists it)",
)


def test_a_recorded_failure_is_one_sentence_with_the_exception_and_the_fix() -> None:
    assert client_failure_message(3, RECORD, ("traceback", "ddslurm-worker: client_error: ...")) == (
        "the client worker exited 3: ModelNotFoundError: The specified model 'writer' could not be found while "
        "running health checks; fix: set deployments.writer.model to the name the server serves (its /v1/models "
        "lists it)"
    )


def test_without_a_record_the_last_log_line_is_quoted_redacted_and_shortened() -> None:
    token = "hf_" + "Zq9" * 10
    message = client_failure_message(3, None, ("first", f"boom with {token} " + "y" * 500, "  "))
    assert message.startswith("the client worker exited 3 without a client-error.json; its last log line: boom with ")
    assert token not in message
    assert "<redacted>" in message
    assert message.endswith("...; fix: read logs/client.log")
    assert client_failure_message(2, None, ()) == (
        "the client worker exited 2 without saying why (no client-error.json, an empty log)"
    )


def test_a_killed_worker_names_the_signal_and_the_memory_suspect() -> None:
    assert client_failure_message(-9, RECORD, ()) == (
        "the client worker was killed by signal 9 (SIGKILL); fix: if the node ran out of memory (sacct's MaxRSS, "
        "dmesg), raise client.memory_gb; else read logs/client.log"
    )
    assert client_failure_message(-11, None, ()) == (
        "the client worker was killed by signal 11 (SIGSEGV); fix: read logs/client.log"
    )
    assert client_failure_message(-200, None, ()).startswith("the client worker was killed by signal 200 (signal 200)")


def test_the_record_is_read_when_intact_and_ignored_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "client-error.json"
    assert read_client_error(path) is None
    write_record_once(path, CLIENT_ERROR_SCHEMA, RECORD)
    assert read_client_error(path) == RECORD
    path.write_text(path.read_text().replace("writer", "critic"))
    assert read_client_error(path) is None, "a corrupt record is evidence of nothing"
