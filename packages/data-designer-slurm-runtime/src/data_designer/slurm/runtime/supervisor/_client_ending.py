"""The status message of a client worker that failed: one sentence naming the cause and a fix.

The worker says why in ``client-error.json`` (``worker._failure``); without one (killed, or it failed before
it loaded its inputs) the message says how it ended and quotes its last log line. The log tail stays in
``status.json`` as the supporting evidence.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from data_designer.slurm.contracts import redact
from data_designer.slurm.contracts.records import CLIENT_ERROR_SCHEMA, ClientErrorRecord
from data_designer.slurm.runtime.store import RecordOk, read_record

QUOTED_LINE_LIMIT = 300
"""The most characters of the client's last log line a message quotes."""


def read_client_error(path: Path) -> ClientErrorRecord | None:
    """The worker's record, or None when it is missing or unreadable (then the message says so)."""
    found = read_record(path, CLIENT_ERROR_SCHEMA)
    return found.payload if isinstance(found, RecordOk) else None


def client_failure_message(code: int, record: ClientErrorRecord | None, tail: Sequence[str]) -> str:
    """How a client worker that ended with ``code`` (non-zero; negative: a signal) failed, and what to do."""
    if code < 0:
        return _killed(-code)
    if record is not None:
        message = record.message.rstrip(". ")
        return f"the client worker exited {code}: {record.exception}: {message}; fix: {record.fix}"
    last = next((line.strip() for line in reversed(tail) if line.strip()), None)
    if last is None:
        return f"the client worker exited {code} without saying why (no client-error.json, an empty log)"
    quoted = redact(last)
    if len(quoted) > QUOTED_LINE_LIMIT:
        quoted = quoted[: QUOTED_LINE_LIMIT - 3] + "..."
    return (
        f"the client worker exited {code} without a client-error.json; its last log line: {quoted}; "
        "fix: read logs/client.log"
    )


def _killed(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    if number == signal.SIGKILL:
        fix = "if the node ran out of memory (sacct's MaxRSS, dmesg), raise client.memory_gb; else read logs/client.log"
    else:
        fix = "read logs/client.log"
    return f"the client worker was killed by signal {number} ({name}); fix: {fix}"
