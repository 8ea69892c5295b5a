"""Registered images in plans: execute, benchmark run and the dry runs resolve names from the workspace registry,
verify each digest by file identity (cheaply), and refuse an image whose contents do not fit its use."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from data_designer.slurm.contracts import CheckFailedError, InvalidInputError, __version__
from data_designer.slurm.contracts.records import FoundVersion, ImageEntry, ImageInspection
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest
from data_designer.slurm.runtime.store import RunLayout, load_plan, modes_for, requester_from_environment
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run, plan_benchmark, plan_run, run_benchmark

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GIB = 1 << 30
OURS = ("data-designer-slurm-contracts", "data-designer-slurm-planner", "data-designer-slurm-runtime")

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    container_runtime: pyxis
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs:
      - {{alias: writer, model: test-model, provider: local}}
    columns:
      - {{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}
records: 8
sharding: {{shards: 2}}
deployments:
  writer:
    engine: command
    argv: [serve, --port, "{{port}}"]
    model: test-model
    gpus_per_replica: 1
    image: {serving}
client: {{cpus: 1, memory_gb: 1{client}}}
"""

BENCH = """\
schema_version: 1
name: sweep
base: {{run: {run}}}
axes:
  - {{axis: image, alias: writer, values: [serve, serve-b, {path}]}}
records: {{policy: fixed, records: 4}}
"""


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.registry = ImageRegistry(self.workspace)
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable), encoding="utf-8")

    def image(self, name: str, *, size: int = 64 << 10, versions: dict[str, str | None] | None = None) -> Path:
        """A SquashFS-headed (sparse) file of ``size`` bytes registered as ``name``, as 'image add' leaves it."""
        path = self.root / "images" / f"{name}.sqsh"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            handle.write(b"hsqs" + bytes(92))
            handle.truncate(size)
        lookup = cached_digest(path, self.registry.digests_dir(name), modes_for("private"))
        found = versions if versions is not None else {"vllm": None}
        inspection = ImageInspection(
            python="3.11",
            distributions=tuple(FoundVersion(distribution=d, version=v) for d, v in found.items()),
            files=3,
        )
        entry = ImageEntry(
            name=name,
            generation=1,
            role="client" if "data-designer" in found else "serving",
            format="squashfs",
            source=str(path),
            source_kind="squashfs",
            path=str(path),
            size=size,
            identity=lookup.identity,
            sha256=lookup.sha256,
            inspection=inspection,
            added_by=requester_from_environment({"USER": "t"}, clock=lambda: CREATED),
        )
        assert self.registry.write_generation(entry, modes_for("private"))
        return path

    def run_file(self, serving: str, client: str | None = None) -> Path:
        path = self.root / f"run-{len(list(self.root.glob('run-*')))}.yaml"
        text = RUN.format(serving=serving, client=f", image: {client}" if client else "")
        path.write_text(text, encoding="utf-8")
        return path

    def dry(self, run: Path) -> str:
        return plan_run(run, profile=self.profile, max_array_size=11).plan.digest

    def execute(self, run: Path) -> str:
        result = execute_run(run, profile=self.profile, runner=FakeSlurm(), clock=lambda: CREATED, environ={})
        return load_plan(RunLayout.of(self.workspace, result.run_id)).digest


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_a_registered_name_resolves_and_gives_the_same_digest_in_the_dry_run_and_execute(env: Env) -> None:
    path = env.image("serve")
    run = env.run_file("serve")
    dry = plan_run(run, profile=env.profile, max_array_size=11)
    assert dry.plan.unresolved == ()
    assert dry.plan.submittable
    assert env.execute(run) == dry.plan.digest
    by_path = env.run_file(str(path))
    assert env.execute(by_path) == env.dry(by_path) != dry.plan.digest


def test_an_unregistered_name_stays_unresolved_and_a_tombstone_unregisters(env: Env) -> None:
    env.image("serve")
    entry = env.registry.current("serve")
    assert entry is not None
    tombstone = ImageEntry(name="serve", generation=2, removed=True, added_by=entry.added_by)
    assert env.registry.write_generation(tombstone, modes_for("private"))
    (unresolved,) = plan_run(env.run_file("serve"), profile=env.profile).plan.unresolved
    assert (unresolved.what, unresolved.key_path) == ("image", "deployments.writer.image")
    assert "has no image of that name" in unresolved.detail


def test_an_incompatible_client_image_is_refused_naming_the_package_and_both_versions(env: Env) -> None:
    env.image("serve")
    client: dict[str, str | None] = dict.fromkeys(OURS, __version__)
    client.update({"data-designer": "1.2.0", "data-designer-slurm": None, "data-designer-slurm-runtime": "0.9.1"})
    env.image("cli", versions=client)
    run = env.run_file("serve", client="cli")
    attempts: tuple[Callable[[Path], str], ...] = (env.dry, env.execute)
    for attempt in attempts:
        with pytest.raises(InvalidInputError) as caught:
            attempt(run)
        assert caught.value.exit_code == 2
        (problem,) = caught.value.problems
        assert problem.code == "image_package_version"
        assert (problem.file, problem.key_path) == (str(run), ("client", "image"))
        assert "holds data-designer-slurm-runtime 0.9.1, this installation is data-designer-slurm-runtime " in (
            problem.message
        )
        assert problem.message.endswith(__version__)
    assert not (env.workspace / "runs").exists()
    client["data-designer-slurm-runtime"] = __version__
    env.image("cli-ok", versions=client)
    assert plan_run(env.run_file("serve", client="cli-ok"), profile=env.profile).plan.submittable


def test_the_benchmark_image_axis_uses_registered_names(env: Env) -> None:
    env.image("serve")
    env.image("serve-b")
    other = env.root / "images" / "by-path.sqsh"
    other.write_bytes(b"hsqs")
    bench = env.root / "bench.yaml"
    bench.write_text(BENCH.format(run=env.run_file("serve"), path=other), encoding="utf-8")
    dry = plan_benchmark(bench, profile=env.profile, max_array_size=11)
    assert dry.unresolved == ()
    assert len({child.plan_digest for child in dry.children}) == 3
    ran = run_benchmark(bench, profile=env.profile, runner=FakeSlurm(), clock=lambda: CREATED, environ={})
    assert ran.error is None
    assert ran.digest == dry.digest


def _read_bytes() -> int:
    with open("/proc/self/io", encoding="ascii") as handle:
        fields = dict(line.split(": ") for line in handle.read().splitlines())
    return int(fields["rchar"])


def _measured(call: Callable[[], object]) -> int:
    """The bytes this process read (``rchar``) while planning; a refused plan counts too."""
    before = _read_bytes()
    with contextlib.suppress(CheckFailedError):
        call()
    return _read_bytes() - before


def test_planning_with_a_2_gib_image_reads_under_1_mib_once_cached_and_a_change_costs_one_re_hash(
    env: Env,
) -> None:
    path = env.image("serve", size=2 * GIB)
    digests = env.registry.digests_dir("serve")
    run = env.run_file("serve")
    env.dry(env.run_file("/elsewhere/warm-up.sqsh"))  # imports and first-use caches, without the image

    assert _measured(lambda: env.dry(run)) < 1 << 20
    assert len(os.listdir(digests)) == 1

    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched: same bytes, new identity
    assert _measured(lambda: env.dry(run)) >= 2 * GIB
    assert len(os.listdir(digests)) == 2
    assert _measured(lambda: env.dry(run)) < 1 << 20

    with path.open("ab") as handle:
        handle.write(b"x")
    with pytest.raises(CheckFailedError) as caught:
        env.dry(run)
    assert caught.value.exit_code == 6
    assert caught.value.info.message.startswith(f"image 'serve' ({path}) changed since it was registered")
    assert caught.value.info.hint is not None
    assert f"image add {path} --name serve --replace" in caught.value.info.hint
    assert len(os.listdir(digests)) == 3
    assert _measured(lambda: env.dry(run)) < 1 << 20  # the changed bytes were hashed once, and cached
