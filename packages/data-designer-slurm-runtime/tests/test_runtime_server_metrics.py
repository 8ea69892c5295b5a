"""Server-side samples: the test server's vLLM ``/metrics`` and injected failures, the pure parser, the bounded
series and its downsampling (exact numbers), the scraper against real test-server processes and what the store
writes, and the per-alias summary."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from data_designer.slurm.contracts.records import (
    SERVER_METRICS_SCHEMA,
    ReplicaServerSamples,
    ServerAggregates,
    ServerSample,
    ServerSamplesRecord,
)
from data_designer.slurm.runtime.analysis import server_summary, servers_total
from data_designer.slurm.runtime.store import AttemptWriter, RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.supervisor import (
    MetricsReading,
    MetricsUnavailable,
    SampleSeries,
    ScrapeTarget,
    ServerScraper,
    fetch_metrics,
    metrics_url,
    parse_metrics,
)
from data_designer.slurm.runtime.testing import closed_port, wait_for_record
from data_designer.slurm.runtime.testing._test_server import StubModelServer, StubServerConfig, stub_server_argv

MODEL = "stub/model-a"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def chat(port: int, text: str = "hi", *, key: str | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}]})
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    try:
        connection.request("POST", "/v1/chat/completions", body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def families(port: int) -> dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]:
    text = fetch_metrics(metrics_url("127.0.0.1", port), 5.0)
    return {
        f.name: (f.type, [(s.name, s.labels, s.value) for s in f.samples if not s.name.endswith("_created")])
        for f in text_string_to_metric_families(text)
        if not f.name.endswith("_created")  # a counter's creation time (vLLM's page has them too)
    }


def stepping_clock(step_s: float = 5.0) -> Callable[[], datetime]:
    """T0 on the first call, then ``step_s`` later on each further call."""
    calls = iter(range(10**6))
    return lambda: T0 + timedelta(seconds=step_s * next(calls))


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Poll (a wait for a state, not a timed assertion)."""
    import time

    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


# -- the test server's /metrics ------------------------------------------------------------------------------------


def test_metrics_use_vllm_names_types_and_labels_and_model_the_queue(tmp_path: Path) -> None:
    config = StubServerConfig(model=MODEL, replica_id="r0", max_num_seqs=2, api_key="k" * 8)
    with StubModelServer(config) as server, ThreadPoolExecutor(5) as pool:
        idle = families(server.port)  # open without the API key, as vLLM's
        labels = {"model_name": MODEL, "engine": "0"}
        assert idle == {
            "vllm:num_requests_running": ("gauge", [("vllm:num_requests_running", labels, 0.0)]),
            "vllm:num_requests_waiting": ("gauge", [("vllm:num_requests_waiting", labels, 0.0)]),
            "vllm:kv_cache_usage_perc": ("gauge", [("vllm:kv_cache_usage_perc", labels, 0.0)]),
            "vllm:num_preemptions": ("counter", [("vllm:num_preemptions_total", labels, 0.0)]),
        }
        server.gate.clear()  # requests holding a slot get no answer until the gate opens
        futures: list[Future[int]] = [pool.submit(chat, server.port, f"q{i}", key="k" * 8) for i in range(5)]
        port = server.port
        wait_until(lambda: parse_metrics(fetch_metrics(metrics_url("127.0.0.1", port), 5.0)).waiting == 3, "3 wait")
        assert parse_metrics(fetch_metrics(metrics_url("127.0.0.1", port), 5.0)) == MetricsReading(
            running=2.0, waiting=3.0, kv_usage=1.0, preemptions_total=0.0
        )
        server.gate.set()
        assert [f.result() for f in futures] == [200] * 5
        assert parse_metrics(fetch_metrics(metrics_url("127.0.0.1", port), 5.0)) == MetricsReading(0.0, 0.0, 0.0, 0.0)


def test_kv_usage_is_the_running_share_of_max_num_seqs() -> None:
    with StubModelServer(StubServerConfig(model=MODEL, replica_id="r0", max_num_seqs=4)) as server:
        server.gate.clear()
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(chat, server.port)
            url = metrics_url("127.0.0.1", server.port)
            wait_until(lambda: parse_metrics(fetch_metrics(url, 5.0)).running == 1, "1 running")
            assert parse_metrics(fetch_metrics(url, 5.0)).kv_usage == 0.25
            server.gate.set()
            assert future.result() == 200


def test_a_server_without_metrics_answers_404_and_the_scrape_says_so() -> None:
    config = StubServerConfig(model=MODEL, replica_id="r0", metrics=False)
    with StubModelServer(config) as server, pytest.raises(MetricsUnavailable, match=r"^GET /metrics answered 404$"):
        fetch_metrics(metrics_url("127.0.0.1", server.port), 5.0)


@pytest.mark.parametrize(
    ("fraction", "failing"),
    [(0.25, [4, 8, 12]), (0.5, [2, 4, 6, 8, 10, 12]), (1 / 3, [3, 6, 9, 12]), (0.0, []), (1.0, list(range(1, 13)))],
)
def test_fail_fraction_fails_exactly_that_share_by_arrival(fraction: float, failing: list[int]) -> None:
    config = StubServerConfig(model=MODEL, replica_id="r0", fail_fraction=fraction, fail_status=503)
    with StubModelServer(config) as server:
        statuses = [chat(server.port, f"q{i}") for i in range(1, 13)]  # one after the other: arrival order is fixed
    assert [i for i, status in enumerate(statuses, 1) if status != 200] == failing
    assert set(statuses) <= {200, 503}
    assert server.failed == len(failing)


def test_the_command_line_carries_the_new_knobs() -> None:
    config = StubServerConfig(
        model=MODEL, replica_id="r0", max_num_seqs=3, fail_fraction=0.1, fail_status=503, metrics=False
    )
    argv = stub_server_argv(config)
    assert argv[argv.index("--max-num-seqs") + 1] == "3"
    assert argv[argv.index("--fail-fraction") + 1] == "0.1"
    assert argv[argv.index("--fail-status") + 1] == "503"
    assert "--no-metrics" in argv
    assert "--max-num-seqs" not in stub_server_argv(StubServerConfig(model=MODEL, replica_id="r0"))
    for bad in ({"max_num_seqs": 0}, {"fail_fraction": 1.5}, {"fail_status": 502}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            StubServerConfig(model=MODEL, replica_id="r0", **bad)


# -- the parser ----------------------------------------------------------------------------------------------------

TWO_ENGINES = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 5.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 99.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# HELP vllm:num_preemptions Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 7.0
vllm:num_preemptions_total{engine="1",model_name="m"} 1.0
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e+09
"""


def test_parse_sums_label_sets_and_takes_the_largest_kv_share() -> None:
    assert parse_metrics(TWO_ENGINES) == MetricsReading(running=7.0, waiting=7.0, kv_usage=0.75, preemptions_total=8.0)


def test_parse_reads_the_older_kv_name_and_leaves_missing_metrics_none() -> None:
    page = '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
    assert parse_metrics(page) == MetricsReading(running=None, waiting=None, kv_usage=0.5, preemptions_total=None)
    untyped = 'vllm:num_preemptions_total{model_name="m"} 2\nvllm:num_requests_waiting NaN\n'
    assert parse_metrics(untyped) == MetricsReading(None, None, None, 2.0)


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        ("<html>not found</html>", "/metrics is not Prometheus text"),
        ("sglang:num_running_reqs 3\n", "/metrics has none of vLLM's metrics"),
        ("", "/metrics has none of vLLM's metrics"),
    ],
)
def test_a_page_without_vllm_metrics_is_unavailable(page: str, reason: str) -> None:
    with pytest.raises(MetricsUnavailable, match=f"^{reason}"):
        parse_metrics(page)


# -- the bounded series --------------------------------------------------------------------------------------------


def reading(n: int, preemptions: float | None = None) -> MetricsReading:
    return MetricsReading(running=float(n), waiting=float(10 * n), kv_usage=n / 100, preemptions_total=preemptions)


def sample(t: float, n: int, preemptions: float | None) -> ServerSample:
    return ServerSample(t_s=t, running=float(n), waiting=float(10 * n), kv_usage=n / 100, preemptions=preemptions)


def test_a_full_series_merges_pairs_and_keeps_later_scrapes_at_twice_the_stride() -> None:
    series = SampleSeries(max_samples=4)
    counters = [0, 1, 1, 3, 6, 6, 7, 9, 9, 12]  # the preemption counter at scrapes 1..10
    for n, counter in enumerate(counters, 1):
        series.add(5.0 * n, reading(n, counter))
    # scrapes 1-4 filled it: merged to (2: 0+1), (4: 0+2); 5+6 -> (6: 3+0); 7+8 -> (8: 1+2) filled it again:
    # merged to (4: 1+2), (8: 3+3) at stride 4; 9 and 10 wait in the pending sample (10: 0+3)
    assert series.stride == 4
    assert series.kept() == (sample(20.0, 4, 3.0), sample(40.0, 8, 6.0), sample(50.0, 10, 3.0))
    assert sum(s.preemptions or 0 for s in series.kept()) == 12.0  # nothing lost: the counter's whole increase
    assert series.aggregates() == ServerAggregates(
        scrapes=10,
        running_mean=5.5,
        running_peak=10.0,
        waiting_mean=55.0,
        waiting_peak=100.0,
        kv_usage_peak=0.1,
        preemptions=12.0,
    )


def test_a_reset_counter_counts_its_new_value_and_a_missing_one_stays_none() -> None:
    series = SampleSeries(max_samples=8)
    for n, counter in enumerate([5.0, 7.0, 2.0], 1):
        series.add(float(n), reading(n, counter))
    assert [s.preemptions for s in series.kept()] == [5.0, 2.0, 2.0]
    assert series.aggregates().preemptions == 9.0
    bare = SampleSeries(max_samples=2)
    bare.add(0.0, MetricsReading(None, 1.0, None, None))
    assert bare.aggregates() == ServerAggregates(
        scrapes=1,
        running_mean=None,
        running_peak=None,
        waiting_mean=1.0,
        waiting_peak=1.0,
        kv_usage_peak=None,
        preemptions=None,
    )
    with pytest.raises(ValueError, match="even"):
        SampleSeries(max_samples=3)


def test_the_series_stays_bounded_over_a_hundred_thousand_scrapes() -> None:
    series = SampleSeries(max_samples=720)
    for n in range(1, 10**5 + 1):
        series.add(float(n), MetricsReading(1.0, float(n % 7), 0.5, float(n // 3)))
    assert 360 <= len(series.kept()) <= 720
    assert series.stride == 256  # 10^5 scrapes / 256 per sample = 390 samples
    assert sum(s.preemptions or 0 for s in series.kept()) == float(10**5 // 3)
    assert series.aggregates().waiting_peak == 6.0


# -- the scraper ---------------------------------------------------------------------------------------------------


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    return RunLayout.of(tmp_path / "ws", "sm-20260301T120000Z-abcdef")


def started_server(*flags: str) -> tuple[subprocess.Popen[str], int]:
    argv = stub_server_argv(StubServerConfig(model=MODEL, replica_id="r0"))
    process = subprocess.Popen([*argv, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()  # "ready HOST:PORT" once it listens
    assert line.startswith("ready 127.0.0.1:"), (line, process.stderr.read() if process.stderr else "")
    return process, int(line.rsplit(":", 1)[1])


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.terminate()
        process.communicate(timeout=10)


def test_the_scraper_records_real_servers_and_says_why_one_has_no_metrics(
    layout: RunLayout, servers: list[subprocess.Popen[str]]
) -> None:
    with_metrics, port = started_server("--max-num-seqs", "4")
    without, bare_port = started_server("--no-metrics")
    servers += [with_metrics, without]
    targets = [
        ScrapeTarget("writer", 0, metrics_url("127.0.0.1", port)),
        ScrapeTarget("writer", 1, metrics_url("127.0.0.1", bare_port)),
        ScrapeTarget("judge", 0, metrics_url("127.0.0.1", closed_port())),
    ]
    writer = AttemptWriter(layout, 0, 1)
    scraper = ServerScraper(writer, targets, clock=stepping_clock(), interval_s=5.0, write_every=2)
    scraper.scrape()
    assert chat(port) == 200
    scraper.scrape()
    assert not layout.server_metrics(0, 1).exists()  # written by the thread every write_every rounds, or by stop
    record = scraper.stop()  # never started: stop writes the final record

    found = read_record(layout.server_metrics(0, 1), SERVER_METRICS_SCHEMA)
    assert isinstance(found, RecordOk)
    assert found.payload == record
    assert (record.shard, record.attempt, record.interval_s, record.started_at, record.finished) == (
        0,
        1,
        5.0,
        T0,
        True,
    )
    served, bare, refused = record.replicas
    # the clock: T0 at construction, then one call per successful sample (5 s and 10 s after T0)
    assert served.samples == (
        ServerSample(t_s=5.0, running=0.0, waiting=0.0, kv_usage=0.0, preemptions=0.0),
        ServerSample(t_s=10.0, running=0.0, waiting=0.0, kv_usage=0.0, preemptions=0.0),
    )
    assert (served.available, served.reason, served.failures, served.stride) == (True, None, 0, 1)
    assert served.aggregates is not None
    assert served.aggregates.scrapes == 2
    assert (bare.available, bare.reason, bare.failures, bare.samples, bare.aggregates) == (
        False,
        "GET /metrics answered 404",
        2,
        (),
        None,
    )
    assert not refused.available
    assert refused.reason is not None
    assert refused.reason.startswith("GET /metrics failed: ")
    assert "refused" in refused.reason.lower()


def test_the_scraper_thread_writes_while_running_and_finished_at_stop(layout: RunLayout) -> None:
    config = StubServerConfig(model=MODEL, replica_id="r0", max_num_seqs=1)
    with StubModelServer(config) as server, ThreadPoolExecutor(3) as pool:
        server.gate.clear()
        futures = [pool.submit(chat, server.port, f"q{i}") for i in range(3)]
        url = metrics_url("127.0.0.1", server.port)
        wait_until(lambda: parse_metrics(fetch_metrics(url, 5.0)).waiting == 2, "2 waiting")
        writer = AttemptWriter(layout, 0, 1)
        scraper = ServerScraper(
            writer, [ScrapeTarget("writer", 0, url)], clock=stepping_clock(1.0), interval_s=0.01, write_every=1
        )
        scraper.start()
        wait_for_record(layout.server_metrics(0, 1), SERVER_METRICS_SCHEMA, timeout_s=30)
        record = scraper.stop()
        server.gate.set()
        assert [f.result() for f in futures] == [200] * 3
    assert record.finished
    (replica,) = record.replicas
    assert replica.aggregates is not None
    assert (replica.aggregates.waiting_peak, replica.aggregates.running_peak, replica.aggregates.kv_usage_peak) == (
        2.0,
        1.0,
        1.0,
    )
    assert all(s.waiting == 2.0 and s.running == 1.0 for s in replica.samples)


def test_a_scraper_thread_that_fails_to_write_never_raises(layout: RunLayout, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    writer = AttemptWriter(RunLayout.of(blocked, "sm-20260301T120000Z-abcdef"), 0, 1)
    said: list[str] = []
    scraper = ServerScraper(
        writer,
        [ScrapeTarget("writer", 0, metrics_url("127.0.0.1", closed_port()))],
        clock=stepping_clock(),
        say=said.append,
    )
    scraper.scrape()
    record = scraper.stop()
    assert not record.replicas[0].available
    assert len(said) == 1
    assert said[0].startswith("server-metrics.json not written: ")


# -- the summary ---------------------------------------------------------------------------------------------------


def replica(
    alias: str, number: int, aggregates: ServerAggregates | None, reason: str | None = None
) -> ReplicaServerSamples:
    return ReplicaServerSamples(
        alias=alias,
        replica=number,
        url=f"http://127.0.0.1:{8000 + number}/metrics",
        available=aggregates is not None,
        reason=reason,
        aggregates=aggregates,
    )


def aggregates(
    scrapes: int, waiting_mean: float, waiting_peak: float, kv: float, preemptions: float
) -> ServerAggregates:
    return ServerAggregates(
        scrapes=scrapes,
        running_mean=1.0,
        running_peak=1.0,
        waiting_mean=waiting_mean,
        waiting_peak=waiting_peak,
        kv_usage_peak=kv,
        preemptions=preemptions,
    )


def record_of(*replicas: ReplicaServerSamples, attempt: int = 1) -> ServerSamplesRecord:
    return ServerSamplesRecord(
        shard=0, attempt=attempt, interval_s=5.0, started_at=T0, finished=True, replicas=tuple(replicas)
    )


def test_server_summary_weights_means_by_scrapes_and_never_invents_zeros() -> None:
    first = record_of(
        replica("writer", 0, aggregates(3, 2.0, 4.0, 0.5, 1.0)),
        replica("writer", 1, aggregates(1, 6.0, 6.0, 0.25, 0.0)),
        replica("embed", 0, None, "GET /metrics answered 404"),
    )
    second = record_of(replica("writer", 0, aggregates(4, 1.0, 3.0, 0.75, 2.0)), attempt=2)
    summary = server_summary([first, second])
    assert list(summary) == ["embed", "writer"]
    writer = summary["writer"]
    # (3 x 2 + 1 x 6 + 4 x 1) / 8 = 2.0
    assert (writer.available, writer.replicas, writer.scrapes) == (True, 3, 8)
    assert (writer.queue_waiting_mean, writer.queue_waiting_peak, writer.kv_cache_usage_peak, writer.preemptions) == (
        2.0,
        6.0,
        0.75,
        3.0,
    )
    embed = summary["embed"]
    assert (embed.available, embed.queue_waiting_mean, embed.queue_waiting_peak, embed.preemptions) == (
        False,
        None,
        None,
        None,
    )
    assert embed.reasons == ("GET /metrics answered 404",)
    assert server_summary([second, first]) == summary
    # every alias folded (a benchmark child's figures): the unavailable embed replica adds nothing, never a zero
    total = servers_total([second, first])
    assert (total.alias, total.available, total.replicas, total.scrapes) == ("*", True, 3, 8)
    assert (total.queue_waiting_mean, total.queue_waiting_peak, total.kv_cache_usage_peak, total.preemptions) == (
        2.0,
        6.0,
        0.75,
        3.0,
    )
    assert total.reasons == ("GET /metrics answered 404",)


def test_the_test_server_module_runs_with_the_new_flags() -> None:
    answer = subprocess.run(
        [sys.executable, "-m", "data_designer.slurm.runtime.testing.test_server", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for flag in ("--max-num-seqs", "--fail-fraction", "--fail-status", "--no-metrics"):
        assert flag in answer.stdout
