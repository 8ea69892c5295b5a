"""``image add/ls/info/rm``: services and CLI over real small SquashFS and SIF images built in the test (issue 17).

Images are packed by the real ``mksquashfs`` from a fake root file system with chosen site-packages metadata
(``runtime.testing``) and inspected through the real ``unsquashfs``. Without squashfs-tools these tests skip, and
fail under CI=true. ``image rm`` of an image a live run uses is checked against a run ``execute`` submitted to the
fake Slurm.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    ConflictError,
    ImageAdded,
    ImageInfo,
    ImageList,
    ImageRemoved,
    InvalidInputError,
    NotFoundError,
)
from data_designer.slurm.runtime.images import ImageRegistry
from data_designer.slurm.runtime.store import run_id_factory
from data_designer.slurm.runtime.testing import (
    FakeSlurm,
    build_squashfs,
    squashfs_tools_missing,
    wrap_in_sif,
    write_root_fs,
)
from data_designer.slurm.services import add_image, cancel_run, execute_run, image_info, list_images, remove_image

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SERVING = {"vllm": "0.6.3.post1"}
CLIENT = {"data-designer": "0.4.0", "data-designer-slurm": "1.0.0rc1"}
UNDETERMINED = ("data-designer-slurm-contracts", "data-designer-slurm-planner", "data-designer-slurm-runtime")

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    container_runtime: pyxis
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

CONFIG = """\
model_configs:
  - {alias: writer, model: test-model, provider: local}
columns:
  - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer: {{config: {config}}}
records: 4
sharding: {{shards: 2}}
deployments:
  writer:
    engine: command
    argv: [python3, -m, server, --host, "{{host}}", --port, "{{port}}"]
    model: test-model
    gpus_per_replica: 1
    image: {image}
client: {{cpus: 1, memory_gb: 1}}
"""


@pytest.fixture(autouse=True)
def squashfs_tools() -> None:
    missing = squashfs_tools_missing()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"squashfs-tools are required under CI=true (.ci/run installs them): {missing}")
        pytest.skip(missing)


class Env:
    """A workspace and a profile naming it; images are built under ``<tmp>/images-in``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable), encoding="utf-8")
        self.environ = {"USER": "tester"}

    def squashfs(self, name: str, versions: Mapping[str, str], **layout: Any) -> Path:
        root = write_root_fs(self.root / "trees" / name, versions=versions, **layout)
        target = self.root / "images-in" / f"{name}.sqsh"
        target.parent.mkdir(parents=True, exist_ok=True)
        return build_squashfs(root, target)

    def add(self, source: str | Path, name: str, **kwargs: Any) -> ImageAdded:
        return add_image(
            str(source), name=name, profile=self.profile, environ=self.environ, clock=lambda: NOW, **kwargs
        )

    def cli(self, *args: str) -> Any:
        return CliRunner().invoke(app, [*args, "--profile", str(self.profile)], env={"USER": "tester"})


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def _versions(payload: Mapping[str, Any]) -> dict[str, str | None]:
    return {found["distribution"]: found["version"] for found in payload["inspection"]["distributions"]}


def test_add_ls_info_rm_of_a_squashfs_show_exact_versions_and_undetermined(env: Env) -> None:
    image = env.squashfs("client", CLIENT, server=False)
    added = env.cli("image", "add", str(image), "--name", "dd-client", "--role", "client", "--json")
    assert added.exit_code == 0, added.output
    result = ImageAdded.model_validate_json(added.stdout)
    assert result.outcome == "registered"
    assert result.hashed
    entry = json.loads(added.stdout)["entry"]
    assert (entry["name"], entry["generation"], entry["role"], entry["format"]) == (
        "dd-client",
        1,
        "client",
        "squashfs",
    )
    assert entry["path"] == str(image)
    assert entry["size"] == image.stat().st_size
    assert _versions(entry) == {
        "vllm": None,
        "data-designer": "0.4.0",
        "data-designer-slurm": "1.0.0rc1",
        **dict.fromkeys(UNDETERMINED),
    }
    assert entry["inspection"]["python"] == "3.11"
    assert entry["inspection"]["server_executable"] is None
    assert Path(result.registry_file) == env.workspace / "images" / "dd-client" / "0001.json"

    listed = env.cli("image", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    images = ImageList.model_validate_json(listed.stdout).images
    assert [(item.name, item.generation, item.python) for item in images] == [("dd-client", 1, "3.11")]
    assert images[0].versions["data-designer"] == "0.4.0"
    assert images[0].versions["vllm"] is None
    assert images[0].sha256 == result.entry.sha256

    info = env.cli("image", "info", "dd-client", "--json")
    assert info.exit_code == 0, info.output
    checked = ImageInfo.model_validate_json(info.stdout)
    assert (checked.state, checked.integrity, checked.rehashed) == ("ready", "identity_unchanged", False)
    assert "0.4.0" in env.cli("image", "info", "dd-client").stdout

    removed = env.cli("image", "rm", "dd-client", "--json")
    assert removed.exit_code == 0, removed.output
    gone = ImageRemoved.model_validate_json(removed.stdout)
    assert (gone.generation, gone.removed_generation, gone.deleted_artifact) == (2, 1, False)
    assert image.exists()
    after = env.cli("image", "info", "dd-client", "--json")
    assert after.exit_code == 3
    assert json.loads(after.stderr)["code"] == "image_not_found"
    assert ImageList.model_validate_json(env.cli("image", "ls", "--json").stdout).removed == 1


def test_a_sif_is_registered_with_its_partition_inspected(env: Env) -> None:
    sif = wrap_in_sif(env.squashfs("serving", SERVING), env.root / "images-in" / "serving.sif")
    added = env.add(sif, "vllm-sif")
    assert added.entry.format == "sif"
    assert added.entry.source_kind == "sif"
    inspection = added.entry.inspection
    assert inspection is not None
    assert inspection.server_executable == "/usr/local/bin/vllm"
    versions = {found.distribution: found.version for found in inspection.distributions}
    assert versions["vllm"] == "0.6.3.post1"
    assert versions["data-designer"] is None
    assert "data-designer: " in " ".join(inspection.undetermined)
    assert env.cli("image", "ls").stdout.splitlines()[1].split()[:4] == ["vllm-sif", "1", "serving", "sif"]


def test_an_existing_name_is_refused_without_replace_and_replaced_with_it(env: Env) -> None:
    first = env.squashfs("one", SERVING)
    second = env.squashfs("two", {"vllm": "0.7.0"})
    env.add(first, "vllm")
    with pytest.raises(ConflictError) as refused:
        env.add(second, "vllm")
    assert refused.value.info.code == "image_exists"
    assert "--replace" in (refused.value.info.hint or "")
    cli = env.cli("image", "add", str(second), "--name", "vllm")
    assert cli.exit_code == 4
    assert "--replace" in cli.stderr
    replaced = env.add(second, "vllm", replace=True)
    assert (replaced.outcome, replaced.entry.generation, replaced.entry.path) == ("replaced", 2, str(second))
    info = image_info("vllm", profile=env.profile, environ=env.environ)
    assert info.entry.generation == 2
    assert info.generations == 2
    history = ImageRegistry(env.workspace).history("vllm")
    assert [entry.path for entry in history.entries] == [str(first), str(second)]


def test_two_concurrent_adds_of_different_names_both_survive(env: Env) -> None:
    images = {name: env.squashfs(name, SERVING) for name in ("left", "right")}
    barrier = threading.Barrier(2)
    results: dict[str, ImageAdded] = {}
    errors: list[BaseException] = []

    def add(name: str) -> None:
        barrier.wait()
        try:
            results[name] = env.add(images[name], name)
        except BaseException as exc:  # reported below: a thread's error would be lost otherwise
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(name,)) for name in images]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert {name: added.entry.generation for name, added in results.items()} == {"left": 1, "right": 1}
    listed = list_images(profile=env.profile, environ=env.environ)
    assert [(item.name, item.path) for item in listed.images] == [(n, str(images[n])) for n in ("left", "right")]


def test_info_rehashes_only_when_the_identity_changed(env: Env) -> None:
    image = env.squashfs("one", SERVING)
    env.add(image, "vllm")
    stamp = int(NOW.timestamp()) * 10**9
    os.utime(image, ns=(stamp, stamp + 1))  # a touch: a new mtime, the same bytes
    touched = image_info("vllm", profile=env.profile, environ=env.environ)
    assert (touched.state, touched.integrity, touched.rehashed) == ("ready", "rehashed_equal", True)
    again = image_info("vllm", profile=env.profile, environ=env.environ)
    assert (again.state, again.rehashed) == ("ready", False)  # the new identity's digest is cached now
    with image.open("ab") as handle:
        handle.write(b"appended")
    changed = image_info("vllm", profile=env.profile, environ=env.environ)
    assert (changed.state, changed.integrity, changed.rehashed) == ("changed", "changed", True)
    assert changed.sha256_now != changed.entry.sha256
    assert "--replace" in (changed.detail or "")
    image.unlink()
    missing = image_info("vllm", profile=env.profile, environ=env.environ)
    assert (missing.state, missing.integrity) == ("missing", None)


def test_unknown_corrupt_relative_and_non_file_sources_are_refused_naming_them(env: Env) -> None:
    text = env.root / "notes.sqsh"
    text.write_text("not an image\n", encoding="utf-8")
    corrupt = env.root / "corrupt.sqsh"
    corrupt.write_bytes(b"hsqs" + b"\0" * 200)
    directory = env.root / "a-directory"
    directory.mkdir()
    cases = {
        str(text): "image_format_unknown",
        str(corrupt): None,  # the magic is right, unsquashfs cannot read it: exit 2 from the inspection
        "relative/image.sqsh": "image_path_relative",
        str(env.root / "absent.sqsh"): "image_missing",
        str(directory): "image_not_a_file",
    }
    for source, code in cases.items():
        with pytest.raises(InvalidInputError) as refused:
            env.add(source, "bad")
        if code is not None:
            assert refused.value.info.code == code, source
        assert source.split("/")[-1] in refused.value.info.message
        cli = env.cli("image", "add", source, "--name", "bad", "--json")
        assert cli.exit_code == 2, (source, cli.output)
    assert not (env.workspace / "images" / "bad").exists() or not any((env.workspace / "images" / "bad").glob("*.json"))


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm on this system")
def test_an_image_in_node_local_memory_is_refused(env: Env) -> None:
    image = env.squashfs("one", SERVING)
    local = Path("/dev/shm") / f"ddslurm-test-{os.getpid()}.sqsh"
    local.write_bytes(image.read_bytes())
    try:
        with pytest.raises(InvalidInputError) as refused:
            env.add(local, "local")
    finally:
        local.unlink()
    assert refused.value.info.code == "image_not_shared"
    assert str(local) in refused.value.info.message


def test_rm_refuses_an_image_a_live_run_uses_and_keeps_a_users_file(env: Env) -> None:
    image = env.squashfs("serving", SERVING)
    env.add(image, "vllm")
    config = env.root / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    run_file = env.root / "run.yaml"
    run_file.write_text(RUN.format(config=config, image=image), encoding="utf-8")
    fake = FakeSlurm()
    executed = execute_run(
        run_file,
        profile=env.profile,
        runner=fake,
        clock=lambda: NOW,
        environ={},
        id_factory=run_id_factory(lambda: NOW, lambda: "abc123"),
    )
    with pytest.raises(ConflictError) as refused:
        remove_image("vllm", profile=env.profile, environ=env.environ, runner=fake, clock=lambda: NOW)
    assert refused.value.info.code == "image_in_use"
    assert executed.run_id in refused.value.info.message
    assert ImageRegistry(env.workspace).current("vllm") is not None
    cancel_run(executed.run_dir, environ={}, runner=fake, clock=lambda: NOW, sleep=fake.sleep)
    removed = remove_image(
        "vllm", delete_artifact=True, profile=env.profile, environ=env.environ, runner=fake, clock=lambda: NOW
    )
    assert (removed.generation, removed.runs_checked, removed.deleted_artifact) == (2, 1, False)
    assert "not ours to delete" in (removed.note or "")
    assert image.exists()
    with pytest.raises(NotFoundError):
        remove_image("vllm", profile=env.profile, environ=env.environ, runner=fake)


def test_an_invalid_name_is_exit_2_naming_the_option_before_anything_is_read(tmp_path: Path) -> None:
    from data_designer.slurm.contracts import InvalidInputError
    from data_designer.slurm.services import add_image

    with pytest.raises(InvalidInputError) as raised:
        add_image(str(tmp_path / "absent.sqsh"), name="Bad_Name", profile=tmp_path / "no-profile.yaml")
    assert (raised.value.info.code, raised.value.info.key_path) == ("invalid_image_name", ("--name",))
    assert raised.value.info.exit_code == 2
