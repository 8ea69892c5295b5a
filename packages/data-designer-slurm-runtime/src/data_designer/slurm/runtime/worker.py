"""The Data Designer client worker of one shard attempt: ``python -m data_designer.slurm.runtime.worker``.

Started by the allocation supervisor on the batch node, in the run directory, as
``--plan plan.json --shard N --attempt M`` with ``DDSLURM_ATTEMPT_DIR`` and ``DDSLURM_ENDPOINTS``
set. It loads the plan's inline Data Designer config with the installed host, validates it fully,
points every model alias at its endpoint, seeds the samplers with the shard's seed, generates the
shard's index ranges (one ``create`` call each), and publishes Parquet parts then the manifest into
``<attempt>/output/``; ``progress.json`` follows every batch.

Exit codes (the supervisor classifies them): 0 succeeded; 2 invalid config (the host rejects the
config, an API key variable is unset, a sampler cannot satisfy its constraints; retrying cannot
help); 3 client error (anything else). The last stderr line of a failure is one line naming it.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import __version__ as runtime_version
from data_designer.slurm.runtime._records import RecordWritten, system_clock, write_record_once
from data_designer.slurm.runtime._router import Router, start_routers
from data_designer.slurm.runtime._worker_host import (
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
from data_designer.slurm.runtime._worker_inputs import (
    WorkerInputError,
    WorkerInputs,
    config_mapping,
    earlier_timings,
    load_inputs,
    parse_args,
)
from data_designer.slurm.runtime._worker_output import (
    OutputConflict,
    ProgressWriter,
    Provenance,
    batch_rows,
    clashing_columns,
    column_types,
    host_batch_files,
    output_schema,
    unified_schema,
    write_parts,
)
from data_designer.slurm.runtime._worker_records import (
    MANIFEST_SCHEMA,
    IndexRange,
    ModelUsage,
    OutputManifest,
    OutputPart,
    ReplicaRequests,
    Routing,
    Timings,
    WorkerError,
)

EXIT_OK = 0
EXIT_INVALID_CONFIG = 2
EXIT_CLIENT_ERROR = 3
ARTIFACTS_DIR = "artifacts"
"""The host's own artifacts (its batch files, metadata) under the attempt directory."""


def main(argv: Sequence[str] | None = None) -> int:
    started = system_clock()
    try:
        inputs = load_inputs(parse_args(sys.argv[1:] if argv is None else argv), os.environ)
    except WorkerInputError as exc:
        return _fail(None, "client_error", str(exc))
    progress = ProgressWriter(inputs.layout, inputs.shard.shard, inputs.attempt, inputs.records)
    try:
        progress.publish("starting")
        manifest = run(inputs, progress, started=started)
    except ConfigRejected as exc:
        return _fail(progress, "invalid_config", str(exc))
    except Exception as exc:  # every other ending is the client's error; the traceback goes to the log first
        import traceback

        traceback.print_exc()
        kind = "invalid_config" if is_deterministic_failure(exc) else "client_error"
        return _fail(progress, kind, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000])
    print(
        f"ddslurm-worker: shard {manifest.shard} attempt {manifest.attempt}: {manifest.records} records in "
        f"{len(manifest.parts)} part(s), {manifest.timings.records_per_s:.1f} records/s",
        file=sys.stderr,
    )
    return EXIT_OK


def run(inputs: WorkerInputs, progress: ProgressWriter, *, started: datetime) -> OutputManifest:
    """Generate the inputs' ranges and publish parts and manifest; raises on any failure."""
    prepare_environment(inputs.attempt_dir)
    clock = time.perf_counter
    t0 = clock()
    host = import_host()
    forbid_tiktoken_downloads()
    t1 = clock()
    builder = load_builder(host, config_mapping(inputs))
    clashes = clashing_columns([column.name for column in builder.get_column_configs()])
    if clashes:
        raise ConfigRejected(f"column names {clashes} are reserved for provenance; rename them")
    routers = start_routers({alias: endpoint.base_urls for alias, endpoint in inputs.endpoints.items()})
    try:
        routed = {alias: router.base_url for alias, router in routers.items()}
        providers = rewrite_models(host, builder, inputs.endpoints, inputs.concurrency, routed)
        artifacts = inputs.attempt_dir / ARTIFACTS_DIR
        designer, tap = make_designer(host, artifacts, providers, batch_size=inputs.plan.allocation.client.batch_size)
        validate(designer, builder)
        t2 = clock()
        progress.publish("generating")
        datasets = [_generate(designer, builder, inputs, item, progress) for item in inputs.ranges]
        t3 = clock()
    finally:
        for router in routers.values():
            router.close()
    progress.publish("writing")
    routing = {alias: _routing(router) for alias, router in routers.items()}
    manifest = _publish(
        inputs, host, tap, datasets, routing, started=started, seconds=(t1 - t0, t2 - t1, t3 - t2), clock=clock
    )
    progress.publish("succeeded")
    return manifest


def _dataset_name(item: IndexRange) -> str:
    return f"records-{item.start}-{item.stop}"


def _generate(designer: Any, builder: Any, inputs: WorkerInputs, item: IndexRange, progress: ProgressWriter) -> Path:
    """One create call for ``item``; returns the directory of the host's batch files."""
    done_before = progress.records_done

    def on_batch_complete(path: Path) -> None:
        # The host aborts the run when this raises; progress is never evidence, so a failure only logs.
        try:
            progress.records_done += batch_rows(Path(path))
        except Exception as exc:
            print(f"ddslurm-worker: cannot count the rows of {str(path)!r}: {exc}", file=sys.stderr)
        progress.publish("generating")

    seed_generators(inputs.shard.seed)
    results = designer.create(
        builder, num_records=item.records, dataset_name=_dataset_name(item), on_batch_complete=on_batch_complete
    )
    dataset_dir = Path(results.artifact_storage.final_dataset_path)
    produced = sum(batch_rows(path) for path in host_batch_files(dataset_dir))
    if produced != item.records:
        raise RuntimeError(f"the host produced {produced} of the {item.records} records of [{item.start}, {item.stop})")
    progress.records_done = done_before + produced
    return dataset_dir


def _publish(
    inputs: WorkerInputs,
    host: Host,
    tap: UsageTap,
    datasets: list[Path],
    routing: dict[str, Routing],
    *,
    started: datetime,
    seconds: tuple[float, float, float],
    clock: Callable[[], float],
) -> OutputManifest:
    t0 = clock()
    provenance = Provenance(
        run_id=str(inputs.layout.run_id),
        plan_digest=inputs.plan.digest,
        shard=inputs.shard.shard,
        attempt=inputs.attempt,
    )
    files = [host_batch_files(directory) for directory in datasets]
    schema = unified_schema([path for group in files for path in group])
    parts: list[OutputPart] = []
    for item, group in zip(inputs.ranges, files, strict=True):
        parts += write_parts(
            inputs.layout, group, schema=schema, first_index=item.start, first_part=len(parts), provenance=provenance
        )
    records = sum(part.records for part in parts)
    final = output_schema(schema)
    import_s, setup_s, generation_s = seconds
    earlier = earlier_timings(inputs)
    manifest = OutputManifest(
        run_id=provenance.run_id,
        plan_digest=inputs.plan.digest,
        config_digest=inputs.plan.config_digest,
        shard=inputs.shard.shard,
        attempt=inputs.attempt,
        seed=inputs.shard.seed,
        ranges=inputs.ranges,
        records=records,
        columns=column_types(final),
        arrow_schema=final.to_string(show_schema_metadata=False),
        parts=tuple(parts),
        usage_source="host" if tap.supported else "unavailable",
        models=_usage(inputs, tap, routing),
        timings=Timings(
            worker_started_at=started,
            worker_finished_at=system_clock(),
            queue_wait_s=earlier.queue_wait_s,
            server_start_s=earlier.server_start_s,
            host_import_s=import_s,
            setup_s=setup_s,
            generation_s=generation_s,
            write_s=clock() - t0,
            records_per_s=records / generation_s if generation_s > 0 else 0.0,
        ),
        host_version=host.version,
        runtime_version=runtime_version,
        python=platform.python_version(),
    )
    path = inputs.layout.output_manifest(inputs.shard.shard, inputs.attempt)
    written = write_record_once(path, MANIFEST_SCHEMA, manifest, operation="worker.write_manifest")
    if not isinstance(written, RecordWritten):
        raise OutputConflict(f"the output manifest {str(path)!r} already exists")
    return manifest


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
