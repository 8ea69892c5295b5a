"""``server-metrics.json``: what each replica's ``/metrics`` said while the client ran (one writer, the supervisor;
replaced every :data:`SERVER_METRICS_WRITE_EVERY` scrapes and once at the end of generation).

Per replica a bounded time series of the gauges that explain throughput, in vLLM's own names (``vllm:num_requests_
running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, and the counter ``vllm:num_preemptions_
total``), plus exact aggregates over every scrape (the series is downsampled, its peaks are not). A replica whose
server exposes no such metrics (404, refused, unparseable text, a ``command`` server without them) is
``available: false`` with the reason: never zeros. A metric the server does not expose is ``None`` in every
sample and aggregate.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

SERVER_METRICS_MAX_SAMPLES = 720
"""At most this many samples per replica: when full, pairs of samples are merged into one (every 2nd kept, the
preemptions of both summed) and later scrapes are kept at twice the stride, so a series spans any run length in a
fixed size (720 samples of at most ~110 bytes each: under 80 KiB per replica)."""
SERVER_METRICS_WRITE_EVERY = 6
"""The record is replaced after every this many scrapes (and once at the end)."""


class ServerSample(BaseModel):
    """One kept scrape of one replica (summed over the label sets of each metric; KV usage the largest)."""

    model_config = FROZEN

    t_s: NonNegativeFloat = Field(description="Seconds since the scraping began (the record's started_at).")
    running: NonNegativeFloat | None = Field(description="vllm:num_requests_running; None: not exposed.")
    waiting: NonNegativeFloat | None = Field(description="vllm:num_requests_waiting; None: not exposed.")
    kv_usage: NonNegativeFloat | None = Field(
        description="vllm:kv_cache_usage_perc (or the older vllm:gpu_cache_usage_perc), 1 = full; None: not exposed."
    )
    preemptions: NonNegativeFloat | None = Field(
        description="The increase of vllm:num_preemptions_total since the previous kept sample (the first: since "
        "the server started); None: not exposed."
    )


class ServerAggregates(BaseModel):
    """Exact over every successful scrape of one replica (the series is downsampled; these are not)."""

    model_config = FROZEN

    scrapes: NonNegativeInt = Field(description="Successful scrapes.")
    running_mean: NonNegativeFloat | None
    running_peak: NonNegativeFloat | None
    waiting_mean: NonNegativeFloat | None
    waiting_peak: NonNegativeFloat | None
    kv_usage_peak: NonNegativeFloat | None
    preemptions: NonNegativeFloat | None = Field(description="Total increase of the preemption counter.")


class ReplicaServerSamples(BaseModel):
    """One replica's samples, or why there are none."""

    model_config = FROZEN

    alias: str
    replica: NonNegativeInt
    url: str = Field(description="The scraped URL (the replica's address, port and /metrics).")
    available: bool = Field(description="At least one scrape found vLLM's metrics.")
    reason: str | None = Field(
        default=None, description="Not available: why (the first failure: HTTP status, connection error, parse)."
    )
    failures: NonNegativeInt = Field(default=0, description="Scrapes that failed (after it was available too).")
    last_error: str | None = Field(default=None, description="The newest failure, if any.")
    stride: PositiveInt = Field(default=1, description="Scrapes per kept sample now (doubles on every merge).")
    aggregates: ServerAggregates | None = Field(default=None, description="None: not available.")
    samples: tuple[ServerSample, ...] = ()


class ServerSamplesRecord(BaseModel):
    """Every deployed replica of one attempt, scraped at a fixed interval while the client ran."""

    model_config = FROZEN

    shard: NonNegativeInt
    attempt: PositiveInt
    interval_s: PositiveFloat = Field(description="Seconds between scrapes.")
    max_samples: PositiveInt = SERVER_METRICS_MAX_SAMPLES
    started_at: AwareDatetime
    finished: bool = Field(description="False while the client runs; True once written at the end.")
    replicas: tuple[ReplicaServerSamples, ...]


SERVER_METRICS_SCHEMA: RecordSchema[ServerSamplesRecord] = RecordSchema("server-metrics", 1, ServerSamplesRecord)
