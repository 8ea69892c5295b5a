"""``python -m data_designer.slurm.runtime.testing.stand_in_worker --shard N --attempt M``: a client worker stand-in.

For supervisor tests that need the real supervisor but not Data Designer. It reads ``endpoints.json``
(``DDSLURM_ENDPOINTS``), sends one chat completion to every base URL, writes the answers to
``<attempt>/stand-in-answers.json``, then does what ``STAND_IN_MODE`` says:

* ``ok`` (default): write a valid result manifest covering the ranges ``attempt.json`` assigns (a stand-in
  manifest: it lists no parts) and exit 0;
* ``no-manifest``: exit 0 without a manifest;
* ``exit<N>``: print ``stand-in: failing with exit<N>`` on stderr and exit N;
* ``client-error``: write a ``client-error.json`` (the writer's model was not found) and exit 3, like the real
  worker when the server does not serve the model name it sends;
* ``sleep``: wait for a signal; ``SIGUSR1``/``SIGTERM`` publish a partial manifest with no records (drained by
  that signal) and exit 4, like the real worker's drain;
* ``sleep-undrained``: wait with the default signal handlers (a worker signalled before it could install its
  own: the signal ends it).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from data_designer.slurm.contracts import __version__
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    ENV_ENDPOINTS,
    EXIT_CLIENT_ERROR,
    EXIT_DRAINED,
    ClientErrorRecord,
    Drained,
    DrainSignal,
    IndexRange,
    OutputManifest,
    Timings,
)
from data_designer.slurm.runtime.store import AttemptWriter, RecordOk, RunLayout, read_record, system_clock


def call_endpoints(writer: AttemptWriter, endpoints_path: Path, argv: Sequence[str]) -> None:
    aliases = json.loads(endpoints_path.read_text())["payload"]["aliases"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    answers = []
    for alias, entry in sorted(aliases.items()):
        for base_url in entry["base_urls"]:
            body = json.dumps({"model": entry["model"], "messages": [{"role": "user", "content": "hi"}]}).encode()
            headers = {"Content-Type": "application/json"}
            if entry["api_key_env"]:
                headers["Authorization"] = "Bearer " + os.environ[entry["api_key_env"]]
            request = urllib.request.Request(base_url + "/chat/completions", data=body, headers=headers)
            with opener.open(request, timeout=10) as answer:
                reply = json.load(answer)
            answers.append({"alias": alias, "base_url": base_url, "text": reply["choices"][0]["message"]["content"]})
    writer.publish_file("stand-in-answers.json", json.dumps({"argv": list(argv), "answers": answers}).encode())


def stand_in_manifest(
    writer: AttemptWriter, *, partial: DrainSignal | None = None, records_of: Sequence[IndexRange] | None = None
) -> OutputManifest:
    """A manifest for the writer's attempt (its ``attempt.json`` names run, shard and ranges)."""
    found = read_record(writer.layout.attempt_record(writer.shard, writer.attempt), ATTEMPT_SCHEMA)
    assert isinstance(found, RecordOk), f"stand-in: no attempt.json: {found.status}"
    attempt = found.payload
    assigned = attempt.assigned or ()
    produced = tuple(assigned if records_of is None else records_of)
    now = system_clock()
    drained = None
    if partial is not None:
        drained = Drained(signal=partial, requested_at=now, published_at=now, settled=True, message="stand-in drain")
    return OutputManifest(
        run_id=attempt.run_id,
        plan_digest=attempt.plan_digest,
        config_digest="stand-in",
        shard=attempt.shard,
        attempt=attempt.attempt,
        seed=0,
        assigned=assigned,
        ranges=produced,
        complete=produced == assigned,
        drained=drained,
        records=sum(item.records for item in produced),
        columns=(),
        arrow_schema="",
        parts=(),
        usage_source="unavailable",
        models={},
        timings=Timings(
            worker_started_at=now,
            worker_finished_at=now,
            host_import_s=0.0,
            setup_s=0.0,
            generation_s=0.0,
            write_s=0.0,
            records_per_s=0.0,
        ),
        host_version="stand-in",
        runtime_version=__version__,
        python=platform.python_version(),
    )


STAND_IN_CLIENT_ERROR = ClientErrorRecord(
    kind="client_error",
    cause="model_not_found",
    exception="ModelNotFoundError",
    message="The specified model 'writer' could not be found while running health checks.",
    alias="writer",
    fix="set deployments.writer.model to the name the server serves (its /v1/models lists it)",
)
"""What the ``client-error`` mode records."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    mode = os.environ.get("STAND_IN_MODE", "ok")
    shard, attempt = (int(args[args.index(flag) + 1]) for flag in ("--shard", "--attempt"))
    writer = AttemptWriter(RunLayout.of_run_dir(Path.cwd()), shard, attempt)  # started in the run directory
    received: list[DrainSignal] = []
    woken = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append("SIGUSR1" if signum == signal.SIGUSR1 else "SIGTERM")
        woken.set()

    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, on_signal)
    call_endpoints(writer, Path(os.environ[ENV_ENDPOINTS]), args)
    if mode == "sleep-undrained":
        for signum in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        print("stand-in: sleeping without handlers", flush=True)
        threading.Event().wait(600)
        return 0
    if mode == "sleep":
        print("stand-in: sleeping", flush=True)
        woken.wait(600)
        if received:
            writer.publish_manifest(stand_in_manifest(writer, partial=received[0], records_of=()))
            print(f"stand-in: drained on {received[0]}", flush=True)
            return EXIT_DRAINED
        return 0
    if mode == "client-error":
        writer.write_client_error(STAND_IN_CLIENT_ERROR)
        print("stand-in: failing with a client-error.json", file=sys.stderr, flush=True)
        return EXIT_CLIENT_ERROR
    if mode.startswith("exit"):
        print(f"stand-in: failing with {mode}", file=sys.stderr, flush=True)
        return int(mode[4:])
    if mode == "ok":
        writer.publish_manifest(stand_in_manifest(writer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
