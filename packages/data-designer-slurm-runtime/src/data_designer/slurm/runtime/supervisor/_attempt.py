"""One claimed attempt, run to its end: checks, assignment, server steps, readiness, endpoints, client, status.

:class:`Supervisor` always ends with exactly one classified status (``status.json``), written before it stops
every step and the client (TERM, then KILL after a grace period), so that the status lands even when Slurm's
``KillWait`` is short.

* Assignment: the attempt generates the shard's range minus what earlier attempts' valid manifests cover
  (``runtime._coverage``), recorded in ``attempt.json``; nothing left means ``succeeded`` at once.
* Replicas: a replica that dies while the client runs is recorded; the attempt goes on while another replica
  of its alias lives (the client's router fails over) and ends ``server_died`` when none does.
* Signals: before the client starts, a signal ends the attempt classified (``supervisor._stopping``) with no
  records. While it runs, the supervisor forwards the signal (``SIGUSR1`` for the warning, else ``SIGTERM``)
  to the client worker, which drains and publishes a partial manifest; the attempt ends ``time_limit``,
  ``preempted`` or ``cancelled`` with the records published (``succeeded`` if the worker finished first).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.contracts.records import (
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    EXIT_CLIENT_ERROR,
    EXIT_CODES,
    EXIT_DRAINED,
    EXIT_INVALID_CONFIG,
    MANIFEST_SCHEMA,
    AliasEndpoints,
    AttemptRecord,
    EndpointsRecord,
    FinalStatus,
    IndexRange,
    OutputManifest,
    ReplicaRecord,
    StatusRecord,
)
from data_designer.slurm.planner import SERVER_API_KEY_ENV, bind_argv
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import (
    AttemptWriter,
    Clock,
    RecordOk,
    RunLayout,
    format_timestamp,
    read_record,
    shard_coverage,
)
from data_designer.slurm.runtime.supervisor._client_ending import client_failure_message, read_client_error
from data_designer.slurm.runtime.supervisor._containers import client_command, container_site
from data_designer.slurm.runtime.supervisor._environment import (
    SetupError,
    TaskIdentity,
    check_digest,
    check_environment,
)
from data_designer.slurm.runtime.supervisor._heartbeat import Heartbeat
from data_designer.slurm.runtime.supervisor._images import check_images
from data_designer.slurm.runtime.supervisor._preflight import check_external_endpoints, preflight_failure
from data_designer.slurm.runtime.supervisor._replicas import (
    LOG_TAIL_LINES,
    LOOPBACK,
    ReplicaProcess,
    log_step,
    log_tail,
    nodes_of,
    passed_to,
    spawn,
    srun_argv,
    step_environment,
    stop_processes,
)
from data_designer.slurm.runtime.supervisor._served_models import ask_models, judge
from data_designer.slurm.runtime.supervisor._server_metrics import (
    SCRAPE_INTERVAL_S,
    ScrapeTarget,
    ServerScraper,
    metrics_url,
)
from data_designer.slurm.runtime.supervisor._slurm_nodes import allocation_nodes
from data_designer.slurm.runtime.supervisor._stopping import StopCause, classify_stop

DEFAULT_POLL_S = 0.2
DEFAULT_STOP_GRACE_S = 10.0
DRAIN_SLACK_S = 5.0
"""Beyond the drain grace, what the client worker gets to write its partial manifest before it is stopped."""
CLIENT_EXIT_STATUS: dict[int, FinalStatus] = {EXIT_INVALID_CONFIG: "invalid_config", EXIT_CLIENT_ERROR: "client_error"}


class AttemptEnded(Exception):
    """The attempt ends with ``status``."""

    def __init__(
        self,
        status: FinalStatus,
        message: str,
        *,
        step: str | None = None,
        tail: Sequence[str] = (),
        records: int | None = None,
        drain_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.step = step
        self.tail = tuple(tail)
        self.records = records
        self.drain_s = drain_s


class Supervisor:
    """One claimed attempt: runs it and always leaves a status and no child process behind."""

    def __init__(
        self,
        plan: ExecutionPlan,
        layout: RunLayout,
        task: TaskIdentity,
        *,
        environ: Mapping[str, str],
        runner: CommandRunner,
        clock: Clock,
        stop: threading.Event,
        received: Sequence[str],
        poll_s: float,
        heartbeat_s: float,
        stop_grace_s: float,
        metrics_interval_s: float = SCRAPE_INTERVAL_S,
    ) -> None:
        self.plan, self.layout, self.task = plan, layout, task
        self.metrics_interval_s = metrics_interval_s
        self.environ, self.runner, self.clock, self.stop = dict(environ), runner, clock, stop
        self.received = received
        self.poll_s, self.stop_grace_s = poll_s, stop_grace_s
        self.attempt_dir = layout.attempt_dir(task.shard, task.attempt)
        self.writer = AttemptWriter(layout, task.shard, task.attempt, clock=clock)
        self.heartbeat = Heartbeat(self.writer, interval_s=heartbeat_s)
        self.started_at = clock()
        self.replicas: list[ReplicaProcess] = []
        self.client: subprocess.Popen[bytes] | None = None
        self.nodes: tuple[str, ...] = ()
        self.addresses: tuple[str, ...] = ()
        self.times: dict[str, datetime] = {}
        self.assigned: tuple[IndexRange, ...] | None = None
        self.covered: tuple[IndexRange, ...] = ()
        self.cause: StopCause | None = None
        self.manifest: OutputManifest | None = None
        """The client worker's valid result manifest, once it ended with one."""

    # -- logging and records -------------------------------------------------------------------------------------

    def say(self, message: str) -> None:
        line = f"{format_timestamp(self.clock())} supervisor: {message}"
        print(line, file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):  # stderr (the Slurm .err file) still has it
            self.writer.append_log("supervisor", line + "\n")

    def write_attempt(self) -> None:
        record = AttemptRecord(
            run_id=str(self.layout.run_id),
            plan_digest=self.plan.digest,
            shard=self.task.shard,
            attempt=self.task.attempt,
            chunk=self.task.chunk,
            array_task=self.task.array_task,
            job_id=self.task.job_id,
            restart_count=self.task.restart_count,
            hostname=socket.gethostname(),
            nodes=self.nodes,
            node_addresses=self.addresses,
            supervisor_pid=os.getpid(),
            supervisor_started_at=self.started_at,
            heartbeat_interval_s=self.heartbeat.interval_s,
            servers_spawned_at=self.times.get("servers_spawned"),
            servers_ready_at=self.times.get("servers_ready"),
            client_started_at=self.times.get("client_started"),
            assigned=self.assigned,
            covered_before=self.covered,
            replicas=tuple(self._replica_record(r) for r in self.replicas),
        )
        self.writer.write_attempt(record)

    @property
    def assigned_records(self) -> int | None:
        """Records this attempt was assigned (None before the assignment)."""
        return None if self.assigned is None else sum(item.records for item in self.assigned)

    def _replica_record(self, replica: ReplicaProcess) -> ReplicaRecord:
        return ReplicaRecord(
            alias=replica.plan.alias,
            replica=replica.plan.replica,
            step=replica.step,
            log=str(replica.log.relative_to(self.attempt_dir)),
            nodes=replica.nodes,
            address=replica.address,
            port=replica.port,
            ports=replica.ports,
            base_url=replica.base_url,
            spawned_at=replica.spawned_at,
            ready_at=replica.ready_at,
            startup_s=replica.startup_s,
            readiness_lag_s=replica.readiness_lag_s,
            exited_at=replica.exited_at,
            exit_code=replica.exit_code,
        )

    # -- the attempt ---------------------------------------------------------------------------------------------

    def run(self) -> int:
        self.say(f"run {self.layout.run_id} shard {self.task.shard} attempt {self.task.attempt} (pid {os.getpid()})")
        self.heartbeat.start()
        try:
            ended = self._attempt()
            self._write_status(ended)
        finally:
            self.heartbeat.set_phase("stopping")
            self._stop_children()
            self.heartbeat.stop()
        return EXIT_CODES[ended.status]

    def _attempt(self) -> AttemptEnded:
        try:
            self._run()
            return AttemptEnded(
                "succeeded",
                "the client worker finished and wrote its manifest",
                records=None if self.manifest is None else self.manifest.records,
            )
        except SetupError as exc:
            return AttemptEnded(exc.status, str(exc))
        except AttemptEnded as exc:
            return exc
        except Exception as exc:  # a bug or an unusable filesystem: still classified, with the traceback
            lines = traceback.format_exception(exc)
            tail = "".join(lines).splitlines()[-LOG_TAIL_LINES:]
            return AttemptEnded("internal_error", f"the supervisor failed: {type(exc).__name__}: {exc}", tail=tail)

    def _run(self) -> None:
        check_digest(self.plan)
        check_environment(self.plan)
        check_images(self.plan, self.layout.root, say=self.say, clock=self.clock)
        self._assign()
        if not self.assigned:
            self.write_attempt()
            raise AttemptEnded(
                "succeeded", "nothing left to generate: earlier attempts published every index of the shard", records=0
            )
        self.nodes, self.addresses = allocation_nodes(self.environ, self.runner)
        needed = max((max(nodes_of(r)) for r in self.plan.allocation.replicas), default=0) + 1
        if needed > len(self.nodes):
            raise SetupError("invalid_config", f"the plan places replicas on {needed} nodes, the job has {self.nodes}")
        self.write_attempt()
        self._preflight()
        key = secrets.token_urlsafe(32) if any(r.requires_api_key for r in self.plan.allocation.replicas) else None
        if key is not None:
            self.environ[SERVER_API_KEY_ENV] = key
        self._start_replicas()
        self._wait_ready()
        self._write_endpoints(with_key=key is not None)
        self._run_client()

    def _preflight(self) -> None:
        """External endpoints must answer before anything starts (a bad URL or key fails in seconds)."""
        checks = check_external_endpoints(self.plan.allocation.client.endpoints, self.environ)
        for check in checks:
            self.say(check.describe())
        failure = preflight_failure(checks)
        if failure is not None:
            raise AttemptEnded(*failure)

    def _assign(self) -> None:
        """The shard's range minus what earlier attempts published (their valid manifests)."""
        shard = next((s for s in self.plan.shards if s.shard == self.task.shard), None)
        if shard is None:
            raise SetupError("invalid_config", f"the plan has no shard {self.task.shard}")
        coverage = shard_coverage(self.layout, shard, plan_digest=self.plan.digest, below_attempt=self.task.attempt)
        self.covered = coverage.covered
        self.assigned = coverage.missing
        if coverage.manifests:
            self.say(
                f"earlier attempts {sorted(coverage.manifests)} published {coverage.records} of "
                f"{shard.records} records; this attempt generates {self.assigned_records}"
            )
        if coverage.overlap:
            self.say(f"earlier attempts overlap on {list(coverage.overlap)}; the lowest attempt keeps those indices")

    def _start_replicas(self) -> None:
        self.heartbeat.set_phase("servers_starting")
        port_dir = self.writer.make_ports_dir()
        site = container_site(self.plan, self.layout)
        for plan in self.plan.allocation.replicas:
            self._check_stop()
            first = nodes_of(plan)[0]
            address = LOOPBACK if plan.bind == "loopback" else self.addresses[first]
            argv = srun_argv(
                plan, python=sys.executable, port_dir=port_dir, environ=self.environ, site=site, master_addr=address
            )
            log = self.layout.log_file(self.task.shard, self.task.attempt, log_step(plan))
            started, monotonic = self.clock(), time.monotonic()
            try:
                env = step_environment(plan, self.environ, self.plan.submission.environment)
                with self.writer.open_log(log_step(plan)) as stream:
                    process = spawn(argv, env=env, log=stream, cwd=self.layout.run_dir)
            except OSError as exc:
                raise AttemptEnded(
                    "server_failed_to_start", f"cannot run {argv[0]!r} for {plan.alias}-r{plan.replica}: {exc}"
                ) from exc
            nodes = tuple(self.nodes[i] for i in nodes_of(plan))
            self.replicas.append(ReplicaProcess(plan, process, log, nodes, address, started, monotonic))
            self.say(f"started {plan.alias}-r{plan.replica} on {','.join(nodes)}: {' '.join(argv[:11])} ...")
        self.times["servers_spawned"] = self.clock()
        self.write_attempt()

    def _wait_ready(self) -> None:
        port_dir = self.layout.ports_dir(self.task.shard, self.task.attempt)
        pending = list(self.replicas)
        models_waits: dict[str, str] = {}  # step -> why a healthy replica is not ready yet (GET /v1/models)
        while pending:
            self._check_stop()
            for replica in list(pending):
                code = replica.process.poll()
                if code is not None:
                    raise AttemptEnded(
                        "server_failed_to_start",
                        f"server {replica.step} exited {code} before it was ready "
                        f"({time.monotonic() - replica.spawned_monotonic:.1f}s after it was started)",
                        step=log_step(replica.plan),
                        tail=log_tail(replica.log),
                    )
                if replica.read_ports(port_dir):
                    healthy, server_ready = replica.health()
                    if healthy and self._serves_its_model(replica, models_waits):
                        self._mark_ready(replica, server_ready)
                        pending.remove(replica)
                        continue
                waited = time.monotonic() - replica.spawned_monotonic
                if waited > replica.plan.startup_timeout_s:
                    why = f" (/health answered; {models_waits[replica.step]})" if replica.step in models_waits else ""
                    raise AttemptEnded(
                        "server_failed_to_start",
                        f"server {replica.step} was not ready within its startup budget of "
                        f"{replica.plan.startup_timeout_s}s{why}",
                        step=log_step(replica.plan),
                        tail=log_tail(replica.log),
                    )
            if pending:
                self.stop.wait(self.poll_s)
        self.times["servers_ready"] = self.clock()
        self.write_attempt()

    def _serves_its_model(self, replica: ReplicaProcess, waits: dict[str, str]) -> bool:
        """Whether a healthy replica lists the name its clients ask for (``_served_models``); a replica serving
        another name ends the attempt ``server_failed_to_start``; one not answering yet is asked again."""
        assert replica.base_url is not None  # healthy: its port is known
        key = self.environ.get(SERVER_API_KEY_ENV) if replica.plan.requires_api_key else None
        identity = judge(replica.plan, replica.step, ask_models(replica.base_url, key))
        if identity.verdict == "failed":
            raise AttemptEnded(
                "server_failed_to_start", identity.message, step=log_step(replica.plan), tail=log_tail(replica.log)
            )
        if identity.verdict == "wait":
            waits[replica.step] = identity.message
            return False
        if identity.message:
            self.say(identity.message)
        return True

    def _mark_ready(self, replica: ReplicaProcess, server_ready: float | None) -> None:
        replica.ready_at = self.clock()
        replica.startup_s = round(time.monotonic() - replica.spawned_monotonic, 6)
        if server_ready is not None:
            replica.readiness_lag_s = round(replica.ready_at.timestamp() - server_ready, 6)
        self.say(f"{replica.step} ready at {replica.base_url} after {replica.startup_s:.2f}s")
        self.write_attempt()

    def _write_endpoints(self, *, with_key: bool) -> None:
        aliases: dict[str, AliasEndpoints] = {}
        replicas = self.plan.allocation.replicas
        for endpoint in self.plan.allocation.client.endpoints:
            if endpoint.kind == "deployed":
                urls = tuple(u for i in endpoint.replicas if (u := self.replicas[i].base_url) is not None)
                keyed = with_key and any(replicas[i].requires_api_key for i in endpoint.replicas)
                key_env = SERVER_API_KEY_ENV if keyed else None
            else:
                urls, key_env = ((endpoint.endpoint,) if endpoint.endpoint else ()), endpoint.api_key_env
            aliases[endpoint.alias] = AliasEndpoints(
                kind=endpoint.kind, base_urls=urls, model=endpoint.model, api_key_env=key_env
            )
        if not self.writer.write_endpoints(EndpointsRecord(aliases=aliases)):
            path = self.layout.endpoints(self.task.shard, self.task.attempt)
            raise SetupError("invalid_config", f"{str(path)!r} already exists: the attempt directory was reused")

    def _run_client(self) -> None:
        self.heartbeat.set_phase("client_running")
        values = {"shard": str(self.task.shard), "attempt": str(self.task.attempt)}
        argv = bind_argv(self.plan.allocation.client.argv, values)
        client = self.plan.allocation.client
        env = {
            **passed_to(self.environ, self.plan.submission.environment, client.pass_environment),
            ENV_ATTEMPT_DIR: str(self.attempt_dir),
            ENV_ENDPOINTS: str(self.layout.endpoints(self.task.shard, self.task.attempt)),
            # The host's order of sampler draws follows set iteration order: a fixed hash seed keeps a
            # shard's sampler values the same from run to run (docs/architecture/sharding.md).
            "PYTHONHASHSEED": "0",
        }
        log = self.layout.log_file(self.task.shard, self.task.attempt, "client")
        argv = tuple(client_command(self.plan, argv, layout=self.layout, environ=env))
        try:
            with self.writer.open_log("client") as stream:
                self.client = spawn(argv, env=env, log=stream, cwd=self.layout.run_dir)
        except OSError as exc:
            raise AttemptEnded(
                "client_error", f"cannot start the client worker {argv[0]!r}: {exc}", step="client"
            ) from exc
        self.times["client_started"] = self.clock()
        self.write_attempt()
        self.say(f"client worker started: {' '.join(argv)}")
        scraper = self._scraper()
        try:
            while True:
                if self.stop.is_set():
                    self._drain(self.client, log)
                    return
                code = self.client.poll()
                if code is not None:
                    self._client_ended(code, log)
                    return
                self._check_replicas()
                self.stop.wait(self.poll_s)
        finally:
            if scraper is not None:
                self._end_scraping(scraper)

    def _scraper(self) -> ServerScraper | None:
        """Scrape every deployed replica's ``/metrics`` while the client runs (``_server_metrics``); None: none."""
        targets = [
            ScrapeTarget(r.plan.alias, r.plan.replica, metrics_url(r.address, r.port))
            for r in self.replicas
            if r.port is not None
        ]
        if not targets:
            return None
        scraper = ServerScraper(
            self.writer, targets, clock=self.clock, interval_s=self.metrics_interval_s, say=self.say
        )
        scraper.start()
        return scraper

    def _end_scraping(self, scraper: ServerScraper) -> None:
        """Stop scraping and write the final record; evidence lost never changes how the attempt ends."""
        try:
            record = scraper.stop()
        except Exception as exc:
            self.say(f"server metrics lost: {type(exc).__name__}: {exc}")
            return
        for replica in record.replicas:
            name = f"{replica.alias}-r{replica.replica}"
            if not replica.available:
                self.say(f"{name}: no server metrics: {replica.reason}")
            elif replica.aggregates is not None:
                found = replica.aggregates
                self.say(
                    f"{name}: {found.scrapes} /metrics samples, waiting mean {found.waiting_mean} peak "
                    f"{found.waiting_peak}, KV cache peak {found.kv_usage_peak}, preemptions {found.preemptions}"
                )

    def _check_replicas(self) -> None:
        """Record replicas that ended; fail only when an alias has no live replica left."""
        for replica in self.replicas:
            if replica.exit_code is not None:
                continue
            died = replica.process.poll()
            if died is None:
                continue
            replica.exit_code, replica.exited_at = died, self.clock()
            self.write_attempt()
            alias = replica.plan.alias
            alive = [r for r in self.replicas if r.plan.alias == alias and r.exit_code is None]
            if not alive:
                raise AttemptEnded(
                    "server_died",
                    f"server {replica.step} exited {died} while the client was running, and no replica of "
                    f"{alias!r} is left",
                    step=log_step(replica.plan),
                    tail=log_tail(replica.log),
                )
            self.say(
                f"server {replica.step} exited {died}; {len(alive)} replica(s) of {alias!r} still serve it "
                "(the client's router fails over)"
            )

    def _drain(self, client: subprocess.Popen[bytes], log: Path) -> None:
        """Forward the stop to the client worker, wait for its partial manifest, and classify the ending."""
        started = time.monotonic()
        self.heartbeat.set_phase("draining")
        cause = self._stop_cause()
        grace = float(self.plan.allocation.drain_grace_s)
        forwarded = self._forward(client)
        self.say(f"{cause.detail}: draining the client worker ({forwarded}, grace {grace:.0f}s)")
        for _ in poll(grace + DRAIN_SLACK_S, min(self.poll_s, 0.05), clock=time.monotonic, since=started):
            if client.poll() is not None:
                break
            if forwarded == "SIGUSR1" and "SIGTERM" in self.received:
                forwarded = self._forward(client)  # the job is ending now: the worker must publish at once
        drain_s = round(time.monotonic() - started, 6)
        code = client.poll()
        if code is None:
            raise AttemptEnded(
                cause.status,
                f"{cause.detail}; the client worker did not finish draining within {grace:.0f}s, nothing published",
                step="client",
                tail=log_tail(log),
                records=0,
                drain_s=drain_s,
            )
        if code == EXIT_DRAINED:
            manifest = self._manifest()
            if manifest is None:
                raise AttemptEnded(
                    "client_error", "the client worker drained without a valid output/manifest.json", step="client"
                )
            assigned = self.assigned_records or 0
            raise AttemptEnded(
                cause.status,
                f"{cause.detail}; drained in {drain_s:.1f}s: {manifest.records} of {assigned} records published, "
                "the rest is left for the next attempt",
                records=manifest.records,
                drain_s=drain_s,
            )
        if code in (-signal.SIGUSR1, -signal.SIGTERM, -signal.SIGKILL):  # it ended before it could drain
            raise AttemptEnded(
                cause.status,
                f"{cause.detail}; the client worker was ended by signal {-code} before it could drain, nothing "
                "published",
                step="client",
                tail=log_tail(log),
                records=0,
                drain_s=drain_s,
            )
        self._client_ended(code, log)
        self.say(f"the client worker finished before it could drain ({drain_s:.1f}s after the signal)")

    def _forward(self, client: subprocess.Popen[bytes]) -> str:
        name = "SIGUSR1" if self.received[:1] == ["SIGUSR1"] and "SIGTERM" not in self.received else "SIGTERM"
        with contextlib.suppress(ProcessLookupError):
            os.kill(client.pid, signal.SIGUSR1 if name == "SIGUSR1" else signal.SIGTERM)
        return name

    def _manifest(self) -> OutputManifest | None:
        found = read_record(self.layout.output_manifest(self.task.shard, self.task.attempt), MANIFEST_SCHEMA)
        return found.payload if isinstance(found, RecordOk) else None

    def _published_records(self) -> int:
        """What this attempt's valid manifest holds; 0 when it published none."""
        manifest = self.manifest or self._manifest()
        return 0 if manifest is None else manifest.records

    def _client_ended(self, code: int, log: Path) -> None:
        if code == 0:
            self.manifest = self._manifest()
            if self.manifest is not None:
                return
            raise AttemptEnded(
                "client_error",
                "the client worker exited 0 without a valid output/manifest.json; fix: read logs/client.log",
                step="client",
                tail=log_tail(log),
            )
        status = CLIENT_EXIT_STATUS.get(code, "client_error")
        tail = log_tail(log)
        record = read_client_error(self.layout.client_error(self.task.shard, self.task.attempt))
        raise AttemptEnded(status, client_failure_message(code, record, tail), step="client", tail=tail)

    def _stop_cause(self) -> StopCause:
        if self.cause is None:
            self.cause = classify_stop(self.received, self.environ, self.runner, restart_count=self.task.restart_count)
        return self.cause

    def _check_stop(self) -> None:
        if self.stop.is_set():
            cause = self._stop_cause()
            raise AttemptEnded(cause.status, f"{cause.detail}; stopped before generation started", records=0)

    def _stop_children(self) -> None:
        processes = [p for p in [self.client, *(r.process for r in self.replicas)] if p is not None]
        if processes:
            self.say(f"stopping {len(processes)} process(es): TERM, then KILL after {self.stop_grace_s:.0f}s")
            stop_processes(processes, grace_s=self.stop_grace_s)

    def _write_status(self, ended: AttemptEnded) -> None:
        record = StatusRecord(
            status=ended.status,
            exit_code=EXIT_CODES[ended.status],
            message=str(ended),
            step=ended.step,
            log_tail=ended.tail,
            signal=self.received[0] if self.received else None,
            records=ended.records if ended.records is not None else self._published_records(),
            records_assigned=self.assigned_records,
            drain_s=ended.drain_s,
            started_at=self.started_at,
            finished_at=self.clock(),
        )
        self.say(f"{ended.status}: {ended}")
        for line in ended.tail:
            self.say(f"  | {line}")
        if not self.writer.write_status(record):
            self.say(f"{self.layout.status(self.task.shard, self.task.attempt)} already exists; not replaced")
