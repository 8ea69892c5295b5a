"""Containers on the local Slurm cluster: one small run three times (plain, apptainer, pyxis) gives the same records.

The run is 2 shards x 12 records with the test server as ``command`` deployments (``writer``: two replicas with one
fake GPU each, ``critic``: one without) and the real Data Designer client worker. The apptainer run puts both
servers and the client in images (empty ``.sif`` files), the pyxis run makes every server and the client a pyxis
``srun`` step (empty ``.sqsh`` files). Neither runtime exists here: the PATH shims of ``runtime.testing``
(``install_shims``), first on the ``PATH`` that ``sbatch`` exports to the job, log every container command line and
run the command natively; the venv's ``bin`` comes next, so an image's ``python3`` is the test's Python.

Checked: every shard of every run succeeded; the records are the same (sampler columns identical, LLM texts
identical once the leading ``replica=<id>`` word is dropped: it names the replica by its port); the shims' logs,
with machine paths, ports and shard numbers replaced by placeholders, equal the golden files
``packages/data-designer-slurm-runtime/tests/golden/containers/cluster-<runtime>.jsonl`` (sorted: steps start
concurrently). Accept an intended change with ``UPDATE_GOLDEN=1`` on this module.

The end-to-end helpers come from ``test_cluster_run_e2e.py`` through the ``e2e`` fixture (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.runtime.supervisor import LAUNCHER_FILE
from data_designer.slurm.runtime.testing import SHIM_LOG_NAME, install_shims, read_shim_log

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "packages" / "data-designer-slurm-runtime" / "tests" / "golden" / "containers"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
SHARDS = 2
RECORDS = 24
RUNTIMES = ("apptainer", "pyxis")
IMAGE_SUFFIX = {"apptainer": "sif", "pyxis": "sqsh"}


CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "e2e-writer", "provider": "local", "inference_parameters": {"max_tokens": 16}},
        {"alias": "critic", "model": "e2e-critic", "provider": "local", "inference_parameters": {"max_tokens": 8}},
    ],
    "columns": [
        {
            "name": "product",
            "column_type": "sampler",
            "sampler_type": "category",
            "params": {"values": ["kettle", "lamp", "bicycle", "teapot", "radio", "tent", "drum", "kite"]},
        },
        {"name": "review", "column_type": "llm-text", "model_alias": "writer", "prompt": "Review a {{ product }}."},
        # Not on {{ review }}: a review names its replica's port, so a prompt quoting it would differ between runs.
        {"name": "verdict", "column_type": "llm-text", "model_alias": "critic", "prompt": "Judge the {{ product }}."},
    ],
}
LLM_COLUMNS = ("review", "verdict")
# One sampler column: the host draws several sampler columns from numpy's global generator in an order that
# depends on the worker process's string hash seed; the supervisor pins PYTHONHASHSEED=0 for the client, and one
# column keeps this comparison independent of that (see the batch size below for the other limit).
SAMPLER_COLUMNS = ("product",)


def run_document(e2e: ModuleType, images: Path | None, runtime: str | None) -> dict[str, Any]:
    """The run, with every server and the client in an image of ``images`` when given."""
    deployments = {
        "writer": e2e.server("writer", replicas=2, gpus=1),
        "critic": e2e.server("critic", replicas=1, gpus=0),
    }
    # One batch per shard: the host's async builder draws the sampler values of a create call's row groups in the
    # order its tasks happen to run, so with several batches two runs can give them to other records.
    client: dict[str, Any] = {"batch_size": RECORDS // SHARDS, "cpus": 1, "memory_gb": 1}
    if images is not None and runtime is not None:
        suffix = IMAGE_SUFFIX[runtime]
        for alias, deployment in deployments.items():
            deployment["image"] = str(images / f"{alias}.{suffix}")
        client["image"] = str(images / f"client.{suffix}")
    return {
        "schema_version": 1,
        "name": "containers",
        "data_designer": {"inline": CONFIG},
        "records": RECORDS,
        "sharding": {"shards": SHARDS},
        "deployments": deployments,
        "client": client,
        "submission": {"time_limit": "00:15:00", "warning_lead_s": 60, "drain_grace_s": 30},
    }


def execute(e2e: ModuleType, directory: Path, local_slurm: Mapping[str, str], runtime: str | None) -> Any:
    """One run through ``data-designer slurm execute``; in containers (through the shims) when ``runtime`` is set."""
    directory.mkdir(parents=True)
    if runtime is None:
        return e2e.execute_and_wait(directory, local_slurm, run_document(e2e, None, None), sys.executable)
    images = directory / "images"
    images.mkdir()
    for name in ("writer", "critic", "client"):
        (images / f"{name}.{IMAGE_SUFFIX[runtime]}").touch()
    shims = install_shims(directory / "shims")
    base = local_slurm.get("PATH") or os.environ.get("PATH", "")
    exports = {**local_slurm, "PATH": f"{shims}:{Path(sys.executable).parent}:{base}"}
    document = run_document(e2e, images, runtime)
    return e2e.execute_and_wait(directory, exports, document, sys.executable, container_runtime=runtime)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> dict[str, Any]:
    """The three runs, submitted together (six array tasks on the cluster's four nodes)."""
    root = tmp_path_factory.mktemp("containers")
    names: dict[str, str | None] = {"plain": None, "apptainer": "apptainer", "pyxis": "pyxis"}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {
            name: pool.submit(execute, e2e, root / name, local_slurm, runtime) for name, runtime in names.items()
        }
        return {name: future.result() for name, future in futures.items()}


def without_stamp(text: Any) -> str:
    """An LLM text without its first word (``replica=<alias>-<port>``, the one word that names the server)."""
    words = str(text).split(" ")
    assert words[0].startswith("replica="), text
    return " ".join(words[1:])


def test_every_shard_of_every_run_succeeded(runs: dict[str, Any]) -> None:
    for name, run in runs.items():
        statuses = {shard: status.status for shard, status in run.statuses.items()}
        assert statuses == dict.fromkeys(range(SHARDS), "succeeded"), (name, run.diagnosis())
        assert {s: t.state for s, t in run.tasks.items()} == dict.fromkeys(range(SHARDS), "completed"), name


def test_containers_give_the_same_records(runs: dict[str, Any]) -> None:
    plain = runs["plain"]
    for name in RUNTIMES:
        run = runs[name]
        for shard in range(SHARDS):
            expected, found = plain.table(shard), run.table(shard)
            assert found.num_rows == expected.num_rows == RECORDS // SHARDS
            for column in SAMPLER_COLUMNS:
                assert found.column(column).to_pylist() == expected.column(column).to_pylist(), (name, column)
            for column in LLM_COLUMNS:
                texts = [without_stamp(t) for t in found.column(column).to_pylist()]
                assert texts == [without_stamp(t) for t in expected.column(column).to_pylist()], (name, column)
            ports = {r.port for r in run.attempt(shard).replicas}
            stamps = {str(t).split(" ")[0] for t in found.column("review").to_pylist()}
            assert stamps <= {f"replica=writer-{port}" for port in ports}, "served by this run's own replicas"


def normaliser(run: Any) -> Callable[[tuple[str, ...]], list[str]]:
    """Replaces what differs between machines and runs: paths, ports, shard numbers, memory shares, mount order."""
    layout = run.layout
    ports = sorted({p.port for s in range(SHARDS) for r in run.attempt(s).replicas for p in r.ports}, reverse=True)
    paths = [
        (str(layout.run_dir), "<RUN_DIR>"),
        (str(layout.root), "<WORKSPACE>"),
        (str(layout.root.parent / "images"), "<IMAGES>"),
        (str(LAUNCHER_FILE.parent), "<RUNTIME>"),
        (sys.executable, "<PYTHON>"),
    ]
    assert ports, "every replica published its port"
    numbers = re.compile(r"(?<![0-9])(" + "|".join(str(p) for p in ports) + r")(?![0-9])")

    def normalise(argv: tuple[str, ...]) -> list[str]:
        words = []
        for index, word in enumerate(argv):
            for path, placeholder in paths:
                word = word.replace(path, placeholder)
            word = re.sub(r"shards/[0-9]{5}/attempts/[0-9]{4}", "shards/<SHARD>/attempts/<ATTEMPT>", word)
            word = re.sub(r"^--mem=[0-9]+M$", "--mem=<MEM>", word)
            if index and argv[index - 1] in ("--shard", "--attempt"):
                word = f"<{argv[index - 1].removeprefix('--').upper()}>"
            word = numbers.sub("<PORT>", word)
            # Mounts are sorted by their real paths, which differ between machines: sort the placeholders instead.
            if word.startswith("--container-mounts="):
                word = "--container-mounts=" + ",".join(sorted(word.removeprefix("--container-mounts=").split(",")))
            elif index and argv[index - 1] == "--bind":
                word = ",".join(sorted(word.split(",")))
            words.append(word)
        return words

    return normalise


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_shims_saw_exactly_the_golden_container_command_lines(runs: dict[str, Any], runtime: str) -> None:
    run = runs[runtime]
    calls = read_shim_log(run.layout.root.parent / "shims" / SHIM_LOG_NAME)
    assert {call.tool for call in calls} == ({"srun", "apptainer"} if runtime == "apptainer" else {"srun"})
    normalise = normaliser(run)
    lines = sorted(json.dumps(normalise(call.argv)) + "\n" for call in calls)
    path = GOLDEN / f"cluster-{runtime}.jsonl"
    if UPDATE:
        path.write_text("".join(lines), encoding="utf-8")
        return
    assert path.is_file(), f"{path.name} is missing; accept it with UPDATE_GOLDEN=1"
    assert "".join(lines) == path.read_text(encoding="utf-8"), f"{path.name} changed; if intended, UPDATE_GOLDEN=1"
