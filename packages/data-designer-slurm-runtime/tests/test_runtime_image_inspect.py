"""Inspecting real SquashFS and SIF images without running them (issue 17).

Every image here is built in the test: a fake root file system with chosen site-packages metadata, packed by the
real ``mksquashfs``, optionally wrapped in a SIF by ``runtime.testing``'s writer, and read back through the real
``unsquashfs`` behind a ``SubprocessRunner``. Without squashfs-tools the image tests skip, and fail under CI=true.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ExitCode, InternalError, InvalidInputError, NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import ImageInspection
from data_designer.slurm.runtime.images import (
    IMAGE_TOOLS,
    INSPECTED_DISTRIBUTIONS,
    SquashfsEntry,
    find_squashfs_partition,
    inspect_image,
    normalise_name,
    parse_listing,
)
from data_designer.slurm.runtime.images._contents import find_python
from data_designer.slurm.runtime.images._sif import DESCRIPTOR, FS_ENCRYPTED_SQUASHFS, HEADER
from data_designer.slurm.runtime.scheduler import CommandResult, SubprocessRunner
from data_designer.slurm.runtime.testing import (
    CountingRunner,
    build_squashfs,
    squashfs_tools_missing,
    wrap_in_sif,
    write_dist_info,
    write_root_fs,
)

SERVING = {"vllm": "0.6.3.post1"}
CLIENT = {
    "data-designer": "0.4.0",
    "data-designer-slurm": "1.0.0rc1+ddslurm",
    "data-designer-slurm-contracts": "1.0.0rc1+ddslurm",
    "data-designer-slurm-planner": "1.0.0rc1+ddslurm",
    "data-designer-slurm-runtime": "1.0.0rc1+ddslurm",
}


@pytest.fixture
def squashfs_tools() -> None:
    missing = squashfs_tools_missing()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"squashfs-tools are required under CI=true (.ci/run installs them): {missing}")
        pytest.skip(missing)


@pytest.fixture
def runner() -> SubprocessRunner:
    return SubprocessRunner(programs=IMAGE_TOOLS)


def _image(tmp_path: Path, versions: Mapping[str, str], **layout: object) -> Path:
    root = write_root_fs(tmp_path / "root", versions=versions, **layout)  # type: ignore[arg-type]
    return build_squashfs(root, tmp_path / "image.sqsh")


def _versions(inspection: ImageInspection) -> dict[str, str | None]:
    return {found.distribution: found.version for found in inspection.distributions}


def _entries_written(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


@pytest.mark.usefixtures("squashfs_tools")
def test_serving_image_exact_versions_and_the_rest_undetermined(tmp_path: Path, runner: SubprocessRunner) -> None:
    image = _image(tmp_path, SERVING)
    inspection = inspect_image(image, "squashfs", runner)
    assert inspection.python == "3.11"
    assert inspection.python_executable == "/usr/bin/python3.11"
    assert inspection.server_executable == "/usr/local/bin/vllm"
    assert inspection.files == _entries_written(tmp_path / "root")
    assert [found.distribution for found in inspection.distributions] == list(INSPECTED_DISTRIBUTIONS)
    (vllm, *rest) = inspection.distributions
    assert vllm.version == "0.6.3.post1"
    assert vllm.where == "/usr/local/lib/python3.11/site-packages/vllm-0.6.3.post1.dist-info/METADATA"
    assert all(found.version is None and found.where is None for found in rest)
    assert (
        rest[0].detail
        == "no data_designer-<version>.dist-info/METADATA in any site-packages or dist-packages directory"
    )
    assert inspection.undetermined == tuple(f"{found.distribution}: {found.detail}" for found in rest)


@pytest.mark.usefixtures("squashfs_tools")
def test_client_image_in_dist_packages_without_a_server(tmp_path: Path, runner: SubprocessRunner) -> None:
    image = _image(tmp_path, CLIENT, python="3.12", server=False, site="usr/local/lib/python{python}/dist-packages")
    inspection = inspect_image(image, "squashfs", runner)
    assert (inspection.python, inspection.python_executable) == ("3.12", "/usr/bin/python3.12")
    assert inspection.server_executable is None
    assert _versions(inspection) == {"vllm": None, **CLIENT}
    assert inspection.undetermined == (
        "server executable: no vllm in /usr/local/bin, /usr/bin, /bin or /opt/*/bin",
        "vllm: no vllm-<version>.dist-info/METADATA in any site-packages or dist-packages directory",
    )


@pytest.mark.usefixtures("squashfs_tools")
def test_reads_the_listing_and_one_small_file_per_distribution_found(tmp_path: Path) -> None:
    image = _image(tmp_path, {**SERVING, **CLIENT})
    counting = CountingRunner(SubprocessRunner(programs=IMAGE_TOOLS))
    inspection = inspect_image(image, "squashfs", counting)
    assert all(found.version is not None for found in inspection.distributions)
    kinds = [next(arg for arg in argv[1:] if arg.startswith("-")) for argv in counting.calls]
    assert kinds == ["-help", "-lls"] + ["-cat"] * len(INSPECTED_DISTRIBUTIONS)
    catted = sorted(argv[-1] for argv in counting.calls if "-cat" in argv)
    assert all(path.endswith(".dist-info/METADATA") for path in catted)


@pytest.mark.usefixtures("squashfs_tools")
def test_sif_wrapping_the_squashfs_gives_the_same_inspection(tmp_path: Path, runner: SubprocessRunner) -> None:
    image = _image(tmp_path, {**SERVING, **CLIENT})
    sif = wrap_in_sif(image, tmp_path / "image.sif")
    partition = find_squashfs_partition(sif)
    assert (partition.size, partition.arch, partition.offset % 4096) == (image.stat().st_size, "amd64", 0)
    counting = CountingRunner(runner)
    assert inspect_image(sif, "sif", counting) == inspect_image(image, "squashfs", runner)
    assert all(argv[1:3] == ("-o", str(partition.offset)) for argv in counting.calls[1:])


class _NoCatRunner(CountingRunner):
    """An unsquashfs whose ``-help`` does not list ``-cat`` (as before squashfs-tools 4.5): files get extracted."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        assert "-cat" not in argv
        result = super().run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)
        if "-help" in argv:
            text = "\n".join(line for line in result.stdout.splitlines() if not line.strip().startswith("-cat"))
            return CommandResult(result.argv, result.returncode, text, result.stderr, result.duration_s)
        return result


@pytest.mark.usefixtures("squashfs_tools")
def test_without_cat_the_metadata_is_extracted_in_one_call(tmp_path: Path, runner: SubprocessRunner) -> None:
    image = _image(tmp_path, {**SERVING, **CLIENT})
    sif = wrap_in_sif(image, tmp_path / "image.sif")
    no_cat = _NoCatRunner(runner)
    assert inspect_image(sif, "sif", no_cat) == inspect_image(image, "squashfs", runner)
    assert len(no_cat.calls) == 3  # -help, -lls, one extraction of every METADATA file
    extraction = no_cat.calls[2]
    assert "-f" in extraction
    assert sum(arg.endswith(".dist-info/METADATA") for arg in extraction) == 6


@pytest.mark.usefixtures("squashfs_tools")
def test_versions_come_from_the_metadata_never_guessed(tmp_path: Path, runner: SubprocessRunner) -> None:
    root = write_root_fs(tmp_path / "root", versions={"data-designer": "0.4.0"})
    site = root / "usr/local/lib/python3.11/site-packages"
    write_dist_info(site, "vllm", None)  # a dist-info whose METADATA has no Version header
    write_dist_info(site, "data-designer-slurm", "1.0.0")
    write_dist_info(root / "usr/lib/python3/dist-packages", "data-designer-slurm", "0.9.0")
    write_dist_info(root / "usr/lib/python3.10/site-packages", "data-designer-slurm-runtime", "0.1.0")  # not 3.11's
    write_dist_info(site, "vllm-flash-attn", "2.6.1")  # starts like vllm, is another distribution
    inspection = inspect_image(build_squashfs(root, tmp_path / "image.sqsh"), "squashfs", runner)
    found = {f.distribution: f for f in inspection.distributions}
    assert found["data-designer"].version == "0.4.0"
    assert found["vllm"].version is None
    assert found["vllm"].detail is not None
    assert found["vllm"].detail.endswith("vllm-0.dist-info/METADATA: no Version header")
    assert found["data-designer-slurm"].version is None
    assert found["data-designer-slurm"].detail == (
        "several versions installed (0.9.0 in /usr/lib/python3/dist-packages/data_designer_slurm-0.9.0.dist-info/"
        "METADATA; 1.0.0 in /usr/local/lib/python3.11/site-packages/data_designer_slurm-1.0.0.dist-info/METADATA)"
    )
    assert found["data-designer-slurm-runtime"].version is None
    assert "vllm: " + str(found["vllm"].detail) in inspection.undetermined


@pytest.mark.usefixtures("squashfs_tools")
def test_no_python_is_undetermined(tmp_path: Path, runner: SubprocessRunner) -> None:
    inspection = inspect_image(_image(tmp_path, SERVING, python=None, site="opt/lib/site-packages"), "squashfs", runner)
    assert (inspection.python, inspection.python_executable) == (None, None)
    assert inspection.undetermined[0] == "python: no python3 on PATH and no lib/python3.X directory in the image"
    assert _versions(inspection)["vllm"] == "0.6.3.post1"


def _entry(path: str, kind: str = "file", target: str | None = None) -> SquashfsEntry:
    return SquashfsEntry(path=path, kind=kind, target=target)  # type: ignore[arg-type]


def test_python_is_the_one_python3_resolves_to_else_undetermined() -> None:
    chained = [
        _entry("/usr/local/bin/python3", "symlink", "/usr/bin/python3"),
        _entry("/usr/bin/python3", "symlink", "python3.12"),
        _entry("/usr/bin/python3.12"),
        _entry("/usr/bin/python3.10"),
    ]
    assert find_python(chained).version == "3.12"
    assert find_python(chained).executable == "/usr/bin/python3.12"
    several = [_entry("/usr/bin/python3.12"), _entry("/usr/bin/python3.10")]
    assert find_python(several).version is None
    assert find_python(several).problem == "python: several versions (3.10, 3.12) and no python3 on PATH"
    dangling = [_entry("/usr/bin/python3", "symlink", "python3.9")]
    assert find_python(dangling).version is None
    lib_only = [_entry("/usr/lib/python3.11", "directory")]
    assert (find_python(lib_only).version, find_python(lib_only).executable) == ("3.11", None)


def test_listing_parses_kinds_symlinks_and_odd_names() -> None:
    text = (
        "drwxr-xr-x root/root                40 2024-05-01 10:00 \n"
        "drwxr-xr-x root/root                29 2024-05-01 10:00 /sp ace\n"
        "-rw-r--r-- root/root                 0 2024-05-01 10:00 /sp ace/a -> b\n"
        "lrwxrwxrwx root/root                10 2024-05-01 10:00 /usr/bin/python3 -> python3.11\n"
        "crw-r--r-- root/root             1,  3 2024-05-01 10:00 /dev/null\n"
    )
    assert parse_listing(text) == (
        _entry("/sp ace", "directory"),
        _entry("/sp ace/a -> b"),
        _entry("/usr/bin/python3", "symlink", "python3.11"),
        _entry("/dev/null", "other"),
    )


def test_names_compare_after_pep_503() -> None:
    assert normalise_name("Data_Designer.Slurm--Runtime") == "data-designer-slurm-runtime"


def _corrupt(sif: Path, offset: int, data: bytes) -> None:
    with sif.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def _refused(sif: Path, runner: SubprocessRunner) -> str:
    with pytest.raises(InvalidInputError) as caught:
        inspect_image(sif, "sif", runner)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.info.code == "sif_corrupt"
    assert caught.value.info.file == str(sif)
    assert caught.value.info.hint is not None
    assert "apptainer build" in caught.value.info.hint
    return str(caught.value)


@pytest.mark.usefixtures("squashfs_tools")
def test_corrupt_sifs_are_refused_naming_the_file_and_the_fault(tmp_path: Path, runner: SubprocessRunner) -> None:
    image = _image(tmp_path, SERVING)
    sif = tmp_path / "bad.sif"

    wrap_in_sif(image, sif)
    _corrupt(sif, 32, b"NOT_MAGIC\0")
    assert "no SIF magic at byte 32 (found b'NOT_MAGIC'" in _refused(sif, runner)

    wrap_in_sif(image, sif)
    os.truncate(sif, 4096 + DESCRIPTOR.size)
    assert "the descriptor table (48 x 585 bytes at byte 4096) lies outside" in _refused(sif, runner)

    partition = find_squashfs_partition(wrap_in_sif(image, sif))
    os.truncate(sif, partition.offset + partition.size // 2)
    assert "the primary system partition" in _refused(sif, runner)
    assert "(truncated?)" in _refused(sif, runner)

    wrap_in_sif(image, sif, fs_type=FS_ENCRYPTED_SQUASHFS)
    assert "(descriptor 2) is encrypted" in _refused(sif, runner)

    wrap_in_sif(image, sif, part_type=3)  # a data partition: no primary system partition at all
    assert "no primary system partition (id 2: fs_type 1, part_type 3)" in _refused(sif, runner)

    partition = find_squashfs_partition(wrap_in_sif(image, sif))
    _corrupt(sif, partition.offset, b"junk")
    assert f"at byte {partition.offset} does not start with a SquashFS" in _refused(sif, runner)

    sif.write_bytes(b"#!/bin/sh\n")
    assert f"10 bytes, shorter than the {HEADER.size}-byte SIF header" in _refused(sif, runner)


@pytest.mark.usefixtures("squashfs_tools")
def test_a_file_that_is_no_squashfs_is_refused(tmp_path: Path, runner: SubprocessRunner) -> None:
    junk = tmp_path / "junk.sqsh"
    junk.write_bytes(b"\0" * 8192)
    with pytest.raises(InvalidInputError) as caught:
        inspect_image(junk, "squashfs", runner)
    assert caught.value.info.code == "squashfs_unreadable"
    assert str(junk) in str(caught.value)
    assert "unsquashfs exited" in str(caught.value)


def test_missing_unsquashfs_is_unavailable_naming_the_tool_and_the_fix(tmp_path: Path) -> None:
    image = tmp_path / "image.sqsh"
    image.write_bytes(b"hsqs")
    bare = SubprocessRunner(env={"PATH": str(tmp_path)}, programs=IMAGE_TOOLS)
    with pytest.raises(UnavailableError) as caught:
        inspect_image(image, "squashfs", bare)
    assert caught.value.exit_code == ExitCode.UNAVAILABLE
    assert caught.value.info.code == "unsquashfs_missing"
    assert "unsquashfs is not installed" in str(caught.value)
    assert caught.value.info.hint is not None
    assert "squashfs-tools" in caught.value.info.hint


def test_a_missing_image_is_not_found(tmp_path: Path, runner: SubprocessRunner) -> None:
    for fmt in ("squashfs", "sif"):
        with pytest.raises(NotFoundError) as caught:
            inspect_image(tmp_path / "absent.img", fmt, runner)
        assert caught.value.info.code == "image_missing"


def test_the_image_runner_starts_only_unsquashfs() -> None:
    runner = SubprocessRunner(programs=IMAGE_TOOLS)
    with pytest.raises(InternalError, match="not one of this runner's programs"):
        runner.run(["sbatch", "--version"], timeout_s=5)
