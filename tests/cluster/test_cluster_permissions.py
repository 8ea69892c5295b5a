"""What a real run leaves in its workspace is private (0700/0600), or with ``workspace_sharing: group`` shared with
the group (0770 + setgid / 0660): every directory and file, the ones Slurm (``slurm-*.out``), the servers, the Data
Designer host and pyarrow create included. An input snapshot never gets more than its source's permissions."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def run_with_sharing(
    e2e: ModuleType, directory: Path, local_slurm: Mapping[str, str], sharing: str, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """One succeeded 1-shard run (the e2e run document) with a profile of ``sharing``; returns its workspace."""
    original = e2e.write_profile

    def write_profile(directory: Path, local_slurm: Mapping[str, str], python: str, **options: str) -> Path:
        path: Path = original(directory, local_slurm, python, **options)
        text = path.read_text(encoding="utf-8")
        assert 'workspace_sharing: "private"' in text  # the template's default, documented
        path.write_text(
            text.replace('workspace_sharing: "private"', f'workspace_sharing: "{sharing}"'), encoding="utf-8"
        )
        return path

    monkeypatch.setattr(e2e, "write_profile", write_profile)
    finished = e2e.execute_and_wait(directory, local_slurm, e2e.run_document(shards=1, records=6), sys.executable)
    assert finished.statuses[0].status == "succeeded", finished.diagnosis()
    workspace: Path = finished.layout.root
    return workspace


def modes_below(root: Path) -> dict[str, int]:
    """``os.stat`` of the root and every directory and file below it (not following links): permission bits."""
    found = {".": os.stat(root).st_mode}
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(directory) / name
            found[str(path.relative_to(root))] = os.lstat(path).st_mode
    return found


def wrong(modes: dict[str, int], *, directory: int, file: int, snapshot: int) -> dict[str, str]:
    """Every entry whose mode is not the expected one, as ``name: octal mode``."""
    bad = {}
    for name, mode in modes.items():
        if stat.S_ISDIR(mode):
            expected = directory
        elif "/inputs/" in name and not name.endswith("/inputs/manifest.json"):
            expected = snapshot
        else:
            expected = file
        if stat.S_IMODE(mode) != expected:
            bad[name] = oct(stat.S_IMODE(mode))
    return bad


def test_a_private_and_a_group_run_leave_only_entries_of_their_modes(
    e2e: ModuleType, tmp_path: Path, local_slurm: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = os.umask(0o022)  # the usual login umask: it must decide nothing
    try:
        private = modes_below(run_with_sharing(e2e, tmp_path / "private", local_slurm, "private", monkeypatch))
        group = modes_below(run_with_sharing(e2e, tmp_path / "group", local_slurm, "group", monkeypatch))
    finally:
        os.umask(previous)
    for modes in (private, group):  # what the runs left: Slurm's logs, records, logs, Parquet parts, the host's home
        names = list(modes)
        assert any(n.rsplit("/", 1)[-1].startswith("slurm-") and n.endswith(".out") for n in names), names
        assert any(n.endswith(".parquet") for n in names), names
        assert any("/logs/" in n for n in names), names
        assert any("/inputs/run/" in n for n in names), names
    # The run file is written 0644 by the test: its snapshot is 0600 (private) and 0640 (0660 & 0644, group).
    assert wrong(private, directory=0o700, file=0o600, snapshot=0o600) == {}
    assert wrong(group, directory=0o2770, file=0o660, snapshot=0o640) == {}
