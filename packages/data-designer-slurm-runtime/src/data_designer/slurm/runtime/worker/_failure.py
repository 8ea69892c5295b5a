"""Why the client worker failed: the exception it caught, named as a cause with a fix, in ``client-error.json``.

:func:`explain` is pure: it walks the caught exception's explicit chain (``raise ... from``, or the implicit
context unless suppressed), takes the innermost exception (the host wraps its model errors, e.g.
``DataDesignerGenerationError`` around ``ModelNotFoundError``) unless the worker's own :class:`ConfigRejected`
or :class:`WorkerInputError` is in it, and maps the well-known causes to fixes naming the run-file key:

* ``model_not_found``: the server does not serve the name the client sends (``deployments.<alias>.model``);
* ``connection_failed``: a server stopped answering (deployed: its log; external: ``external.<alias>.endpoint``);
* ``authentication``: the key was refused (``external.<alias>.api_key_env``);
* ``timeout``, ``server_error``, ``invalid_config``, ``bad_inputs``, and ``other`` (the client log).

The message is one line, shortened and redacted (``contracts.redact``): a secret never reaches the record.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

from data_designer.slurm.contracts import redact
from data_designer.slurm.contracts.records import (
    CLIENT_ERROR_MESSAGE_LIMIT,
    AliasEndpoints,
    ClientCause,
    ClientErrorRecord,
    WorkerFailure,
)
from data_designer.slurm.runtime.store import AttemptWriter
from data_designer.slurm.runtime.worker._host import ConfigRejected
from data_designer.slurm.runtime.worker._inputs import WorkerInputError

_CAUSES: tuple[tuple[ClientCause, frozenset[str]], ...] = (
    ("model_not_found", frozenset({"ModelNotFoundError"})),
    ("authentication", frozenset({"ModelAuthenticationError", "ModelPermissionDeniedError"})),
    ("connection_failed", frozenset({"ModelAPIConnectionError", "ConnectionError", "ConnectError"})),
    ("timeout", frozenset({"ModelTimeoutError", "TimeoutError", "TimeoutException"})),
    ("server_error", frozenset({"ModelInternalServerError"})),
)
"""Exception type names (anywhere in the chain, base classes included) and the cause they name, first match wins."""


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from, outermost first (each exception once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def explain(exc: BaseException, kind: WorkerFailure, endpoints: Mapping[str, AliasEndpoints]) -> ClientErrorRecord:
    """The record for a worker ending with ``kind`` on ``exc``: cause, innermost exception, alias and fix."""
    caught = list(chain(exc))
    ours = next((e for e in caught if isinstance(e, ConfigRejected | WorkerInputError)), None)
    shown = ours if ours is not None else caught[-1]
    names = {klass.__name__ for e in caught for klass in type(e).__mro__}
    cause: ClientCause
    if isinstance(ours, WorkerInputError):
        cause = "bad_inputs"
    elif kind == "invalid_config":
        cause = "invalid_config"
    else:
        cause = next((c for c, types in _CAUSES if names & types), "other")
    text = " ".join(message_of(e) for e in caught)
    alias = _alias(text, endpoints)
    return ClientErrorRecord(
        kind=kind,
        cause=cause,
        exception=type(shown).__name__,
        message=one_line(message_of(shown)),
        alias=alias,
        fix=_fix(cause, alias, endpoints.get(alias) if alias else None, ours, names),
    )


def message_of(exc: BaseException) -> str:
    """The exception's own text: the host's formatted model errors give their cause (and provider message)."""
    first = exc.args[0] if len(exc.args) == 1 else None
    cause = getattr(first, "cause", None)
    if isinstance(cause, str) and cause:
        provider = getattr(first, "provider_message", None)
        return f"{cause} (the server said: {provider})" if isinstance(provider, str) and provider else cause
    lines = [line.strip().lstrip("|").strip() for line in str(exc).splitlines()]
    return " ".join(line for line in lines if line.strip("-")) or type(exc).__name__


def one_line(text: str) -> str:
    """``text`` on one line, redacted, at most :data:`CLIENT_ERROR_MESSAGE_LIMIT` characters."""
    line = redact(" ".join(text.split())).lstrip("🛑⚠️❌ ") or "(no message)"
    limit = CLIENT_ERROR_MESSAGE_LIMIT
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _alias(text: str, endpoints: Mapping[str, AliasEndpoints]) -> str | None:
    """The alias the text names (``alias 'x'``), else the first whose model name it quotes."""
    for alias in endpoints:
        if f"alias {alias!r}" in text:
            return alias
    return next((alias for alias, e in endpoints.items() if f"{e.model!r}" in text or f'"{e.model}"' in text), None)


def _fix(
    cause: ClientCause,
    alias: str | None,
    endpoint: AliasEndpoints | None,
    ours: BaseException | None,
    names: set[str],
) -> str:
    deployed = endpoint is not None and endpoint.kind == "deployed"
    server_log = f"logs/server-{alias}-*.log" if deployed else "the server logs of this attempt"
    if cause == "model_not_found":
        if endpoint is None:
            return "check each deployments.<alias>.model and external.<alias>.model against what its server serves"
        if deployed:
            return f"set deployments.{alias}.model to the name the server serves (its /v1/models lists it)"
        return f"set external.{alias}.model to a model the endpoint serves (its /v1/models lists them)"
    if cause == "connection_failed":
        if endpoint is not None and not deployed:
            return f"check external.{alias}.endpoint: the endpoint did not answer"
        return f"a model server stopped answering: read {server_log}, then retry the run"
    if cause == "authentication":
        if endpoint is not None and endpoint.api_key_env and not deployed:
            return f"check the key in ${endpoint.api_key_env} (external.{alias}.api_key_env): the endpoint refused it"
        return f"the server refused the request's key: read {server_log}"
    if cause == "timeout":
        where = f"client.concurrency.{alias}" if alias else "client.concurrency"
        return f"the requests timed out: lower {where} or give the model more time in the Data Designer config"
    if cause == "server_error":
        return f"the model server answered with errors: read {server_log}"
    if cause == "invalid_config":
        if isinstance(ours, ConfigRejected) and ours.fix:
            return ours.fix
        if "RejectionSamplingError" in names:
            return "loosen the sampler's constraints in the Data Designer config: the same seed fails again"
        return "correct the Data Designer config (the run file's data_designer key): retrying cannot help"
    if cause == "bad_inputs":
        return "the run directory no longer matches its plan (edited or moved): start a new run with execute"
    return "read the traceback in logs/client.log; retry the run if the failure was transient"


def write_client_error(writer: AttemptWriter, record: ClientErrorRecord) -> None:
    """Write the record once; a failure to write only logs (the exit code still classifies the ending)."""
    path = writer.layout.client_error(writer.shard, writer.attempt)
    try:
        written = writer.write_client_error(record)
    except Exception as exc:  # a full or read-only filesystem: the supervisor falls back to the log
        print(f"ddslurm-worker: cannot write {str(path)!r}: {exc}", file=sys.stderr)
        return
    if not written:
        print(f"ddslurm-worker: {str(path)!r} already exists; not replaced", file=sys.stderr)
