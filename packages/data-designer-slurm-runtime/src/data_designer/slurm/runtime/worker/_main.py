"""The Data Designer client worker of one shard attempt: ``python -m data_designer.slurm.runtime.worker``.

Started by the allocation supervisor on the batch node, in the run directory, as
``--plan plan.json --shard N --attempt M`` with ``DDSLURM_ATTEMPT_DIR`` and ``DDSLURM_ENDPOINTS``
set. It loads the plan's inline Data Designer config with the installed host, validates it fully,
points every deployed alias at a local router in front of its replicas (``_router``; their request evidence goes
to ``requests.json``, ``_evidence``), seeds the samplers,
generates the index ranges ``attempt.json`` assigns (the shard's range minus what earlier attempts
published; one ``create`` call each, seeded by ``planner.derive_range_seed``), and publishes Parquet parts
then the manifest into ``<attempt>/output/``; ``progress.json`` follows every batch. On ``SIGUSR1`` or
``SIGTERM`` it drains (``_worker_drain``) and publishes the complete batches as a partial manifest.

Exit codes (the supervisor classifies them): 0 succeeded; 2 invalid config (the host rejects the
config, an API key variable is unset, a sampler cannot satisfy its constraints; retrying cannot
help); 3 client error (anything else); 4 drained (a partial manifest is published). A failure after the
inputs are loaded writes ``client-error.json`` (``_failure``: the exception, its cause and a fix) for the
supervisor's status message; the last stderr line of a failure is one line naming it.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import __version__ as runtime_version
from data_designer.slurm.contracts.records import (
    EXIT_CLIENT_ERROR,
    EXIT_DRAINED,
    EXIT_INVALID_CONFIG,
    EXIT_OK,
    Drained,
    IndexRange,
    ModelUsage,
    OutputManifest,
    ReplicaRequests,
    Routing,
    Timings,
    WorkerError,
    WorkerFailure,
)
from data_designer.slurm.planner import derive_range_seed, normalise_ranges
from data_designer.slurm.runtime._versions import installed_version
from data_designer.slurm.runtime.store import system_clock
from data_designer.slurm.runtime.worker._drain import (
    CompletedBatch,
    Drain,
    DrainOutcome,
    batch_range,
    exact_batches,
)
from data_designer.slurm.runtime.worker._evidence import EvidencePublisher
from data_designer.slurm.runtime.worker._failure import explain, write_client_error
from data_designer.slurm.runtime.worker._host import (
    ConfigRejected,
    Host,
    UsageTap,
    forbid_tiktoken_downloads,
    import_host,
    is_deterministic_failure,
    load_builder,
    make_designer,
    prepare_environment,
    rewrite_models,
    seed_generators,
    validate,
)
from data_designer.slurm.runtime.worker._inputs import (
    WorkerInputError,
    WorkerInputs,
    config_mapping,
    earlier_timings,
    load_inputs,
    parse_args,
)
from data_designer.slurm.runtime.worker._output import (
    OutputConflict,
    ProgressWriter,
    Provenance,
    batch_number,
    batch_rows,
    clashing_columns,
    column_types,
    consecutive,
    host_batch_files,
    output_schema,
    unified_schema,
    write_parts,
)
from data_designer.slurm.runtime.worker._router import Router, start_routers


def main(argv: Sequence[str] | None = None) -> int:
    started = system_clock()
    try:
        inputs = load_inputs(parse_args(sys.argv[1:] if argv is None else argv), os.environ)
    except WorkerInputError as exc:
        return _fail(None, "client_error", str(exc))
    progress = ProgressWriter(inputs.layout, inputs.shard.shard, inputs.attempt, inputs.records)
    drain = Drain(warning_grace_s=inputs.drain_grace_s)
    session = Session(inputs, progress, drain, started=started)
    drain.install()
    drain.start(session.publish_drained)
    try:
        progress.publish("starting")
        manifest = session.run()
    except ConfigRejected as exc:
        _record_failure(inputs, exc, "invalid_config")
        return _fail(progress, "invalid_config", str(exc))
    except Exception as exc:  # every other ending is the client's error; the traceback goes to the log first
        import traceback

        traceback.print_exc()
        kind: WorkerFailure = "invalid_config" if is_deterministic_failure(exc) else "client_error"
        _record_failure(inputs, exc, kind)
        return _fail(progress, kind, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000])
    print(
        f"ddslurm-worker: shard {manifest.shard} attempt {manifest.attempt}: {manifest.records} records in "
        f"{len(manifest.parts)} part(s), {manifest.timings.records_per_s:.1f} records/s",
        file=sys.stderr,
    )
    return EXIT_OK


@dataclass
class Session:
    """One worker run: what it has set up so far, so that a drain can publish at any moment."""

    inputs: WorkerInputs
    progress: ProgressWriter
    drain: Drain
    started: datetime
    host: Host | None = None
    tap: UsageTap | None = None
    routers: dict[str, Router] = field(default_factory=dict)
    evidence: EvidencePublisher | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    generation_started: float | None = None

    def run(self) -> OutputManifest:
        """Generate the assigned ranges and publish parts and manifest; raises on any failure."""
        inputs = self.inputs
        prepare_environment(inputs.writer.make_worker_home())
        clock = time.perf_counter
        t0 = clock()
        self.host = host = import_host()
        forbid_tiktoken_downloads()
        t1 = clock()
        self.seconds["import"] = t1 - t0
        builder = load_builder(host, config_mapping(inputs))
        clashes = clashing_columns([column.name for column in builder.get_column_configs()])
        if clashes:
            raise ConfigRejected(f"column names {clashes} are reserved for provenance; rename them")
        deployed = {alias: e.base_urls for alias, e in inputs.endpoints.items() if e.kind == "deployed"}
        keys = {
            alias: os.environ.get(e.api_key_env) if e.api_key_env else None for alias, e in inputs.endpoints.items()
        }
        self.routers = routers = start_routers(deployed, keys)
        self.evidence = evidence = EvidencePublisher(inputs.writer, routers).start()
        self.drain.watch(list(routers.values()), unwatched=len(routers) < len(inputs.endpoints))
        try:
            routed = {alias: router.base_url for alias, router in routers.items()}
            providers = rewrite_models(host, builder, inputs.endpoints, inputs.concurrency, routed)
            artifacts = inputs.layout.host_artifacts(inputs.shard.shard, inputs.attempt)
            batch_size = inputs.plan.allocation.client.batch_size
            designer, self.tap = make_designer(host, artifacts, providers, batch_size=batch_size)
            validate(designer, builder)
            t2 = clock()
            self.seconds["setup"] = t2 - t1
            self.generation_started = t2
            self.progress.publish("generating")
            datasets = [self._generate(designer, builder, item) for item in inputs.ranges]
            self.seconds["generation"] = clock() - t2
            if not self.drain.claim_publication("worker"):
                threading.Event().wait()  # the drain is publishing and ends the process
            self.progress.publish("writing")
            batches = [
                consecutive(host_batch_files(d), item.start) for d, item in zip(datasets, inputs.ranges, strict=True)
            ]
            manifest = self._publish([b for group in batches for b in group], None)
        finally:
            evidence.close()  # the final evidence, unless the manifest's publication wrote it
            for router in routers.values():
                router.close()
        self.progress.publish("succeeded")
        return manifest

    def _generate(self, designer: Any, builder: Any, item: IndexRange) -> Path:
        """One create call for ``item``; returns the directory of the host's batch files."""
        progress, drain = self.progress, self.drain
        done_before = progress.records_done
        batch_size = self.inputs.plan.allocation.client.batch_size

        def on_batch_complete(path: Path) -> None:
            # The host aborts the run when this raises; progress is never evidence, so a failure only logs.
            path = Path(path)
            number = batch_number(path)
            span = batch_range(item.start, item.stop, number, batch_size) if number is not None else None
            if span is not None:
                drain.batch_done(CompletedBatch(path, span[0], span[1] - span[0]))
            try:
                progress.records_done += batch_rows(path)
            except Exception as exc:
                print(f"ddslurm-worker: cannot count the rows of {str(path)!r}: {exc}", file=sys.stderr)
            progress.publish("draining" if drain.requested else "generating")

        shard = self.inputs.shard
        seed_generators(derive_range_seed(shard.seed, shard.start, item.start))
        results = designer.create(
            builder, num_records=item.records, dataset_name=_dataset_name(item), on_batch_complete=on_batch_complete
        )
        dataset_dir = Path(results.artifact_storage.final_dataset_path)
        produced = sum(batch_rows(path) for path in host_batch_files(dataset_dir))
        if produced != item.records:
            raise RuntimeError(
                f"the host produced {produced} of the {item.records} records of [{item.start}, {item.stop})"
            )
        progress.records_done = done_before + produced
        return dataset_dir

    def publish_drained(self, outcome: DrainOutcome) -> int:
        """The drain's publication: the exactly complete batches as a partial manifest; the exit code."""
        self.progress.publish("writing")
        if self.generation_started is not None and "generation" not in self.seconds:
            self.seconds["generation"] = time.perf_counter() - self.generation_started
        batches = exact_batches(outcome.batches, batch_rows)
        manifest = self._publish([(b.path, b.first_index) for b in batches], outcome)
        self.progress.records_done = manifest.records
        self.progress.publish("partial")
        how = "after in-flight requests finished" if outcome.settled else "at once"
        print(
            f"ddslurm-worker: {outcome.signal}: published {manifest.records} of {self.inputs.records} records "
            f"in {len(manifest.parts)} part(s) {how}",
            file=sys.stderr,
        )
        return EXIT_DRAINED

    def _publish(self, batches: list[tuple[Path, int]], drained: DrainOutcome | None) -> OutputManifest:
        inputs = self.inputs
        clock = time.perf_counter
        t0 = clock()
        provenance = Provenance(
            run_id=str(inputs.layout.run_id),
            plan_digest=inputs.plan.digest,
            shard=inputs.shard.shard,
            attempt=inputs.attempt,
        )
        schema = unified_schema([path for path, _ in batches])
        parts = write_parts(inputs.layout, batches, schema=schema, first_part=0, provenance=provenance)
        records = sum(part.records for part in parts)
        produced = normalise_ranges((p.first_index, p.first_index + p.records) for p in parts)
        final = output_schema(schema)
        generation_s = self.seconds.get("generation", 0.0)
        earlier = earlier_timings(inputs)
        tap = self.tap or UsageTap()
        routing = {alias: _routing(router) for alias, router in self.routers.items()}
        manifest = OutputManifest(
            run_id=provenance.run_id,
            plan_digest=inputs.plan.digest,
            config_digest=inputs.plan.config_digest,
            shard=inputs.shard.shard,
            attempt=inputs.attempt,
            seed=inputs.shard.seed,
            assigned=inputs.ranges,
            ranges=produced,
            complete=produced == normalise_ranges(inputs.ranges),
            drained=None if drained is None else _drained(drained),
            records=records,
            columns=column_types(final),
            arrow_schema=final.to_string(show_schema_metadata=False),
            parts=tuple(parts),
            usage_source="host" if tap.supported else "unavailable",
            models=_usage(inputs, tap, routing),
            timings=Timings(
                worker_started_at=self.started,
                worker_finished_at=system_clock(),
                queue_wait_s=earlier.queue_wait_s,
                server_start_s=earlier.server_start_s,
                host_import_s=self.seconds.get("import", 0.0),
                setup_s=self.seconds.get("setup", 0.0),
                generation_s=generation_s,
                write_s=clock() - t0,
                records_per_s=records / generation_s if generation_s > 0 else 0.0,
            ),
            host_version=self.host.version if self.host is not None else (installed_version("data-designer") or ""),
            runtime_version=runtime_version,
            python=platform.python_version(),
        )
        if self.evidence is not None:
            self.evidence.publish(final=True)  # before the manifest: a valid manifest's attempt has the final counts
        if not inputs.writer.publish_manifest(manifest):
            path = inputs.layout.output_manifest(inputs.shard.shard, inputs.attempt)
            raise OutputConflict(f"the output manifest {str(path)!r} already exists")
        return manifest


def _dataset_name(item: IndexRange) -> str:
    return f"records-{item.start}-{item.stop}"


def _drained(outcome: DrainOutcome) -> Drained:
    why = {"SIGUSR1": "the time-limit warning", "SIGTERM": "a termination"}[outcome.signal]
    how = (
        "new requests were held and every in-flight request finished"
        if outcome.settled
        else ("published at once" if outcome.signal == "SIGTERM" else "the drain grace ran out")
    )
    return Drained(
        signal=outcome.signal,
        requested_at=outcome.requested_at,
        published_at=system_clock(),
        settled=outcome.settled,
        message=f"stopped on {why} ({outcome.signal}): {how}; the missing indices are left for the next attempt",
    )


def _routing(router: Router) -> Routing:
    stats = router.stats()
    return Routing(
        router_url=router.base_url,
        replicas=tuple(
            ReplicaRequests(base_url=item.base_url, requests=item.requests, failures=item.failures)
            for item in stats.upstreams
        ),
        failovers=stats.failovers,
        unrouted=stats.unrouted,
        failover_s=stats.failover_s,
    )


def _usage(inputs: WorkerInputs, tap: UsageTap, routing: dict[str, Routing]) -> dict[str, ModelUsage]:
    """Per alias: requests and tokens over every create call (None throughout when the host hides them)."""
    totals: dict[str, tuple[int, int, int, int]] = {}
    known = tap.supported
    for item in inputs.ranges:
        stats = tap.usage(_dataset_name(item))
        if stats is None:
            known = False
            continue
        for alias, usage in stats.items():
            counts = (
                int(usage.request_usage.successful_requests),
                int(usage.request_usage.failed_requests),
                int(usage.token_usage.input_tokens),
                int(usage.token_usage.output_tokens),
            )
            previous = totals.get(alias, (0, 0, 0, 0))
            totals[alias] = (
                previous[0] + counts[0],
                previous[1] + counts[1],
                previous[2] + counts[2],
                previous[3] + counts[3],
            )
    out = {}
    for alias, endpoint in inputs.endpoints.items():
        row: tuple[int | None, ...] = totals.get(alias, (0, 0, 0, 0)) if known else (None, None, None, None)
        out[alias] = ModelUsage(
            kind=endpoint.kind,
            model=endpoint.model,
            base_urls=endpoint.base_urls,
            used_base_url=endpoint.base_urls[0],
            successful_requests=row[0],
            failed_requests=row[1],
            input_tokens=row[2],
            output_tokens=row[3],
            routing=routing.get(alias),
        )
    return out


def _record_failure(inputs: WorkerInputs, exc: BaseException, kind: WorkerFailure) -> None:
    """``client-error.json``: the cause and a fix, for the supervisor's status message."""
    try:
        record = explain(exc, kind, inputs.endpoints)
    except Exception as failed:  # never let the explanation hide the failure itself
        print(f"ddslurm-worker: cannot explain the failure: {type(failed).__name__}: {failed}", file=sys.stderr)
        return
    write_client_error(inputs.writer, record)


def _fail(progress: ProgressWriter | None, kind: str, message: str) -> int:
    line = " ".join(message.split())
    if progress is not None:
        progress.publish(
            "failed", WorkerError(kind="invalid_config" if kind == "invalid_config" else "client_error", message=line)
        )
    print(f"ddslurm-worker: {kind}: {line}", file=sys.stderr, flush=True)
    return EXIT_INVALID_CONFIG if kind == "invalid_config" else EXIT_CLIENT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
