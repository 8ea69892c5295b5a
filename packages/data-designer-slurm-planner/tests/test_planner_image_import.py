"""The registry import job's script (golden) and the strict ``docker://`` reference grammar.

Accept an intended change of the script with one line (then review the diff):

    UPDATE_GOLDEN=1 uv run pytest packages/data-designer-slurm-planner/tests/test_planner_image_import.py
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import InvalidInputError
from data_designer.slurm.planner import (
    IMPORT_FINISH_MODULE,
    ImportScriptRequest,
    RegistryReference,
    is_registry_reference,
    parse_registry_reference,
    render_import_script,
)

GOLDEN = Path(__file__).resolve().parent / "golden" / "jobs" / "image_import.sbatch"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

REQUEST = ImportScriptRequest(
    reference=parse_registry_reference("docker://nvcr.io#nvidia/pytorch:24.05-py3"),
    name="torch",
    generation=3,
    target="/shared/ws/images/torch/imports/0003-1a2b3c4d.sqsh",
    workspace_root="/shared/ws",
    launcher=("/shared/venv/bin/python",),
)


def test_the_script_matches_its_golden_file() -> None:
    text = render_import_script(REQUEST)
    if UPDATE:
        GOLDEN.write_text(text, encoding="utf-8")
        return
    assert GOLDEN.is_file(), f"{GOLDEN.name} is missing; accept it with UPDATE_GOLDEN=1"
    assert GOLDEN.read_text(encoding="utf-8") == text, (
        f"{GOLDEN.name} changed; if intended, accept it with UPDATE_GOLDEN=1"
    )


def test_the_script_is_valid_bash_and_ends_by_exec_ing_the_finish_step() -> None:
    text = render_import_script(REQUEST)
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    last = shlex.split(text.splitlines()[-1])
    assert last == [
        "exec",
        "/shared/venv/bin/python",
        "-m",
        IMPORT_FINISH_MODULE,
        "--workspace-root",
        "/shared/ws",
        "--name",
        "torch",
        "--generation",
        "3",
    ]
    assert 'enroot import -o "$partial" -- "$reference"' in text
    assert "partial=/shared/ws/images/torch/imports/0003-1a2b3c4d.sqsh.partial" in text


def test_without_enroot_the_script_exits_127_naming_the_node_and_never_runs_the_finish_step(tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    request = ImportScriptRequest(
        reference=parse_registry_reference("docker://busybox:latest"),
        name="bb",
        generation=1,
        target=str(tmp_path / "0001.sqsh"),
        workspace_root=str(tmp_path),
        launcher=("/bin/touch", str(marker)),
    )
    script = tmp_path / "import.sh"
    script.write_text(render_import_script(request), encoding="utf-8")
    empty = tmp_path / "bin"
    empty.mkdir()
    done = subprocess.run(
        ["/bin/bash", str(script)], env={"PATH": str(empty)}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 127
    assert "enroot is not installed on node" in done.stderr
    assert "docker://busybox:latest" in done.stderr
    assert not marker.exists()


def test_a_failed_enroot_import_removes_the_partial_file_and_keeps_its_exit(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "enroot"
    fake.write_text('#!/bin/bash\necho "$@" > "$(dirname "$0")/argv"; : > "$3"; exit 3\n', encoding="utf-8")
    fake.chmod(0o755)
    marker = tmp_path / "finished"
    request = ImportScriptRequest(
        reference=parse_registry_reference("docker://busybox@sha256:" + "a" * 64),
        name="bb",
        generation=1,
        target=str(tmp_path / "0001.sqsh"),
        workspace_root=str(tmp_path),
        launcher=("/bin/touch", str(marker)),
    )
    script = tmp_path / "import.sh"
    script.write_text(render_import_script(request), encoding="utf-8")
    path = f"{bin_dir}:/usr/bin:/bin"
    done = subprocess.run(["/bin/bash", str(script)], env={"PATH": path}, capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert "enroot import of docker://busybox@sha256:" in done.stderr
    argv = (bin_dir / "argv").read_text(encoding="utf-8").split()
    assert argv == ["import", "-o", f"{tmp_path}/0001.sqsh.partial", "--", "docker://busybox@sha256:" + "a" * 64]
    assert not (tmp_path / "0001.sqsh.partial").exists()
    assert not marker.exists()


@pytest.mark.parametrize(
    ("source", "parts"),
    [
        ("docker://busybox", RegistryReference(image="busybox")),
        ("docker://busybox:latest", RegistryReference(image="busybox", tag="latest")),
        (
            "docker://alice@nvcr.io#nvidia/pytorch:24.05-py3",
            RegistryReference(image="nvidia/pytorch", user="alice", registry="nvcr.io", tag="24.05-py3"),
        ),
        (
            "docker://registry.local:5000#team/vllm-openai@sha256:" + "0f" * 32,
            RegistryReference(image="team/vllm-openai", registry="registry.local:5000", digest="sha256:" + "0f" * 32),
        ),
        ("docker://library/ubuntu:22.04", RegistryReference(image="library/ubuntu", tag="22.04")),
    ],
)
def test_valid_references_are_parsed_part_by_part_and_round_trip(source: str, parts: RegistryReference) -> None:
    parsed = parse_registry_reference(source)
    assert parsed == parts
    assert parsed.text == source


@pytest.mark.parametrize(
    "source",
    [
        "busybox:latest",  # no scheme
        "dockerd://busybox",
        "docker://",
        "docker://busybox;rm -rf /",
        "docker://busybox:latest && true",
        "docker://$(id)",
        "docker://`id`",
        "docker://busy box",
        "docker://busybox'",
        'docker://busybox"',
        "docker://busybox\n",
        "docker://BusyBox",  # image paths are lower case
        "docker://busybox:latest@sha256:" + "a" * 64,  # a tag or a digest, not both
        "docker://busybox@sha256:abc",
        "docker://user:pw@busybox",
        "docker://-rf",
        "docker://busybox:-x",
        "docker://a#b#c",
        "docker://" + "a" * 600,
    ],
)
def test_anything_else_is_refused_naming_the_source_and_the_form(source: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_registry_reference(source)
    error = caught.value
    assert error.info.code == "invalid_image_reference"
    assert error.exit_code == 2
    assert "docker://[USER@][REGISTRY#]IMAGE[:TAG]" in error.info.message
    assert error.info.key_path == ("SOURCE",)


def test_is_registry_reference_looks_at_the_scheme_only() -> None:
    assert is_registry_reference("docker://x;y")
    assert not is_registry_reference("/images/x.sqsh")


SHELL_CHARACTERS = set(" \t\n\r'\"`$;&|<>(){}[]*?!\\~")


@given(st.text(min_size=1, max_size=80))
def test_an_accepted_reference_never_holds_a_shell_character(body: str) -> None:
    try:
        parsed = parse_registry_reference("docker://" + body)
    except InvalidInputError:
        return
    assert not SHELL_CHARACTERS & set(parsed.text)
    assert shlex.quote(parsed.text) == parsed.text
