"""The one writer of user-named outputs (``write_output``) and the OS-error translation around it (issue 28).

A symbolic link at the target (a dangling one too) is refused, ``--force`` or not; an existing file is replaced only
with ``force``; a missing parent directory is never made; the file is 0600 whatever the umask (0660 in a setgid,
group-shared directory); a name over the file system's limit is exit 2 ``name_too_long`` wherever it is met.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ConflictError, InvalidInputError
from data_designer.slurm.planner import (
    check_output_location,
    name_too_long,
    read_text,
    write_output,
    write_text_atomic,
)

LONG = "x" * 300  # over every common NAME_MAX (255 bytes)


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("force", [False, True])
def test_a_symbolic_link_at_the_target_is_refused_and_its_target_untouched(tmp_path: Path, force: bool) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "out.png"
    link.symlink_to(victim)
    with pytest.raises(InvalidInputError) as refused:
        write_output(link, b"new", force=force, operation="test", key_path=("--plot",))
    info = refused.value.info
    assert (info.exit_code, info.code, info.file, info.key_path) == (2, "output_symlink", str(link), ("--plot",))
    assert info.hint
    assert victim.read_bytes() == b"precious"
    assert link.is_symlink()
    assert names(tmp_path) == ["out.png", "victim.txt"]


@pytest.mark.parametrize("force", [False, True])
def test_a_dangling_symbolic_link_is_refused_and_nothing_is_created_where_it_points(
    tmp_path: Path, force: bool
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out.png"
    link.symlink_to(elsewhere / "planted.png")
    with pytest.raises(InvalidInputError) as refused:
        write_output(link, b"new", force=force, operation="test")
    assert refused.value.info.code == "output_symlink"
    assert names(elsewhere) == []


def test_an_existing_file_is_kept_without_force_and_replaced_with_it(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    with pytest.raises(ConflictError) as refused:
        write_output(target, b"new", force=False, operation="test")
    assert (refused.value.info.exit_code, refused.value.info.code) == (4, "file_exists")
    assert target.read_bytes() == b"old"
    assert write_output(target, b"new", force=True, operation="test") is True
    assert target.read_bytes() == b"new"
    assert names(tmp_path) == ["plot.png"]


def test_a_missing_parent_directory_is_refused_naming_it_and_never_made(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "plot.png"
    with pytest.raises(InvalidInputError) as refused:
        write_output(target, b"x", force=False, operation="test")
    info = refused.value.info
    assert (info.exit_code, info.code, info.file) == (2, "output_parent_missing", str(target))
    assert str(tmp_path / "a" / "b") in info.message
    assert "mkdir -p" in (info.hint or "")
    assert names(tmp_path) == []


def test_a_parent_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError) as refused:
        write_output(tmp_path / "file" / "plot.png", b"x", force=True, operation="test")
    assert refused.value.info.code == "output_parent_missing"
    assert names(tmp_path) == ["file"]


def test_a_directory_at_the_target_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "plot.png").mkdir()
    with pytest.raises(InvalidInputError) as refused:
        write_output(tmp_path / "plot.png", b"x", force=True, operation="test")
    assert refused.value.info.code == "not_a_file"


def test_the_file_is_private_whatever_the_umask_and_group_in_a_setgid_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2770)
    old = os.umask(0o022)
    try:
        write_output(tmp_path / "private.png", b"x", force=False, operation="test")
        write_output(shared / "group.png", b"x", force=False, operation="test")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "private.png").stat().st_mode) == 0o600
    assert stat.S_IMODE((shared / "group.png").stat().st_mode) == 0o660


def test_check_output_location_creates_nothing_and_says_whether_the_target_exists(tmp_path: Path) -> None:
    assert check_output_location(tmp_path / "new.png", force=False, operation="test") is False
    (tmp_path / "dir").mkdir()
    assert check_output_location(tmp_path / "dir", force=True, operation="test", directory_ok=True) is True
    assert names(tmp_path) == ["dir"]


def test_a_name_over_the_limit_is_invalid_input_naming_the_limit(tmp_path: Path) -> None:
    target = tmp_path / f"{LONG}.png"
    with pytest.raises(InvalidInputError) as refused:
        write_output(target, b"x", force=False, operation="test")
    info = refused.value.info
    assert (info.exit_code, info.code, info.file) == (2, "name_too_long", str(target))
    assert "304 bytes" in info.message
    assert "255 bytes per name" in info.message
    assert names(tmp_path) == []


def test_write_text_atomic_maps_a_long_name_too(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        write_text_atomic(tmp_path / LONG / "profile.yaml", "x\n", overwrite=False, operation="profile.init")
    assert (refused.value.info.code, refused.value.info.operation) == ("name_too_long", "profile.init")
    assert names(tmp_path) == []


def test_reading_a_long_name_is_invalid_input_not_unavailable(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        read_text(tmp_path / f"{LONG}.yaml", operation="profile.load")
    assert (refused.value.info.exit_code, refused.value.info.code) == (2, "name_too_long")


def test_a_whole_path_over_the_limit_is_named_as_such() -> None:
    deep = "/" + "/".join(["d" * 200] * 30)
    error = name_too_long(deep, "test")
    assert "bytes per path" in error.info.message
    assert error.info.exit_code == 2
