"""Server-side samples: each deployed replica's ``GET /metrics`` scraped while the client runs (``server-metrics.json``).

* **What is read** (:func:`parse_metrics`, pure): Prometheus text, parsed by ``prometheus_client``'s own parser, of
  vLLM's scheduler gauges and preemption counter (names as vLLM 0.32/0.33 define them in
  ``vllm/v1/metrics/loggers.py``, labels ``model_name`` and ``engine``): ``vllm:num_requests_running`` and
  ``vllm:num_requests_waiting`` summed over the label sets (one per engine), ``vllm:kv_cache_usage_perc`` the largest
  of them (a share per engine; ``vllm:gpu_cache_usage_perc``, the older name (deprecated in vLLM 0.9, gone from 0.32), when it is missing), and
  ``vllm:num_preemptions_total`` summed. A page holding none of them is unreadable: no vLLM metrics.
* **What is kept** (:class:`SampleSeries`): per replica at most ``max_samples`` samples; when full, each pair of
  samples becomes one (the later one's gauges and time, both preemption increases summed) and later scrapes are
  kept one in ``stride`` (doubled), so the series covers any run in a fixed size, deterministically. Aggregates
  (means, peaks, total preemptions) are exact over every scrape.
* **When** (:class:`ServerScraper`): on its own thread, at once when the client starts and then every
  ``interval_s`` (:data:`SCRAPE_INTERVAL_S`), each request with a short timeout (:data:`SCRAPE_TIMEOUT_S`) and no
  proxy; the record is replaced through the store every :data:`SERVER_METRICS_WRITE_EVERY` rounds and once at the
  end (``finished``). A scrape never raises into the supervisor: a failure is recorded (``failures``,
  ``last_error``), and a replica that never answered with vLLM's metrics is ``available: false`` with the first
  reason, never zeros.
"""

from __future__ import annotations

import math
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from data_designer.slurm.contracts.records import (
    SERVER_METRICS_MAX_SAMPLES,
    SERVER_METRICS_WRITE_EVERY,
    ReplicaServerSamples,
    ServerAggregates,
    ServerSample,
    ServerSamplesRecord,
)
from data_designer.slurm.runtime.store import AttemptWriter, Clock

SCRAPE_INTERVAL_S = 5.0
"""Seconds between two scrapes of every replica (the supervisor's ``--metrics-interval-s``)."""
SCRAPE_TIMEOUT_S = 2.0
"""One ``GET /metrics`` waits at most this long (connect and read)."""
METRICS_PATH = "/metrics"
MAX_METRICS_BYTES = 4 * 1024 * 1024
"""A page longer than this is not read (vLLM's is tens of KiB)."""

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
KV_USAGE_OLD_NAME = "vllm:gpu_cache_usage_perc"
PREEMPTIONS = "vllm:num_preemptions_total"
_DIGITS = 6
# Scrapes go straight to the node, like the health checks: a site's http_proxy must not see (or break) them.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class MetricsUnavailable(Exception):
    """A scrape that gave no reading: the reason, one line (HTTP status, connection error, unreadable page)."""


@dataclass(frozen=True)
class MetricsReading:
    """One page's values (None: the page does not have that metric)."""

    running: float | None
    waiting: float | None
    kv_usage: float | None
    preemptions_total: float | None


def parse_metrics(text: str) -> MetricsReading:
    """vLLM's gauges and preemption counter from a Prometheus text page; :class:`MetricsUnavailable` when the text
    does not parse or holds none of them. Non-finite and negative values are left out."""
    values: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in _WANTED and math.isfinite(sample.value) and sample.value >= 0:
                    values.setdefault(sample.name, []).append(float(sample.value))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsUnavailable(f"/metrics is not Prometheus text: {_one_line(exc)}") from None
    if not values:
        raise MetricsUnavailable(f"/metrics has none of vLLM's metrics ({', '.join(_WANTED)})")
    kv = values.get(KV_USAGE) or values.get(KV_USAGE_OLD_NAME)
    return MetricsReading(
        running=_sum(values.get(RUNNING)),
        waiting=_sum(values.get(WAITING)),
        kv_usage=None if kv is None else _round(max(kv)),
        preemptions_total=_sum(values.get(PREEMPTIONS)),
    )


_WANTED = (RUNNING, WAITING, KV_USAGE, KV_USAGE_OLD_NAME, PREEMPTIONS)


def fetch_metrics(url: str, timeout_s: float) -> str:
    """The text of ``GET url`` answered 200; :class:`MetricsUnavailable` for anything else."""
    try:
        with _OPENER.open(url, timeout=timeout_s) as answer:
            data: bytes = answer.read(MAX_METRICS_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise MetricsUnavailable(f"GET {METRICS_PATH} answered {exc.code}") from None
    except (OSError, ValueError) as exc:  # refused, reset, timed out, a URL it cannot use
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise MetricsUnavailable(f"GET {METRICS_PATH} failed: {_one_line(reason)}") from None
    if len(data) > MAX_METRICS_BYTES:
        raise MetricsUnavailable(f"GET {METRICS_PATH} answered more than {MAX_METRICS_BYTES} bytes")
    return data.decode("utf-8", "replace")


@dataclass
class _Stat:
    total: float = 0.0
    count: int = 0
    peak: float | None = None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.total += value
        self.count += 1
        self.peak = value if self.peak is None else max(self.peak, value)

    @property
    def mean(self) -> float | None:
        return None if not self.count else _round(self.total / self.count)


@dataclass
class SampleSeries:
    """One replica's bounded series and exact aggregates (module docstring); ``max_samples`` even, at least 2."""

    max_samples: int = SERVER_METRICS_MAX_SAMPLES
    samples: list[ServerSample] = field(default_factory=list)
    stride: int = 1
    scrapes: int = 0
    _pending: ServerSample | None = None
    _pending_count: int = 0
    _counter: float | None = None
    _preemptions: float | None = None
    _running: _Stat = field(default_factory=_Stat)
    _waiting: _Stat = field(default_factory=_Stat)
    _kv: _Stat = field(default_factory=_Stat)

    def __post_init__(self) -> None:
        if self.max_samples < 2 or self.max_samples % 2:
            raise ValueError(f"max_samples {self.max_samples!r} must be even and at least 2")

    def add(self, t_s: float, reading: MetricsReading) -> None:
        delta = None
        if reading.preemptions_total is not None:
            previous = self._counter
            # a counter that went down was reset (the server restarted): its whole new value is new
            fresh = previous is None or reading.preemptions_total < previous
            delta = _round(reading.preemptions_total if fresh else reading.preemptions_total - (previous or 0.0))
            self._counter = reading.preemptions_total
            self._preemptions = _round((self._preemptions or 0.0) + delta)
        self.scrapes += 1
        self._running.add(reading.running)
        self._waiting.add(reading.waiting)
        self._kv.add(reading.kv_usage)
        point = ServerSample(
            t_s=_round(t_s, 3),
            running=reading.running,
            waiting=reading.waiting,
            kv_usage=reading.kv_usage,
            preemptions=delta,
        )
        self._pending = point if self._pending is None else _merge(self._pending, point)
        self._pending_count += 1
        if self._pending_count < self.stride:
            return
        self.samples.append(self._pending)
        self._pending, self._pending_count = None, 0
        if len(self.samples) == self.max_samples:
            pairs = zip(self.samples[0::2], self.samples[1::2], strict=True)
            self.samples = [_merge(first, second) for first, second in pairs]
            self.stride *= 2

    def kept(self) -> tuple[ServerSample, ...]:
        """The samples, and the scrapes since the last kept one merged into one more (nothing is lost at the end)."""
        return (*self.samples, self._pending) if self._pending is not None else tuple(self.samples)

    def aggregates(self) -> ServerAggregates:
        return ServerAggregates(
            scrapes=self.scrapes,
            running_mean=self._running.mean,
            running_peak=self._running.peak,
            waiting_mean=self._waiting.mean,
            waiting_peak=self._waiting.peak,
            kv_usage_peak=self._kv.peak,
            preemptions=self._preemptions,
        )


def _merge(first: ServerSample, second: ServerSample) -> ServerSample:
    """Two consecutive samples as one: the later one's time and gauges, both preemption increases."""
    if first.preemptions is None or second.preemptions is None:
        preemptions = second.preemptions if first.preemptions is None else first.preemptions
    else:
        preemptions = _round(first.preemptions + second.preemptions)
    return second.model_copy(update={"preemptions": preemptions})


@dataclass(frozen=True)
class ScrapeTarget:
    """One replica to scrape: its alias, number and ``http://<address>:<port>/metrics``."""

    alias: str
    replica: int
    url: str


@dataclass
class _ReplicaState:
    target: ScrapeTarget
    series: SampleSeries
    reason: str | None = None
    failures: int = 0
    last_error: str | None = None

    def record(self) -> ReplicaServerSamples:
        available = self.series.scrapes > 0
        return ReplicaServerSamples(
            alias=self.target.alias,
            replica=self.target.replica,
            url=self.target.url,
            available=available,
            reason=None if available else (self.reason or "not scraped yet"),
            failures=self.failures,
            last_error=self.last_error,
            stride=self.series.stride,
            aggregates=self.series.aggregates() if available else None,
            samples=self.series.kept(),
        )


Fetch = Callable[[str, float], str]


class ServerScraper:
    """Scrapes every target on a thread from :meth:`start` to :meth:`stop`, writing ``server-metrics.json``."""

    def __init__(
        self,
        writer: AttemptWriter,
        targets: Sequence[ScrapeTarget],
        *,
        clock: Clock,
        interval_s: float = SCRAPE_INTERVAL_S,
        timeout_s: float = SCRAPE_TIMEOUT_S,
        max_samples: int = SERVER_METRICS_MAX_SAMPLES,
        write_every: int = SERVER_METRICS_WRITE_EVERY,
        fetch: Fetch = fetch_metrics,
        say: Callable[[str], None] | None = None,
    ) -> None:
        if not (0 < interval_s < math.inf and 0 < timeout_s < math.inf) or write_every < 1:
            raise ValueError("interval_s and timeout_s must be positive and finite, write_every at least 1")
        self._writer, self._clock, self._fetch = writer, clock, fetch
        self._interval_s, self._timeout_s, self._write_every = interval_s, timeout_s, write_every
        self._say = say or (lambda line: print(f"supervisor: {line}", file=sys.stderr))
        self._replicas = [_ReplicaState(t, SampleSeries(max_samples)) for t in targets]
        self._started: datetime = clock()
        self._rounds = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-metrics", daemon=True)
        self._write_failed = False

    def start(self) -> None:
        self._started = self._clock()
        self._thread.start()

    def stop(self) -> ServerSamplesRecord:
        """End the thread (a scrape in flight ends within its timeout) and write the final record."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._timeout_s * max(1, len(self._replicas)) + 5)
        return self.write(finished=True)

    def scrape(self) -> None:
        """One round: every target once, in order; never raises for what a server answers."""
        for state in self._replicas:
            if self._stopped.is_set() and self._rounds:  # stopping: after one round, the rest only delays the end
                return
            try:
                reading = parse_metrics(self._fetch(state.target.url, self._timeout_s))
            except MetricsUnavailable as exc:
                with self._lock:
                    state.failures += 1
                    state.last_error = str(exc)
                    state.reason = state.reason or str(exc)
                continue
            t_s = max(0.0, (self._clock() - self._started).total_seconds())
            with self._lock:
                state.series.add(t_s, reading)
        self._rounds += 1

    def record(self, *, finished: bool) -> ServerSamplesRecord:
        with self._lock:
            return ServerSamplesRecord(
                shard=self._writer.shard,
                attempt=self._writer.attempt,
                interval_s=self._interval_s,
                max_samples=self._replicas[0].series.max_samples if self._replicas else SERVER_METRICS_MAX_SAMPLES,
                started_at=self._started,
                finished=finished,
                replicas=tuple(state.record() for state in self._replicas),
            )

    def write(self, *, finished: bool) -> ServerSamplesRecord:
        """Replace ``server-metrics.json`` (a failed write is said once and never stops the attempt)."""
        record = self.record(finished=finished)
        try:
            self._writer.write_server_metrics(record)
        except Exception as exc:  # evidence lost is never a reason to stop the attempt
            if not self._write_failed:
                self._say(f"server-metrics.json not written: {_one_line(exc)}")
            self._write_failed = True
        return record

    def _run(self) -> None:
        while True:
            self.scrape()
            if self._rounds % self._write_every == 0:
                self.write(finished=False)
            if self._stopped.wait(self._interval_s):
                return


def metrics_url(address: str, port: int) -> str:
    """``http://<address>:<port>/metrics`` (an IPv6 address in brackets)."""
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{METRICS_PATH}"


def _sum(values: list[float] | None) -> float | None:
    return None if values is None else _round(math.fsum(values))


def _round(value: float, digits: int = _DIGITS) -> float:
    return round(value, digits) + 0.0  # + 0.0: never -0.0


def _one_line(reason: object) -> str:
    return " ".join(str(reason).split())[:300] or type(reason).__name__
