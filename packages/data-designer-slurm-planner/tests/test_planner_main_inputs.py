"""``python -m data_designer.slurm.planner``: named files are read bounded, by the reader the runtime's store uses.

``/dev/zero`` behind a symbolic link, a FIFO, a directory and a file over ``MAX_INPUT_FILE_BYTES`` exit 2
naming the file, in a thread joined with a timeout (a plain read would block or never end); a symbolic link
to a regular file is read.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from data_designer.slurm.contracts import MAX_INPUT_FILE_BYTES
from data_designer.slurm.planner._main import main

GOLDEN_PROFILE = Path(__file__).resolve().parent / "golden" / "profile.yaml"
GUARD_S = 20.0

RUN = {
    "schema_version": 1,
    "name": "demo",
    "data_designer": {
        "inline": {
            "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
            "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
        }
    },
    "records": 100,
    "sharding": {"shards": 3},
    "deployments": {"writer": {"engine": "vllm", "model": "/m/writer"}},
}


def _cli(*argv: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(main([str(a) for a in argv], stdout=io.StringIO(), stderr=err)), daemon=True
    )
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"{argv} did not finish within {GUARD_S} s"
    return codes[0], err.getvalue()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _over_the_cap(path: Path) -> None:
    path.write_bytes(b"#" * (MAX_INPUT_FILE_BYTES + 1))


HOSTILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "dev_zero": (_dev_zero, "is a character device, not a regular file"),
    "fifo": (_fifo, "is a FIFO (named pipe), not a regular file"),
    "directory": (_directory, "is a directory, not a regular file"),
    "over_the_cap": (_over_the_cap, f"is 4 MiB ({MAX_INPUT_FILE_BYTES + 1:,} bytes), above the limit of 4 MiB"),
}


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_profile_exits_2(kind: str, tmp_path: Path, run_file: Path) -> None:
    make, message = HOSTILE[kind]
    profile = tmp_path / "hostile.yaml"
    make(profile)
    code, err = _cli("compile", run_file, "--profile", profile)
    assert code == 2, err
    assert f"profile {str(profile)!r} {message}" in err


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_run_file_exits_2(kind: str, tmp_path: Path) -> None:
    make, message = HOSTILE[kind]
    run = tmp_path / "hostile-run.yaml"
    make(run)
    code, err = _cli("compile", run, "--profile", GOLDEN_PROFILE)
    assert code == 2, err
    assert f"run file {str(run)!r} {message}" in err


def test_a_symbolic_link_to_a_regular_file_is_read(tmp_path: Path, run_file: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(run_file)
    code, err = _cli("compile", link, "--profile", GOLDEN_PROFILE)
    assert code == 0, err


def test_counts_over_their_caps_exit_2_naming_the_key(tmp_path: Path) -> None:
    run = tmp_path / "big.yaml"
    run.write_text(yaml.safe_dump({**RUN, "records": 10**12, "sharding": {"shards": 10**7}}), encoding="utf-8")
    code, err = _cli("compile", run, "--profile", GOLDEN_PROFILE)
    assert code == 2, err
    assert "sharding.shards: shards 10000000 is above the limit of 100,000" in err
