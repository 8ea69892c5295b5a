"""Reading a SquashFS without mounting or running it: ``unsquashfs`` lists it and hands out single files.

Every call goes through the injected :class:`~data_designer.slurm.runtime.CommandRunner` with a timeout (the
production runner is ``SubprocessRunner(programs=IMAGE_TOOLS)``). A SquashFS inside a SIF is read at its
partition's byte offset (``-o OFFSET``). What this version of ``unsquashfs`` can do is asked once
(``unsquashfs -help``: whether it lists ``-cat`` and ``-o``), so older squashfs-tools work too: without ``-cat`` the
wanted files are extracted (``-d TMP -f``) into a temporary directory and read from there.

Listing is ``unsquashfs -lls -d '' IMAGE``: one line per entry, ``MODE OWNER/GROUP SIZE DATE TIME /PATH`` and
``-> TARGET`` for a symlink; it reads the image's directory tables, not its file data.

Errors: ``unsquashfs`` missing -> UnavailableError (exit 5) naming the tool and how to install it; a hang ->
UnavailableError; a file ``unsquashfs`` cannot read as a SquashFS -> InvalidInputError (exit 2) naming the file.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from data_designer.slurm.contracts import InvalidInputError, UnavailableError
from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner

UNSQUASHFS = "unsquashfs"
IMAGE_TOOLS: frozenset[str] = frozenset({UNSQUASHFS})
"""The programs image inspection runs (``SubprocessRunner(programs=IMAGE_TOOLS)``)."""
DEFAULT_LIST_TIMEOUT_S = 120.0
DEFAULT_READ_TIMEOUT_S = 60.0
MAX_READ_BYTES = 1 << 20
"""A file read from an image is cut at 1 MiB: METADATA headers sit at the top."""

EntryKind = Literal["directory", "file", "symlink", "other"]

_KINDS: Mapping[str, EntryKind] = {"d": "directory", "-": "file", "l": "symlink"}
_LINE = re.compile(r"^(?P<mode>\S{10})\s+\S+\s+\d+(?:,\s*\d+)?\s+\d{4}-\d\d-\d\d\s+\d\d:\d\d\s?(?P<rest>.*)$")
_OFFSET_OPTION = re.compile(r"^\s*-o(?:\[ffset\]|ffset)?\s", re.MULTILINE)
_CAT_OPTION = re.compile(r"^\s*-cat\s", re.MULTILINE)
_INSTALL_HINT = (
    "install squashfs-tools on this (login) node, e.g. 'apt-get install squashfs-tools' or "
    "'dnf install squashfs-tools', so that unsquashfs is on PATH"
)


@dataclass(frozen=True, slots=True)
class SquashfsEntry:
    """One entry of an image's file system: its absolute path inside the image, its kind, a symlink's target."""

    path: str
    kind: EntryKind
    target: str | None = None


@dataclass(frozen=True, slots=True)
class UnsquashfsFeatures:
    """What the ``unsquashfs`` on PATH can do, from its ``-help`` text."""

    cat: bool
    offset: bool


@dataclass(frozen=True, slots=True)
class ExtractedFile:
    """One file read from an image: its text, or why it could not be read."""

    path: str
    text: str | None
    problem: str | None = None


def parse_features(help_text: str) -> UnsquashfsFeatures:
    """Which of ``-cat`` and ``-o`` the ``unsquashfs -help`` text lists."""
    return UnsquashfsFeatures(cat=bool(_CAT_OPTION.search(help_text)), offset=bool(_OFFSET_OPTION.search(help_text)))


def parse_listing(text: str) -> tuple[SquashfsEntry, ...]:
    """The entries of ``unsquashfs -lls -d ''`` output, without the root; a line not understood is kind 'other'."""
    entries: list[SquashfsEntry] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            entries.append(SquashfsEntry(path=line.strip(), kind="other"))
            continue
        rest = match["rest"]
        kind = _KINDS.get(match["mode"][0], "other")
        target: str | None = None
        if kind == "symlink":
            rest, _, target = rest.partition(" -> ")
        if rest in ("", "/"):
            continue  # the root directory itself
        entries.append(SquashfsEntry(path=rest if rest.startswith("/") else "/" + rest, kind=kind, target=target))
    return tuple(entries)


class SquashfsReader:
    """Lists one SquashFS (at ``offset`` bytes into ``image``) and reads single files from it via ``unsquashfs``."""

    def __init__(
        self,
        image: Path,
        runner: CommandRunner,
        *,
        offset: int = 0,
        list_timeout_s: float = DEFAULT_LIST_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    ) -> None:
        self._image = image
        self._runner = runner
        self._offset = offset
        self._list_timeout_s = list_timeout_s
        self._read_timeout_s = read_timeout_s
        self._features: UnsquashfsFeatures | None = None

    def features(self) -> UnsquashfsFeatures:
        """What this ``unsquashfs`` supports (asked once); UnavailableError when it is missing or lacks ``-o``."""
        if self._features is None:
            result = self._runner.run([UNSQUASHFS, "-help"], timeout_s=self._read_timeout_s)
            if result.not_found or result.timed_out or (result.returncode is None):
                raise self._unavailable(result)
            features = parse_features(result.stdout + "\n" + result.stderr)
            if self._offset and not features.offset:
                raise UnavailableError(
                    f"the unsquashfs on PATH has no -o/-offset option: it cannot read the SquashFS inside the SIF "
                    f"{str(self._image)!r}",
                    code="unsquashfs_too_old",
                    operation="inspect_image",
                    file=str(self._image),
                    hint="install a newer squashfs-tools (one whose 'unsquashfs -help' lists -o[ffset])",
                )
            self._features = features
        return self._features

    def entries(self) -> tuple[SquashfsEntry, ...]:
        """Every entry of the image's file system (reads its directory tables, not its files)."""
        self.features()
        result = self._runner.run(
            [UNSQUASHFS, *self._offset_args(), "-lls", "-d", "", str(self._image)], timeout_s=self._list_timeout_s
        )
        if not result.ok:
            raise self._failed(result)
        return parse_listing(result.stdout)

    def read(self, paths: Sequence[str]) -> tuple[ExtractedFile, ...]:
        """The text of each absolute ``path`` inside the image (at most 1 MiB each), or why it is unreadable."""
        if not paths:
            return ()
        features = self.features()
        if features.cat:
            return tuple(self._cat(path) for path in paths)
        return self._extract(paths)

    def _offset_args(self) -> list[str]:
        return ["-o", str(self._offset)] if self._offset else []

    def _cat(self, path: str) -> ExtractedFile:
        result = self._runner.run(
            [UNSQUASHFS, *self._offset_args(), "-cat", str(self._image), path.lstrip("/")],
            timeout_s=self._read_timeout_s,
        )
        if result.not_found:
            raise self._unavailable(result)
        if not result.ok:
            return ExtractedFile(path=path, text=None, problem=f"unreadable in the image ({result.describe()})")
        return ExtractedFile(path=path, text=result.stdout[:MAX_READ_BYTES])

    def _extract(self, paths: Sequence[str]) -> tuple[ExtractedFile, ...]:
        with tempfile.TemporaryDirectory(prefix="ddslurm-unsquashfs-") as scratch:
            dest = Path(scratch) / "root"
            argv = [UNSQUASHFS, *self._offset_args(), "-no-xattrs", "-f", "-d", str(dest), str(self._image)]
            result = self._runner.run([*argv, *(p.lstrip("/") for p in paths)], timeout_s=self._read_timeout_s)
            if result.not_found or result.timed_out:
                raise self._unavailable(result)
            files: list[ExtractedFile] = []
            for path in paths:
                target = dest / path.lstrip("/")
                try:
                    with target.open("rb") as handle:
                        data = handle.read(MAX_READ_BYTES)
                except OSError as exc:
                    why = f"not extracted ({result.describe() if not result.ok else exc.strerror})"
                    files.append(ExtractedFile(path=path, text=None, problem=why))
                    continue
                files.append(ExtractedFile(path=path, text=data.decode("utf-8", errors="replace")))
            return tuple(files)

    def _unavailable(self, result: CommandResult) -> UnavailableError:
        if result.not_found:
            return UnavailableError(
                f"{UNSQUASHFS} is not installed (not on PATH): it is needed to inspect {str(self._image)!r}",
                code="unsquashfs_missing",
                operation="inspect_image",
                file=str(self._image),
                hint=_INSTALL_HINT,
            )
        return UnavailableError(
            f"cannot inspect {str(self._image)!r}: {result.describe()}",
            code="unsquashfs_timed_out" if result.timed_out else "unsquashfs_failed",
            operation="inspect_image",
            file=str(self._image),
            hint="check the shared filesystem holding the image, then try again",
        )

    def _failed(self, result: CommandResult) -> UnavailableError | InvalidInputError:
        if result.not_found or result.timed_out or result.returncode is None:
            return self._unavailable(result)
        where = f" at byte {self._offset}" if self._offset else ""
        return InvalidInputError(
            f"{str(self._image)!r} is not a readable SquashFS image{where}: {result.describe()}",
            code="squashfs_unreadable",
            operation="inspect_image",
            file=str(self._image),
            hint="give a SquashFS built by mksquashfs or 'enroot import', or a SIF built by apptainer",
        )
